"""Cited-by counts of report sources looked up in batches: 50 DOIs per OpenAlex request, a title search
only for the papers no DOI found. Real PostgreSQL, the real OpenAlex client (pyalex over HTTP) against the
demo snapshot's works on the replay server, whose request log counts what was asked."""

from __future__ import annotations

import json
import logging
import math
from urllib.parse import parse_qs

import pytest
import sqlalchemy as sa
from support.warehouse import one_query_release

from deepscholar import db
from deepscholar.http_guard import BREAKER, HostUnavailable
from deepscholar.release.source_counts import arxiv_doi, freeze_source_counts
from deepscholar.release.spec import ReleaseSpec
from deepscholar.replay.demo_snapshot import write_demo_snapshot
from deepscholar.replay.server import ReplayServer
from deepscholar.settings import Settings
from deepscholar.sources.openalex import BATCH, OpenAlexSource, arxiv_id_from_work, bare_doi

pytestmark = pytest.mark.slow  # builds a release per test

RELEASE = "2025-06"
QUERY = "2506.01001"
# Papers OpenAlex knows by no DOI of theirs: two sort before the snapshot's arXiv ids (first batch), two after.
TITLE_HIT = "1901.99901"  # titled like a work with no arXiv id: found by title
TITLE_OTHER = "1901.99902"  # titled like another arXiv paper's work: that is a different paper
UNKNOWN = "2599.99903"  # a title nobody knows
NO_TITLE = "2599.99904"  # nothing to search by title


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory):
    return write_demo_snapshot(tmp_path_factory.mktemp("snapshot")).path


@pytest.fixture
def server(snapshot):
    with ReplayServer(snapshot) as srv:
        yield srv


def _jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.fixture
def month(engine, snapshot) -> dict:
    """Two ok reports citing every arXiv paper the snapshot's OpenAlex knows (corpus DOIs as the release
    stores them), four papers only a title search can settle, one exemplar reference's paper and one
    already frozen paper."""
    works = _jsonl(snapshot / "openalex" / "works.jsonl")
    entries = {e["id"].split("v")[0]: e for e in _jsonl(snapshot / "arxiv" / "entries.jsonl")}
    on_arxiv = sorted({arxiv_id_from_work(w) for w in works} - {None})
    assert len(on_arxiv) > BATCH  # more than one batch
    without_arxiv = next(w for w in works if arxiv_id_from_work(w) is None)
    other = next(w for w in works if arxiv_id_from_work(w) == on_arxiv[10])
    from_exemplar, frozen = on_arxiv[3], on_arxiv[-3]
    titles = {a: entries[a]["title"] for a in on_arxiv} | {
        TITLE_HIT: without_arxiv["title"], TITLE_OTHER: other["title"], UNKNOWN: "A survey nobody ever wrote",
        NO_TITLE: None}
    cited = sorted(titles)
    with engine.begin() as conn:
        one_query_release(conn, RELEASE, QUERY)
        db.upsert(conn, "corpus", [
            {"arxiv_id": a, "title": titles[a], "doi": entries[a].get("doi"), "source": "reference"}
            for a in on_arxiv], key=["arxiv_id"])
        db.upsert(conn, "exemplar_references", [
            {"release_id": RELEASE, "arxiv_id": QUERY, "cite_key": "ex", "resolved_arxiv_id": from_exemplar,
             "openalex_id": "W1", "cited_by_count": 777, "is_important": True}],
            key=["release_id", "arxiv_id", "cite_key"])
        db.upsert(conn, "systems", [{"system_id": s, "kind": "extractive"} for s in ("a", "b")], key=["system_id"])
        for system, sources in (("a", cited[: len(cited) * 2 // 3]), ("b", cited[len(cited) // 3:])):
            report_id = conn.execute(sa.text(
                "INSERT INTO reports (release_id, system_id, arxiv_id, status, text) "
                "VALUES (:r, :s, :q, 'ok', 'x') RETURNING report_id"), {"r": RELEASE, "s": system, "q": QUERY}).scalar()
            db.upsert(conn, "report_sources", [
                {"report_id": report_id, "source_idx": i, "arxiv_id": a, "title": titles[a]}
                for i, a in enumerate(sources, start=1)], key=["report_id", "source_idx"])
        db.upsert(conn, "source_cited_by", [
            {"release_id": RELEASE, "arxiv_id": frozen, "openalex_id": "W2", "cited_by_count": 5}],
            key=["release_id", "arxiv_id"])
    todo = [a for a in cited if a not in (from_exemplar, frozen)]
    return {"cited": cited, "todo": todo, "titles": titles, "from_exemplar": from_exemplar, "frozen": frozen,
            "doi": {a: entries[a].get("doi") if a in entries else None for a in cited},
            "works_by_doi": {bare_doi(w["doi"]): w for w in works}}


def _runtime(server) -> Settings:
    return Settings.from_env().replace(openalex_url=server.openalex_url, openalex_email="bench@example.org")


def _rows(engine) -> dict[str, dict]:
    with engine.connect() as conn:
        return {r["arxiv_id"]: dict(r) for r in conn.execute(sa.text(
            "SELECT * FROM source_cited_by WHERE release_id = :r"), {"r": RELEASE}).mappings()}


def _outcome(row: dict) -> tuple:
    return row["openalex_id"], row["cited_by_count"], row["lookup_error"]


def _requests(server) -> dict[str, list]:
    """OpenAlex requests by kind: batched DOI lookups (with the DOIs each asked for), title searches."""
    works = [r for r in server.requests if r.path.startswith("/works")]
    kinds: dict[str, list] = {"doi": [], "title": [], "other": []}
    for r in works:
        flt = parse_qs(r.query).get("filter", [""])[0]
        if r.path == "/works" and flt.startswith("doi:"):
            kinds["doi"].append(flt[len("doi:"):].split("|"))
        elif r.path == "/works" and flt.startswith("title.search:"):
            kinds["title"].append(flt)
        else:
            kinds["other"].append(r.path)
    return kinds


def _one_by_one(server, month) -> tuple[dict[str, tuple | None], int]:
    """What the former per-paper lookup gave: GET /works/<doi>, then a title search when that found nothing;
    (openalex_id, count) or None per paper, and the number of requests it took."""
    openalex = OpenAlexSource(base_url=server.openalex_url)
    threshold = ReleaseSpec().title_match_threshold
    server.clear_requests()
    out = {}
    for a in month["todo"]:
        work = openalex.work_by_doi(month["doi"][a] or arxiv_doi(a))
        title = month["titles"][a]
        if work is None and title:
            work = openalex.best_title_match(title, threshold=threshold)
            if work is not None and work.arxiv_id and work.arxiv_id != a:
                work = None
        out[a] = (work.openalex_id, work.cited_by_count) if work is not None else None
    made = len(server.requests)
    server.clear_requests()
    return out, made


def test_batched_lookups_give_the_one_by_one_counts_in_a_fraction_of_the_requests(engine, month, server, caplog):
    caplog.set_level(logging.INFO, logger="deepscholar.progress")
    todo = month["todo"]
    counts = freeze_source_counts(engine, RELEASE, settings=_runtime(server))
    assert counts == {"from_exemplar": 1, "looked_up": len(todo) - 3, "not_found": 3, "errors": 0,
                      "already_frozen": 1}
    rows = _rows(engine)
    assert set(rows) == set(month["cited"])

    # (2) ceil(n/50) DOI requests (every paper has a DOI: its own or its arXiv DOI), 50 DOIs at most in
    # each, and a title search only for the three papers no DOI found that have a title.
    asked = _requests(server)
    assert len(asked["doi"]) == math.ceil(len(todo) / BATCH) == 2 and asked["other"] == []
    assert [len(d) for d in asked["doi"]] == [BATCH, len(todo) - BATCH]
    assert sorted(d for batch in asked["doi"] for d in batch) == sorted(
        bare_doi(month["doi"][a] or arxiv_doi(a)) for a in todo)
    assert len(asked["title"]) == 3
    assert len(server.requests) == 2 + 3
    assert server.requests[0].status == 200

    # (1) the counts the former one-by-one lookups give, and the snapshot's own works.
    expected, one_by_one_requests = _one_by_one(server, month)
    assert {a: (r["openalex_id"], r["cited_by_count"]) if r["cited_by_count"] is not None else None
            for a, r in rows.items() if a in todo} == expected
    assert one_by_one_requests == len(todo) + 3 == 70  # before: one request per paper, plus the titles
    for a in todo:
        work = month["works_by_doi"].get(bare_doi(month["doi"][a] or arxiv_doi(a)))
        if work is not None:  # found by DOI
            assert (rows[a]["openalex_id"], rows[a]["cited_by_count"], rows[a]["lookup_error"]) == (
                work["id"].rsplit("/", 1)[-1], work["cited_by_count"], None)
    assert rows[TITLE_HIT]["cited_by_count"] is not None and rows[TITLE_HIT]["lookup_error"] is None
    for a, how in ((TITLE_OTHER, " or title"), (UNKNOWN, " or title"), (NO_TITLE, "")):
        assert rows[a]["lookup_error"] == f"not_found: no OpenAlex work by doi {arxiv_doi(a)}{how}"
    assert _outcome(rows[month["from_exemplar"]]) == ("W1", 777, None)
    assert _outcome(rows[month["frozen"]]) == ("W2", 5, None)

    # Progress counts papers, not requests.
    lines = [r.getMessage() for r in caplog.records if r.name == "deepscholar.progress"
             and "OpenAlex cited-by counts" in r.getMessage()]
    assert lines[0].endswith(f": 0 of {len(todo)}")
    assert lines[-1].startswith(f"OpenAlex cited-by counts for {RELEASE}: {len(todo)} of {len(todo)} (100%)")
    assert lines[-1].endswith(f"({len(todo) - 3} found, 3 not found, 0 failed)")

    # (3) Rerunning stores nothing twice and asks OpenAlex nothing.
    again = freeze_source_counts(engine, RELEASE, settings=_runtime(server))
    assert again == {"from_exemplar": 0, "looked_up": 0, "not_found": 0, "errors": 0,
                     "already_frozen": len(month["cited"])}
    assert server.requests == []
    assert _rows(engine) == rows  # looked_up_at included: nothing rewritten
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM source_cited_by")).scalar() == len(month["cited"])


def _undisturbed(engine, server, month) -> dict[str, tuple]:
    """The outcome of an undisturbed freeze; the rows it wrote are then removed again."""
    freeze_source_counts(engine, RELEASE, settings=_runtime(server))
    rows = {a: _outcome(r) for a, r in _rows(engine).items()}
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM source_cited_by WHERE release_id = :r AND arxiv_id <> :f"),
                     {"r": RELEASE, "f": month["frozen"]})
    server.clear_requests()
    return rows


def test_a_batch_answered_400_marks_its_papers_and_loses_nothing(engine, month, server):
    undisturbed = _undisturbed(engine, server, month)
    todo = month["todo"]
    first, second = set(todo[:BATCH]), set(todo[BATCH:])
    assert {TITLE_HIT, TITLE_OTHER} <= first and {UNKNOWN, NO_TITLE} <= second

    server.inject_failures("/works", [400])  # the first request: the first batch of DOIs
    counts = freeze_source_counts(engine, RELEASE, settings=_runtime(server))
    assert counts == {"from_exemplar": 1, "looked_up": len(second) - 2, "not_found": 2, "errors": BATCH,
                      "already_frozen": 1}
    asked = _requests(server)
    # No title search for the failed batch's papers; the second batch as usual (UNKNOWN's title search).
    assert [r.status for r in server.requests] == [400, 200, 200]
    assert [len(d) for d in asked["doi"]] == [BATCH, len(second)] and len(asked["title"]) == 1
    rows = _rows(engine)
    assert set(rows) == set(month["cited"])
    for a in first:
        assert rows[a]["openalex_id"] is None and rows[a]["cited_by_count"] is None
        assert rows[a]["lookup_error"].startswith("error: HTTPError: 400 Client Error")
        assert len(rows[a]["lookup_error"]) < 400  # not the 50 DOIs of the URL
    assert {a: _outcome(r) for a, r in rows.items() if a not in first} == {
        a: o for a, o in undisturbed.items() if a not in first}

    # Failed lookups stay frozen unless errors are retried; the retry asks only for the failed batch.
    server.clear_requests()
    assert freeze_source_counts(engine, RELEASE, settings=_runtime(server))["already_frozen"] == len(month["cited"])
    assert server.requests == []
    counts = freeze_source_counts(engine, RELEASE, settings=_runtime(server), retry_errors=True)
    assert counts == {"from_exemplar": 0, "looked_up": BATCH - 1, "not_found": 1, "errors": 0,
                      "already_frozen": len(month["cited"]) - BATCH}
    asked = _requests(server)
    assert [sorted(d) for d in asked["doi"]] == [sorted(bare_doi(month["doi"][a] or arxiv_doi(a)) for a in first)]
    assert len(asked["title"]) == 2  # TITLE_HIT and TITLE_OTHER
    after = _rows(engine)
    assert {a: _outcome(r) for a, r in after.items()} == undisturbed
    assert {a: r for a, r in after.items() if a not in first} == {a: r for a, r in rows.items() if a not in first}


def test_openalex_down_for_a_batch_stops_the_step_and_freezes_no_error(engine, month, server):
    """One failed batched request is 50 failed lookups: as many in a row as open the host's breaker."""
    undisturbed = _undisturbed(engine, server, month)
    openalex = OpenAlexSource(base_url=server.openalex_url, max_retries=1, backoff_seconds=0.001, timeout=5)
    server.inject_failures("/works", [503] * 100)
    with pytest.raises(HostUnavailable, match=rf"cited-by lookups of {BATCH} papers in a row failed on the host"):
        freeze_source_counts(engine, RELEASE, settings=_runtime(server), openalex=openalex)
    assert [r.status for r in server.requests] == [503, 503]  # one batch, its one retry; then stopped
    assert {a: _outcome(r) for a, r in _rows(engine).items()} == {
        a: undisturbed[a] for a in (month["from_exemplar"], month["frozen"])}

    # The task's retry (a new process: a closed breaker) finishes the job once OpenAlex is back.
    BREAKER.reset()
    server.clear_failures()
    server.clear_requests()
    counts = freeze_source_counts(engine, RELEASE, settings=_runtime(server), openalex=openalex)
    assert counts["errors"] == 0 and counts["already_frozen"] == 2
    assert len(server.requests) == 2 + 3
    assert {a: _outcome(r) for a, r in _rows(engine).items()} == undisturbed
