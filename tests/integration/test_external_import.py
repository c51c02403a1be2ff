"""Importing the six published systems' outputs (../shared fixtures) as external systems, plus JSONL,
unmappable outputs, leakage of imported sources and the HTTP external system.

Expected sources are read from the fixture files with plain regex/json, independently of the readers,
so the tests check the mapping each format defines rather than restating the importer's results.
"""

from __future__ import annotations

import csv
import json
import re
import shutil
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa
from werkzeug import Response

from deepscholar import db
from deepscholar.errors import SystemFailure
from deepscholar.release.official_import import import_official
from deepscholar.systems.base import Query, SystemContext, make_system
from deepscholar.systems.external import ExternalHTTPSystem, detect_format, import_reports
from deepscholar.systems.generation import generate_pair
from deepscholar.systems.registry import add_system
from deepscholar.text.citations import citation_numbers
from deepscholar.text.sentences import split_report_sentences

pytestmark = pytest.mark.slow  # imports a built month per test

RELEASE = "official"
QUERY = "2506.02838"  # row 0 of papers_with_related_works.csv, the paper every published output is for
QUERY_CUTOFF = datetime(2025, 6, 3, 13, 6, 19, tzinfo=UTC)


@pytest.fixture
def outputs(shared_fixtures) -> Path:
    return shared_fixtures / "deepscholar_official" / "system_outputs_paper0"


@pytest.fixture
def release(engine, shared_fixtures):
    summary = import_official(engine, shared_fixtures / "deepscholar_official", RELEASE)
    assert summary.n_errors == 0, summary.errors
    return engine


def place(src: Path, dest: Path) -> Path:
    """Copy one published output under a folder named by its row or arXiv id (as the authors ran them)."""
    shutil.copytree(src, dest)
    return dest.parent


def rows(engine, sql: str, **params):
    with engine.connect() as conn:
        return conn.execute(sa.text(sql), params).mappings().all()


def stored(engine, system_id: str):
    """The one report of a system and its cited sources by number (retrieved-only ones: `retrieved`)."""
    report = rows(engine, "SELECT * FROM reports WHERE system_id = :s", s=system_id)
    assert len(report) == 1
    sources = rows(engine, "SELECT * FROM report_sources WHERE report_id = :r AND cited ORDER BY source_idx",
                   r=report[0]["report_id"])
    return report[0], {s["source_idx"]: s for s in sources}


def retrieved(engine, report) -> list:
    return rows(engine, "SELECT * FROM report_sources WHERE report_id = :r AND NOT cited ORDER BY source_idx",
                r=report["report_id"])


def arxiv_links(text: str) -> list[str]:
    """Distinct version-less arXiv ids of markdown links, first appearance first."""
    seen: dict[str, None] = {}
    for m in re.finditer(r"\]\((?:https?://)arxiv\.org/abs/([^)\s]+?)(?:v\d+)?\)", text):
        seen.setdefault(m.group(1), None)
    return list(seen)


def reference_numbers(text: str) -> dict[int, str]:
    """Lines '[n] …' after the last References heading."""
    tail = re.split(r"(?mi)^#*\s*references\s*$", text)[-1]
    return {int(m.group(1)): m.group(2) for m in re.finditer(r"(?m)^\[(\d+)\]\s*(.*)$", tail)}


def assert_every_citation_resolves(report, sources):
    cited = set(citation_numbers(report["text"]))
    assert cited and cited <= set(sources), cited - set(sources)
    assert report["status"] == "ok" and report["arxiv_id"] == QUERY
    assert report["n_unresolved_citations"] == 0 and report["trace"]["import"]["unresolved"] == []
    assert report["search_backend"] == "external"
    assert report["quality_flags"] == []


def import_twice(engine, system_id: str, path: Path, fmt: str = "auto"):
    """Import, then import again: the second changes no row count (titles looked up in the corpus only)."""
    first = import_reports(engine, system_id, path, RELEASE, fmt=fmt, title_search="corpus")
    counts = db.row_counts(engine)
    again = import_reports(engine, system_id, path, RELEASE, fmt=fmt, title_search="corpus")
    assert db.row_counts(engine) == counts, "re-import changed row counts"
    assert (again.n_stored, again.n_errors, again.by_format) == (first.n_stored, first.n_errors, first.by_format)
    return first


# ------------------------------------------------------------------------------ the six systems


def test_deepscholar_base_links_become_numbers_matched_to_paper_csv(release, outputs, tmp_path):
    src = outputs / "deepscholar-base"
    root = place(src, tmp_path / "runs" / "0")  # row 0 -> 2506.02838 through row_index
    assert detect_format(root) == "deepscholar-base"
    summary = import_twice(release, "ds_base", root)
    assert (summary.n_stored, summary.n_errors) == (1, 0), summary.errors

    report, sources = stored(release, "ds_base")
    assert_every_citation_resolves(report, sources)
    expected = arxiv_links((src / "intro.md").read_text())
    assert [sources[n]["arxiv_id"] for n in sorted(sources)] == expected  # numbered by first appearance
    assert "arxiv.org" not in report["text"].split("## References")[0]
    csv.field_size_limit(2**31 - 1)
    with (src / "paper.csv").open(newline="") as fh:
        snippets = {re.sub(r"v\d+$", "", r["id"]): r["snippet"] for r in csv.DictReader(fh)}
    assert all(s["snippet"] == snippets[s["arxiv_id"]] for s in sources.values())
    # The system cited the query paper itself: published at the cutoff, so it is flagged as leaked.
    assert report["n_leaked_sources"] == 1
    leaked = [s for s in sources.values() if s["leaked"]]
    assert [(s["arxiv_id"], s["date_basis"]) for s in leaked] == [(QUERY, "corpus")]
    # paper.csv rows the text never links are kept as retrieved, uncited, numbered past every [n].
    with (src / "paper.csv").open(newline="") as fh:
        csv_ids = [re.sub(r"v\d+$", "", r["id"]) for r in csv.DictReader(fh)]
    uncited = retrieved(release, report)
    assert [s["arxiv_id"] for s in uncited] == [a for a in csv_ids if a not in expected]
    assert min(s["source_idx"] for s in uncited) > max([*sources, *citation_numbers(report["text"])])
    assert all(s["snippet"] == snippets[s["arxiv_id"]] for s in uncited)
    assert report["n_leaked_retrieved"] == sum(s["leaked"] for s in uncited) == 0
    body_cited = {n for sentence in split_report_sentences(report["text"]) for n in sentence.citations}
    assert len(body_cited) == 11  # 19 listed, 11 cited in the body (docs/PITFALLS.md)
    assert summary.by_format == {"deepscholar-base": {
        "outputs": 1, "reports": 1, "cited": 11, "resolved": 11, "unresolved": 0, "leaked": 1,
        "leaked_retrieved": 0, "flagged": 0, "errors": 0}}
    assert rows(release, "SELECT kind, config FROM systems WHERE system_id = 'ds_base'")[0] == {
        "kind": "external", "config": {"source": str(root), "format": "deepscholar-base"}}


def test_deepscholar_base_gpt41_keyed_by_an_arxiv_id_folder(release, outputs, tmp_path):
    src = outputs / "deepscholar_base_gpt_4.1"
    root = place(src, tmp_path / "runs" / f"{QUERY}v1")
    summary = import_twice(release, "ds_base_gpt41", root)
    assert (summary.n_stored, summary.n_errors) == (1, 0), summary.errors
    report, sources = stored(release, "ds_base_gpt41")
    assert_every_citation_resolves(report, sources)
    assert [sources[n]["arxiv_id"] for n in sorted(sources)] == arxiv_links((src / "intro.md").read_text())
    assert all(s["snippet"].strip() for s in sources.values())
    assert report["n_leaked_sources"] == 0


def test_search_ai_reference_list_decides_what_n_means(release, outputs, tmp_path):
    src = outputs / "search_ai_gpt_4.1"
    root = place(src, tmp_path / "runs" / "0")
    summary = import_twice(release, "search_ai", root)
    assert (summary.n_stored, summary.n_errors) == (1, 0), summary.errors
    report, sources = stored(release, "search_ai")
    assert_every_citation_resolves(report, sources)

    data = json.loads(next(src.glob("*.json")).read_text())
    listed = reference_numbers(data["output"])
    expected = {n: re.search(r"arxiv\.org/abs/(\S+?)(?:v\d+)?$", line).group(1) for n, line in listed.items()}
    assert {n: s["arxiv_id"] for n, s in sources.items()} == expected
    # [2] is the Multi-LLM-agent paper the text describes, which is ctxs[29], not ctxs[1].
    assert sources[2]["arxiv_id"] == "2502.16879" and sources[2]["snippet"] == data["ctxs"][29]["text"]
    ctx_text = {re.sub(r"v\d+$", "", c["url"].rsplit("/", 1)[1]): c["text"] for c in data["ctxs"]}
    assert all(s["snippet"] == ctx_text[s["arxiv_id"]] for s in sources.values())
    assert report["latency_ms"] == pytest.approx(data["latency"] * 1000)
    assert report["cost_usd"] == pytest.approx(data["usage"]["total_cost_usd_dollar"])


def test_openscholar_zero_based_passages_shifted_and_keyed_by_its_own_arxiv_id(release, outputs):
    src = outputs / "openscholar"
    summary = import_twice(release, "openscholar", src)  # the JSON names 2506.02838v1 itself
    assert (summary.n_stored, summary.n_errors) == (1, 0), summary.errors
    report, sources = stored(release, "openscholar")
    assert_every_citation_resolves(report, sources)

    data = json.loads(next(src.glob("*.json")).read_text())
    assert data["final_passages"].startswith("[0]")
    cited_zero_based = set(citation_numbers(data["output"]))
    assert 0 in cited_zero_based and set(citation_numbers(report["text"])) == {n + 1 for n in cited_zero_based}
    for n, s in sources.items():
        ctx = data["ctxs"][n - 1]
        assert s["snippet"] == ctx["text"]
        # pes2o passages carry no URL or arXiv id: the Semantic Scholar corpus id identifies the paper.
        assert s["arxiv_id"] is None and s["url"] == f"https://api.semanticscholar.org/CorpusID:{ctx['id']}"
    assert report["n_leaked_sources"] == 0


def test_deepresearcher_answer_extracted_and_title_only_references_unresolved(release, outputs, tmp_path):
    src = outputs / "deepresearcher"
    root = place(src, tmp_path / "runs" / "0")
    summary = import_twice(release, "deepresearcher", root)
    assert (summary.n_stored, summary.n_errors) == (1, 0), summary.errors
    report = rows(release, "SELECT * FROM reports WHERE system_id = 'deepresearcher'")[0]

    data = json.loads(next(src.glob("*.json")).read_text())
    assert "<tool_calls>" in data["output"] and "<tool_calls>" not in report["text"]
    assert "</think>" not in report["text"] and report["text"].rstrip().endswith("Journal of Taxation and "
                                                                                 "Economic Policy, 6(1), 1-15.")
    listed = reference_numbers(report["text"])
    assert sorted(listed) == list(range(1, 11))
    # Its references are titles it wrote itself (no id, URL or DOI) that match none of its retrieved
    # passages and nothing in the corpus: every citation is unresolved, listed, and the report flagged.
    unresolved = report["trace"]["import"]["unresolved"]
    assert [u["n"] for u in unresolved] == list(range(1, 11))
    assert unresolved[0]["entry"] == "Optimal taxation with endogenous human capital"
    assert all(u["reason"] == "a title alone that matches nothing in the corpus" for u in unresolved)
    assert (report["n_unresolved_citations"], report["quality_flags"]) == (10, ["no_sources", "unresolved_citations"])
    assert rows(release, "SELECT count(*) AS n FROM report_sources WHERE report_id = :r AND cited",
                r=report["report_id"])[0]["n"] == 0
    # What it retrieved is kept, uncited, for the leakage check.
    ctx_urls = {c["url"] for c in data["ctxs"] if c.get("url")}
    assert {s["url"] for s in retrieved(release, report)} == ctx_urls
    assert summary.by_format["deepresearcher"] | {} == {
        "outputs": 1, "reports": 1, "cited": 10, "resolved": 0, "unresolved": 10, "leaked": 0,
        "leaked_retrieved": report["n_leaked_retrieved"], "flagged": 1, "errors": 0}


def test_storm_url_to_unified_index_numbers_the_sources(release, outputs, tmp_path):
    src = outputs / "storm"
    root = place(src, tmp_path / "runs" / "0")  # 0/<run dir>/, the layout the authors ran
    assert detect_format(root) == "storm"
    summary = import_twice(release, "storm", root)
    assert (summary.n_stored, summary.n_errors) == (1, 0), summary.errors
    report, sources = stored(release, "storm")
    assert_every_citation_resolves(report, sources)

    info = json.loads(next(src.glob("*/url_to_info.json")).read_text())
    assert {n: s["url"] for n, s in sources.items()} == {
        n: url for url, n in info["url_to_unified_index"].items()}
    for s in sources.values():
        assert s["snippet"] == "\n\n".join(info["url_to_info"][s["url"]]["snippets"])
        assert s["title"] == info["url_to_info"][s["url"]]["title"]


# --------------------------------------------------------------------------- mapping and errors


def test_unmappable_outputs_are_reported_not_stored(release, outputs, tmp_path):
    runs = tmp_path / "runs"
    place(outputs / "search_ai_gpt_4.1", runs / "7")  # the slice has rows 0-4 only
    place(outputs / "search_ai_gpt_4.1", runs / "2401.00001")  # not a query of the release
    place(outputs / "search_ai_gpt_4.1", runs / "0")
    place(outputs / "search_ai_gpt_4.1", runs / f"{QUERY}v1")  # the same query twice: the first one wins
    summary = import_reports(release, "search_ai", runs, RELEASE)
    assert (summary.n_outputs, summary.n_stored, summary.n_errors) == (4, 1, 3)
    reasons = sorted(e["error"] for e in summary.errors)
    assert any("row 7 is not a row" in r for r in reasons)
    assert any("2401.00001 is not a query" in r for r in reasons)
    assert any(f"a second output for {QUERY}" in r for r in reasons)
    assert [r["arxiv_id"] for r in rows(release, "SELECT arxiv_id FROM reports")] == [QUERY]

    # Row 3 is another paper than the one the openscholar JSON names: refused, not guessed.
    wrong = import_reports(release, "openscholar", place(outputs / "openscholar", tmp_path / "os" / "3"), RELEASE)
    assert wrong.n_stored == 0 and "folder row 3 is 2506.00418" in wrong.errors[0]["error"]

    # A lone output in a folder named by neither a row nor an id is not guessed at.
    alone = import_reports(release, "alone", outputs / "search_ai_gpt_4.1", RELEASE)
    assert alone.n_stored == 0 and "names no arXiv id" in alone.errors[0]["error"]


def test_rows_only_map_through_an_imported_dataset_order(engine, outputs, tmp_path):
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": "2025-06", "status": "published"}], key=["release_id"])
        db.upsert(conn, "release_queries", [{
            "release_id": "2025-06", "arxiv_id": QUERY, "title": "TaxAgent", "abstract": "x",
            "published": QUERY_CUTOFF, "section_raw_latex": "x", "section_text": "x", "word_count": 1}],
            key=["release_id", "arxiv_id"])
    root = place(outputs / "storm", tmp_path / "runs" / "0")
    summary = import_reports(engine, "storm", root, "2025-06")
    assert summary.n_stored == 0 and "only official imports record rows" in summary.errors[0]["error"]


def write_jsonl(path: Path, lines: list) -> Path:
    path.write_text("".join((x if isinstance(x, str) else json.dumps(x)) + "\n" for x in lines))
    return path


def test_generic_jsonl(release, tmp_path):
    path = write_jsonl(tmp_path / "reports.jsonl", [
        {"arxiv_id": "2506.00958v1", "text": "## Related Work\n\nGesture studies [1]. Speech models [2][3].",
         "sources": [
             {"idx": 1, "arxiv_id": "arXiv:2310.00001v2", "title": "Gestures", "snippet": "We study gestures."},
             {"idx": 2, "url": "https://arxiv.org/pdf/2311.00002v1.pdf", "title": "Speech", "snippet": "S."},
             {"idx": 3, "url": "https://aclanthology.org/2020.acl-main.1", "title": "ACL paper", "snippet": ""}]},
        # No sources: the reference list is parsed, and its placeholder id stays unresolved.
        {"arxiv_id": "2506.00832", "text": "Editing activations [1]. Probing [2].\n\n## References\n\n"
                                           "[1] Activation editing. *arXiv:2305.12345*, 2023.\n"
                                           "[2] Probing classifiers. *arXiv:2306.XXXXX*, 2023.\n"},
        {"arxiv_id": "2401.99999", "text": "Not a query of the release [1].", "sources": []},
        "{not json",
    ])
    summary = import_twice(release, "jsonl_sys", path)
    assert (summary.n_outputs, summary.n_stored, summary.n_errors) == (4, 2, 2)
    assert sorted(e["path"].rsplit(":", 1)[1] for e in summary.errors) == ["3", "4"]

    report, sources = stored_for(release, "jsonl_sys", "2506.00958")
    assert [(s["source_idx"], s["arxiv_id"]) for s in sources] == [(1, "2310.00001"), (2, "2311.00002"), (3, None)]
    assert (report["n_citations"], report["n_unresolved_citations"]) == (3, 0)

    report, sources = stored_for(release, "jsonl_sys", "2506.00832")
    assert [(s["source_idx"], s["arxiv_id"], s["title"]) for s in sources] == [
        (1, "2305.12345", "Activation editing")]
    assert (report["n_citations"], report["n_unresolved_citations"]) == (2, 1)
    assert report["trace"]["import"]["unresolved"] == [{
        "n": 2, "entry": "Probing classifiers. *arXiv:2306.XXXXX*, 2023.",
        "reason": "names no resolvable arXiv id ('2306.XXXXX')", "in_text": True}]
    assert report["quality_flags"] == ["unresolved_citations"]  # 1 of 2 is above the default 20%
    assert [r["quality_flags"] for r in summary.flagged] == [["unresolved_citations"]]


def stored_for(engine, system_id: str, arxiv_id: str):
    report = rows(engine, "SELECT * FROM reports WHERE system_id = :s AND arxiv_id = :a", s=system_id, a=arxiv_id)[0]
    sources = rows(engine, "SELECT * FROM report_sources WHERE report_id = :r ORDER BY source_idx",
                   r=report["report_id"])
    return report, sources


def test_a_source_dated_after_the_query_is_flagged_leaked(release, tmp_path):
    path = write_jsonl(tmp_path / "leak.jsonl", [{
        "arxiv_id": QUERY, "text": "Earlier work [1]. A follow-up [2].",
        "sources": [{"idx": 1, "arxiv_id": "2108.02755", "title": "The AI Economist", "snippet": "AI."},
                    {"idx": 2, "arxiv_id": "2507.00001", "title": "From July", "snippet": "Later."}]}])
    import_reports(release, "leaky", path, RELEASE)
    report, sources = stored_for(release, "leaky", QUERY)
    assert report["n_leaked_sources"] == 1
    assert rows(release, "SELECT count(*) AS n FROM corpus WHERE arxiv_id = '2507.00001'")[0]["n"] == 0
    later = sources[1]
    assert (later["leaked"], later["date_basis"]) == (True, "arxiv_id_lower_bound")
    assert later["published"] == datetime(2025, 7, 1, tzinfo=UTC)
    assert sources[0]["leaked"] is False


def test_an_existing_non_external_system_is_not_overwritten(release, tmp_path):
    add_system(release, "extractive_x", "extractive")
    path = write_jsonl(tmp_path / "r.jsonl", [{"arxiv_id": QUERY, "text": "A [1].", "sources": []}])
    with pytest.raises(ValueError, match="is a extractive system"):
        import_reports(release, "extractive_x", path, RELEASE)


# ------------------------------------------------------------------------------ HTTP system

REMOTE_REPORT = {
    "text": "## Related Work\n\nEconomic simulation with RL [1]. Later agents [2].",
    "sources": [
        {"idx": 1, "arxiv_id": "2108.02755v1", "title": "The AI Economist", "snippet": "AI and RL..."},
        {"idx": 2, "url": "http://arxiv.org/abs/2507.00001v1", "title": "Future", "snippet": "Later.",
         "published": "2025-07-02T00:00:00Z"}],
}


def http_system(httpserver, **config) -> ExternalHTTPSystem:
    return make_system("remote", "external", {"endpoint": httpserver.url_for("/report"), "retry_wait": 0,
                                              **config}, SystemContext(engine=None))


def query() -> Query:
    return Query(RELEASE, QUERY, "TaxAgent", "Economic inequality...", QUERY_CUTOFF)


def test_http_system_posts_the_query_and_reads_the_report(httpserver):
    httpserver.expect_request("/report", method="POST", json={
        "arxiv_id": QUERY, "title": "TaxAgent", "abstract": "Economic inequality...",
        "cutoff": QUERY_CUTOFF.isoformat()}).respond_with_json(REMOTE_REPORT)
    system = http_system(httpserver)
    assert isinstance(system, ExternalHTTPSystem) and system.uses_search is False
    report = system.generate(query(), None)
    assert [(s.idx, s.arxiv_id) for s in report.sources] == [(1, "2108.02755"), (2, "2507.00001")]
    assert report.sources[1].published == datetime(2025, 7, 2, tzinfo=UTC)
    assert report.trace["import"]["attempts"] == 1


def test_http_system_retries_5xx_then_succeeds(httpserver):
    httpserver.expect_oneshot_request("/report", method="POST").respond_with_data("busy", status=503)
    httpserver.expect_request("/report", method="POST").respond_with_json(REMOTE_REPORT)
    report = http_system(httpserver).generate(query(), None)
    assert report.trace["import"]["attempts"] == 2 and len(httpserver.log) == 2


def test_http_system_gives_up_and_refuses_clearly(httpserver):
    httpserver.expect_request("/report", method="POST").respond_with_data("down", status=500)
    with pytest.raises(SystemFailure, match="failed after 2 attempts: HTTP 500"):
        http_system(httpserver, attempts=2).generate(query(), None)
    assert len(httpserver.log) == 2

    httpserver.clear()
    httpserver.expect_request("/report", method="POST").respond_with_data("no such paper", status=404)
    with pytest.raises(SystemFailure, match="refused the query: HTTP 404"):
        http_system(httpserver).generate(query(), None)
    assert len(httpserver.log) == 1  # a 4xx is not retried

    httpserver.clear()
    httpserver.expect_request("/report", method="POST").respond_with_json({"sources": []})
    with pytest.raises(SystemFailure, match="malformed report: report has no text"):
        http_system(httpserver).generate(query(), None)


def test_http_system_retries_timeouts(httpserver):
    def slow(_request):
        time.sleep(0.3)
        return Response(json.dumps(REMOTE_REPORT), content_type="application/json")

    httpserver.expect_request("/report", method="POST").respond_with_handler(slow)
    with pytest.raises(SystemFailure, match="failed after 2 attempts: ReadTimeout"):
        http_system(httpserver, timeout=0.05, attempts=2).generate(query(), None)


def test_file_imported_external_system_cannot_generate():
    system = make_system("imported_x", "external", {"source": "x.jsonl", "format": "jsonl"}, SystemContext(None))
    with pytest.raises(SystemFailure, match="external system imported_x has no endpoint; its reports are imported "
                                            "with `deepscholar reports import`"):
        system.generate(query(), None)


def test_http_system_through_generation_stores_and_checks_leakage(release, httpserver):
    httpserver.expect_request("/report", method="POST").respond_with_json(REMOTE_REPORT)
    add_system(release, "remote", "external", {"endpoint": httpserver.url_for("/report"), "retry_wait": 0})
    result = generate_pair(release, RELEASE, "remote", QUERY)
    assert result["status"] == "ok", result
    report, sources = stored_for(release, "remote", QUERY)
    assert (report["n_citations"], report["n_unresolved_citations"], report["n_leaked_sources"]) == (2, 0, 1)
    assert [s["leaked"] for s in sources] == [False, True]
