"""LaTeX to plain text: the cleaned-text format described in :mod:`deepscholar.sources.latex` (citation
markers, floats and labels dropped, footnotes inline, math verbatim), and its word count."""

from __future__ import annotations

import re
from functools import lru_cache

from pylatexenc.latex2text import (
    EnvironmentTextSpec,
    LatexNodes2Text,
    MacroTextSpec,
    SpecialsTextSpec,
)
from pylatexenc.latex2text import get_default_latex_context_db as _l2t_default_db
from pylatexenc.latexwalker import LatexGroupNode as _GroupNode
from pylatexenc.latexwalker import LatexWalker
from pylatexenc.latexwalker import get_default_latex_context_db as _walker_default_db
from pylatexenc.macrospec import std_environment, std_macro

from deepscholar.text.markers import CITATION_MARKER_RE, format_marker

from .latex_citations import (
    CITE_CALL_RE,
    CITE_MACROS,
    CITE_NAME_RE,
    NOT_CITATIONS,
    cite_keys_in_latex,
    split_keys,
)

__all__ = ["latex_to_text", "normalise_whitespace", "word_count"]

_FLOAT_ENVS = (
    "figure", "figure*", "table", "table*", "wrapfigure", "wraptable", "algorithm", "algorithm*",
    "SCfigure", "subfigure", "sidewaystable", "sidewaysfigure", "tabular", "tabular*", "tabularx",
    "longtable", "algorithmic", "lstlisting", "verbatim", "tikzpicture", "thebibliography",
)
_HEADING_MACROS = ("part", "chapter", "section", "subsection", "subsubsection", "paragraph", "subparagraph")
_DROP_MACROS_WALKER = {
    # name -> argspec, so the walker swallows the arguments of macros we drop entirely
    "label": "{",
    "vspace": "*{",
    "hspace": "*{",
    "setlength": "{{",
    "addtolength": "{{",
    "setcounter": "{{",
    "addtocounter": "{{",
    "renewcommand": "*{[[{",
    "newcommand": "*{[[{",
    "providecommand": "*{[[{",
    "DeclareMathOperator": "*{{",
    "definecolor": "{{{",
    "includegraphics": "*[{",
    "caption": "*[{",
    "captionof": "*{[{",
    "bibliographystyle": "{",
    "bibliography": "{",
    "addbibresource": "[{",
    "nocite": "{",
    "todo": "[{",
    "graphicspath": "{",
    "linespread": "{",
    "color": "[{",
    "pagecolor": "[{",
    "rowcolor": "[{",
    "cellcolor": "[{",
    "index": "{",
    "glsadd": "{",
    "resizebox": "*{{",
}
_REF_MACROS = ("ref", "eqref", "autoref", "Autoref", "cref", "Cref", "vref", "Vref", "pageref", "nameref",
               "cpageref", "Cpageref", "autopageref", "subref")


def _cite_repl(node, macroname=None) -> str:
    if macroname in NOT_CITATIONS:
        return ""
    args = node.nodeargd.argnlist if node.nodeargd and node.nodeargd.argnlist else []
    mandatory = [a for a in args if a is not None and a.isNodeType(_GroupNode) and a.delimiters[0] == "{"]
    if not mandatory:
        return ""
    keys: list[str] = []
    for group in mandatory:
        keys.extend(split_keys("".join(n.latex_verbatim() for n in group.nodelist)))
    return format_marker(list(dict.fromkeys(keys)))


def _heading_repl(node, l2tobj) -> str:
    args = node.nodeargd.argnlist if node.nodeargd and node.nodeargd.argnlist else []
    title = l2tobj.nodelist_to_text([args[-1]]) if args and args[-1] is not None else ""
    title = title.strip()
    return f"\n\n{title}\n\n" if title else "\n\n"


def _footnote_repl(node, l2tobj) -> str:
    args = node.nodeargd.argnlist if node.nodeargd and node.nodeargd.argnlist else []
    text = l2tobj.nodelist_to_text([args[-1]]).strip() if args and args[-1] is not None else ""
    return f" ({text})" if text else ""


def _href_repl(node, l2tobj) -> str:
    args = node.nodeargd.argnlist if node.nodeargd and node.nodeargd.argnlist else []
    if len(args) >= 2 and args[1] is not None:
        return l2tobj.nodelist_to_text([args[1]])
    return ""


def _url_repl(node) -> str:
    args = node.nodeargd.argnlist if node.nodeargd and node.nodeargd.argnlist else []
    if args and args[-1] is not None:
        return "".join(n.latex_verbatim() for n in args[-1].nodelist).replace("\\%", "%")
    return ""


@lru_cache(maxsize=64)
def _contexts(extra_cites: tuple[str, ...]):
    cite_names = tuple(dict.fromkeys((*CITE_MACROS, *extra_cites)))
    walker_db = _walker_default_db()
    walker_macros = [std_macro(name, "*[[{") for name in cite_names if not name.endswith("cites")]
    walker_macros += [std_macro(name, "[[{[[{[[{[[{") for name in cite_names if name.endswith("cites")]
    walker_macros += [std_macro(name, spec) for name, spec in _DROP_MACROS_WALKER.items()]
    walker_macros += [std_macro(name, "*{") for name in _REF_MACROS]
    walker_macros += [std_macro(name, "*[{") for name in _HEADING_MACROS]
    walker_macros += [
        std_macro("footnote", "[{"),
        std_macro("footnotetext", "[{"),
        std_macro("url", "{"),
        std_macro("href", "{{"),
        std_macro("hyperref", "[{"),
        std_macro("textcolor", "[{{"),
        std_macro("colorbox", "[{{"),
        std_macro("multicolumn", "{{{"),
        std_macro("multirow", "[{[{{"),
        std_macro("scalebox", "{[{"),
    ]
    walker_envs = [std_environment(name, "[{") for name in ("figure", "figure*", "table", "table*")]
    walker_envs += [std_environment(name, "[{{") for name in ("wrapfigure", "wraptable")]
    walker_envs += [std_environment(name, "{") for name in ("tabular", "tabularx", "minipage")]
    walker_envs += [std_environment("tabular*", "{{")]
    walker_db.add_context_category(
        "deepscholar", prepend=True, macros=walker_macros, environments=walker_envs
    )
    _speed_up_specials(walker_db)

    text_db = _l2t_default_db()
    text_macros = [MacroTextSpec(name, simplify_repl=_cite_repl) for name in cite_names]
    text_macros += [MacroTextSpec(name, discard=True) for name in _DROP_MACROS_WALKER]
    text_macros += [MacroTextSpec(name, simplify_repl="[ref]") for name in _REF_MACROS]
    text_macros += [MacroTextSpec(name, simplify_repl=_heading_repl) for name in _HEADING_MACROS]
    text_macros += [
        MacroTextSpec("footnote", simplify_repl=_footnote_repl),
        MacroTextSpec("footnotetext", simplify_repl=_footnote_repl),
        MacroTextSpec("url", simplify_repl=_url_repl),
        MacroTextSpec("href", simplify_repl=_href_repl),
        MacroTextSpec("hyperref", simplify_repl=_href_repl),
        MacroTextSpec("textcolor", simplify_repl="%(3)s"),
        MacroTextSpec("colorbox", simplify_repl="%(3)s"),
        MacroTextSpec("item", simplify_repl="\n"),
        MacroTextSpec("\\", simplify_repl="\n"),
        MacroTextSpec("xspace", discard=True),
        MacroTextSpec("maketitle", discard=True),
        MacroTextSpec("and", simplify_repl=" and "),
    ]
    text_envs = [EnvironmentTextSpec(name, discard=True) for name in _FLOAT_ENVS]
    text_specials = [SpecialsTextSpec("~", " ")]
    text_db.add_context_category(
        "deepscholar", prepend=True, macros=text_macros, environments=text_envs, specials=text_specials
    )
    return walker_db, text_db


def _speed_up_specials(db) -> None:
    """pylatexenc tries every specials string at every character; most characters start none."""
    original = db.test_for_specials
    first_chars = frozenset(spec.specials_chars[0] for spec in db.iter_specials_specs())

    def test_for_specials(s, pos, parsing_state=None):
        if pos >= len(s) or s[pos] not in first_chars:
            return None
        return original(s, pos, parsing_state=parsing_state)

    db.test_for_specials = test_for_specials


_WS_RE = re.compile(r"[ \t\r\f\v\u00a0]+")
_PARA_SPLIT_RE = re.compile(r"\n\s*\n")


def normalise_whitespace(text: str) -> str:
    """Blank-line separated paragraphs, single spaces inside them."""
    paras = []
    for para in _PARA_SPLIT_RE.split(text):
        p = _WS_RE.sub(" ", para.replace("\n", " ")).strip()
        if p:
            paras.append(p)
    return "\n\n".join(paras)


_URL_ARG_RE = re.compile(r"(\\(?:url|href|path)\s*\{)([^{}]*)(\})")


def _prepare(latex: str) -> str:
    # A URL may hold a literal %, which pylatexenc would read as a comment.
    latex = _URL_ARG_RE.sub(
        lambda m: m.group(1) + re.sub(r"(?<!\\)%", r"\\%", m.group(2)) + m.group(3), latex
    )
    # ``\"`` before a space is a mistyped closing quote (``...\"), not an umlaut on the next word.
    latex = re.sub(r'\\"(?=\s)', "''", latex)
    # ``\cite{a}`` right after a word with no space would glue the marker onto the word.
    latex = re.sub(r"(?<=[^\s~(\[])(\\[A-Za-z]*cite[A-Za-z]*(?![A-Za-z@]))", r" \1", latex)
    return latex


_PLAIN_GROUP_RE = re.compile(r"\{([^{}\\$%&#^_~]*)\}")


def _is_macro_argument(text: str, brace: int) -> bool:
    """Whether the group opening at ``brace`` follows a macro name or another argument."""
    i = brace - 1
    while i >= 0 and text[i] in " \t\n":
        i -= 1
    if i < 0:
        return False
    if text[i] in "]}^_":  # another argument, or a math super/subscript
        return True
    if text[i] == "*":
        i -= 1
    end = i
    while i >= 0 and (text[i].isalpha() or text[i] == "@"):
        i -= 1
    return i >= 0 and i < end and text[i] == "\\"


def _unwrap_plain_groups(latex: str) -> str:
    """Drop braces around plain text ({B}ERT -> BERT) unless they are a macro's argument.

    Plain text does not need case-protecting braces, and text without markup can then skip
    pylatexenc, which is slow (it tokenises character by character).
    """
    if "{" not in latex:
        return latex
    for _ in range(8):
        current = latex

        def unwrap(m: re.Match[str], text: str = current) -> str:
            return m.group(0) if _is_macro_argument(text, m.start()) else m.group(1)

        new = _PLAIN_GROUP_RE.sub(unwrap, current)
        if new == current:
            break
        latex = new
    return latex


# Anything pylatexenc would change: markup characters and TeX ligatures (-- ``).
_SPECIAL_CHARS_RE = re.compile(r"[\\{}$&~%^_#]|--|``|''|[!?]`")


# pylatexenc's time grows faster than the text (a 2 MB one-line section took 80 s): past this size the
# crude strip below is used, as for input pylatexenc cannot parse. A section under the word cap (1000
# words) is a few tens of thousands of characters, so only sections dropped as too long take this path.
_MAX_PARSED_CHARS = 100_000


def _crude_text(latex: str) -> str:
    """Commands and braces dropped; citations kept as markers, as the real conversion writes them."""
    def marker(m: re.Match[str]) -> str:
        return " " + format_marker(cite_keys_in_latex(m.group(0))) + " "

    return re.sub(r"\\[A-Za-z@]+\*?|[{}]", " ", CITE_CALL_RE.sub(marker, latex))


def latex_to_text(latex: str) -> str:
    """Plain text of a LaTeX fragment (comments must already be stripped)."""
    if not latex.strip():
        return ""
    latex = _unwrap_plain_groups(latex)
    if not _SPECIAL_CHARS_RE.search(latex):
        return normalise_whitespace(latex)
    if len(latex) > _MAX_PARSED_CHARS:
        return normalise_whitespace(_crude_text(latex))
    latex = _prepare(latex)
    extra = tuple(sorted({m for m in CITE_NAME_RE.findall(latex) if m not in CITE_MACROS}))
    walker_db, text_db = _contexts(extra)
    try:
        walker = LatexWalker(latex, latex_context=walker_db, tolerant_parsing=True)
        nodes, _, _ = walker.get_latex_nodes()
        text = LatexNodes2Text(latex_context=text_db, math_mode="verbatim").nodelist_to_text(nodes)
    except Exception:  # pylatexenc on hostile input: degrade to a crude strip, never sink a whole run
        text = _crude_text(latex)
    return normalise_whitespace(text)


_WORD_RE = re.compile(r"\w", re.UNICODE)


def word_count(text: str) -> int:
    """Words of cleaned text, not counting citation markers (they are not prose)."""
    stripped = CITATION_MARKER_RE.sub(" ", text)
    return sum(1 for tok in stripped.split() if _WORD_RE.search(tok))
