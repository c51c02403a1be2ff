"""One paper however it is cited (evaluation/metrics/papers.py, text/paper_ids.py): identifier keys, identity
within one list, and the matching rule between a report's papers and the exemplar's (issue: the title
fallback must never pair two different identifiers of one kind)."""

from __future__ import annotations

import random

import pytest
from support.metric_support import exemplar_reference, source_doc

from deepscholar.evaluation.metrics.papers import TITLE_MATCH_THRESHOLD, match_papers, resolve_papers
from deepscholar.text import title_similarity
from deepscholar.text.paper_ids import arxiv_key, doi_key

# Real near-miss pairs: different papers whose titles pass the 0.8 bar.
DDIM, DDPM = "Denoising Diffusion Implicit Models", "Denoising Diffusion Probabilistic Models"
CGAN, GAN = "Conditional Generative Adversarial Nets", "Generative Adversarial Nets"
ADAMW, WD = "Decoupled Weight Decay Regularization", "Weight Decay Regularization"
NEAR_MISSES = [(DDIM, "2010.02502", DDPM, "2006.11239"), (CGAN, "1411.1784", GAN, "1406.2661"),
               (ADAMW, "1711.05101", WD, "1711.00000")]
DPR = "Dense Passage Retrieval for Open-Domain Question Answering"
AT_080 = "Dense Passage Open-Domain Question Answering Systems"  # similarity exactly 0.80 to DPR
AT_079 = "Dense Passage Retrieval for Open-Domain Dialogue"  # similarity 0.7925 to DPR


def src(idx, arxiv_id=None, title=None, doi=None):
    return source_doc(idx, "t", arxiv_id=arxiv_id, title=title, doi=doi)


def ref(key, arxiv_id=None, title=None, doi=None):
    return exemplar_reference(key, arxiv_id, title, doi=doi)


def matched(sources, refs):
    """[(cite key, source idx, how)] of the matching of the two lists, each resolved to papers first."""
    return [(m.reference.first.cite_key, m.source.first.idx, m.by)
            for m in match_papers(resolve_papers(sources), resolve_papers(refs))]


@pytest.mark.parametrize("written", ["2401.00001", "2401.00001v2", "arXiv:2401.00001", "arxiv: 2401.00001v3",
                                     "https://arxiv.org/abs/2401.00001v3", "arxiv.org/pdf/2401.00001v1.pdf",
                                     "10.48550/arXiv.2401.00001", "https://doi.org/10.48550/ARXIV.2401.00001"])
def test_every_written_form_of_a_new_style_arxiv_id_is_one_key(written):
    assert arxiv_key(written) == "2401.00001"


@pytest.mark.parametrize(("written", "key"), [
    ("hep-th/9901001", "hep-th/9901001"), ("HEP-TH/9901001v1", "hep-th/9901001"),
    ("arXiv:hep-th/9901001v2", "hep-th/9901001"), ("math.GT/0309136v1", "math.GT/0309136"),
    ("http://arxiv.org/abs/math.GT/0309136", "math.GT/0309136")])
def test_old_style_ids_keep_arxivs_own_case(written, key):
    assert arxiv_key(written) == key


def test_doi_keys_fold_resolvers_prefixes_escapes_and_case_and_an_arxiv_doi_is_no_doi_key():
    forms = ["https://doi.org/10.1145/ABC", "doi:10.1145/abc", "10.1145/abc", "DOI 10.1145/Abc",
             "http://dx.doi.org/10.1145%2Fabc"]
    assert {doi_key(f) for f in forms} == {"10.1145/abc"}
    assert doi_key("10.48550/arXiv.2401.00001") is None and doi_key("") is None and arxiv_key(None) is None


def test_one_paper_under_an_arxiv_id_a_doi_and_a_title_only_is_one_paper():
    entries = [src(1, "2401.00001v1", "Alpha: a study", doi="10.1/alpha"), src(2, None, "ALPHA -- A Study"),
               src(3, None, None, doi="https://doi.org/10.1/ALPHA"), src(4, "arXiv:2401.00001v2", "Other title"),
               src(5, "2402.00002", "Beta")]
    papers = resolve_papers(entries)
    assert [[e.idx for e in p.entries] for p in papers] == [[1, 2, 3, 4], [5]]
    assert papers[0].arxiv_ids == {"2401.00001"} and papers[0].dois == {"10.1/alpha"}


def test_an_arxiv_doi_and_the_id_itself_are_one_paper():
    papers = resolve_papers([src(1, None, "X", doi="10.48550/arXiv.2401.00001"), src(2, "2401.00001", "Y")])
    assert len(papers) == 1 and papers[0].arxiv_ids == {"2401.00001"} and papers[0].dois == set()


def test_the_same_title_under_two_different_ids_is_two_papers():
    papers = resolve_papers([src(1, "2401.00001", "Attention"), src(2, "2401.00002", "Attention"),
                             src(3, None, "Attention")])
    # [3] has no id: it joins the first paper it does not contradict, and the two ids stay two papers.
    assert [[e.idx for e in p.entries] for p in papers] == [[1, 3], [2]]


def test_an_entry_without_any_key_is_a_paper_of_its_own():
    papers = resolve_papers([src(1), src(2), src(3, None, "")])
    assert len(papers) == 3 and all(p.arxiv_id is None for p in papers)


@pytest.mark.parametrize(("title_a", "id_a", "title_b", "id_b"), NEAR_MISSES)
def test_near_miss_titles_with_different_ids_never_match(title_a, id_a, title_b, id_b):
    assert title_similarity(title_a, title_b) >= TITLE_MATCH_THRESHOLD  # the trap: titles alone would pair them
    assert matched([src(1, id_a, title_a)], [ref("t", id_b, title_b)]) == []
    # the same with DOIs that differ
    assert matched([src(1, None, title_a, doi="10.1/a")], [ref("t", None, title_b, doi="10.1/b")]) == []


@pytest.mark.parametrize(("title_a", "id_a", "title_b", "id_b"), NEAR_MISSES)
def test_the_title_step_still_serves_pairs_where_one_side_lacks_the_identifier(title_a, id_a, title_b, id_b):
    # Rule 1 allows the title step here: nothing contradicts it (the near miss is the definition's own risk).
    assert matched([src(1, None, title_a)], [ref("t", id_b, title_b)]) == [("t", 1, "title")]
    # an arXiv id on one side and a DOI on the other are different kinds: the titles decide
    assert matched([src(1, id_a, title_a)], [ref("t", None, title_b, doi="10.1/b")]) == [("t", 1, "title")]


def test_id_then_doi_then_title_and_an_equal_arxiv_id_wins_over_differing_dois():
    refs = [ref("a", "2401.00001", "A", doi="10.1/journal"), ref("b", None, "B", doi="10.1/b"),
            ref("c", None, DPR)]
    sources = [src(1, "2401.00001v3", "Something else", doi="10.1/proceedings"), src(2, None, "Bee", doi="DOI:10.1/B"),
               src(3, None, AT_080)]
    assert matched(sources, refs) == [("a", 1, "id"), ("b", 2, "doi"), ("c", 3, "title")]


def test_title_threshold_is_inclusive_at_080_and_rejects_079():
    assert title_similarity(DPR, AT_080) == pytest.approx(0.80, abs=1e-12)
    assert round(title_similarity(DPR, AT_079), 2) == 0.79
    (m,) = match_papers(resolve_papers([src(1, None, AT_080)]), resolve_papers([ref("dpr", "2004.04906", DPR)]))
    assert m.by == "title" and m.similarity == pytest.approx(0.8)
    assert matched([src(1, None, AT_079)], [ref("dpr", "2004.04906", DPR)]) == []


def test_title_match_survives_latex_and_accents():
    (m,) = match_papers(resolve_papers([src(1, None, "Café retrieval -- a study")]),
                        resolve_papers([ref("c", "2001.00001", r"{C}af\'{e} \emph{Retrieval}: A Study")]))
    assert m.similarity == 1.0


def test_one_to_one_and_greedy_by_similarity_deterministically():
    refs = [ref("a", None, "Graph neural networks for molecules"),
            ref("b", None, "Graph neural networks for molecule generation")]
    sources = [src(1, None, "Graph neural networks for molecule generation"),
               src(2, None, "Graph neural networks for molecules")]
    assert matched(sources, refs) == [("a", 2, "title"), ("b", 1, "title")]
    assert matched([src(1, None, DPR)], [ref("v1", None, DPR), ref("v2", None, DPR + " (extended)")]) == [
        ("v1", 1, "title")]


def test_adding_a_paper_with_a_different_identifier_never_raises_an_unrelated_truth_entrys_match():
    """Property (seeded, 400 cases): for random lists drawn from a pool of near-identical titles and ids,
    adding one more cited paper that carries an identifier no truth entry has never creates a match for a
    truth entry that has an identifier of the same kind, and never changes how any other truth entry that
    was matched by an identifier is matched."""
    rng = random.Random(31)
    titles = [DDIM, DDPM, CGAN, GAN, ADAMW, WD, DPR, AT_080]
    ids = [f"24{m:02d}.{n:05d}" for m in range(1, 4) for n in range(1, 4)]
    for _ in range(400):
        refs = [ref(f"r{i}", rng.choice(ids + [None]), rng.choice(titles)) for i in range(rng.randint(1, 5))]
        sources = [src(i + 1, rng.choice(ids + [None]), rng.choice(titles)) for i in range(rng.randint(0, 5))]
        before = {k: (s, by) for k, s, by in matched(sources, refs)}
        new_id = "2599.99999"
        extra = src(99, new_id, rng.choice(titles))
        after = {k: (s, by) for k, s, by in matched([*sources, extra], refs)}
        for r in refs:
            if r.arxiv_id and after.get(r.cite_key, (None,))[0] == 99:
                pytest.fail(f"{r.cite_key} ({r.arxiv_id}) matched the added paper {new_id} by title")
            if before.get(r.cite_key, (None, None))[1] == "id":
                assert after[r.cite_key] == before[r.cite_key]
