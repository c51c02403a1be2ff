"""Citation markers, sentences, reference lists and link renumbering on hand-made reports."""

from __future__ import annotations

import pytest

from deepscholar.systems.base import Source
from deepscholar.systems.external.formats import report_from_json
from deepscholar.text.arxiv_ids import arxiv_id_or_problem
from deepscholar.text.citations import (
    arxiv_links_to_numbers,
    citation_numbers,
    citation_stats,
    parse_reference_list,
    reference_title,
    remap_citation_numbers,
)
from deepscholar.text.sentences import split_report_sentences

# ----------------------------------------------------------------------------------- markers


@pytest.mark.parametrize("text, expected", [
    ("Dense retrieval [3].", [3]),
    ("Two papers [2][7].", [2, 7]),
    ("Two papers [2] [7].", [2, 7]),
    ("Comma list [2, 7] and semicolons [4; 9].", [2, 7, 4, 9]),
    ("A range [2-4].", [2, 3, 4]),
    ("An en-dash range [2–4] and an em-dash one [6—7].", [2, 3, 4, 6, 7]),
    ("Mixed [1, 3-5].", [1, 3, 4, 5]),
    ("Escaped markdown \\[5\\].", [5]),
    ("Repeated [3] then [1] then [3].", [3, 1]),
    ("A numbered link label [3](https://arxiv.org/abs/2401.00001).", [3]),
])
def test_marker_forms(text, expected):
    assert citation_numbers(text) == expected


@pytest.mark.parametrize("text", [
    "See [a] and [text](https://example.org) and [abstract].",
    "Footnotes [^1] are not citations.",
    "Years [2020] and spans [2019-2021] are not citations.",
    "A backwards range [5-2] is a typo, not five citations.",
    "Nested [[Zheng 2021](http://arxiv.org/abs/2108.02755v1)] links are not numbers yet.",
    "",
])
def test_things_that_are_not_markers(text):
    assert citation_numbers(text) == []


def test_renumber_shifts_every_marker_form():
    text = "Zero-based [0], pairs [1][2], lists [0, 3-4], escaped \\[5\\] and [abstract] untouched."
    assert remap_citation_numbers(text, lambda n: n + 1) == (
        "Zero-based [1], pairs [2][3], lists [1, 4-5], escaped \\[6\\] and [abstract] untouched.")


# --------------------------------------------------------------------------------- sentences


def test_sentences_skip_headings_blank_lines_and_the_reference_list():
    text = (
        "# Related Work\n\n"
        "## Dense retrieval\n\n"
        "Dense retrieval was popularised by DPR [1]. Smith et al. (2020) add hard negatives [2][3].\n\n"
        "---\n\n"
        "Scaling studies [4] followed.\n\n"
        "## References\n\n"
        "[1] Karpukhin et al. (2020). Dense Passage Retrieval for Open-Domain Question Answering. EMNLP.\n"
        "[2] Smith, J. (2020). Hard negatives. ACL.\n"
    )
    sentences = split_report_sentences(text)
    assert [(s.index, s.text, s.citations) for s in sentences] == [
        (0, "Dense retrieval was popularised by DPR [1].", [1]),
        (1, "Smith et al. (2020) add hard negatives [2][3].", [2, 3]),
        (2, "Scaling studies [4] followed.", [4]),
    ]


@pytest.mark.parametrize("text, expected", [
    # Abbreviations never end a sentence.
    ("Methods, e.g. BM25, i.e. sparse ones, work [1]. Zheng et al. [2] disagree. Next one.",
     ["Methods, e.g. BM25, i.e. sparse ones, work [1].", "Zheng et al. [2] disagree.", "Next one."]),
    ("As Fig. 3 and Eq. (2) show, the U.S. federal tax [1] matters. Dr. Smith agrees.",
     ["As Fig. 3 and Eq. (2) show, the U.S. federal tax [1] matters.", "Dr. Smith agrees."]),
    ("Proposed by J. M. Epstein [4]. Later versions differ.",
     ["Proposed by J. M. Epstein [4].", "Later versions differ."]),
    # Markers after the full stop belong to the sentence they close.
    ("Inequality is pressing.[1] Traditional systems lag.[2][3] Done.",
     ["Inequality is pressing.[1]", "Traditional systems lag.[2][3]", "Done."]),
    ("Decimals like 3.5 and versions v1.2 stay whole [1]. Questions? Yes! Fine.",
     ["Decimals like 3.5 and versions v1.2 stay whole [1].", "Questions?", "Yes!", "Fine."]),
    # Hard-wrapped lines join; a line ending with a colon introduces the next one.
    ("A sentence wrapped\nover two lines [1]. Then:\nthe next line is its own sentence.",
     ["A sentence wrapped over two lines [1].", "Then:", "the next line is its own sentence."]),
    ("- first item cites [1]\n- second item cites [2].",
     ["first item cites [1]", "second item cites [2]."]),
])
def test_sentence_boundaries(text, expected):
    assert [s.text for s in split_report_sentences(text)] == expected


def test_plain_heading_lines_and_agent_tags_are_not_sentences():
    text = "Related Works\n\n**Background**\n\n<answer>\nWork on X [1] exists.\n</answer>"
    assert [s.text for s in split_report_sentences(text)] == ["Work on X [1] exists."]


def test_a_trailing_numbered_list_without_heading_is_a_reference_list():
    text = ("Retrieval helps [1]. Generation too [2].\n\n"
            "[1] Lewis et al. Retrieval-augmented generation. 2020.\n"
            "[2] Brown et al. Language models are few-shot learners. 2020.\n")
    assert [s.text for s in split_report_sentences(text)] == ["Retrieval helps [1].", "Generation too [2]."]
    assert sorted(parse_reference_list(text)) == [1, 2]


def test_a_numbered_list_in_the_body_is_not_a_reference_list():
    text = "We compare three ideas:\n\n1. sparse retrieval [1]\n2. dense retrieval [2]\n"
    assert [s.citations for s in split_report_sentences(text)] == [[], [1], [2]]
    assert parse_reference_list(text) == {}


def test_a_reference_block_in_the_middle_ends_at_the_next_heading():
    text = ("# Summary\n\nLead [1].\n\n## References\n\n[1] Lead source\n\n"
            "# Related Works\n\nBody [2].\n\n## References\n\n[1] Body one\n[2] Body two\n")
    assert [s.text for s in split_report_sentences(text)] == ["Lead [1].", "Body [2]."]
    assert {n: r.title for n, r in parse_reference_list(text).items()} == {1: "Body one", 2: "Body two"}


# ---------------------------------------------------------------------------- reference lists


def test_reference_list_entries_ids_urls_and_titles():
    text = (
        "Body [1][2][3][4][5].\n\n## References\n\n"
        "[1] Sparse retrieval. *arXiv:2308.10363v2*, 2023.\n"
        "[2] A placeholder. *arXiv:2306.XXXXX*, 2023.\n"
        "3. Optimal taxation and the Domar-Musgrave effect (2023) http://arxiv.org/abs/2311.05822v2\n"
        "[4] Saez, E. (2010). Do Taxpayers Bunch at Kink Points? American Economic Journal, 2(3), 180-212.\n"
        "[5] Hierarchical retrieval for long documents\n"
        "    continued on a second line (https://example.org/paper).\n"
    )
    refs = parse_reference_list(text)
    assert sorted(refs) == [1, 2, 3, 4, 5]
    assert (refs[1].title, refs[1].arxiv_id, refs[1].url, refs[1].problem) == (
        "Sparse retrieval", "2308.10363", None, None)
    # An id that names no paper is not an id: unresolved, with the reason kept.
    assert refs[2].arxiv_id is None and "2306.XXXXX" in refs[2].problem and not refs[2].resolvable
    assert (refs[3].title, refs[3].arxiv_id, refs[3].url) == (
        "Optimal taxation and the Domar-Musgrave effect", "2311.05822", "http://arxiv.org/abs/2311.05822v2")
    assert refs[4].title == "Do Taxpayers Bunch at Kink Points?" and refs[4].arxiv_id is None
    assert (refs[5].title, refs[5].url) == ("Hierarchical retrieval for long documents continued on a second line",
                                            "https://example.org/paper")


@pytest.mark.parametrize("entry, title", [
    ("Lewis, P. (2020). Retrieval-augmented generation for knowledge-intensive NLP. NeurIPS.",
     "Retrieval-augmented generation for knowledge-intensive NLP"),
    ('Zheng, S. et al., "The AI Economist: Improving Equality and Productivity," 2020.',
     "The AI Economist: Improving Equality and Productivity"),
    ("Lewis and Perez. 2020. Retrieval-augmented generation. In Proceedings of NeurIPS.",
     "Retrieval-augmented generation"),
    ("Document 17: TaxAgent: How Large Language Model Designs Fiscal Policy", "TaxAgent: How Large Language "
                                                                              "Model Designs Fiscal Policy"),
    ("BERT. arXiv preprint arXiv:1810.04805, 2018.", "BERT"),
])
def test_reference_titles(entry, title):
    assert reference_title(entry) == title


@pytest.mark.parametrize("text, found", [
    ("https://arxiv.org/abs/2108.02755v1", ("2108.02755", None)),
    ("https://arxiv.org/pdf/2108.02755v2.pdf", ("2108.02755", None)),
    ("doi:10.48550/arXiv.2308.10363", ("2308.10363", None)),
    ("arXiv preprint arXiv:cs/0601001v2", ("cs/0601001", None)),
    ("arXiv: A survey of everything", (None, None)),
    ("no identifier here", (None, None)),
])
def test_arxiv_ids_in_text(text, found):
    assert arxiv_id_or_problem(text) == found


# ------------------------------------------------------------------------------ link renumbering


def test_arxiv_links_become_numbers_in_order_of_first_appearance():
    text = (
        "Economic policy design \\[[Stephan Zheng' 2021-08-05](http://arxiv.org/abs/2108.02755v1)\\]. "
        "Taxation \\[[Alessandro Ferrari' 2022-11-08](http://arxiv.org/abs/2211.04388v3)\\]"
        "\\[[Kirill Borissov' 2021-07-01](http://arxiv.org/abs/2107.00410v1)\\]. "
        "Again the first, another version \\[[Stephan Zheng' 2021-08-05](https://arxiv.org/abs/2108.02755v2)\\], "
        "a pdf link [[Han](https://arxiv.org/pdf/2112.14377v2.pdf)], "
        "two in one bracket \\[[A](http://arxiv.org/abs/2308.01500v1), [B](http://arxiv.org/abs/1911.10181)\\], "
        "and a [project page](https://github.com/x/y) that is no citation."
    )
    numbered, ids = arxiv_links_to_numbers(text)
    assert ids == {1: "2108.02755", 2: "2211.04388", 3: "2107.00410", 4: "2112.14377", 5: "2308.01500",
                   6: "1911.10181"}
    assert numbered == (
        "Economic policy design [1]. Taxation [2][3]. Again the first, another version [1], a pdf link [4], "
        "two in one bracket [5, 6], and a [project page](https://github.com/x/y) that is no citation.")
    assert citation_numbers(numbered) == [1, 2, 3, 4, 5, 6]


def test_text_without_arxiv_links_is_unchanged():
    assert arxiv_links_to_numbers("Plain [1] text.") == ("Plain [1] text.", {})


def test_an_arxiv_link_without_an_id_stays_a_link():
    text = "A [search page](https://arxiv.org/abs/?q=rag) and [a paper](https://arxiv.org/abs/2108.02755v2)."
    assert arxiv_links_to_numbers(text) == (
        "A [search page](https://arxiv.org/abs/?q=rag) and [1].", {1: "2108.02755"})


# ---------------------------------------------------------------------------------- statistics


def test_citation_stats_counts_pairs_distinct_and_unresolved():
    text = ("First claim [1][2]. Second claim [2, 3]. Third claim [4]. Fifth [5].\n\n"
            "## References\n\n[1] Not counted [9]\n")
    sources = [Source(idx=1, title="One", snippet="", arxiv_id="2401.00001"),
               Source(idx=2, title="", snippet="", url="https://example.org"),
               Source(idx=3, title="Titled only", snippet=""),
               Source(idx=4, title="", snippet="a snippet alone names nothing")]
    stats = citation_stats(text, sources)
    assert (stats.n_citations, stats.n_distinct, stats.n_unresolved) == (6, 5, 2)
    assert stats.unresolved == (4, 5)  # 4 has no id, URL or title; 5 has no source at all
    assert citation_stats("No citations at all.", []) == citation_stats("", [])
    assert citation_stats("", []).n_citations == 0


def test_a_placeholder_reference_is_counted_unresolved_not_dropped():
    report = report_from_json({"text": (
        "Sparse retrieval [1]. A placeholder [2]. Nothing listed [3].\n\n## References\n\n"
        "[1] Sparse retrieval. *arXiv:2308.10363*, 2023.\n"
        "[2] Placeholder paper. *arXiv:2306.XXXXX*, 2023.\n")})
    assert [(s.idx, s.arxiv_id) for s in report.sources] == [(1, "2308.10363")]
    stats = citation_stats(report.text, report.sources)
    assert (stats.n_citations, stats.n_unresolved, stats.unresolved) == (3, 2, (2, 3))
    assert report.trace["import"]["unresolved"] == [
        {"n": 2, "entry": "Placeholder paper. *arXiv:2306.XXXXX*, 2023.",
         "reason": "names no resolvable arXiv id ('2306.XXXXX')", "in_text": True},
        {"n": 3, "entry": "", "reason": "no entry with this number in the reference list", "in_text": True}]


def test_reference_entries_with_dois_resolve_and_placeholder_dois_do_not():
    refs = parse_reference_list(
        "Text [1][2][3][4].\n\n## References\n\n"
        "[1] Fairness. In SIGIR, 2024. doi:10.1145/3626772.3657766\n"
        "[2] ACL paper. https://doi.org/10.18653/v1/2020.acl-main.1.\n"
        "[3] arXiv DOI. DOI 10.48550/arXiv.2308.10363\n"
        "[4] Invented. doi: 10.xxxx/xxxxx\n")
    assert [(r.arxiv_id, r.url, r.doi, r.problem) for r in refs.values()] == [
        (None, "https://doi.org/10.1145/3626772.3657766", "10.1145/3626772.3657766", None),
        (None, "https://doi.org/10.18653/v1/2020.acl-main.1", "10.18653/v1/2020.acl-main.1", None),
        ("2308.10363", None, "10.48550/arXiv.2308.10363", None),
        (None, None, None, "names no resolvable DOI ('10.xxxx/xxxxx')")]


def test_retrieved_only_sources_never_resolve_a_citation():
    sources = [Source(idx=1, title="Cited", snippet="", arxiv_id="2308.10363"),
               Source(idx=2, title="Only retrieved", snippet="s", arxiv_id="2309.00001", cited=False)]
    assert citation_stats("A [1]. B [2].", sources).unresolved == (2,)
