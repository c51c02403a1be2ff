"""Hand-made external outputs in every shape a new user brings: each citation resolves through what the
output itself says (arXiv links, its numbered reference list, the corpus, arXiv title search), what it
cannot resolve is counted and listed, doubtful reports are flagged, and what a system only retrieved is
leak-checked but never read as a citation.

The release is the published DeepScholar-bench slice (../shared fixtures): row 0 is 2506.02838, dated
2025-06-03; its corpus holds the papers the slice's exemplars cite.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.chromium import parse_html, serve

from deepscholar import db
from deepscholar.errors import InvalidInput
from deepscholar.evaluation.judging.report_contexts import load_reports
from deepscholar.release.official_import import import_official
from deepscholar.systems.external import detect_format, import_reports
from deepscholar.systems.external.importer import format_import_summary
from deepscholar.systems.generation import list_reports
from deepscholar.text.sentences import split_report_sentences

pytestmark = pytest.mark.slow  # CLI subprocesses on a built month

RELEASE = "official"
QUERY = "2506.02838"  # row 0
CUTOFF = datetime(2025, 6, 3, 13, 6, 19, tzinfo=UTC)
CORPUS_TITLE = "The AI Economist: Improving Equality and Productivity with AI-Driven Tax Policies"  # 2004.13332
CSV_FIELDS = ["id", "title", "url", "snippet", "date"]


@pytest.fixture
def release(engine, shared_fixtures):
    summary = import_official(engine, shared_fixtures / "deepscholar_official", RELEASE)
    assert summary.n_errors == 0, summary.errors
    with engine.connect() as conn:  # the corpus title the tests resolve against is there
        assert conn.execute(sa.text("SELECT arxiv_id FROM corpus WHERE title ILIKE 'The AI Economist: Improving%'")
                            ).scalar() == "2004.13332"
    return engine


def rows(engine, sql: str, **params) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]


def report_of(engine, system_id: str, arxiv_id: str = QUERY) -> tuple[dict, dict[int, dict], list[dict]]:
    """(report row, cited sources by number, retrieved-only sources)."""
    (report,) = rows(engine, "SELECT * FROM reports WHERE system_id = :s AND arxiv_id = :a", s=system_id, a=arxiv_id)
    sources = rows(engine, "SELECT * FROM report_sources WHERE report_id = :r ORDER BY source_idx",
                   r=report["report_id"])
    return report, {s["source_idx"]: s for s in sources if s["cited"]}, [s for s in sources if not s["cited"]]


def write_csv(path: Path, records: list[dict]) -> None:
    with path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        writer.writeheader()
        for r in records:
            writer.writerow({k: r.get(k, "") for k in CSV_FIELDS})


def paper(arxiv_id: str, title: str, date: str) -> dict:
    return {"id": f"{arxiv_id}v1", "title": title, "url": f"http://arxiv.org/abs/{arxiv_id}v1",
            "snippet": f"What the system read of {title}.", "date": date}


def deepscholar_base_dir(root: Path, intro: str, papers: list[dict]) -> Path:
    root.mkdir(parents=True)
    (root / "intro.md").write_text(intro)
    write_csv(root / "paper.csv", papers)
    return root


def import_twice(engine, system_id: str, path: Path, **kw):
    first = import_reports(engine, system_id, path, RELEASE, title_search="corpus", **kw)
    counts = db.row_counts(engine)
    again = import_reports(engine, system_id, path, RELEASE, title_search="corpus", **kw)
    assert db.row_counts(engine) == counts, "re-import changed row counts"
    assert (again.n_stored, again.n_errors, again.by_format) == (first.n_stored, first.n_errors, first.by_format)
    return first


# --------------------------------------------------------------------------- deepscholar-base, links


LINKED_INTRO = """## Related Works

Tax policy was learned with two-level reinforcement learning \\[[Stephan Zheng' 2021-08-05](http://arxiv.org/abs/2108.02755v1)\\]. A paper from after the query is cited too \\[[A. Author' 2025-07-02](http://arxiv.org/abs/2507.00001v1)\\].
"""


def test_deepscholar_base_links_keep_uncited_rows_apart_and_leak_check_them(release, tmp_path, monkeypatch):
    root = deepscholar_base_dir(tmp_path / "runs" / "0", LINKED_INTRO, [
        paper("2108.02755", "The AI Economist: Optimal Economic Policy Design", "2021-08-05 17:42:35+00:00"),
        paper("2507.04321", "Retrieved from the future", "2025-07-08 00:00:00+00:00"),
        paper("2507.00001", "Cited from the future", "2025-07-02 00:00:00+00:00"),
        paper("2004.13332", CORPUS_TITLE, "2020-04-28 00:00:00+00:00"),
    ])
    summary = import_twice(release, "dsb_links", root.parent)
    assert (summary.n_stored, summary.n_errors, summary.n_flagged) == (1, 0, 0), summary.errors
    report, cited, uncited = report_of(release, "dsb_links")
    assert {n: s["arxiv_id"] for n, s in cited.items()} == {1: "2108.02755", 2: "2507.00001"}
    assert cited[1]["snippet"] == "What the system read of The AI Economist: Optimal Economic Policy Design."
    assert [(s["source_idx"], s["arxiv_id"], s["leaked"]) for s in uncited] == [
        (3, "2507.04321", True), (4, "2004.13332", False)]
    assert (report["n_citations"], report["n_unresolved_citations"]) == (2, 0)
    assert (report["n_leaked_sources"], report["n_leaked_retrieved"], report["quality_flags"]) == (1, 1, [])
    assert summary.by_format["deepscholar-base"]["leaked_retrieved"] == 1

    # The metrics read cited sources only; the CLI's listing counts them apart.
    (ctx,) = load_reports(release, [report["report_id"]])
    assert sorted(ctx.sources) == [1, 2] and ctx.cited_arxiv_ids == ("2108.02755", "2507.00001")
    (listed,) = [r for r in list_reports(release, RELEASE) if r["system_id"] == "dsb_links"]
    assert (listed["n_sources"], listed["n_retrieved_uncited"], listed["leaked_retrieved"]) == (2, 2, 1)

    # Cited-by counts are frozen for cited papers only (OpenAlex from the replay server).
    from deepscholar.release.source_counts import freeze_source_counts
    from deepscholar.replay.demo_snapshot import write_demo_snapshot
    from deepscholar.replay.server import ReplayServer

    write_demo_snapshot(tmp_path / "snapshot")
    with ReplayServer(tmp_path / "snapshot") as server:
        monkeypatch.setenv("DEEPSCHOLAR_OPENALEX_URL", server.openalex_url)
        freeze_source_counts(release, RELEASE)
    frozen = {r["arxiv_id"] for r in rows(release, "SELECT arxiv_id FROM source_cited_by WHERE release_id = :r",
                                          r=RELEASE)}
    assert {"2108.02755", "2507.00001"} <= frozen and not {"2507.04321", "2004.13332"} & frozen


# ------------------------------------------------------------------- deepscholar-base, [n] + list

NUMBERED_INTRO = """## Related Works

Reinforcement learning designs tax policy [1]. LLM agents compete in simulated markets [2]. Fair ranking
can be seen as taxation [3]. Scaling laws were measured [4]. A placeholder id is cited [5]. AI-driven tax
policies improve equality [6]. A made-up paper proves everything [7]. Agent-based platforms model
policy [8]. Nothing is listed for this one [9].

## References

[1] The AI Economist: Optimal Economic Policy Design via Two-level Deep Reinforcement Learning. *arXiv:2108.02755*, 2021.
[2] CompeteAI: Understanding the Competition Dynamics in Large Language Model-based Agents. https://arxiv.org/abs/2310.17512v2
[3] A Taxation Perspective for Fair Re-ranking. In SIGIR, 2024. doi:10.1145/3626772.3657766
[4] Scaling laws for neural language models. https://example.org/scaling-laws.pdf
[5] Imaginary results on taxation. *arXiv:2301.XXXXX*, 2023.
[6] The AI Economist: Improving Equality and Productivity with AI-Driven Tax Policies
[7] A Grand Unified Theory of Everything Written by a Language Model
[8] PolicySpace: a modeling platform
"""
NUMBERED_PAPERS = [
    paper("2108.02755", "The AI Economist: Optimal Economic Policy Design via Two-level Deep Reinforcement Learning",
          "2021-08-05 17:42:35+00:00"),
    paper("2404.17826", "A Taxation Perspective for Fair Re-ranking", "2024-04-27 08:21:29+00:00"),
    paper("1801.00259", "PolicySpace: a modeling platform", "2017-12-31 09:51:18+00:00"),
    paper("2506.01385", "Spending Behavior and Economic Impacts of Urban Digital Coupons", "2025-06-02 07:21:51+00:00"),
    paper("2507.09999", "Retrieved from the future", "2025-07-20 00:00:00+00:00"),
]


def test_deepscholar_base_numbered_list_resolves_every_kind_of_entry(release, tmp_path):
    root = deepscholar_base_dir(tmp_path / "runs" / "0", NUMBERED_INTRO, NUMBERED_PAPERS)
    assert detect_format(root.parent) == "deepscholar-base"  # by its files; the numbering by its content
    summary = import_twice(release, "dsb_numbered", root.parent)
    assert (summary.n_stored, summary.n_errors) == (1, 0), summary.errors
    report, cited, uncited = report_of(release, "dsb_numbered")
    assert report["text"] == NUMBERED_INTRO  # [n] already are the numbers: nothing rewritten
    assert report["trace"]["import"]["numbering"] == "reference_list"

    assert {n: (s["arxiv_id"], s["url"]) for n, s in cited.items()} == {
        1: ("2108.02755", "http://arxiv.org/abs/2108.02755v1"),  # arXiv id; paper.csv gives its snippet
        2: ("2310.17512", "https://arxiv.org/abs/2310.17512v2"),  # arXiv URL
        3: ("2404.17826", "https://doi.org/10.1145/3626772.3657766"),  # DOI; its title matches a paper.csv row
        4: (None, "https://example.org/scaling-laws.pdf"),  # a URL
        6: ("2004.13332", "https://arxiv.org/abs/2004.13332"),  # a title alone, found in the corpus
        8: ("1801.00259", "http://arxiv.org/abs/1801.00259v1"),  # a title alone, matching a paper.csv row
    }
    assert cited[1]["snippet"] == NUMBERED_PAPERS[0]["snippet"] and cited[8]["snippet"] == NUMBERED_PAPERS[2]["snippet"]
    assert cited[2]["snippet"] == "" and cited[6]["snippet"] == ""
    assert report["trace"]["import"]["title_matches"] == [{
        "n": 6, "entry": CORPUS_TITLE, "arxiv_id": "2004.13332", "title": CORPUS_TITLE, "via": "corpus",
        "similarity": 1.0}]

    # [5] names a placeholder id, [7] only a title nobody knows, [9] has no entry: 3 of 9 unresolved.
    assert [(u["n"], u["reason"]) for u in report["trace"]["import"]["unresolved"]] == [
        (5, "names no resolvable arXiv id ('2301.XXXXX')"),
        (7, "a title alone that matches nothing in the corpus"),
        (9, "no entry with this number in the reference list")]
    assert (report["n_unresolved_citations"], report["quality_flags"]) == (3, ["unresolved_citations"])
    assert report["trace"]["import"]["quality"]["unresolved_share"] == pytest.approx(3 / 9, abs=1e-4)

    # paper.csv rows the report does not list: kept uncited, leak-checked apart.
    assert [(s["arxiv_id"], s["leaked"], s["date_basis"]) for s in uncited] == [
        ("2506.01385", False, "arxiv_id_lower_bound"), ("2507.09999", True, "arxiv_id_lower_bound")]
    assert min(s["source_idx"] for s in uncited) == 10
    assert (report["n_leaked_sources"], report["n_leaked_retrieved"]) == (0, 1)
    assert summary.by_format == {"deepscholar-base": {
        "outputs": 1, "reports": 1, "cited": 9, "resolved": 6, "unresolved": 3, "leaked": 0,
        "leaked_retrieved": 1, "flagged": 1, "errors": 0}}
    text = format_import_summary(summary)
    assert f"{QUERY}  unresolved_citations  (3 of 9 cited [n] unresolved, 6 sources)" in text
    assert "[5] Imaginary results on taxation. *arXiv:2301.XXXXX*, 2023.: names no resolvable arXiv id" in text

    # The threshold is the caller's: at 50% the same report is not flagged, and the upsert clears the flag.
    again = import_reports(release, "dsb_numbered", root.parent, RELEASE, title_search="corpus",
                           max_unresolved_share=0.5)
    assert again.n_flagged == 0 and report_of(release, "dsb_numbered")[0]["quality_flags"] == []


def test_deepscholar_base_without_links_or_list_is_flagged_not_silent(release, tmp_path):
    root = deepscholar_base_dir(tmp_path / "runs" / "0", "## Related Works\n\nPrior work [1] and more [2].\n",
                                NUMBERED_PAPERS[:2])
    summary = import_reports(release, "dsb_bare", root.parent, RELEASE, title_search="corpus")
    report, cited, uncited = report_of(release, "dsb_bare")
    assert cited == {} and len(uncited) == 2
    assert report["quality_flags"] == ["no_sources", "unresolved_citations"]
    assert [u["reason"] for u in report["trace"]["import"]["unresolved"]] == ["no source with this number"] * 2
    assert "neither arXiv links nor a numbered reference list" in report["trace"]["import"]["notes"][0]
    assert summary.n_flagged == 1


# ----------------------------------------------------------------------------- plain markdown


def test_plain_markdown_with_a_list_whatever_the_folder_is_called(release, tmp_path):
    folder = tmp_path / "whatever_system_outputs"
    folder.mkdir()
    (folder / f"{QUERY}v1.md").write_text(
        "# Related work\n\nEconomic simulation with RL [1]. Agents compete [2, 3].\n\n"
        "1. Zheng et al. The AI Economist. arXiv:2108.02755 (2021).\n"
        "2. Li et al. CompeteAI. https://arxiv.org/abs/2310.17512 (2023).\n"
        "3. Someone. A paper. arXiv preprint arXiv:2306.XXXXX, 2023.\n")
    (folder / "README.md").write_text("How these outputs were made.\n")
    assert detect_format(folder) == "markdown"
    summary = import_twice(release, "plain_md", folder)
    assert (summary.n_stored, summary.n_errors) == (1, 0), summary.errors
    assert summary.skipped == [{"path": str(folder / "README.md"), "why": (
        "no [n] markers, arXiv links or reference list (give the file itself to import it as a report)")}]
    report, cited, uncited = report_of(release, "plain_md")
    assert {n: s["arxiv_id"] for n, s in cited.items()} == {1: "2108.02755", 2: "2310.17512"} and uncited == []
    assert [u["n"] for u in report["trace"]["import"]["unresolved"]] == [3]
    assert report["quality_flags"] == ["unresolved_citations"]  # 1 of 3
    assert [s.citations for s in split_report_sentences(report["text"])] == [[1], [2, 3]]


def test_jsonl_title_only_sources_resolve_through_the_corpus(release, tmp_path):
    path = tmp_path / "reports.jsonl"
    path.write_text(json.dumps({"arxiv_id": QUERY, "text": "AI-driven tax policy [1]. Invented work [2].",
                                "sources": [{"idx": 1, "title": CORPUS_TITLE},
                                            {"idx": 2, "title": "An Invented Paper Nobody Wrote"}]}) + "\n")
    summary = import_twice(release, "jsonl_titles", path)
    report, cited, _ = report_of(release, "jsonl_titles")
    assert {n: s["arxiv_id"] for n, s in cited.items()} == {1: "2004.13332"}
    assert report["trace"]["import"]["unresolved"] == [{
        "n": 2, "entry": "An Invented Paper Nobody Wrote", "in_text": True,
        "reason": "a title alone that matches nothing in the corpus"}]
    assert summary.by_format["jsonl"]["unresolved"] == 1 and report["quality_flags"] == ["unresolved_citations"]


def test_arxiv_title_search_resolves_a_title_the_corpus_lacks(release, tmp_path, monkeypatch):
    from deepscholar.replay.demo_snapshot import write_demo_snapshot
    from deepscholar.replay.server import ReplayServer

    write_demo_snapshot(tmp_path / "snapshot")
    title = "Attributed Text Generation with Inline Citations"  # 1903.19545 in the snapshot, not the corpus
    out = tmp_path / "out"
    out.mkdir()
    (out / f"{QUERY}.md").write_text(f"Citations inline [1].\n\n## References\n\n[1] {title}. 2019.\n")
    corpus_before = db.row_counts(release)["corpus"]
    with ReplayServer(tmp_path / "snapshot") as server:
        monkeypatch.setenv("DEEPSCHOLAR_ARXIV_API_URL", server.arxiv_api_url)
        monkeypatch.setenv("DEEPSCHOLAR_ARXIV_DELAY_SECONDS", "0")
        summary = import_reports(release, "md_arxiv", out, RELEASE)
        assert any(r.path == "/api/query" for r in server.requests)
    report, cited, _ = report_of(release, "md_arxiv")
    assert cited[1]["arxiv_id"] == "1903.19545" and report["n_unresolved_citations"] == 0
    assert report["trace"]["import"]["title_matches"][0]["via"] == "arxiv_title_search"
    assert summary.n_flagged == 0
    assert db.row_counts(release)["corpus"] == corpus_before  # an import never grows the search corpus

    # Limited to the corpus, the same entry is unresolved, and says where it was looked for.
    import_reports(release, "md_arxiv", out, RELEASE, title_search="corpus")
    report, cited, _ = report_of(release, "md_arxiv")
    assert cited == {} and report["quality_flags"] == ["no_sources", "unresolved_citations"]


# ------------------------------------------------------------------------- unreadable outputs


def test_unreadable_outputs_are_reported_and_the_rest_imported(release, tmp_path):
    runs = tmp_path / "runs"
    (runs / "0").mkdir(parents=True)
    (runs / "0" / "report.md").write_text("Economic RL [1].\n\n## References\n\n[1] The AI Economist. arXiv:2108.02755\n")
    (runs / "1").mkdir()
    (runs / "1" / "output.json").write_text('{"output": "truncated')
    (runs / "2").mkdir()
    (runs / "2" / "report.md").write_bytes(b"Broken bytes \xff\xfe [1].\n")
    summary = import_reports(release, "mixed", runs, RELEASE, title_search="corpus")
    assert (summary.n_outputs, summary.n_stored, summary.n_errors) == (3, 1, 2)
    errors = {Path(e["path"]).relative_to(runs).as_posix(): e["error"] for e in summary.errors}
    assert errors["1/output.json"].startswith("not readable as JSON: Unterminated string")
    assert errors["2/report.md"].startswith("not readable as UTF-8 text")
    assert [r["arxiv_id"] for r in rows(release, "SELECT arxiv_id FROM reports WHERE system_id = 'mixed'")] == [QUERY]
    assert summary.by_format["unreadable"]["errors"] == 2

    # Nothing readable at all: no system is registered for it.
    only_bad = tmp_path / "only_bad"
    only_bad.mkdir()
    (only_bad / "x.json").write_text("[")
    bad = import_reports(release, "nothing_readable", only_bad, RELEASE, title_search="corpus")
    assert (bad.n_stored, bad.n_errors) == (0, 1)
    assert rows(release, "SELECT count(*) AS n FROM systems WHERE system_id = 'nothing_readable'")[0]["n"] == 0

    # Files that are no outputs at all: a usage error that says what was looked at and why it was skipped.
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "README.md").write_text("How the runs were made.\n")
    with pytest.raises(InvalidInput, match=r"no system outputs recognised .*README.md: no \[n\] markers"):
        import_reports(release, "notes", notes, RELEASE)


# ------------------------------------------------------------------------------ the report page


def test_report_page_shows_the_flags_escaped(release, tmp_path):
    from deepscholar.web import create_app

    root = deepscholar_base_dir(tmp_path / "runs" / "0", NUMBERED_INTRO, NUMBERED_PAPERS)
    import_reports(release, "dsb_page", root.parent, RELEASE, title_search="corpus")
    report, _, _ = report_of(release, "dsb_page")
    with release.begin() as conn:  # a hostile flag (as if written by hand in SQL) must not become markup
        conn.execute(sa.text("UPDATE reports SET quality_flags = array_append(quality_flags, '<b>x</b>') WHERE report_id = :r"),
                     {"r": report["report_id"]})
    import urllib.request

    with serve(create_app(lambda: release)) as url:
        with urllib.request.urlopen(f"{url}/report/{report['report_id']}", timeout=30) as resp:
            html = resp.read().decode()
    cell = parse_html(html).one("td", {"data-field": "quality_flags"})
    assert [s.text() for s in cell.find_all("span", {"class": "quality-flag"})] == ["unresolved_citations", "<b>x</b>"]
    assert "&lt;b&gt;x&lt;/b&gt;" in html and "<b>x</b>" not in html
    assert "3 unresolved citations, 1 leaked retrieved-only sources" in cell.text()
    assert html.count("(retrieved, not cited)") == 2


# ------------------------------------------------------------------------------ the command line


def run_cli(*args: str, db_url: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", DEEPSCHOLAR_DB_URL=db_url)
    return subprocess.run([sys.executable, "-m", "deepscholar.cli", *args], capture_output=True, text=True, env=env,
                          timeout=300)


def test_cli_prints_per_format_counts_lists_flagged_reports_and_exits_2_on_unreadable(release, db_url, tmp_path):
    runs = tmp_path / "runs"
    deepscholar_base_dir(runs / "0", NUMBERED_INTRO, NUMBERED_PAPERS)
    (runs / "3").mkdir()
    (runs / "3" / "report.md").write_text("Placeholders only [1][2].\n\n## References\n\n"
                                          "[1] One. arXiv:2301.XXXXX\n[2] Two. arXiv:2302.XXXXX\n")
    (runs / "4").mkdir()
    (runs / "4" / "broken.json").write_text("{not json")
    args = ["import-reports", "ext", str(runs), "--release", RELEASE, "--title-search", "corpus"]

    out = run_cli(*args, db_url=db_url)
    assert out.returncode == 2, out.stdout + out.stderr
    # One line per output that could not be read, naming it (besides the progress lines).
    (line,) = [x for x in out.stderr.splitlines() if x.strip() and "deepscholar.progress" not in x]
    assert line.startswith(f"deepscholar: error: {runs / '4' / 'broken.json'}: not readable as JSON")
    table = {r.split()[0]: r.split()[1:] for r in out.stdout.splitlines()[3:7]}
    # reports, cited [n], resolved, unresolved, leaked, leaked (retrieved only), flagged, not imported
    assert table["deepscholar-base"] == ["1", "9", "6", "3", "0", "1", "1", "0"]
    assert table["markdown"] == ["1", "2", "0", "2", "0", "0", "1", "0"]
    assert table["unreadable"] == ["0", "0", "0", "0", "0", "0", "0", "1"]
    assert table["total"] == ["2", "11", "6", "5", "0", "1", "2", "1"]
    assert "flagged reports (2; more than 20% unresolved counts as unresolved_citations):" in out.stdout
    assert f"  {QUERY}  unresolved_citations  (3 of 9 cited [n] unresolved, 6 sources)" in out.stdout
    assert "  2506.00418  no_sources, unresolved_citations  (2 of 2 cited [n] unresolved, 0 sources)" in out.stdout

    again = run_cli(*args, "--json", "--max-unresolved", "0.5", db_url=db_url)
    assert again.returncode == 2
    summary = json.loads(again.stdout)
    assert summary["by_format"]["deepscholar-base"]["flagged"] == 0 and summary["n_flagged"] == 1
    assert [(r["arxiv_id"], r["quality_flags"]) for r in summary["flagged"]] == [
        ("2506.00418", ["no_sources", "unresolved_citations"])]

    listed = run_cli("reports", "--release", RELEASE, "--json", db_url=db_url)
    flags = {r["arxiv_id"]: r["quality_flags"] for r in json.loads(listed.stdout) if r["system_id"] == "ext"}
    assert flags == {QUERY: [], "2506.00418": ["no_sources", "unresolved_citations"]}
    shown = run_cli("reports", "--release", RELEASE, db_url=db_url).stdout
    assert "quality_flags" in shown.splitlines()[0]
    assert any(r.split()[:3] == ["ext", "2506.00418", "ok"] and r.endswith("no_sources,unresolved_citations")
               for r in shown.splitlines())
    with release.connect() as conn:  # and in SQL
        assert conn.execute(sa.text("SELECT arxiv_id FROM reports WHERE 'no_sources' = ANY(quality_flags)")
                            ).scalars().all() == ["2506.00418"]

    bad = run_cli(*args, "--max-unresolved", "1.5", db_url=db_url)
    assert bad.returncode == 2 and "share in [0, 1]" in bad.stderr
