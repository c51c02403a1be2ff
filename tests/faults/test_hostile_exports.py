"""Hostile text in what we publish: `deepscholar export` and `annotate export` write text third parties wrote
(reports, source titles, report sentences). A reader's CSV parser must see one row per record, and a
spreadsheet must show a cell, never run it; `export --out` must leave exactly one export behind and refuse
what is not an export.
"""

from __future__ import annotations

import csv
import io
import json

import pandas as pd
import pytest
import sqlalchemy as sa

from deepscholar import cli, db
from faults.conftest import unchanged

MONTH = "2025-07"
SYSTEM = "outside"
N_REPORTS = 40
TEXT = {"arxiv_id": str, "system_id": str}
# A bare CR ends a record for csv and pandas unless quoted: the text after it would become a row of its own,
# with attacker text as report_id.
SPLITTER = "Fine text.\r999999,2025-07,evil,=cmd|' /C calc'!A0,x\rmore"
FORMULAS = ["=HYPERLINK(\"http://evil.example\",\"x\")", "+1+1", "-2+3", "@SUM(A1:A9)", "\t=1+1", "\r=1+1"]


def _seed(engine) -> None:
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": MONTH, "status": "published",
                                      "window_start": f"{MONTH}-01T00:00:00+00:00"}], key=["release_id"])
        db.upsert(conn, "systems", [{"system_id": SYSTEM, "kind": "external"}], key=["system_id"])
        queries = [f"2507.{i:05d}" for i in range(1, N_REPORTS + 1)]
        db.upsert(conn, "release_queries", [{
            "release_id": MONTH, "arxiv_id": q, "title": f"Paper {q}", "abstract": "abstract",
            "section_raw_latex": "x", "section_text": "x", "word_count": 1} for q in queries],
            key=["release_id", "arxiv_id"])
        texts = [SPLITTER, *FORMULAS] + [f"Report {i} [1]." for i in range(N_REPORTS - 1 - len(FORMULAS))]
        db.upsert(conn, "reports", [{"release_id": MONTH, "system_id": SYSTEM, "arxiv_id": q, "status": "ok",
                                     "text": t} for q, t in zip(queries, texts, strict=True)],
                  key=["release_id", "system_id", "arxiv_id"])
        ids = list(conn.execute(sa.text("SELECT report_id FROM deepscholar.reports ORDER BY arxiv_id")).scalars())
        titles = [SPLITTER, *FORMULAS] + [f"Source of {i}" for i in range(N_REPORTS - 1 - len(FORMULAS))]
        db.upsert(conn, "report_sources", [{"report_id": r, "source_idx": 1, "arxiv_id": "2401.00001", "title": t}
                                           for r, t in zip(ids, titles, strict=True)], key=["report_id", "source_idx"])


@pytest.fixture
def month(engine, monkeypatch):
    _seed(engine)
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", engine.url.render_as_string(hide_password=False))
    return engine


def _export(out, capsys) -> tuple[int, list[str]]:
    capsys.readouterr()
    code = cli.main(["export", "--release", MONTH, "--out", str(out)])
    return code, capsys.readouterr().err.splitlines()


CSV_CASES = [pytest.param("reports", "text", id="report-text"),
             pytest.param("report_sources", "title", id="source-title")]


@pytest.mark.parametrize(("table", "column"), CSV_CASES)
def test_a_bare_cr_never_splits_a_row_and_formulas_are_shown_not_run(month, tmp_path, capsys, table, column):
    """Before: the CR was written unquoted and both readers saw 41 rows, one with attacker text as
    report_id; the formula cells were written as they came."""
    code, err = _export(tmp_path / "out", capsys)
    assert code == 0, err
    path = tmp_path / "out" / f"{table}.csv"
    frame = pd.read_csv(path, dtype=TEXT)
    assert len(frame) == N_REPORTS and frame["report_id"].dtype.kind == "i"
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == N_REPORTS and all(r["report_id"].isdigit() for r in rows)
    exact = pd.read_parquet(tmp_path / "out" / f"{table}.parquet")
    for hostile in [SPLITTER, *FORMULAS]:
        # The CSV: a `'` before each formula lead (the datacard says so); the Parquet: the exact text.
        shown = "'" + hostile if hostile[0] in "=+-@\t\r" else hostile
        assert (frame[column] == shown).sum() == 1, hostile
        assert (exact[column] == hostile).sum() == 1, hostile
    card = (tmp_path / "out" / "README.md").read_text()
    assert "## Untrusted text" in card and f"- `{table}.csv`: " in card and f"`{column}`" in card
    assert "starts with an added `'`" in card


def test_export_into_an_earlier_export_replaces_it_whole(month, tmp_path, capsys):
    out = tmp_path / "out"
    assert _export(out, capsys)[0] == 0
    (out / "stale_table.csv").write_text("left from an older export\n")
    (out / "reports.parquet").unlink()
    with unchanged(month):
        code, err = _export(out, capsys)
    assert code == 0, err
    assert not (out / "stale_table.csv").exists() and (out / "reports.parquet").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no staging or old folder left behind


REFUSED_CASES = [pytest.param("file", id="out-is-a-file"), pytest.param("folder", id="out-is-someone-elses-folder")]


@pytest.mark.parametrize("kind", REFUSED_CASES)
def test_export_refuses_a_file_or_a_folder_that_is_no_export_in_one_line(month, tmp_path, capsys, kind):
    out = tmp_path / "target"
    if kind == "file":
        out.write_text("precious\n")
    else:
        out.mkdir()
        (out / "notes.txt").write_text("precious\n")
    code, err = _export(out, capsys)
    assert code == 2 and len(err) == 1 and err[0].startswith("deepscholar: error: --out "), err
    kept = out if kind == "file" else out / "notes.txt"
    assert kept.read_text() == "precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["target"]


def test_annotate_exports_csv_quotes_line_breaks_and_neutralises_formulas(engine, tmp_path, monkeypatch):
    """The annotation sample carries third-party text (here the cited sources' titles) into the CSV an
    annotator opens in a spreadsheet: one row per item, formulas shown; the JSONL keeps the exact text."""
    from deepscholar.evaluation.judge_validation.annotation import export_sample
    from faults.test_hostile_imports import JUDGE, seed_month
    from faults.test_hostile_imports import MONTH as LABEL_MONTH

    report_id = seed_month(engine, len(FORMULAS) + 1)
    with engine.begin() as conn:
        for i, title in enumerate([SPLITTER, *FORMULAS], start=1):
            conn.execute(sa.text("UPDATE deepscholar.report_sources SET title = :t WHERE report_id = :r "
                                 "AND source_idx = :i"), {"t": title, "r": report_id, "i": i})
    export_sample(engine, LABEL_MONTH, "relevance_rate", JUDGE, len(FORMULAS) + 1, 3, tmp_path / "sample")
    exact = [json.loads(line) for line in (tmp_path / "sample.jsonl").read_text(encoding="utf-8").splitlines()]
    with (tmp_path / "sample.csv").open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == len(exact) == len(FORMULAS) + 1
    by_item = {r["item_id"]: r for r in rows}
    for item in exact:  # each cell as the JSONL has it, a `'` before a formula lead
        title = item["source_title"]
        assert by_item[item["item_id"]]["source_title"] == ("'" + title if title[:1] in ("=", "+", "-", "@", "\t", "\r")
                                                            else title)
    assert {r["source_title"][:2] for r in rows} >= {"'=", "'+", "'-", "'@"}
    assert len(pd.read_csv(io.StringIO((tmp_path / "sample.csv").read_text(encoding="utf-8"), newline=""))) == len(rows)
