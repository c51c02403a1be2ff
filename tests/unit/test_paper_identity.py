"""One paper however it is cited (evaluation/metrics/papers.py, text/paper_ids.py): identifier keys, identity
within one list, the matching rule between a report's papers and the exemplar's (the title fallback never
pairs two different identifiers of one kind, and takes the same title only: tests/unit/test_title_rule.py
has the rule itself), and the one reader of ids that the importers and every metric share."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support.metric_support import exemplar_reference, source_doc

from deepscholar.evaluation.metrics.papers import match_papers, resolve_papers
from deepscholar.release.official_import import arxiv_id_from_link
from deepscholar.systems.external.formats.base import arxiv_id as imported_arxiv_id
from deepscholar.text import title_similarity
from deepscholar.text.paper_ids import arxiv_key, doi_key

# Real near-miss pairs: different papers whose titles pass the 0.8 bar.
DDIM, DDPM = "Denoising Diffusion Implicit Models", "Denoising Diffusion Probabilistic Models"
CGAN, GAN = "Conditional Generative Adversarial Nets", "Generative Adversarial Nets"
ADAMW, WD = "Decoupled Weight Decay Regularization", "Weight Decay Regularization"
NEAR_MISSES = [(DDIM, "2010.02502", DDPM, "2006.11239"), (CGAN, "1411.1784", GAN, "1406.2661"),
               (ADAMW, "1711.05101", WD, "1711.00000")]
DPR = "Dense Passage Retrieval for Open-Domain Question Answering"
DPR_WEB = "[PDF] Dense Passage Retrieval for Open-Domain Question ..."  # as a search engine lists it
AT_080 = "Dense Passage Open-Domain Question Answering Systems"  # similarity exactly 0.80 to DPR


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
    ("http://arxiv.org/abs/math.GT/0309136", "math.GT/0309136"), ("arxiv.org/abs/HEP-TH/9901001v1", "hep-th/9901001"),
    ("https://arxiv.org/abs/MATH.gt/0309136v2", "math.GT/0309136"), ("arXiv:HEP-TH/9901001", "hep-th/9901001")])
def test_old_style_ids_keep_arxivs_own_case(written, key):
    assert arxiv_key(written) == key


FORMS = ["2401.00001", "2401.00001v2", "arXiv:2401.00001", "arxiv: 2401.00001v3", "https://arxiv.org/abs/2401.00001v3",
         "arxiv.org/pdf/2401.00001v1.pdf", "10.48550/arXiv.2401.00001", "https://doi.org/10.48550/ARXIV.2401.00001",
         "hep-th/9901001v2", "HEP-TH/9901001", "arxiv.org/abs/HEP-TH/9901001v1", "https://arxiv.org/pdf/hep-th/9901001v1",
         "math.GT/0309136", "https://arxiv.org/abs/MATH.gt/0309136v2"]


@pytest.mark.parametrize("written", FORMS)
def test_the_importers_accept_every_form_the_resolver_accepts_and_read_the_same_key(written):
    key = arxiv_key(written)
    assert imported_arxiv_id(written) == key  # external systems' sources (systems/external/formats)
    assert arxiv_id_from_link(written)[0] == key  # the official dataset's links (release/official_import.py)


def test_the_importers_refuse_what_names_no_id_and_keep_the_version_they_read():
    assert imported_arxiv_id("https://example.org/2401.x") is None and arxiv_id_from_link("not an id") is None
    assert arxiv_id_from_link("arxiv.org/abs/HEP-TH/9901001v3") == ("hep-th/9901001", 3)
    assert arxiv_id_from_link("http://arxiv.org/abs/2004.13332v1") == ("2004.13332", 1)


def test_doi_keys_fold_resolvers_prefixes_escapes_and_case_and_an_arxiv_doi_is_no_doi_key():
    forms = ["https://doi.org/10.1145/ABC", "doi:10.1145/abc", "10.1145/abc", "DOI 10.1145/Abc",
             "http://dx.doi.org/10.1145%2Fabc"]
    assert {doi_key(f) for f in forms} == {"10.1145/abc"}
    assert doi_key("10.48550/arXiv.2401.00001") is None and doi_key("") is None and arxiv_key(None) is None


@pytest.mark.parametrize("not_a_doi", ["ISBN 978-3-16-148410-0", "https://example.org/paper", "see the journal",
                                       "10.1/abc", "10.12345", "abc/10.1145"])
def test_a_doi_key_is_made_only_from_something_shaped_like_a_doi(not_a_doi):
    assert doi_key(not_a_doi) is None


def test_two_entries_whose_doi_fields_hold_the_same_non_doi_are_not_one_paper_by_it():
    papers = resolve_papers([src(1, None, "Alpha", doi="see the journal"), src(2, None, "Beta", doi="See the journal")])
    assert len(papers) == 2 and all(not p.dois for p in papers)


def test_one_paper_under_an_arxiv_id_a_doi_and_a_title_only_is_one_paper():
    entries = [src(1, "2401.00001v1", "Alpha: a study", doi="10.1000/alpha"), src(2, None, "ALPHA -- A Study"),
               src(3, None, None, doi="https://doi.org/10.1000/ALPHA"), src(4, "arXiv:2401.00001v2", "Other title"),
               src(5, "2402.00002", "Beta")]
    papers = resolve_papers(entries)
    assert [[e.idx for e in p.entries] for p in papers] == [[1, 2, 3, 4], [5]]
    assert papers[0].arxiv_ids == {"2401.00001"} and papers[0].dois == {"10.1000/alpha"}


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
    assert len(papers) == 3 and all(p.arxiv_key is None for p in papers)


@pytest.mark.parametrize(("title_a", "id_a", "title_b", "id_b"), NEAR_MISSES)
def test_near_miss_titles_with_different_ids_never_match(title_a, id_a, title_b, id_b):
    assert title_similarity(title_a, title_b) >= 0.8  # the trap: d2's similarity alone would pair them
    assert matched([src(1, id_a, title_a)], [ref("t", id_b, title_b)]) == []
    # the same with DOIs that differ
    assert matched([src(1, None, title_a, doi="10.1000/a")], [ref("t", None, title_b, doi="10.1000/b")]) == []


@pytest.mark.parametrize(("title_a", "id_a", "title_b", "id_b"), NEAR_MISSES)
def test_near_miss_titles_never_match_when_one_side_lacks_the_identifier_either(title_a, id_a, title_b, id_b):
    # d2 matched these (only the titles decide there, and they were >= 0.8 apart); they are different papers.
    assert matched([src(1, None, title_a)], [ref("t", id_b, title_b)]) == []
    assert matched([src(1, id_a, title_a)], [ref("t", None, title_b, doi="10.1000/b")]) == []
    assert matched([src(1, None, title_a)], [ref("t", None, title_b)]) == []


def test_the_title_step_serves_the_same_title_where_one_side_lacks_the_identifier():
    assert matched([src(1, None, DPR_WEB)], [ref("dpr", "2004.04906", DPR)]) == [("dpr", 1, "title")]
    # an arXiv id on one side and a DOI on the other are different kinds: the titles decide
    assert matched([src(1, "2004.04906", DPR)], [ref("dpr", None, DPR.upper(), doi="10.1000/dpr")]) == [
        ("dpr", 1, "title")]
    assert matched([src(1, None, AT_080)], [ref("dpr", "2004.04906", DPR)]) == []  # d2's inclusive 0.80: no more


def test_id_then_doi_then_title_and_an_equal_arxiv_id_wins_over_differing_dois():
    refs = [ref("a", "2401.00001", "A", doi="10.1000/journal"), ref("b", None, "B", doi="10.1000/b"),
            ref("c", None, DPR)]
    sources = [src(1, "2401.00001v3", "Something else", doi="10.1000/proceedings"), src(2, None, "Bee", doi="DOI:10.1000/B"),
               src(3, None, DPR_WEB)]
    assert matched(sources, refs) == [("a", 1, "id"), ("b", 2, "doi"), ("c", 3, "title")]


def test_a_title_match_records_its_similarity():
    (m,) = match_papers(resolve_papers([src(1, None, DPR_WEB)]), resolve_papers([ref("dpr", "2004.04906", DPR)]))
    assert m.by == "title" and m.similarity == pytest.approx(title_similarity(DPR_WEB, DPR))
    assert m.as_detail()["similarity"] == round(m.similarity, 4)


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


# --- no metric compares identifiers by hand ------------------------------------------------------------

METRICS_DIR = Path(__file__).resolve().parents[2] / "include" / "deepscholar" / "evaluation" / "metrics"
ID_READERS = {"deepscholar.text.arxiv_ids", "deepscholar.text.paper_ids"}
ID_HELPERS = {"strip_arxiv_version", "clean_arxiv_id", "canonical_arxiv_id", "ARXIV_NEW_ID_RE", "ARXIV_OLD_ID_RE"}
RAW_IDS = {"arxiv_id", "doi"}  # an entry's identifiers as written; a Paper's keys are `arxiv_key`, `arxiv_ids`, `dois`
KEYING_CALLS = {"fromkeys", "set", "frozenset", "sorted", "Counter", "setdefault", "get"}


def _reads_a_raw_id(node: ast.AST | None) -> bool:
    return node is not None and any(isinstance(n, ast.Attribute) and n.attr in RAW_IDS for n in ast.walk(node))


def hand_comparisons(tree: ast.AST) -> list[str]:
    """Where a module compares, keys or de-duplicates entries by their identifiers as written, or reads
    identifiers with the text layer's helpers instead of evaluation/metrics/papers.py."""
    found = []
    for node in ast.walk(tree):
        line = getattr(node, "lineno", 0)
        if isinstance(node, ast.ImportFrom) and (node.module in ID_READERS or (
                node.module == "deepscholar.text" and {a.name for a in node.names} & ID_HELPERS)):
            found.append(f"line {line}: reads identifiers with {node.module} (use evaluation/metrics/papers.py)")
        elif isinstance(node, ast.Compare) and any(_reads_a_raw_id(x) for x in (node.left, *node.comparators)):
            found.append(f"line {line}: compares an identifier as written")
        elif isinstance(node, ast.Dict) and any(_reads_a_raw_id(k) for k in node.keys):
            found.append(f"line {line}: keys a dict by an identifier as written")
        elif isinstance(node, ast.DictComp | ast.SetComp) and _reads_a_raw_id(getattr(node, "key", None) or node.elt):
            found.append(f"line {line}: keys a comprehension by an identifier as written")
        elif isinstance(node, ast.Subscript) and _reads_a_raw_id(node.slice):
            found.append(f"line {line}: indexes by an identifier as written")
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", getattr(node.func, "id", None)) in KEYING_CALLS \
                and any(_reads_a_raw_id(a) for a in node.args):
            found.append(f"line {line}: de-duplicates or keys by an identifier as written")
    return found


@pytest.mark.parametrize("path", sorted(p for p in METRICS_DIR.rglob("*.py") if p.name != "papers.py"),
                         ids=lambda p: str(p.relative_to(METRICS_DIR)))
def test_no_metric_module_compares_identifiers_by_hand(path):
    """Every metric that counts or matches papers goes through evaluation/metrics/papers.py (and, through it,
    text/paper_ids.py): `hep-th/9901001v2` and `HEP-TH/9901001` are one paper only if one reader says so."""
    problems = hand_comparisons(ast.parse(path.read_text(encoding="utf-8")))
    assert not problems, f"{path.name}:\n" + "\n".join(problems)


@pytest.mark.parametrize("code", [
    "seen = {s.arxiv_id: s for s in sources}", "keys = dict.fromkeys(s.arxiv_id for s in sources)",
    "same = a.arxiv_id == b.arxiv_id", "ok = x.doi in dois", "from deepscholar.text import strip_arxiv_version",
    "from deepscholar.text.paper_ids import arxiv_key", "n = len({s.doi for s in sources})", "c = counts[s.arxiv_id]"])
def test_the_check_catches_each_way_of_comparing_by_hand(code):
    assert hand_comparisons(ast.parse(code))
