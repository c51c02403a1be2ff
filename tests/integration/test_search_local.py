"""`local` search (BM25 index derived from `corpus`) on a real PostgreSQL: the exact cutoff and exclusions,
whatever the index holds; the index following the corpus; deterministic ranking; the registry."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa
from support.search_corpus import CUTOFF, GNN, add_cutoff_corpus, add_papers

from deepscholar.search import backend_names, bm25_index, make_search
from deepscholar.search.bm25_index import Bm25Index
from deepscholar.search.local import LocalSearch
from deepscholar.search.local_tsrank import TsRankSearch
from deepscholar.systems.base import Query


@pytest.fixture(autouse=True)
def index_dir(tmp_path, monkeypatch):
    """Each test's own index cache, checked before every search unless a test says otherwise."""
    folder = tmp_path / "search-index"
    monkeypatch.setenv("DEEPSCHOLAR_SEARCH_INDEX_DIR", str(folder))
    monkeypatch.setenv("DEEPSCHOLAR_SEARCH_INDEX_CHECK_SECONDS", "0")
    bm25_index.forget_loaded()
    yield folder
    bm25_index.forget_loaded()


@pytest.fixture
def corpus(engine):
    add_cutoff_corpus(engine)
    return engine


def _ids(results) -> list[str]:
    return [r.arxiv_id for r in results]


# --- the cutoff and the excluded ids are exact ---------------------------------------------------------------

def test_cutoff_is_strict_and_undated_papers_never_return(corpus):
    found = _ids(LocalSearch(corpus, CUTOFF).search("graph neural networks", k=50))
    assert set(found) == {"2401.00001", "2402.00002", "2506.00003", "2506.00007"}  # 00003: one second early
    # A paper dated exactly at the cutoff is out; one a day later's cutoff takes it.
    later = _ids(LocalSearch(corpus, CUTOFF + timedelta(days=1)).search("graph neural networks", k=50))
    assert "2506.00004" in later and "2506.00005" not in later and "2506.00006" not in later


def test_the_best_match_on_or_after_the_cutoff_is_never_returned(corpus):
    text = "Hypergraph neural networks with sheaf diffusion. " + GNN
    add_papers(corpus, [("2506.00010", "Hypergraph neural networks with sheaf diffusion", GNN, CUTOFF),
                  ("2506.00011", "Hypergraph neural networks with sheaf diffusion", GNN, CUTOFF + timedelta(days=2))])
    found = LocalSearch(corpus, CUTOFF).search(text, k=50)
    assert found and all(r.published < CUTOFF for r in found)
    assert not {"2506.00004", "2506.00005", "2506.00010", "2506.00011"} & set(_ids(found))
    # The same text with a cutoff past them ranks them first: they are the best matches.
    assert _ids(LocalSearch(corpus, CUTOFF + timedelta(days=30)).search(text, k=2)) == ["2506.00010", "2506.00011"]


def test_query_paper_and_excluded_ids_never_return_whatever_their_version_suffix(corpus):
    search = LocalSearch(corpus, CUTOFF, exclude_ids=["2506.00007v2", "2401.00001"])
    found = _ids(search.search("graph neural networks: the query paper", 50))
    assert "2506.00007" not in found and "2401.00001" not in found and "2402.00002" in found
    # An id longer than any indexed one excludes nothing else (it is not cut to a known id's length).
    found = _ids(LocalSearch(corpus, CUTOFF, exclude_ids=["2506.000077"]).search("graph neural networks", 50))
    assert "2506.00007" in found


def test_the_warehouse_has_the_last_word_even_when_the_index_proposes_anything(corpus, monkeypatch):
    """By construction: every proposed paper is confirmed by SQL over `corpus`, so an index that proposed
    every paper it holds, or one older than a changed date, still yields only eligible papers."""
    LocalSearch(corpus, CUTOFF).search("graph", 5)  # builds the index
    everything = ["2506.00004", "2506.00005", "2506.00006", "2506.00007", "2401.00001", "2402.00002",
                  "2506.00003", "9999.99999"]

    def reckless(self, lexemes, cutoff, exclude_ids, m):
        return [(a, 10.0 - i) for i, a in enumerate(everything)][:m]

    monkeypatch.setattr(Bm25Index, "rank", reckless)
    found = _ids(LocalSearch(corpus, CUTOFF, exclude_ids=["2506.00007"]).search("graph neural networks", k=3))
    assert found == ["2401.00001", "2402.00002", "2506.00003"]  # looked further down for k confirmed ones
    monkeypatch.undo()

    # A stale index (never re-checked) holds 2401.00001's old date; the corpus moved it past the cutoff.
    stale = LocalSearch(corpus, CUTOFF, check_seconds=3600)
    assert "2401.00001" in _ids(stale.search("graph neural networks", 50))
    with corpus.begin() as conn:
        conn.execute(sa.text("UPDATE corpus SET published = :p WHERE arxiv_id = '2401.00001'"),
                     {"p": CUTOFF + timedelta(days=1)})
    assert "2401.00001" not in _ids(stale.search("graph neural networks", 50))


def test_naive_cutoff_is_read_as_utc(corpus):
    found = _ids(LocalSearch(corpus, CUTOFF.replace(tzinfo=None)).search("graph neural networks", 50))
    assert "2506.00003" in found and "2506.00004" not in found


# --- the index follows the corpus ------------------------------------------------------------------------------

def test_a_paper_added_after_the_build_is_found_after_the_refresh(corpus):
    lazy = LocalSearch(corpus, CUTOFF, check_seconds=3600)
    text = "capsule routing agreement graph"
    assert lazy.search(text, 1)[0].arxiv_id != "2201.00042"
    add_papers(corpus, [("2201.00042", "Capsule routing by agreement", "Capsules vote for wholes.",
                   datetime(2022, 1, 1, tzinfo=UTC))])
    # Within the check interval, a search that finds its k papers keeps this process's index ...
    assert lazy.search(text, 1)[0].arxiv_id != "2201.00042"
    # ... the next check brings the paper in (here another search's, in this process: the same index) ...
    assert _ids(LocalSearch(corpus, CUTOFF).search(text, 1)) == ["2201.00042"]
    assert _ids(lazy.search(text, 1)) == ["2201.00042"]
    # ... and a search finding fewer than k asks at once.
    add_papers(corpus, [("2201.00043", "Quaternion embeddings", "Rotations in four dimensions.",
                   datetime(2022, 1, 2, tzinfo=UTC))])
    assert _ids(lazy.search("quaternion embeddings", 10)) == ["2201.00043"]


def test_the_index_is_rebuilt_when_the_corpus_changes_and_old_ones_are_dropped(corpus, index_dir):
    first = bm25_index.ensure_index(corpus)
    assert first.n_docs == 8  # every dated paper; the undated one is not indexed at all
    assert bm25_index.ensure_index(corpus).path == first.path  # unchanged corpus: same index
    with corpus.begin() as conn:  # an update, not an insert, changes it too
        conn.execute(sa.text("UPDATE corpus SET title = 'Renamed' WHERE arxiv_id = '2302.00009'"))
    second = bm25_index.ensure_index(corpus)
    assert second.path != first.path and second.fingerprint != first.fingerprint
    add_papers(corpus, [("2201.00050", "Another", "Paper.", datetime(2022, 1, 1, tzinfo=UTC))])
    third = bm25_index.ensure_index(corpus)
    with corpus.begin() as conn:
        conn.execute(sa.text("DELETE FROM corpus WHERE arxiv_id = '2201.00050'"))
    fourth = bm25_index.ensure_index(corpus)
    assert len({first.path, second.path, third.path}) == 3
    assert fourth.path == second.path and fourth.n_docs == 8  # the same rows as after the update
    kept = sorted(p.name for p in fourth.path.parent.iterdir() if p.is_dir())
    assert len(kept) == bm25_index.KEEP_INDEXES and fourth.path.name in kept  # no temporary folders left
    assert str(index_dir) in str(fourth.path)


def test_while_another_process_builds_a_searcher_keeps_the_index_it_has(corpus, index_dir, monkeypatch):
    monkeypatch.setattr(bm25_index, "BUSY_RECHECK_SECONDS", 0.0)  # re-check at once once the lock is free
    search = LocalSearch(corpus, CUTOFF)
    search.search("graph", 5)
    before = search.history[-1]["index"]
    add_papers(corpus, [("2201.00042", "Capsule routing by agreement", "Capsules vote.", datetime(2022, 1, 1, tzinfo=UTC))])
    warehouse_dir = next(p for p in index_dir.iterdir() if p.is_dir())
    with bm25_index._build_lock(warehouse_dir, wait=True):  # "another process" is building
        outcome: list = []
        worker = threading.Thread(target=lambda: outcome.append(search.search("capsule routing", 5)))
        worker.start()
        worker.join(timeout=30)
        assert not worker.is_alive(), "a searcher holding an index must not wait for another's build"
    assert search.history[-1]["index"] == before and "2201.00042" not in _ids(outcome[0])
    assert _ids(search.search("capsule routing", 5))[0] == "2201.00042"  # built once the lock is free


_CONCURRENT_BUILD = """
import json, sys
from pathlib import Path
from deepscholar import db
from deepscholar.search import bm25_index
built = []
original = bm25_index.build_index
bm25_index.build_index = lambda *a: built.append(1) or original(*a)
index = bm25_index.ensure_index(db.get_engine(sys.argv[1]), Path(sys.argv[2]))
print(json.dumps({"path": str(index.path), "built": len(built), "n_docs": index.n_docs}))
"""


def test_processes_starting_together_build_the_index_once(corpus, index_dir):
    url = corpus.url.render_as_string(hide_password=False)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    procs = [subprocess.Popen([sys.executable, "-c", _CONCURRENT_BUILD, url, str(index_dir)], env=env,
                              stdout=subprocess.PIPE, text=True) for _ in range(3)]
    outs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len({o["path"] for o in outs}) == 1 and sum(o["built"] for o in outs) == 1
    assert {o["n_docs"] for o in outs} == {8}
    (warehouse_dir,) = [p for p in index_dir.iterdir() if p.is_dir()]
    assert [p.name for p in warehouse_dir.iterdir() if p.is_dir()] == [os.path.basename(outs[0]["path"])]


# --- ranking -----------------------------------------------------------------------------------------------------

def test_results_carry_the_warehouse_metadata_and_an_abs_url(corpus):
    (hit,) = LocalSearch(corpus, CUTOFF).search("dense passage retrieval dual encoders", k=1)
    assert hit.arxiv_id == "2302.00009" and hit.title == "Dense passage retrieval"
    assert hit.url == "https://arxiv.org/abs/2302.00009"
    assert hit.published == datetime(2023, 2, 2, tzinfo=UTC) and hit.score > 0
    assert hit.abstract.startswith("Dual encoders")


def test_more_and_rarer_matching_words_rank_higher(corpus):
    found = LocalSearch(corpus, CUTOFF).search("over-smoothing in deep graph neural networks", k=10)
    assert found[0].arxiv_id == "2402.00002"
    assert [r.score for r in found] == sorted((r.score for r in found), reverse=True)
    # Shares no word with one of them: the paper matching one word still comes (an OR of the words).
    assert "2301.00008" in _ids(LocalSearch(corpus, CUTOFF).search("graph recommenders", k=10))


def test_equal_scores_are_ordered_by_arxiv_id_and_every_process_ranks_alike(corpus, tmp_path):
    twin = ("Capsule routing", "Capsule networks route parts to wholes by agreement.")
    ids = ("2201.00030", "2201.00010", "2201.00020", "2201.00040")
    add_papers(corpus, [(i, *twin, datetime(2022, 1, 1, tzinfo=UTC)) for i in ids])
    found = LocalSearch(corpus, CUTOFF).search("capsule routing agreement", k=3)
    assert _ids(found) == ["2201.00010", "2201.00020", "2201.00030"] and len({r.score for r in found}) == 1
    text = "graph neural networks capsule recommenders retrieval over-smoothing"
    first = [(r.arxiv_id, r.score) for r in LocalSearch(corpus, CUTOFF).search(text, k=20)]
    # An index built afresh elsewhere (another machine's cache) gives the same list and the same scores.
    bm25_index.forget_loaded()
    elsewhere = LocalSearch(corpus, CUTOFF, index_dir=tmp_path / "other").search(text, k=20)
    assert [(r.arxiv_id, r.score) for r in elsewhere] == first


_WORDS = ("graph neural network attention transformer retrieval dense sparse capsule routing agreement diffusion "
          "sheaf quaternion embedding recommender sequential message passing smoothing contrastive kernel "
          "bandit policy gradient reward language model token protein folding lattice").split()


def _many_papers(engine, n: int) -> None:
    """n seeded papers over a few years, some sharing a date (the order then falls back on the arXiv id)."""
    rng = random.Random(5)
    add_papers(engine, [(f"2{i % 4}0{1 + i % 9}.{i:05d}", " ".join(rng.choices(_WORDS, k=rng.randint(3, 6))),
                         " ".join(rng.choices(_WORDS, k=rng.randint(5, 40))) + ".",
                         datetime(2020, 1, 1, tzinfo=UTC) + timedelta(days=rng.randint(0, 60) * 20))
                        for i in range(n)])


def test_a_build_in_many_small_segments_writes_the_same_files_as_a_build_in_one(corpus, tmp_path, monkeypatch):
    """The build keeps SEGMENT_POSTINGS in memory and merges MERGE_POSTINGS at a time: however small, the
    index (and so every ranking) is byte for byte the one a build holding the whole corpus writes."""
    _many_papers(corpus, 120)
    whole = bm25_index.build_index(corpus, tmp_path / "whole")
    monkeypatch.setattr(bm25_index, "SEGMENT_POSTINGS", 7)  # a segment or so per paper
    monkeypatch.setattr(bm25_index, "MERGE_POSTINGS", 5)  # blocks shorter than a common word's postings
    pieces = bm25_index.build_index(corpus, tmp_path / "pieces")
    files = sorted(p.name for p in whole.iterdir())
    assert files == sorted(p.name for p in pieces.iterdir())  # no segment files left behind
    for name in files:
        if name != "meta.json":
            assert (whole / name).read_bytes() == (pieces / name).read_bytes(), name
    meta = [json.loads((p / "meta.json").read_text()) for p in (whole, pieces)]
    assert meta[0] | {"built_at": ""} == meta[1] | {"built_at": ""}
    a, b = Bm25Index.load(whole), Bm25Index.load(pieces)
    assert a.n_docs == 128 and len(a.post_doc) > 1000
    with corpus.connect() as conn:
        for text in ("graph neural network", "capsule routing agreement protein", " ".join(_WORDS)):
            lexemes = bm25_index.query_lexemes(conn, text)
            for cutoff in (datetime(2021, 3, 1, tzinfo=UTC), CUTOFF):
                ranked = a.rank(lexemes, cutoff, ["2100.00004"], 30)
                assert ranked and ranked == b.rank(lexemes, cutoff, ["2100.00004"], 30)


def test_k_and_degenerate_queries(corpus):
    search = LocalSearch(corpus, CUTOFF)
    assert len(search.search("graph neural networks", k=2)) == 2
    assert search.search("", k=5) == [] and search.search("  ?! ", k=5) == []
    assert search.search("graph", k=0) == []
    assert search.search("the of and", k=5) == []  # stop words only: no lexeme to match
    assert search.search('"graph neural" -or or OR & | ! :*', k=5)  # operators are only words here
    assert LocalSearch(corpus, datetime(2000, 1, 1, tzinfo=UTC)).search("graph", k=5) == []


def test_an_empty_corpus_searches_to_nothing(engine):
    assert LocalSearch(engine, CUTOFF).search("graph neural networks", 10) == []
    assert bm25_index.ensure_index(engine).n_docs == 0


# --- the registry --------------------------------------------------------------------------------------------------

def test_make_search_finds_local_and_the_old_ranking_by_name(corpus):
    query = Query("2025-06", "2506.00007", "Graph neural networks", "abstract", CUTOFF)
    search = make_search("local", corpus, query)
    assert isinstance(search, LocalSearch) and search.name == "local" and search.cutoff == CUTOFF
    found = _ids(search.search("graph neural networks", 50))
    assert "2506.00007" not in found and "2506.00004" not in found and "2506.00003" in found
    assert isinstance(make_search(None, corpus, query), LocalSearch)  # the default backend
    old = make_search("local_tsrank", corpus, query)
    assert isinstance(old, TsRankSearch)
    assert set(_ids(old.search("graph neural networks", 50))) == set(found)
    assert {"local", "local_tsrank", "arxiv"} <= set(backend_names())
    with pytest.raises(ValueError, match="unknown search backend"):
        make_search("google", corpus, query)


# --- many threads on a small pool ----------------------------------------------------------------------------

def test_sixteen_threads_searching_on_a_pool_of_four_all_finish(corpus, db_url, monkeypatch):
    """Issue 32 §4: a search that found fewer than k papers asks at once whether the corpus changed. It used
    to ask while holding its pooled connection, and the index's lock-holder waited for a connection those
    threads held: with 16 threads on a pool of 4, 13 of 16 searches waited out the pool's timeout."""
    monkeypatch.setenv("DEEPSCHOLAR_DB_POOL_TIMEOUT_SECONDS", "5")
    from deepscholar import db

    small = db.get_engine(db_url, pool_size=4)
    assert small.pool.size() == 4 and small.pool.timeout() == 5
    threads = 16
    start = threading.Barrier(threads)
    outcomes: dict[int, object] = {}

    def one(i: int) -> None:
        search = LocalSearch(small, CUTOFF, check_seconds=60)  # the lag check runs only on a few hits
        start.wait()
        try:
            outcomes[i] = _ids(search.search(f"graph neural networks message passing {i}", k=50))
        except Exception as exc:  # noqa: BLE001 - the outcome is what the test asserts
            outcomes[i] = exc

    workers = [threading.Thread(target=one, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=120)
    assert not any(w.is_alive() for w in workers)
    failed = {i: repr(o) for i, o in outcomes.items() if isinstance(o, BaseException)}
    assert not failed, f"{len(failed)} of {threads} searches failed: {sorted(failed.values())[:2]}"
    assert all(set(o) == {"2401.00001", "2402.00002", "2506.00003", "2506.00007"} for o in outcomes.values())
