"""User macros without arguments are expanded in the cleaned related-work text (sources/latex_macros.py)."""

from __future__ import annotations

import logging
import string
import time
from pathlib import Path

import pytest
from support.files import write_tree

from deepscholar.sources.latex import find_related_work
from deepscholar.sources.latex_macros import MAX_ADDED_CHARS, MAX_EXPANSIONS, MacroTable


def _doc(preamble: str, body: str) -> str:
    return ("\\documentclass{article}\n" + preamble + "\n\\begin{document}\n\\section{Introduction} Hi.\n"
            "\\section{Related Work}\n" + body + "\n\\section{Method} M.\n\\end{document}\n")


def _text(tmp_path: Path, files: dict[str, str]) -> str:
    section = find_related_work(write_tree(tmp_path, files))
    assert section is not None
    return section.text


@pytest.mark.parametrize("definition", [
    "\\newcommand{\\sysname}{Obelia}",
    "\\newcommand{\\sysname}{Obelia\\xspace}",
    "\\newcommand*\\sysname{Obelia\\xspace}",
    "\\newcommand*{\\sysname}[0]{Obelia}",
    "\\newcommand\\sysname{\\textsc{Obelia}\\xspace}",
    "\\renewcommand{\\sysname}{Obelia}",
    "\\providecommand{\\sysname}{Obelia}",
    "\\DeclareRobustCommand{\\sysname}{Obelia}",
    "\\def\\sysname{Obelia\\xspace}",
    "\\gdef\\sysname{Obelia}",
])
def test_each_definition_form_expands(tmp_path, definition):
    body = "Unlike \\cite{a}, \\sysname{} learns online; \\sysname is also cheaper than \\citet{b}."
    text = _text(tmp_path, {"main.tex": _doc(definition, body)})
    assert text == "Unlike [@a], Obelia learns online; Obelia is also cheaper than [@b]."


def test_macros_may_use_other_macros(tmp_path):
    preamble = "\\newcommand{\\sysname}{Obelia\\xspace}\n\\newcommand{\\full}{\\sysname{}Pro}\n\\def\\eg{e.g.,\\xspace}"
    text = _text(tmp_path, {"main.tex": _doc(preamble, "Tools, \\eg \\full, differ \\cite{a}.")})
    assert text == "Tools, e.g., ObeliaPro, differ [@a]."


def test_which_definition_wins(tmp_path):
    preamble = (
        "\\newcommand{\\first}{One}\n\\newcommand{\\first}{Two}\n"        # LaTeX refuses the second
        "\\newcommand{\\re}{Old}\n\\renewcommand{\\re}{New}\n"             # replaced
        "\\def\\d{Old}\n\\def\\d{New}\n"                                   # replaced
        "\\newcommand{\\kept}{Mine}\n\\providecommand{\\kept}{Theirs}\n"  # only defines what is missing
        "\\providecommand{\\fresh}{Provided}\n"
    )
    text = _text(tmp_path, {"main.tex": _doc(preamble, "\\first \\re \\d \\kept \\fresh \\cite{a}.")})
    assert text == "One New New Mine Provided [@a]."


def test_definitions_in_other_files_of_the_project(tmp_path):
    files = {
        "main.tex": _doc("\\usepackage[utf8]{inputenc}\n\\usepackage{macros,amsmath}\n\\input{defs}",
                         "\\input{sections/related}"),
        "macros.sty": "\\RequirePackage{xspace}\\RequirePackage{more}\n\\newcommand{\\sysname}{Obelia\\xspace}\n",
        "more.sty": "% a comment \\newcommand{\\hidden}{NO}\n\\def\\dataset{WikiQA}\n",
        "defs.tex": "\\newcommand{\\metric}{F1}\n",
        "sections/related.tex": "\\sysname{} is scored on \\dataset{} with \\metric{} \\cite{a}. \\hidden{}",
        "unused.sty": "\\renewcommand{\\metric}{WRONG}\n",
        "dead.tex": "\\renewcommand{\\sysname}{WRONG}\n",
    }
    assert _text(tmp_path, files) == "Obelia is scored on WikiQA with F1 [@a]."


def test_a_definition_inside_the_section_counts_from_there_on(tmp_path):
    body = "Before: \\late. \\newcommand{\\late}{Defined}After: \\late{} \\cite{a}."
    text = _text(tmp_path, {"main.tex": _doc("", body)})
    assert text == "Before: . After: Defined [@a]."


def test_macros_with_arguments_are_left_alone(tmp_path):
    preamble = (
        "\\newcommand{\\tool}[1]{Tool-#1}\n\\newcommand{\\opt}[1][x]{Opt-#1}\n"
        "\\def\\pair#1#2{#1 and #2}\n\\newcommand{\\sysname}{Obelia}"
    )
    text = _text(tmp_path, {"main.tex": _doc(preamble, "\\tool{A}, \\pair{B}{C}: \\sysname{} \\cite{a}.")})
    # The name is dropped and its arguments kept as text; the expansion would need TeX itself.
    assert text == "A, BC: Obelia [@a]."


def test_protected_names_are_never_redefined(tmp_path):
    preamble = "\\renewcommand{\\cite}{CITE}\n\\def\\section{SECTION}\n\\newcommand{\\mycite}{X}"
    section = find_related_work(write_tree(tmp_path, {"main.tex": _doc(preamble, "See \\cite{a} \\mycite{} here.")}))
    assert section is not None and section.cite_keys == ["a"]
    assert section.text == "See [@a] here."


def test_recursion_is_left_unexpanded(tmp_path):
    preamble = "\\def\\loop{\\loop x}\n\\newcommand{\\ping}{\\pong}\n\\newcommand{\\pong}{pong \\ping}"
    table = MacroTable()
    table.read(preamble)
    assert table.expand("\\loop") == "{\\loop x}"
    assert table.expand("\\ping") == "{{pong \\ping}}"
    text = _text(tmp_path, {"main.tex": _doc(preamble, "A \\loop{} and \\ping{} \\cite{a}.")})
    assert text == "A x and pong [@a]."


def test_exponential_blow_up_is_capped(caplog):
    # \ma -> "xx...", \mb -> \ma\ma, \mc -> \mb\mb, ...: 2**25 copies if nothing stopped it.
    names = ["m" + c for c in string.ascii_lowercase[:26]]
    preamble = "\\def\\" + names[0] + "{" + "x" * 50 + "}\n"
    preamble += "".join(f"\\def\\{b}{{\\{a}\\{a}}}\n" for a, b in zip(names, names[1:], strict=False))
    table = MacroTable()
    table.read(preamble)
    started = time.perf_counter()
    with caplog.at_level(logging.WARNING, logger="deepscholar.sources.latex_macros"):
        out = table.expand(f"Start \\{names[-1]} end \\{names[0]}.")
    assert time.perf_counter() - started < 5
    assert len(out) <= MAX_ADDED_CHARS + 200
    assert out.startswith("Start {{") and out.endswith(f"end \\{names[0]}.")  # later uses left as written
    assert out.count("{") <= 2 * MAX_EXPANSIONS
    assert "macro expansion stopped" in caplog.text


def test_many_uses_within_the_cap_all_expand():
    table = MacroTable()
    table.read("\\newcommand{\\sysname}{Obelia}")
    out = table.expand(" ".join(["\\sysname"] * 500))
    assert out == " ".join(["{Obelia}"] * 500)
