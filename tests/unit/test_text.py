from datetime import date

import pytest

from deepscholar.text import (
    ARXIV_NEW_ID_RE,
    arxiv_id_lower_bound_date,
    normalise_title,
    strip_arxiv_version,
    title_similarity,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("Attention Is All You Need", "attention is all you need"),
        ("  Self-Reflective   Retrieval-Augmented\nGeneration ", "self reflective retrieval augmented generation"),
        ("{BERT}: Pre-training of Deep Bidirectional Transformers", "bert pre training of deep bidirectional transformers"),
        (r"Caf\'{e} M{\"u}ller and the \emph{Na\"ive} Bayes", "cafe muller and the naive bayes"),
        ("Café Müller and the Naïve Bayes", "cafe muller and the naive bayes"),
        (r"Ko\v{c}evi\'c's \textbf{Graph} Nets", "kocevic s graph nets"),
        (r"Search \& Rank: $k$-NN~Retrieval", "search rank k nn retrieval"),
        ("Sørensen’s “Quoted” Title!", "sorensen s quoted title"),
        ("", ""),
        (None, ""),
    ],
)
def test_normalise_title(raw, expected):
    assert normalise_title(raw) == expected


@pytest.mark.parametrize(("latex", "unicode"), [
    (r"Fran\c{c}ais", "Français"), (r"Fran\c cais", "Français"), (r"{\c c}a va", "Ça va"), (r"Gar\c{c}on", "Garçon"),
    (r"Mart\'{\i}nez", "Martínez"), (r"Mart\'\i nez", "Martínez"), (r"S\o ren", "Søren"), (r"S\o{}ren", "Søren"),
    (r"\L\'od\'z", "Łódź"), (r"\r{A}ngstr\"om", "Ångström"), (r"\aa{}ngstr\"{o}m", "ångström"), (r"Erd\H{o}s", "Erdős"),
    (r"\v{S}koda \k{a}", "Škoda ą"), (r"Stra\ss e", "Straße"), (r"\AE sop", "Æsop"), (r"\u{g}", "ğ"),
    (r"\={a}\.{z}\d{s}\b{t}", "āżṣṯ"), (r"\~{n}", "ñ"), (r"\^{o}", "ô"), (r"\`{e}", "è"),
])
def test_a_latex_accent_is_the_letter_it_writes_never_a_space(latex, unicode):
    """`\\c{c}` writes ç, so its key is ç's key ("c"), as `\\c cais` is "çais" (a letter accent takes one
    letter and the rest of the word follows); letters without a decomposition (ø, ł, æ) fold alike."""
    assert normalise_title(latex) == normalise_title(unicode)


def test_a_letter_accent_without_braces_keeps_its_word_whole():
    assert normalise_title(r"Fran\c cais et Gar\c{c}on") == "francais et garcon"
    assert normalise_title(r"\textbf{Bold} \emph{naive}") == "bold naive"  # \t and \e are no accents there


def test_normalise_title_does_not_split_words_at_braces():
    assert normalise_title(r"{R}etrieval-{A}ugmented {G}eneration") == "retrieval augmented generation"


def test_title_similarity_is_one_for_cosmetic_differences():
    a = "Self-Reflective Retrieval-Augmented Generation with {Critique} Tokens"
    b = "self reflective retrieval augmented generation with critique tokens."
    assert title_similarity(a, b) == 1.0


def test_title_similarity_orders_near_and_far_titles():
    title = "Dual-Encoder Passage Retrieval for Open-Domain Question Answering"
    near = "Dual Encoder Passage Retrieval for Open Domain Question-Answering Systems"
    far = "Temporal Graph Networks for Dynamic Graphs"
    assert 0.85 < title_similarity(title, near) < 1.0
    assert title_similarity(title, far) < 0.5
    assert title_similarity(title, near) == pytest.approx(title_similarity(near, title), abs=0.05)


@pytest.mark.parametrize(("a", "b"), [("", "x"), (None, "x"), ("!!!", "x")])
def test_title_similarity_of_empty_titles_is_zero(a, b):
    assert title_similarity(a, b) == 0.0


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2506.02838v1", ("2506.02838", 1)),
        ("2506.02838", ("2506.02838", None)),
        ("2506.02838v12", ("2506.02838", 12)),
        ("1205.2618v3", ("1205.2618", 3)),
        ("arXiv:2301.01234v2", ("2301.01234", 2)),
        ("cs/0601001v2", ("cs/0601001", 2)),
        ("hep-th/9901001", ("hep-th/9901001", None)),
        ("math.GT/0309136v1", ("math.GT/0309136", 1)),
        (" 2401.00001v1 ", ("2401.00001", 1)),
    ],
)
def test_strip_arxiv_version(raw, expected):
    assert strip_arxiv_version(raw) == expected


def test_new_style_id_regex():
    assert ARXIV_NEW_ID_RE.fullmatch("2506.02838v1")
    assert ARXIV_NEW_ID_RE.fullmatch("0704.0001")
    assert not ARXIV_NEW_ID_RE.fullmatch("2513.02838")  # month 13
    assert not ARXIV_NEW_ID_RE.fullmatch("cs/0601001")
    m = ARXIV_NEW_ID_RE.search("see arXiv:2301.01234v2 for details")
    assert m and m.group("id") == "2301.01234" and m.group("version") == "2"


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("2506.02838v1", date(2025, 6, 1)),
        ("2506.02838", date(2025, 6, 1)),
        ("0704.0001", date(2007, 4, 1)),
        ("1912.11111v4", date(2019, 12, 1)),
        ("cs/0601001v2", None),
        ("not an id", None),
    ],
)
def test_arxiv_id_lower_bound_date(raw, expected):
    assert arxiv_id_lower_bound_date(raw) == expected
