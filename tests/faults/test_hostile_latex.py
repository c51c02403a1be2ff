"""Pathological LaTeX and bibliographies: bounded work, then a section (or None) and a partial parse.

Each case runs the real section finder and bibliography parser in a forked child with a generous time
limit (the parent never hangs, and a crash of the child is reported as such). Typical runs take well under
a second; before the fixes a 2 MB one-line section took 80 s in pylatexenc, and NUL bytes in a source
reached PostgreSQL, which refuses them.
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from pathlib import Path

import pytest

from deepscholar.sources.bibliography import parse_bibliography
from deepscholar.sources.latex import find_related_work

pytestmark = pytest.mark.slow  # megabytes of pathological LaTeX per case

LIMIT_SECONDS = 30  # generous: every case finishes in well under a second on 2 cores

HEAD = "\\documentclass{article}\n\\begin{document}\n\\section{Introduction}\nIntro.\n\\section{Related Work}\n"
TAIL = "\n\\bibliography{refs}\n\\section{Method}\nM.\n\\end{document}\n"
BIB = "@article{a, title={Paper A}, year=2020}\n@article{b, title={Paper B}, year=2021}\n"


def doc(body: str, preamble: str = "") -> str:
    return HEAD.replace("\\begin{document}", preamble + "\\begin{document}") + body + TAIL


def _chain(n: int) -> str:
    return "\\def\\m0{x}\n" + "".join(f"\\def\\m{i}{{\\m{i - 1}\\m{i - 1}}}\n" for i in range(1, n))


# (project files, expected cite keys of the section (None: no section), expected bibliography keys subset,
#  minimum number of bibliography entries)
LATEX_CASES = [
    pytest.param({"main.tex": doc("Prior work \\cite{a} " + "{" * 10_000 + "x" + "}" * 10_000 + " more.")},
                 ["a"], {"a"}, 2, id="brace-nesting-10k-levels"),
    pytest.param({"main.tex": doc("Prior work \\cite{a} " + "{" * 10_000 + "x")}, ["a"], {"a"}, 2,
                 id="brace-nesting-10k-never-closed"),
    pytest.param({"main.tex": doc("See \\cite{a}. \\input{main}")}, ["a"], {"a"}, 2, id="input-self"),
    pytest.param({"main.tex": doc("\\input{a}"), "a.tex": "A \\cite{a}. \\input{b}\n", "b.tex": "B \\cite{b}. \\input{a}\n"},
                 ["a", "b"], {"a", "b"}, 2, id="input-cycle-a-b-a"),
    pytest.param({"main.tex": doc("\\input{f0}"),
                  **{f"f{i}.tex": f"part {i} \\cite{{a}} \\input{{f{i + 1}}}\n" for i in range(2000)}},
                 ["a"], {"a"}, 2, id="input-chain-2000-files"),
    pytest.param({"main.tex": doc("We \\a{} and \\b{} cite \\cite{a}.", "\\def\\a{\\a\\a}\n\\newcommand{\\b}{\\b x}\n")},
                 ["a"], {"a"}, 2, id="def-self-recursion"),
    pytest.param({"main.tex": doc("Use \\m9999{} \\cite{a}.", _chain(10_000))}, ["a"], {"a"}, 2,
                 id="def-chain-10k-doubling"),
    pytest.param({"main.tex": doc("\\x{} \\cite{a}.", "\\newcommand{\\x}{\\y}\n\\newcommand{\\y}{\\x}\n")},
                 ["a"], {"a"}, 2, id="newcommand-mutual-recursion"),
    pytest.param({"main.tex": doc("word " * 400_000 + "\\cite{a}")}, ["a"], {"a"}, 2, id="section-one-line-2MB"),
    pytest.param({"main.tex": doc("\\textbf{w} " * 100_000 + "\\cite{a}")}, ["a"], {"a"}, 2,
                 id="section-one-line-100k-macros"),
    pytest.param({"main.tex": doc("Prior \\cite{a}.", "%" + "x" * 5_000_000 + "\n\\newcommand{\\foo}{"
                                  + "y" * 3_000_000 + "}\n")}, ["a"], {"a"}, 2, id="preamble-lines-of-5MB-and-3MB"),
    pytest.param({"main.tex": doc("Prior \\cite{k0,k9999}."), "refs.bib": "".join(
        f"@article{{k{i},\n  title={{Title {i} with {{Nested}} braces}},\n  author={{A. Author and B. Author}},\n"
        f"  year={{2020}},\n}}\n" for i in range(10_000))}, ["k0", "k9999"], {"k0", "k9999"}, 10_000,
        id="bib-10k-entries"),
    pytest.param({"main.tex": doc("Prior \\cite{a,b}."), "refs.bib": "@article{a, title={Good}, year=2020}\n"
                  "@article{x, title={Never closed " + "{" * 5000 + "\n@article{b, title={After}}\n"},
                 ["a", "b"], {"a"}, 1, id="bib-unclosed-braces"),
    pytest.param({"main.tex": doc("Prior \\cite{a,b}."), "refs.bib": os.urandom(200_000)}, ["a", "b"], set(), 0,
                 id="bib-binary-junk"),
    pytest.param({"main.tex": doc("Prior \\cite{a,b}."),
                  "refs.bib": b"@article{a, title={Good}}\n" + os.urandom(50_000) + b"\n@article{b, title={Also}}\n"},
                 ["a", "b"], {"a"}, 1, id="bib-binary-junk-between-entries"),
    pytest.param({"main.tex": doc("Prior \\cite{a,b}."), "refs.bib": "@article{a, title={" + "{" * 10_000 + "x"
                  + "}" * 10_000 + "}}\n@article{b, title={Fine}}\n"}, ["a", "b"], {"a", "b"}, 2,
                 id="bib-brace-nesting-10k"),
    pytest.param({"main.tex": doc("Prior \\cite{a,b}."), "refs.bib": "@article{a, title={" + "word " * 400_000
                  + "}}\n@article{b, title={Fine}}\n"}, ["a", "b"], {"a", "b"}, 2, id="bib-field-one-line-2MB"),
    pytest.param({"main.tex": doc("Prior \\cite{a,b}."),
                  "refs.bib": b"@article{a, title={Nul\x00 in \x00title}, author={M\xfcller, A.}}\n@article{b, title={Paper B}}\n"},
                 ["a", "b"], {"a", "b"}, 2, id="bib-nul-and-latin-1-bytes"),
    pytest.param({"main.tex": doc("Prior \\cite{k0,k9999}.").replace("\\bibliography{refs}", ""),
                  "main.bbl": "\\begin{thebibliography}{9}\n" + "".join(
                      f"\\bibitem{{k{i}}} A. Author. Title {i}. 2020.\n" for i in range(10_000))
                  + "\\end{thebibliography}\n"}, ["k0", "k9999"], {"k0", "k9999"}, 10_000, id="bbl-10k-bibitems"),
]


def _parse(project: Path, conn) -> None:
    try:
        section = find_related_work(project)
        bib = parse_bibliography(project, section.main_tex if section else "main.tex")
        conn.send({"keys": section.cite_keys if section else None, "text": section.text if section else "",
                   "bib": {k: (e.title or "") for k, e in bib.items()}})
    except BaseException:
        conn.send({"crash": traceback.format_exc()})


def parse_in_child(project: Path) -> dict:
    ctx = multiprocessing.get_context("fork")  # inherits the imports: no start-up cost
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_parse, args=(project, child), daemon=True)
    proc.start()
    child.close()
    try:
        if not parent.poll(LIMIT_SECONDS):
            raise AssertionError(f"no answer within {LIMIT_SECONDS} s: the parser hangs on this input")
        return parent.recv()
    finally:
        proc.kill()
        proc.join()


@pytest.mark.parametrize(("files", "cite_keys", "bib_keys", "min_entries"), LATEX_CASES)
def test_pathological_latex_is_bounded_and_parsed(tmp_path, files, cite_keys, bib_keys, min_entries):
    files = {"refs.bib": BIB, **files}
    for name, content in files.items():
        (tmp_path / name).write_bytes(content if isinstance(content, bytes) else content.encode())
    result = parse_in_child(tmp_path)
    assert "crash" not in result, result.get("crash")
    assert result["keys"] == cite_keys
    assert bib_keys <= set(result["bib"]) and len(result["bib"]) >= min_entries, sorted(result["bib"])[:10]
    # Nothing PostgreSQL refuses reaches the release rows (text columns reject NUL).
    assert "\x00" not in result["text"] and not any("\x00" in k + t for k, t in result["bib"].items())
