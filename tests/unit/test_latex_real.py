"""Related-work extraction and bibliography parsing checked against real papers' hand-made labels.

Each folder of the shared latex_real fixtures (tests/support/shared_data.py) has a labels.json written and checked by hand; the
fixture README and each label's "notes" describe the traps these papers set.
"""

from __future__ import annotations

import json
import re

import pytest
from support import shared_data
from support.files import write_tree

from deepscholar.sources.bibliography import load_bibliography
from deepscholar.sources.inspect import inspect_latex
from deepscholar.sources.latex import find_related_work
from deepscholar.sources.latex_source import strip_comments
from deepscholar.sources.latex_text import word_count
from deepscholar.text.markers import CITATION_MARKER_RE, cite_keys_in_marker_text

FIXTURES = shared_data.shared_root() / "latex_real"
PAPERS = shared_data.folder_names("latex_real")


@pytest.fixture(autouse=True)
def _needs_the_real_papers():
    """Skip every test here when the papers are missing (fail under CI=true)."""
    shared_data.require("latex_real")


def _labels(name: str) -> dict:
    return json.loads((FIXTURES / name / "labels.json").read_text(encoding="utf-8"))


def _plain(text: str) -> str:
    """The labels' plain-text convention: citation groups dropped, TeX dashes, single spaces."""
    text = CITATION_MARKER_RE.sub(" ", text)
    text = text.replace("\u2014", "---").replace("\u2013", "--")
    return " ".join(text.split())


def test_every_fixture_has_labels():
    assert PAPERS, "no latex_real fixtures"
    for name in PAPERS:
        assert (FIXTURES / name / "labels.json").is_file(), name


@pytest.mark.parametrize("name", PAPERS)
def test_related_work_section(name):
    labels = _labels(name)
    section = find_related_work(FIXTURES / name)
    if not labels["has_related_work"]:
        assert section is None
        return
    assert section is not None
    assert section.main_tex == labels["main_tex"]
    assert section.title == labels["section_title"]
    assert section.command == labels["section_command"]
    assert section.level == labels["section_level"]
    assert section.file == labels["section_file"]

    assert section.cite_keys == labels["cite_keys"]
    for key in labels["cite_keys_only_in_comments"]:
        assert key not in section.cite_keys
        assert key not in cite_keys_in_marker_text(section.text)

    plain = _plain(section.text)
    assert " ".join(labels["first_words"].split()) in plain
    assert " ".join(labels["last_words"].split()) in plain
    # Nothing but a nested heading line may come before the first words (no float, no own heading).
    before = plain[: plain.find(" ".join(labels["first_words"].split()))]
    assert len(before.split()) <= 12, before


@pytest.mark.parametrize("name", PAPERS)
def test_section_text_markers_match_cite_keys(name):
    labels = _labels(name)
    section = find_related_work(FIXTURES / name)
    if section is None:
        return
    # Keys cited only inside floats are absent from the text (floats are dropped) but kept in cite_keys.
    in_text = set(cite_keys_in_marker_text(section.text))
    assert in_text <= set(section.cite_keys)
    assert set(section.cite_keys) - in_text <= set(labels.get("cite_keys_only_in_table", [])) | _float_keys(
        section.raw_latex
    )
    assert word_count(section.text) > 20
    # Floats are not prose: the text must hold no caption or tabular residue.
    assert "\\begin" not in section.text and "\\caption" not in section.text


def _float_keys(raw: str) -> set[str]:
    keys: set[str] = set()
    live = strip_comments(raw).live
    for env in re.finditer(r"\\begin\{(table|figure)\*?\}.*?\\end\{\1\*?\}", live, re.DOTALL):
        for m in re.finditer(r"\\cite[a-z]*\*?(?:\[[^\]]*\])*\{([^}]*)\}", env.group(0)):
            keys.update(k.strip() for k in m.group(1).split(","))
    return keys


@pytest.mark.parametrize("name", PAPERS)
def test_bibliography(name):
    labels = _labels(name)
    bib = load_bibliography(FIXTURES / name, labels["main_tex"])
    # Duplicate keys collapse to one entry (first wins), so the unique-key count is what we can match.
    expected = labels.get("n_bib_unique_keys", labels["n_bib_entries"])
    assert len(bib.entries) == expected, bib.failures
    if labels["n_bib_entries"] != expected or "malformed" in labels.get("notes", "").lower():
        assert bib.failures, "a messy .bib must report what it repaired or dropped"
    expected_sources = labels.get("bib_files") or ([labels["bbl_file"]] if labels.get("bbl_file") else None)
    if expected_sources:
        assert sorted(bib.sources) == sorted(expected_sources)
    unresolved = set(labels.get("unresolved_cite_keys", []))
    for key in labels["cite_keys"]:
        if key in unresolved:
            continue
        assert key in bib.entries, key
        assert bib.entries[key].title, key


@pytest.mark.parametrize("name", PAPERS)
def test_inspect_latex(name):
    labels = _labels(name)
    report = inspect_latex(FIXTURES / name)
    assert report["main_tex"] == labels["main_tex"]
    assert report["section_title"] == labels["section_title"]
    assert report["section_level"] == labels["section_level"]
    assert report["section_file"] == labels["section_file"]
    assert report["cite_keys"] == labels["cite_keys"]
    unresolved = sorted(labels.get("unresolved_cite_keys", []))
    assert report["unresolved_cite_keys"] == unresolved
    assert sorted(report["bib_entries"]) == sorted(set(labels["cite_keys"]) - set(unresolved))
    assert report["n_bib_entries"] == labels.get("n_bib_unique_keys", labels["n_bib_entries"])
    if labels["has_related_work"]:
        assert report["word_count"] > 20
    else:
        assert report["section_text"] is None and report["word_count"] is None


def test_mavbench_messy_bib_entries_survive():
    bib = load_bibliography(FIXTURES / "mavbench", "main.tex")
    # The unclosed entry and the entry with repeated fields are repaired, not lost.
    assert bib.entries["unrealcv"].title == "Unrealcv: Connecting computer vision to unreal engine"
    assert bib.entries["Zhang2017207"].authors
    assert bib.entries["vins-mono"].eprint == "1708.03852"
    assert any("vins-mono" in f for f in bib.failures)


def test_bib_latex_accents_are_decoded():
    bib = load_bibliography(FIXTURES / "electron_paths", "main_iclr.tex")
    authors = " ".join(e.authors or "" for e in bib.entries.values())
    assert "\\" not in authors and "{" not in authors
    assert "Müller" in authors and "Schütt" in authors


# --------------------------------------------------------------------------------------------------
# Small synthetic projects for the rules the real papers do not all exercise.


DOC = "\\documentclass{article}\n\\begin{document}\n%s\n\\end{document}\n"


@pytest.mark.parametrize(
    "heading",
    [
        "\\section{Related Works}",
        "\\section*{Related work}",
        "\\section{Background and Related Work}",
        "\\section{Related Work and Background}",
        "\\section{PRIOR WORK}",
        "\\section{Previous Work}",
        "\\section{Related Literature}",
        "\\section{Literature Review}",
        "\\section{Related Work\\label{sec:rw}}",
        "\\section[Related]{Related Work}",
    ],
)
def test_title_variants(tmp_path, heading):
    body = (
        f"\\section{{Intro}} Hi.\n{heading}\n\\label{{x}}\n"
        "We build on \\cite{a}.\n\\section{Method} M."
    )
    section = find_related_work(write_tree(tmp_path, {"main.tex": DOC % body}))
    assert section is not None
    assert section.text == "We build on [@a]."
    assert section.cite_keys == ["a"]


def test_commented_and_dead_related_work_is_not_found(tmp_path):
    body = (
        "\\section{Intro} Hi.\n% \\section{Related Work}\n%\\input{related_work}\n"
        "\\begin{comment}\n\\section{Related Work}\n\\end{comment}\n"
        "\\iffalse\n\\section{Related Work}\n\\fi\n\\section{Method} M."
    )
    files = {"main.tex": DOC % body, "related_work.tex": "\\section{Related Work}\nOld text \\cite{x}.\n"}
    assert find_related_work(write_tree(tmp_path, files)) is None


def test_subsection_ends_at_next_subsection_and_inputs_resolve(tmp_path):
    body = "\\section{Background}\n\\input{sec/bg}\n\\section{Method} M."
    files = {
        "main.tex": DOC % body,
        "sec/bg.tex": (
            "Intro text.\n\\subsection{Related Work}\nA 50\\% gain~\\citep[see][p.~2]{k1,k2} and"
            " \\citet{k3}. % \\cite{hidden}\n\\input{sec/more.tex}\n\\subsection{Next}\nNot related."
        ),
        "sec/more.tex": "More\\footnote{Foot \\cite{k4}.} text.\n\\input{sec/bg}\n",
    }
    section = find_related_work(write_tree(tmp_path, files))
    assert section is not None
    assert section.level == "subsection"
    assert section.file == "sec/bg.tex"
    assert section.cite_keys == ["k1", "k2", "k3", "k4"]
    assert section.text == "A 50% gain [@k1; @k2] and [@k3]. More (Foot [@k4].) text."
    assert "\\cite{hidden}" in section.raw_latex  # raw keeps comments
    assert word_count(section.text) == 7  # A 50% gain and More (Foot text.


def test_main_file_is_the_one_not_input_by_others(tmp_path):
    files = {
        "a_wrapper.tex": DOC % "\\input{paper}",
        "paper.tex": DOC % "\\section{Related Work}\nX \\cite{k}.\n",
    }
    section = find_related_work(write_tree(tmp_path, files))
    assert section is not None and section.main_tex == "a_wrapper.tex"


def test_marker_helpers():
    text = "See [@a; @b:1] and [@c-d], not [1] or [@]."
    assert CITATION_MARKER_RE.findall(text) == ["[@a; @b:1]", "[@c-d]"]
    assert cite_keys_in_marker_text(text) == ["a", "b:1", "c-d"]
    assert word_count(text) == 5  # See, and, not, [1], or


def test_simple_macros_expand_and_iffalse_else_is_live(tmp_path):
    preamble = "\\newcommand{\\sys}{Sybil\\xspace}\n\\def\\ours{OurNet}\n\\newcommand{\\red}[1]{#1}\n"
    body = (
        "\\section{Related Work}\n\\iffalse Old \\cite{old}. \\else New \\cite{new}. \\fi\n"
        "Unlike \\sys, \\ours{} uses \\red{colour} \\cite{k}.\n\\section{End}"
    )
    doc = "\\documentclass{article}\n" + preamble + "\\begin{document}\n" + body + "\n\\end{document}\n"
    section = find_related_work(write_tree(tmp_path, {"main.tex": doc}))
    assert section is not None
    assert section.cite_keys == ["k", "new"]
    assert section.text == "New [@new]. Unlike Sybil, OurNet uses colour [@k]."


def test_text_tex_never_reads_is_ignored(tmp_path):
    files = {
        "main.tex": (DOC % "\\section{Intro} Hi.\n\\import{parts/}{intro}\n")
        + "\\section{Related Work}\nOld.\n",
        "parts/intro.tex": "Intro body.\n\\endinput\n\\section{Related Work}\nDead draft \\cite{dead}.\n",
    }
    # Only headings after \end{document} or after \endinput mention related work: TeX never reads them.
    assert find_related_work(write_tree(tmp_path, files)) is None


def test_loose_title_is_a_fallback_only(tmp_path):
    body = (
        "\\section{Preliminaries and Related Work}\nLoose \\cite{a}.\n"
        "\\section{Method} M.\n"
    )
    section = find_related_work(write_tree(tmp_path / "loose", {"main.tex": DOC % body}))
    assert section is not None and section.title == "Preliminaries and Related Work"
    body += "\\subsection{Related Work}\nExact \\cite{b}.\n"
    section = find_related_work(write_tree(tmp_path / "exact", {"main.tex": DOC % body}))
    assert section is not None and section.cite_keys == ["b"]


def test_latex_to_text_details():
    from deepscholar.sources.latex_text import latex_to_text

    src = (
        "See \\href{http://a.b/c%20d}{the site}, \\url{http://x.y/~z_w%41}, 5\\,\\% and \\$5 \\& co. "
        "Caf{\\'e} ``quoted''~\\citeauthor{k} [\\citealp[p.~2]{a, b}] $x_1$ \\ref{t}."
    )
    assert latex_to_text(src) == (
        "See the site, http://x.y/~z_w%41, 5 % and $5 & co. Café “quoted” [@k] [[@a; @b]] $x_1$ [ref]."
    )
