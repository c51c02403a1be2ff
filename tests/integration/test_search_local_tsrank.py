"""`local_tsrank` (the first local search, kept for comparison) on a real PostgreSQL: the cutoff, the query
paper, ranking and the OR fallback."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from support.search_corpus import CUTOFF, add_cutoff_corpus, add_papers

from deepscholar.search import make_search
from deepscholar.search.local_tsrank import TsRankSearch, or_query_text
from deepscholar.systems.base import Query


@pytest.fixture
def corpus(engine):
    add_cutoff_corpus(engine)
    return engine


def _ids(results) -> list[str]:
    return [r.arxiv_id for r in results]


def test_cutoff_is_strict_and_undated_papers_never_return(corpus):
    found = _ids(TsRankSearch(corpus, CUTOFF).search("graph neural networks", k=50))
    assert "2506.00003" in found  # one second before the cutoff is allowed
    assert "2506.00004" not in found  # published exactly at the cutoff is not
    assert "2506.00005" not in found
    assert "2506.00006" not in found
    assert set(found) == {"2401.00001", "2402.00002", "2506.00003", "2506.00007"}


def test_query_paper_is_excluded_whatever_its_version_suffix(corpus):
    found = _ids(TsRankSearch(corpus, CUTOFF, exclude_ids=["2506.00007v2"]).search("graph neural networks", 50))
    assert "2506.00007" not in found and "2401.00001" in found


def test_results_carry_metadata_and_an_abs_url(corpus):
    (hit,) = TsRankSearch(corpus, CUTOFF).search("dense passage retrieval dual encoders", k=1)
    assert hit.arxiv_id == "2302.00009" and hit.title == "Dense passage retrieval"
    assert hit.url == "https://arxiv.org/abs/2302.00009"
    assert hit.published == datetime(2023, 2, 2, tzinfo=UTC) and hit.score > 0
    assert hit.abstract.startswith("Dual encoders")


def test_ranking_is_by_rank_then_arxiv_id_and_repeatable(corpus):
    search = TsRankSearch(corpus, CUTOFF)
    first = search.search("graph neural networks over-smoothing deep", k=10)
    assert first[0].arxiv_id == "2402.00002"  # the only one matching every term
    for _ in range(3):
        assert _ids(search.search("graph neural networks over-smoothing deep", k=10)) == _ids(first)

    only_and = TsRankSearch(corpus, CUTOFF, fallback_below=0).search("graph neural networks", k=10)
    assert [r.score for r in only_and] == sorted((r.score for r in only_and), reverse=True)


def test_equal_ranks_are_ordered_by_arxiv_id(corpus):
    twin = ("Capsule routing", "Capsule networks route parts to wholes by agreement.")
    add_papers(corpus, [(i, *twin, datetime(2022, 1, 1, tzinfo=UTC)) for i in ("2201.00030", "2201.00010", "2201.00020")])
    found = TsRankSearch(corpus, CUTOFF).search("capsule routing agreement", k=3)
    assert _ids(found) == ["2201.00010", "2201.00020", "2201.00030"]
    assert len({r.score for r in found}) == 1


def test_or_fallback_tops_up_when_every_term_together_finds_too_little(corpus):
    search = TsRankSearch(corpus, CUTOFF)
    # No single paper mentions both graphs and recommenders: the AND query finds nothing.
    found = search.search("graph recommenders", k=10)
    assert search.history[-1]["n_and"] == 0 and search.history[-1]["n_or"] > 0
    assert "2301.00008" in _ids(found) and "2401.00001" in _ids(found)
    assert all(r.published < CUTOFF for r in found)

    # AND hits keep their places ahead of what the OR query adds.
    found = search.search("over-smoothing graph", k=10)
    assert found[0].arxiv_id == "2402.00002" and len(found) > 1

    # Without the fallback, only papers with every term.
    strict = TsRankSearch(corpus, CUTOFF, fallback_below=0).search("graph recommenders", k=10)
    assert strict == []


def test_k_and_degenerate_queries(corpus):
    search = TsRankSearch(corpus, CUTOFF)
    assert len(search.search("graph neural networks", k=2)) == 2
    assert search.search("", k=5) == [] and search.search("  ?! ", k=5) == []
    assert search.search("graph", k=0) == []
    assert search.search("the of and", k=5) == []  # stop words only: no lexeme to match
    # Operators in free text never break the query.
    assert search.search('"graph neural" -or or OR & | ! :*', k=5)
    assert or_query_text("graph OR neural, or networks") == "graph or neural or networks"


def test_naive_cutoff_is_read_as_utc(corpus):
    found = _ids(TsRankSearch(corpus, CUTOFF.replace(tzinfo=None)).search("graph neural networks", 50))
    assert "2506.00003" in found and "2506.00004" not in found


def test_make_search_binds_the_query_cutoff_and_excludes_the_query_paper(corpus):
    query = Query("2025-06", "2506.00007", "Graph neural networks", "abstract", CUTOFF)
    search = make_search("local_tsrank", corpus, query)
    assert isinstance(search, TsRankSearch) and search.name == "local_tsrank" and search.cutoff == CUTOFF
    found = _ids(search.search("graph neural networks", 50))
    assert "2506.00007" not in found and "2506.00004" not in found and "2506.00003" in found
