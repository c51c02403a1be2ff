"""The offline systems (extractive, oracle, human_exemplar) on a small release inserted by hand."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from deepscholar import db
from deepscholar.errors import SystemFailure
from deepscholar.search import make_search
from deepscholar.systems.base import Query, SystemContext, make_system, system_kinds
from deepscholar.text.markers import markers_to_numbers

pytestmark = pytest.mark.slow  # builds a release

RELEASE = "2025-06"
QUERY_ID = "2506.09999"
CUTOFF = datetime(2025, 6, 10, 12, 0, tzinfo=UTC)
TITLE = "Curvature-Aware Rewiring Against Over-Squashing in Graph Neural Networks"
ABSTRACT = (
    "Message passing graph neural networks compress information from exponentially growing neighbourhoods "
    "into fixed-size vectors, a bottleneck known as over-squashing. We propose CurvRewire, which adds edges "
    "where the discrete Ricci curvature of the graph is most negative and removes edges where it is most "
    "positive. Rewiring by curvature mitigates over-squashing without causing over-smoothing on heterophilous "
    "graphs. Experiments on node classification benchmarks show consistent accuracy gains."
)

# (arxiv_id, title, abstract, published)
PRE_CUTOFF = [
    ("1904.13353", "Over-Squashing and Graph Rewiring via Curvature",
     "Graph neural networks struggle to propagate information between distant nodes. We relate over-squashing "
     "to negatively curved edges that act as bottlenecks in the graph. A curvature-based rewiring algorithm "
     "adds supporting edges around these bottlenecks and improves long-range tasks.", datetime(2019, 4, 26)),
    ("2303.11410", "Over-Smoothing in Deep Graph Neural Networks",
     "Stacking many message passing layers makes node representations indistinguishable. We analyse this "
     "over-smoothing effect through the spectrum of the normalised adjacency matrix. Residual connections and "
     "normalisation delay the collapse of representations in deep networks.", datetime(2023, 3, 18)),
    ("1903.18750", "How Expressive Are Message Passing Graph Neural Networks?",
     "Message passing neural networks are at most as powerful as the Weisfeiler-Lehman graph isomorphism "
     "test. We characterise which aggregation functions reach this bound. An injective sum aggregator yields "
     "a maximally expressive architecture for graph classification.", datetime(2019, 3, 19)),
    ("2011.03018", "Heterophily-Aware Graph Neural Networks",
     "Most graph neural networks assume that connected nodes share labels. On heterophilous graphs neighbours "
     "tend to have different labels and standard aggregation fails. Separating ego and neighbour embeddings "
     "and using higher-order neighbourhoods restores accuracy under heterophily.", datetime(2020, 11, 30)),
    ("2106.11722", "Inductive Representation Learning on Large Graphs",
     "Transductive node embeddings cannot generalise to unseen nodes. We learn aggregation functions over "
     "sampled neighbourhoods that produce embeddings for nodes never seen in training. Neighbourhood sampling "
     "keeps the cost of each training step bounded on large graphs.", datetime(2021, 6, 29)),
    ("2204.17516", "Semi-Supervised Node Classification with Graph Convolutional Networks",
     "Labels are scarce for node classification in citation networks. We motivate a layer-wise propagation "
     "rule from a first-order approximation of spectral graph convolutions. The resulting graph convolutional "
     "network scales linearly in the number of edges.", datetime(2022, 4, 23)),
    ("2103.09711", "Graph Transformers with Structural Positional Encodings",
     "Transformers attend over all pairs of nodes and therefore ignore graph structure. Laplacian eigenvectors "
     "and random-walk statistics serve as positional encodings for graph transformers. Global attention "
     "sidesteps the bottlenecks of local message passing on long-range benchmarks.", datetime(2021, 3, 13)),
    ("2012.11708", "Open Graph Benchmark Datasets for Machine Learning on Graphs",
     "Progress in graph learning is hampered by small datasets with inconsistent splits. We release large "
     "realistic datasets for node, link and graph property prediction. Standardised evaluators make results "
     "comparable across papers.", datetime(2020, 12, 7)),
    ("1910.18325", "Self-Attentive Sequential Recommendation",
     "Sequential recommenders predict the next item a user will interact with. Self-attention over the "
     "interaction history captures both short and long-range dependencies. The model outperforms recurrent "
     "and convolutional recommenders on sparse and dense datasets.", datetime(2019, 10, 15)),
    ("2110.14981", "Dense Passage Retrieval for Open-Domain Question Answering",
     "Open-domain question answering relies on retrieving relevant passages. Dual encoders embed questions and "
     "passages into one vector space learned from question-answer pairs. Dense retrieval outperforms sparse "
     "term matching on several benchmarks.", datetime(2021, 10, 31)),
]
LEAKY = [  # same theme, but none of these may ever be cited by a system
    ("2506.10000", "Curvature Rewiring at the Cutoff",
     "Rewiring graphs by curvature mitigates over-squashing in graph neural networks.", CUTOFF),
    ("2506.20001", "Curvature Rewiring Revisited for Over-Squashing",
     "We revisit curvature-based graph rewiring and over-squashing in message passing networks.",
     CUTOFF + timedelta(days=5)),
    ("1501.00001", "Undated Graph Rewiring Note",
     "An undated note on graph rewiring, curvature and over-squashing in graph neural networks.", None),
    (QUERY_ID, TITLE, ABSTRACT, CUTOFF),
]
PRE_IDS = {r[0] for r in PRE_CUTOFF}

SECTION = (
    "Over-squashing was identified as a bottleneck of message passing [@topping2019; @alon2021]. "
    "Expressivity is bounded by the WL test [@xu2019]. Heterophily hurts standard aggregation [@zhu2020], "
    "see also [@zhu2020b; @missingkey].\n\n"
    "Spectral views are classic [@book2016] and [@openalex2018]. Concurrent work revisits curvature "
    "[@future2025]. A key without any reference row [@ghost]."
)
# cite_key -> (resolved_arxiv_id, important, resolved title, resolved abstract, bib title)
REFS = {
    "topping2019": ("1904.13353", True),
    "alon2021": ("2303.11410", True),
    "xu2019": ("1903.18750", False),
    "zhu2020": ("2011.03018", True),
    "zhu2020b": ("2011.03018", True),  # a duplicate bib entry for the same paper
    "future2025": ("2506.20001", True),  # an important reference dated after the query paper
    "kipf2017": ("2204.17516", True),  # important but not cited in the section text
    "book2016": (None, True),  # unresolved
    "openalex2018": (None, False),  # resolved through OpenAlex only: no arXiv id
    "missingkey": None,  # cited, but no exemplar_references row
}


def _utc(dt):
    return dt.replace(tzinfo=UTC) if dt is not None and dt.tzinfo is None else dt


@pytest.fixture
def release(engine):
    corpus = {a: (t, ab, _utc(p)) for a, t, ab, p in PRE_CUTOFF + LEAKY}
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "published"}], key=["release_id"])
        db.upsert(conn, "corpus", [{"arxiv_id": a, "title": t, "abstract": ab, "published": p, "source": "test"}
                                   for a, (t, ab, p) in corpus.items()], key=["arxiv_id"])
        db.upsert(conn, "release_queries", [{
            "release_id": RELEASE, "arxiv_id": QUERY_ID, "title": TITLE, "abstract": ABSTRACT, "published": CUTOFF,
            "section_raw_latex": "(raw)", "section_text": SECTION, "word_count": len(SECTION.split()),
        }], key=["release_id", "arxiv_id"])
        rows = []
        for key, spec in REFS.items():
            if spec is None:
                continue
            arxiv_id, important = spec
            row = {"release_id": RELEASE, "arxiv_id": QUERY_ID, "cite_key": key, "bib_title": f"Bib title of {key}",
                   "bib_authors": "A. Author", "bib_year": "2020", "resolved_arxiv_id": arxiv_id,
                   "resolved_title": corpus[arxiv_id][0] if arxiv_id else None,
                   "resolved_abstract": corpus[arxiv_id][1] if arxiv_id else None, "is_important": important}
            if key == "openalex2018":
                row |= {"resolved_title": "Spectral Graph Theory Lecture Notes",
                        "resolved_abstract": "Lecture notes on the spectra of graph Laplacians."}
            rows.append(row)
        db.upsert(conn, "exemplar_references", rows, key=["release_id", "arxiv_id", "cite_key"])
    return Query(RELEASE, QUERY_ID, TITLE, ABSTRACT, CUTOFF)


def _system(engine, kind: str, config: dict | None = None):
    return make_system(kind, kind, config or {}, SystemContext(engine=engine))


def _cited(text: str) -> set[int]:
    return {int(n) for n in re.findall(r"\[(\d+)\]", text)}


def test_offline_kinds_are_registered():
    kinds = system_kinds()
    assert kinds["extractive"].uses_search
    assert not kinds["oracle"].uses_search and not kinds["human_exemplar"].uses_search


# --- extractive ------------------------------------------------------------------------------------


def test_extractive_cites_only_pre_cutoff_sources_from_their_own_sentences(release, engine):
    started = time.perf_counter()
    report = _system(engine, "extractive").generate(release, make_search("local", engine, release))
    elapsed = time.perf_counter() - started
    sources = report.sources
    assert 3 <= len(sources) <= 10
    assert {s.arxiv_id for s in sources} <= PRE_IDS
    assert all(s.published is not None and s.published < CUTOFF for s in sources)
    assert "1904.13353" in {s.arxiv_id for s in sources}  # the closest prior work is found
    assert [s.idx for s in sources] == list(range(1, len(sources) + 1))
    assert _cited(report.text) == {s.idx for s in sources}  # every [n] resolves, every source is cited

    abstracts = {a: ab for a, _, ab, _ in PRE_CUTOFF}
    by_idx = {s.idx: s for s in sources}
    n_sentences = 0
    for line in report.text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        for body, n in re.findall(r"(?:^|(?<=\]\. ))(.+?) \[(\d+)\]\.", line):
            src = by_idx[int(n)]
            assert src.snippet == abstracts[src.arxiv_id]  # the snippet is the abstract the system saw
            body = re.sub(r"^(Similarly|Relatedly|In the same vein|Along these lines), ", "", body)
            # Verbatim, up to the first letter a connective lower-cased and the final full stop.
            assert body in src.snippet or body[:1].upper() + body[1:] in src.snippet, (body, src.snippet)
            n_sentences += 1
    assert n_sentences == len(sources)
    # 2-4 themes, each under a heading, in order of citation.
    themes = report.trace["themes"]
    assert 2 <= len(themes) <= 4 and [i for t in themes for i in t] == list(range(1, len(sources) + 1))
    assert report.text.count("### ") == len(themes)
    assert report.trace["queries"][0]["query"] == TITLE and 2 <= len(report.trace["queries"]) <= 4
    print(f"\nextractive: {len(sources)} sources in {elapsed:.2f}s (first call loads MiniLM); "
          f"trace timings {report.trace['timings_ms']}")


def test_extractive_is_deterministic(release, engine):
    runs = []
    for _ in range(2):
        started = time.perf_counter()
        report = _system(engine, "extractive").generate(release, make_search("local", engine, release))
        runs.append((report, time.perf_counter() - started))
    (a, _), (b, warm) = runs
    assert a.text == b.text
    assert [(s.idx, s.arxiv_id, s.snippet) for s in a.sources] == [(s.idx, s.arxiv_id, s.snippet) for s in b.sources]
    assert warm < 30
    print(f"\nextractive, model loaded: {warm:.2f}s per report")


def test_extractive_config_bounds_the_sources(release, engine):
    report = _system(engine, "extractive", {"top_k": 4, "max_themes": 2, "headings": False}).generate(
        release, make_search("local", engine, release))
    assert len(report.sources) == 4 and "###" not in report.text
    assert len(report.text.strip().split("\n\n")) == 2


def test_extractive_fails_honestly_when_nothing_predates_the_cutoff(release, engine):
    early = Query(RELEASE, QUERY_ID, TITLE, ABSTRACT, datetime(2010, 1, 1, tzinfo=UTC))
    with pytest.raises(SystemFailure, match="before the cutoff"):
        _system(engine, "extractive").generate(early, make_search("local", engine, early))


# --- oracle ----------------------------------------------------------------------------------------


def test_oracle_cites_exactly_the_important_arxiv_references(release, engine):
    report = _system(engine, "oracle").generate(release, None)
    # Order of first citation; the duplicate entry is one source; the uncited one comes last; the
    # reference dated after the query paper is left out by default; unresolved ones are not on arXiv.
    assert [s.arxiv_id for s in report.sources] == ["1904.13353", "2303.11410", "2011.03018", "2204.17516"]
    assert report.trace["dropped_after_cutoff"] == ["2506.20001"]
    abstracts = {a: ab for a, _, ab, _ in PRE_CUTOFF}
    for s in report.sources:
        assert s.snippet == abstracts[s.arxiv_id] and s.url == f"https://arxiv.org/abs/{s.arxiv_id}"
        first = abstracts[s.arxiv_id].split(". ")[0]
        assert f"{first} [{s.idx}]." in report.text
    assert _cited(report.text) == {1, 2, 3, 4}

    everything = _system(engine, "oracle", {"respect_cutoff": False}).generate(release, None)
    assert [s.arxiv_id for s in everything.sources] == ["1904.13353", "2303.11410", "2011.03018", "2506.20001",
                                                        "2204.17516"]


def test_oracle_without_important_arxiv_references_is_a_system_failure(release, engine):
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE exemplar_references SET is_important = false"))
    with pytest.raises(SystemFailure, match="no important"):
        _system(engine, "oracle").generate(release, None)


# --- human exemplar --------------------------------------------------------------------------------


def test_human_exemplar_renumbers_markers_in_order_of_first_citation(release, engine):
    report = _system(engine, "human_exemplar").generate(release, None)
    assert report.text == (
        "Over-squashing was identified as a bottleneck of message passing [1][2]. "
        "Expressivity is bounded by the WL test [3]. Heterophily hurts standard aggregation [4], "
        "see also [4].\n\n"
        "Spectral views are classic [5] and [6]. Concurrent work revisits curvature "
        "[7]. A key without any reference row.\n"
    )
    got = [(s.idx, s.arxiv_id, s.title) for s in report.sources]
    assert got == [
        (1, "1904.13353", "Over-Squashing and Graph Rewiring via Curvature"),
        (2, "2303.11410", "Over-Smoothing in Deep Graph Neural Networks"),
        (3, "1903.18750", "How Expressive Are Message Passing Graph Neural Networks?"),
        (4, "2011.03018", "Heterophily-Aware Graph Neural Networks"),
        (5, None, "Bib title of book2016"),  # unresolved: kept, with its bib title and no arXiv id
        (6, None, "Spectral Graph Theory Lecture Notes"),  # resolved off arXiv
        (7, "2506.20001", "Curvature Rewiring Revisited for Over-Squashing"),
    ]
    assert report.sources[4].snippet == "A. Author. Bib title of book2016. 2020"
    assert report.sources[5].snippet == "Lecture notes on the spectra of graph Laplacians."
    assert report.trace["dropped_keys"] == 2 and report.trace["dropped_key_names"] == ["missingkey", "ghost"]
    assert _cited(report.text) == {s.idx for s in report.sources}


def test_renumber_citations_keeps_prose_intact():
    text = "A~[@a]. B [see @b, p. 3; @a]. C [@x]. [@b] starts. Plain [brackets] stay."
    out, dropped = markers_to_numbers(text, {"a": 1, "b": 2, "x": None})
    assert out == "A [1]. B [2][1]. C. [2] starts. Plain [brackets] stay."
    assert dropped == ["x"]


# --- through generation and storage ----------------------------------------------------------------


def test_generated_reports_store_with_resolved_citations_and_no_leaks(release, engine):
    from deepscholar.systems.generation import generate_pair
    from deepscholar.systems.registry import add_system

    for kind in ("extractive", "oracle", "human_exemplar"):
        add_system(engine, kind, kind, {})
        result = generate_pair(engine, RELEASE, kind, QUERY_ID)
        assert result["status"] == "ok", result
    with engine.connect() as conn:
        rows = {r["system_id"]: r for r in conn.execute(sa.text(
            "SELECT system_id, n_citations, n_unresolved_citations, n_leaked_sources, search_backend "
            "FROM reports")).mappings()}
    assert rows["extractive"]["search_backend"] == "local"
    for kind in ("extractive", "oracle", "human_exemplar"):
        assert rows[kind]["n_citations"] > 0 and rows[kind]["n_unresolved_citations"] == 0
    assert rows["extractive"]["n_leaked_sources"] == 0 and rows["oracle"]["n_leaked_sources"] == 0
    # The human cites concurrent work dated after the paper itself: a fact about the exemplar, flagged.
    assert rows["human_exemplar"]["n_leaked_sources"] == 1
