"""`deepscholar reports check` on the demo month (real Postgres): the kit's example submission is clean and
imports cleanly; a hostile submission's every bad line is that line's problem, the others pass; the check
writes nothing, and its verdict on each output is the import's (the same rules: systems/external/rules.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.demo_month import served_demo_month

from deepscholar import cli, db
from deepscholar.systems.external import import_reports
from deepscholar.systems.external.check import check_submission

EXAMPLE = Path(__file__).resolve().parents[1] / "data" / "submission_example.jsonl"
SYSTEM = "kit_team"


@pytest.fixture(scope="module")
def month(demo_template):
    with served_demo_month(demo_template, "deepscholar_kit_") as built:
        yield built


@pytest.fixture
def cli_env(month, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", month["engine"].url.render_as_string(hide_password=False))
    return month


def _warehouse(engine) -> dict:
    """Every table's row count, and the reports' and systems' content: what a write would change."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT system_id, arxiv_id, md5(coalesce(text, '')) FROM reports ORDER BY 1, 2")).all()
        systems = conn.execute(sa.text("SELECT system_id FROM systems ORDER BY 1")).scalars().all()
    return {"counts": db.row_counts(engine), "reports": rows, "systems": systems}


def _check(args: list[str], capsys) -> tuple[int, str, str]:
    capsys.readouterr()
    code = cli.main(["reports", "check", *args, "--title-search", "corpus"])
    out = capsys.readouterr()
    return code, out.out, out.err


def _cleanup(engine) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM reports WHERE system_id = :s"), {"s": SYSTEM})
        conn.execute(sa.text("DELETE FROM systems WHERE system_id = :s"), {"s": SYSTEM})


def test_the_example_submission_is_clean_writes_nothing_and_imports_cleanly(cli_env, capsys):
    engine, month = cli_env["engine"], cli_env["month"]
    before = _warehouse(engine)
    code, out, _ = _check([str(EXAMPLE), "--release", month, "--system", SYSTEM], capsys)
    assert code == 0, out
    assert "8 outputs for 8 queries; 8 importable, 0 of them marked, 0 not imported, 0 queries missing; clean" in out
    assert _warehouse(engine) == before

    try:
        summary = import_reports(engine, SYSTEM, EXAMPLE, month, title_search="corpus")
        assert (summary.n_stored, summary.n_errors, summary.n_flagged) == (8, 0, 0)
        with engine.connect() as conn:
            leaks = conn.execute(sa.text("SELECT sum(n_leaked_sources), sum(n_unresolved_citations) FROM reports "
                                         "WHERE system_id = :s"), {"s": SYSTEM}).one()
        assert tuple(leaks) == (0, 0)
        assert all(r["query_paper_citations"] == [] for r in summary.reports)
    finally:
        _cleanup(engine)


def _line(arxiv_id: str, text: str, sources: list[tuple[int, str]]) -> str:
    return json.dumps({"arxiv_id": arxiv_id, "text": text,
                       "sources": [{"idx": i, "arxiv_id": a, "title": f"Paper {a}"} for i, a in sources]})


def _hostile(folder: Path) -> tuple[Path, dict[int, str]]:
    """The example's lines with bad ones among them: {line number: what the check must say of it}."""
    good = EXAMPLE.read_text(encoding="utf-8").splitlines()
    first = json.loads(good[0])
    bad = {
        2: ("not json at all {", "not imported: Expecting value"),
        3: (json.dumps(first), f"not imported: a second output for {first['arxiv_id']}"),
        4: (_line("2301.99999", "Unknown [1].", [(1, "1902.00756")]), "is not a query of release"),
        5: (_line(json.loads(good[3])["arxiv_id"], "Me [1], the future [2], nothing [3], nothing [4].",
                  [(1, json.loads(good[3])["arxiv_id"]), (2, "2507.00001")]), "flag unresolved_citations"),
        6: (_line(json.loads(good[4])["arxiv_id"], "Long " + "x" * 3000 + " [1].", [(1, "1902.00756")]),
            "more than DEEPSCHOLAR_IMPORT_MAX_REPORT_CHARS"),
        7: ('{"arxiv_id": "<script>alert(1)</script>", "text": 5}', "not imported:"),
    }
    lines = [good[0]] + [bad[n][0] for n in sorted(bad)] + good[5:]
    path = folder / "hostile.jsonl"
    raw = "\n".join(lines).encode("utf-8") + b"\n\xff\xfe not utf-8\n"
    path.write_bytes(raw)
    expect = {n: says for n, (_, says) in bad.items()} | {len(lines) + 1: "not imported: not UTF-8"}
    return path, expect


def test_a_hostile_submission_is_refused_line_by_line_as_the_import_refuses_it(cli_env, capsys, monkeypatch,
                                                                                tmp_path):
    engine, month = cli_env["engine"], cli_env["month"]
    monkeypatch.setenv("DEEPSCHOLAR_IMPORT_MAX_REPORT_CHARS", "2000")
    path, expect = _hostile(tmp_path)
    before = _warehouse(engine)
    code, out, err = _check([str(path), "--release", month, "--json"], capsys)
    assert code == 2 and err == ""
    result = json.loads(out)
    assert _warehouse(engine) == before
    by_line = {int(o["path"].rsplit(":", 1)[1]): o for o in result["outputs"]}
    assert set(by_line) == set(expect), by_line
    for n, says in expect.items():
        assert any(says in p for p in by_line[n]["problems"]), (n, by_line[n])
    marked = by_line[5]
    assert marked["imported"] and len(marked["problems"]) == 3  # unresolved, itself, after the cutoff
    assert any("cites the query paper itself ([1])" in p for p in marked["problems"])
    assert any("[2] 2507.00001" in p and "on or after the query paper" in p for p in marked["problems"])
    # The lines between and after the bad ones pass; the queries they would have answered are missing.
    assert result["n_importable"] == 1 + 1 + len(EXAMPLE.read_text().splitlines()[5:])
    assert result["missing"] == sorted(json.loads(x)["arxiv_id"] for x in EXAMPLE.read_text().splitlines()[1:5]
                                       if json.loads(x)["arxiv_id"] != json.loads(
                                           EXAMPLE.read_text().splitlines()[3])["arxiv_id"])
    assert not result["clean"]

    # The import holds each output to the same rules: the same lines refused with the same words, the same
    # report flagged and its leak and self-citation stored.
    check = check_submission(engine, path, month, title_search="corpus")
    try:
        summary = import_reports(engine, SYSTEM, path, month, title_search="corpus")
        refused = {e["path"]: e["error"] for e in summary.errors}
        assert refused == {o["path"]: o["problems"][0].removeprefix("not imported: ") for o in check.outputs
                           if not o["imported"]}
        assert summary.n_stored == check.n_importable and summary.n_flagged == 1
        flagged = summary.flagged[0]
        assert flagged["query_paper_citations"] == [1] and flagged["n_leaked_sources"] == 2  # itself and 2507
    finally:
        _cleanup(engine)


def test_what_refuses_the_whole_import_refuses_the_check_in_one_line(cli_env, capsys, monkeypatch, tmp_path):
    engine, month = cli_env["engine"], cli_env["month"]
    before = _warehouse(engine)
    monkeypatch.setenv("DEEPSCHOLAR_IMPORT_MAX_FILE_BYTES", "1000")
    shutil.copy(EXAMPLE, tmp_path / "big.jsonl")
    code, out, err = _check([str(tmp_path / "big.jsonl"), "--release", month], capsys)
    assert code == 2 and out == "" and err.count("\n") == 1 and "DEEPSCHOLAR_IMPORT_MAX_FILE_BYTES" in err
    monkeypatch.delenv("DEEPSCHOLAR_IMPORT_MAX_FILE_BYTES")
    code, _, err = _check([str(EXAMPLE), "--release", "2031-01"], capsys)
    assert code == 2 and "2031-01" in err and err.count("\n") == 1
    code, _, err = _check([str(EXAMPLE), "--release", month, "--system", "Human_Exemplar"], capsys)
    assert code == 2 and "only by case" in err
    (tmp_path / "notes.txt").write_text("hello")
    code, _, err = _check([str(tmp_path / "notes.txt"), "--release", month], capsys)
    assert code == 2 and err.startswith("deepscholar: error: ") and err.count("\n") == 1
    assert _warehouse(engine) == before
