"""Commands whose argument is printed text keep their words in the cleaned text, while settings, names,
lengths and files never leak into it (sources/latex_text.py, "Which arguments are text"; acronyms:
sources/latex_macros.py)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from support.files import write_tree

from deepscholar.sources.latex import find_related_work
from deepscholar.sources.latex_macros import MacroTable
from deepscholar.sources.latex_text import latex_to_text

# (command as written, words that must survive). "Quokka" is a word no command name or setting contains.
TEXT_COMMANDS = [
    ("\\textrm{Quokka}", "Quokka"),
    ("\\textsf{Quokka}", "Quokka"),
    ("\\texttt{Quokka}", "Quokka"),
    ("\\textmd{Quokka}", "Quokka"),
    ("\\textbf{Quokka}", "Quokka"),
    ("\\textup{Quokka}", "Quokka"),
    ("\\textit{Quokka}", "Quokka"),
    ("\\textsl{Quokka}", "Quokka"),
    ("\\textsc{Quokka}", "Quokka"),
    ("\\textnormal{Quokka}", "Quokka"),
    ("\\emph{Quokka}", "Quokka"),
    ("\\underline{Quokka}", "Quokka"),
    ("\\uline{Quokka}", "Quokka"),
    ("\\sout{Quokka}", "Quokka"),
    ("\\hl{Quokka}", "Quokka"),
    ("\\text{Quokka}", "Quokka"),
    ("\\textsuperscript{Quokka}", "Quokka"),
    ("\\textsubscript{Quokka}", "Quokka"),
    ("\\mathrm{Quokka}", "Quokka"),
    ("\\mathit{Quokka}", "Quokka"),
    ("\\mathbf{Quokka}", "Quokka"),
    ("\\mathsf{Quokka}", "Quokka"),
    ("\\mathtt{Quokka}", "Quokka"),
    ("\\ensuremath{Quokka}", "Quokka"),
    ("{\\bf Quokka}", "Quokka"),
    ("{\\tt Quokka}", "Quokka"),
    ("{\\itshape Quokka}", "Quokka"),
    ("{\\sffamily Quokka}", "Quokka"),
    ("{\\small Quokka}", "Quokka"),
    ("\\small{Quokka}", "Quokka"),
    ("\\mbox{Quokka}", "Quokka"),
    ("\\hbox{Quokka}", "Quokka"),
    ("\\fbox{Quokka}", "Quokka"),
    ("\\makebox{Quokka}", "Quokka"),
    ("\\makebox[3cm][l]{Quokka}", "Quokka"),
    ("\\framebox[3cm]{Quokka}", "Quokka"),
    ("\\parbox{3cm}{Quokka}", "Quokka"),
    ("\\parbox[t]{0.5\\linewidth}{Quokka}", "Quokka"),
    ("\\raisebox{2pt}{Quokka}", "Quokka"),
    ("\\scalebox{0.9}{Quokka}", "Quokka"),
    ("\\rotatebox{90}{Quokka}", "Quokka"),
    ("\\resizebox{3cm}{!}{Quokka}", "Quokka"),
    ("\\textcolor{red}{Quokka}", "Quokka"),
    ("\\textcolor[rgb]{0.8,0,0}{Quokka}", "Quokka"),
    ("\\colorbox{yellow}{Quokka}", "Quokka"),
    ("\\fcolorbox{black}{yellow}{Quokka}", "Quokka"),
    ("\\href{https://example.org/page}{Quokka}", "Quokka"),
    ("\\hyperref[sec:method]{Quokka}", "Quokka"),
    ("\\hyperlink{target}{Quokka}", "Quokka"),
    ("\\enquote{Quokka}", "\u201cQuokka\u201d"),
    ("\\foreignlanguage{ngerman}{Quokka}", "Quokka"),
    ("\\verb|Quokka|", "Quokka"),
    ("\\url{https://quokka.example.org/x}", "https://quokka.example.org/x"),
    ("\\nolinkurl{quokka.example.org}", "quokka.example.org"),
    ("\\footnote{Quokka}", "(Quokka)"),
    ("\\citetext{Quokka}", "Quokka"),
    ("\\protect\\textsf{Quokka}", "Quokka"),
    ("\\textsf {Quokka}", "Quokka"),
    ("\\textbf{\\textsf{Quokka}}", "Quokka"),
    ("\\mbox{\\texttt{Quokka}}", "Quokka"),
    ("\\someunknownmacro{Quokka}", "Quokka"),
    ("\\ac{Quokka}", "Quokka"),
    ("\\gls{Quokka}", "Quokka"),
]

# Settings that must not show up in the text: colour names, widths, URLs behind link text, languages.
SETTINGS = ("red", "rgb", "yellow", "black", "3cm", "2pt", "0.9", "90", "linewidth", "example.org/page",
            "sec:method", "target", "ngerman", "0.8")


def _around(latex: str) -> str:
    return latex_to_text(f"Before {latex} after \\cite{{k}}.")


@pytest.mark.parametrize(("latex", "kept"), TEXT_COMMANDS, ids=[c for c, _ in TEXT_COMMANDS])
def test_text_commands_keep_their_words(latex, kept):
    text = _around(latex)
    assert kept in text
    assert text.startswith("Before ") and text.endswith(" after [@k].")
    leaked = [s for s in SETTINGS if s in text and s not in kept]
    assert not leaked, text


def test_the_table_covers_at_least_forty_commands():
    names = {re.findall(r"\\([A-Za-z]+)", c)[0] for c, _ in TEXT_COMMANDS}
    assert len(names) >= 40


# (command as written, what must not leak). Each is dropped whole: no word of it is printed.
NON_TEXT_COMMANDS = [
    ("\\label{sec:quokka}", "quokka"),
    ("\\vspace{-2mm}", "2mm"),
    ("\\vspace*{3pt}", "3pt"),
    ("\\hspace{1em}", "1em"),
    ("\\vskip -2mm", "2mm"),
    ("\\hskip 0.5\\linewidth", "0.5"),
    ("\\setlength{\\tabcolsep}{4pt}", "4pt"),
    ("\\addtolength{\\textwidth}{1cm}", "1cm"),
    ("\\color{quokkared}", "quokkared"),
    ("\\definecolor{quokkared}{RGB}{200,0,0}", "quokkared"),
    ("\\includegraphics[width=\\linewidth]{figs/quokka.pdf}", "quokka"),
    ("\\input{sections/quokka}", "quokka"),
    ("\\include{quokka}", "quokka"),
    ("\\bibliography{quokka}", "quokka"),
    ("\\bibliographystyle{quokka}", "quokka"),
    ("\\usepackage[utf8]{quokka}", "quokka"),
    ("\\documentclass[10pt]{quokka}", "quokka"),
    ("\\newcommand{\\qk}{Quokka}", "Quokka"),
    ("\\todo{Quokka}", "Quokka"),
    ("\\thanks{Quokka}", "Quokka"),
    ("\\index{quokka}", "quokka"),
    ("\\hyphenation{quok-ka}", "quok"),
    ("\\phantom{Quokka}", "Quokka"),
    ("\\selectlanguage{quokkish}", "quokkish"),
    ("\\newacronym{qk}{QK}{Quokka}", "Quokka"),
    ("\\acrodef{QK}{Quokka}", "Quokka"),
    ("\\nocite{quokka}", "quokka"),
]


@pytest.mark.parametrize(("latex", "hidden"), NON_TEXT_COMMANDS, ids=[c for c, _ in NON_TEXT_COMMANDS])
def test_non_text_arguments_do_not_leak(latex, hidden):
    assert _around(latex) == "Before after [@k]."
    assert hidden not in _around(latex)


@pytest.mark.parametrize(("latex", "expected"), [
    ("\\ref{sec:quokka}", "[ref]"),
    ("\\eqref{eq:quokka}", "[ref]"),
    ("\\autoref{quokka}", "[ref]"),
    ("\\cref{quokka}", "[ref]"),
    ("\\Cref{quokka}", "[ref]"),
    ("\\pageref{quokka}", "[ref]"),
    ("\\cite{quokka}", "[@quokka]"),
    ("\\citep[see][p.~3]{a,b}", "[@a; @b]"),
    ("\\citet*{a}", "[@a]"),
    ("\\citeauthor{a}", "[@a]"),
    ("\\parencite[p.~2]{a}", "[@a]"),
    ("\\textcite{a}", "[@a]"),
    ("\\citetext{see \\citealp{a}}", "see [@a]"),
])
def test_references_and_citations_still_behave(latex, expected):
    assert _around(latex) == f"Before {expected} after [@k]."


def test_xspace_prints_only_the_space_before_a_word():
    assert latex_to_text("Obelia\\xspace is fast.") == "Obelia is fast."
    assert latex_to_text("Obelia\\xspace, then Ours\\xspace.") == "Obelia, then Ours."
    assert latex_to_text("{Obelia\\xspace} is {Obelia\\xspace}{}.") == "Obelia is Obelia."


def test_math_stays_verbatim_and_headings_keep_their_words():
    assert latex_to_text("with $\\mathbf{x} = \\texttt{y}$ here") == "with $\\mathbf{x} = \\texttt{y}$ here"
    assert latex_to_text("\\paragraph{\\textsf{Quokka} models.} Text.") == "Quokka models.\n\nText."


def test_acronyms_defined_in_the_source_print_their_forms():
    table = MacroTable()
    table.read(
        "\\newacronym{cnn}{CNN}{convolutional neural network}\n"
        "\\acrodef{GAN}{generative adversarial network}\n"
        "\\DeclareAcronym{llm}{short = LLM, long = {large language model}, tag = x}\n"
        "\\newglossaryentry{quokka}{name={quokka}, description={a small marsupial}}\n"
    )
    body = (
        "\\gls{cnn}, \\glspl{cnn}, \\Glsxtrlong{cnn}, \\acrfull{cnn}; \\ac{GAN}, \\acl{GAN}, \\acf{GAN}, "
        "\\acp{GAN}; \\ac{llm}, \\Acl{llm}, \\aclp{llm}; \\Gls{quokka}; \\ac{RL}, \\acp{RL}. "
        "\\begin{acronym}\\acro{RL}{reinforcement learning}\\end{acronym} \\acl{RL}."
    )
    assert latex_to_text(table.expand(body)) == (
        "CNN, CNNs, Convolutional neural network, convolutional neural network (CNN); GAN, "
        "generative adversarial network, generative adversarial network (GAN), GANs; LLM, Large language "
        "model, large language models; Quokka; RL, RLs. reinforcement learning."
    )


def _doc(preamble: str, body: str) -> str:
    return ("\\documentclass{article}\n" + preamble + "\n\\begin{document}\n\\section{Introduction} Hi.\n"
            + body + "\n\\section{Method} M.\n\\end{document}\n")


def test_paper_with_its_name_in_a_text_command_defined_in_an_input_file(tmp_path: Path):
    files = {
        "main.tex": _doc(
            "\\usepackage{xspace,xcolor,hyperref}\n\\input{defs}",
            "\\input{sections/related}",
        ),
        "defs.tex": (
            "\\newcommand{\\sysname}{\\textsf{Name}\\xspace}\n"
            "\\newcommand{\\tool}{\\texttt{FooNet}}\n"
            "\\newacronym{rag}{RAG}{retrieval-augmented generation}\n"
        ),
        "sections/related.tex": (
            "\\section{Related Work}\\label{sec:rw}\n"
            "\\vspace{-1mm}\n"
            "Unlike \\tool{} \\cite{a}, \\sysname is trained online; \\sysname, like \\mbox{\\textup{Obelia}} "
            "and \\textmd{Coral} \\citep{b}, uses \\acf{rag} (see Section~\\ref{sec:m}).\n\n"
            "\\textcolor{blue}{\\sysname{}} builds on \\href{https://x.org}{prior systems}\\footnote{See "
            "\\url{https://x.org/a}.}.\n"
        ),
    }
    section = find_related_work(write_tree(tmp_path, files))
    assert section is not None
    assert section.cite_keys == ["a", "b"]
    assert section.text == (
        "Unlike FooNet [@a], Name is trained online; Name, like Obelia and Coral [@b], uses "
        "retrieval-augmented generation (RAG) (see Section [ref]).\n\n"
        "Name builds on prior systems (See https://x.org/a.)."
    )
    assert "Name" in section.text
