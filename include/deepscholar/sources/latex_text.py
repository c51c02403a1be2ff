"""LaTeX to plain text: the cleaned-text format described in :mod:`deepscholar.sources.latex` (citation
markers, floats and labels dropped, footnotes inline, math verbatim), and its word count.

Design notes: docs/MODULE_NOTES.md, `deepscholar.sources.latex_text`.
"""

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
from .latex_macros import ACRONYM_USES, acronym_text

__all__ = ["latex_to_text", "normalise_whitespace", "word_count"]

_FLOAT_ENVS = (
    "figure", "figure*", "table", "table*", "wrapfigure", "wraptable", "algorithm", "algorithm*",
    "SCfigure", "subfigure", "sidewaystable", "sidewaysfigure", "tabular", "tabular*", "tabularx",
    "longtable", "algorithmic", "lstlisting", "verbatim", "tikzpicture", "thebibliography",
)
_HEADING_MACROS = ("part", "chapter", "section", "subsection", "subsubsection", "paragraph", "subparagraph")
# Commands whose arguments are not text (settings, names, files, lengths, definitions, notes that are not
# prose): name -> argument spec, so the walker swallows the arguments and the text drops them with the name.
_NON_TEXT_MACROS: dict[str, str] = {
    "label": "{",
    "vspace": "*{",
    "hspace": "*{",
    "setlength": "{{",
    "addtolength": "{{",
    "settowidth": "{{",
    "settoheight": "{{",
    "newlength": "{",
    "setcounter": "{{",
    "addtocounter": "{{",
    "newcounter": "{[",
    "setstretch": "{",
    "fontsize": "{{",
    "enlargethispage": "*{",
    "renewcommand": "*{[[{",
    "newcommand": "*{[[{",
    "providecommand": "*{[[{",
    "newenvironment": "*{[[{{",
    "renewenvironment": "*{[[{{",
    "newtheorem": "*{[{[",
    "theoremstyle": "{",
    "DeclareMathOperator": "*{{",
    "definecolor": "[{{{",
    "providecolor": "[{{{",
    "colorlet": "[{[{",
    "includegraphics": "*[{",
    "caption": "*[{",
    "captionof": "*{[{",
    "captionsetup": "[{",
    "documentclass": "[{",
    "usepackage": "[{",
    "RequirePackage": "[{",
    "input": "{",
    "include": "{",
    "subfile": "{",
    "bibliographystyle": "{",
    "bibliography": "{",
    "addbibresource": "[{",
    "nocite": "{",
    "todo": "[{",
    "thanks": "{",
    "graphicspath": "{",
    "linespread": "{",
    "color": "[{",
    "pagecolor": "[{",
    "rowcolor": "[{",
    "cellcolor": "[{",
    "rowcolors": "*[{{{",
    "index": "{",
    "glsadd": "[{",
    "acused": "{",
    "newacronym": "[{{{",
    "acrodef": "{[{",
    "acro": "{[{",
    "newacro": "{[{",
    "DeclareAcronym": "{{",
    "newglossaryentry": "{{",
    "hypersetup": "{",
    "urlstyle": "{",
    "selectlanguage": "{",
    "hyphenation": "{",
    "phantom": "{",
    "hphantom": "{",
    "vphantom": "{",
    "pagestyle": "{",
    "thispagestyle": "{",
    "pagenumbering": "{",
    "footnotemark": "[",
    "addcontentsline": "{{{",
    "addtocontents": "{{",
    "markboth": "{{",
    "markright": "{",
    "keywords": "{",
    "Description": "[{",
    "sbox": "{{",
    "savebox": "{[[{",
    "newsavebox": "{",
    "usebox": "{",
    "crefname": "{{{",
    "Crefname": "{{{",
    "setcitestyle": "{",
    "lstset": "{",
    "tikzset": "{",
    "pgfplotsset": "{",
    "sisetup": "{",
    "ding": "{",
}
# Commands with setting arguments and one text argument: name -> (argument spec, index of the text one).
_TEXT_ARG_MACROS: dict[str, tuple[str, int]] = {
    "textcolor": ("[{{", 2),
    "colorbox": ("[{{", 2),
    "fcolorbox": ("[{[{{", 4),
    "href": ("[{{", 2),
    "hyperref": ("[{", 1),
    "hyperlink": ("{{", 1),
    "hypertarget": ("{{", 1),
    "parbox": ("[[[{{", 4),
    "makebox": ("[[{", 2),
    "framebox": ("[[{", 2),
    "raisebox": ("{[[{", 3),
    "rotatebox": ("[{{", 2),
    "scalebox": ("{[{", 2),
    "resizebox": ("*{{{", 3),
    "foreignlanguage": ("[{{", 2),
    "multicolumn": ("{{{", 2),
    "multirow": ("[{[{{", 4),
    "texorpdfstring": ("{{", 1),  # the plain-text twin the author wrote for non-TeX readers
}
# Math font commands met in text keep their letters as they are (pylatexenc would write 𝐁𝐨𝐥𝐝 letters).
_MATH_FONT_MACROS = ("mathrm", "mathit", "mathbf", "mathsf", "mathtt", "mathnormal", "boldsymbol", "bm")
_REF_MACROS = ("ref", "eqref", "autoref", "Autoref", "cref", "Cref", "vref", "Vref", "pageref", "nameref",
               "cpageref", "Cpageref", "autopageref", "subref")


def _cite_repl(node, l2tobj, macroname=None) -> str:
    if macroname == "citetext":  # natbib's parenthetical text: words, not keys
        return _mandatory_args_repl(node, l2tobj)
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


def _mandatory_args_repl(node, l2tobj) -> str:
    """The rule for commands without a spec of their own: the text of their braced arguments."""
    argd = node.nodeargd
    if argd is None or not argd.argnlist:
        return ""
    spec = getattr(argd, "argspec", None) or ""
    out = []
    for i, arg in enumerate(argd.argnlist):
        if arg is None or (i < len(spec) and spec[i] != "{"):
            continue  # a star or an optional argument: settings, not text
        out.append(l2tobj.nodelist_to_text([arg]))
    return "".join(out)


def _text_arg_repl(index: int):
    """A replacement keeping only argument ``index`` (the text; the others are settings)."""

    def repl(node, l2tobj) -> str:
        args = node.nodeargd.argnlist if node.nodeargd and node.nodeargd.argnlist else []
        if len(args) > index and args[index] is not None:
            return l2tobj.nodelist_to_text([args[index]])
        return ""

    return repl


def _verb_repl(node) -> str:
    return getattr(node.nodeargd, "verbatim_text", "") or ""


def _enquote_repl(node, l2tobj) -> str:
    text = _mandatory_args_repl(node, l2tobj)
    return f"\u201c{text}\u201d" if text else ""


def _acronym_repl(node, l2tobj, macroname=None) -> str:
    """An acronym whose definition was not found: the key itself, in the form the command asks for."""
    key = _mandatory_args_repl(node, l2tobj).strip()
    if not key:
        return ""
    _, plural, capital = ACRONYM_USES.get(macroname or "", ("short", False, ""))
    return acronym_text(key, key, "short", plural, capital)


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
    walker_macros += [std_macro(name, spec) for name, spec in _NON_TEXT_MACROS.items()]
    walker_macros += [std_macro(name, spec) for name, (spec, _) in _TEXT_ARG_MACROS.items()]
    walker_macros += [std_macro(name, "*[{") for name in ACRONYM_USES]
    walker_macros += [std_macro(name, "{") for name in _MATH_FONT_MACROS]
    walker_macros += [std_macro(name, "*{") for name in _REF_MACROS]
    walker_macros += [std_macro(name, "*[{") for name in _HEADING_MACROS]
    walker_macros += [
        std_macro("footnote", "[{"),
        std_macro("footnotetext", "[{"),
        std_macro("url", "{"),
        std_macro("enquote", "*{"),
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
    text_macros += [MacroTextSpec(name, discard=True) for name in _NON_TEXT_MACROS]
    text_macros += [MacroTextSpec(name, simplify_repl=_text_arg_repl(i)) for name, (_, i) in _TEXT_ARG_MACROS.items()]
    text_macros += [MacroTextSpec(name, simplify_repl=_acronym_repl) for name in ACRONYM_USES]
    text_macros += [MacroTextSpec(name, simplify_repl=_mandatory_args_repl) for name in _MATH_FONT_MACROS]
    text_macros += [MacroTextSpec(name, simplify_repl="[ref]") for name in _REF_MACROS]
    text_macros += [MacroTextSpec(name, simplify_repl=_heading_repl) for name in _HEADING_MACROS]
    text_macros += [
        MacroTextSpec("footnote", simplify_repl=_footnote_repl),
        MacroTextSpec("footnotetext", simplify_repl=_footnote_repl),
        MacroTextSpec("url", simplify_repl=_url_repl),
        MacroTextSpec("verb", simplify_repl=_verb_repl),
        MacroTextSpec("enquote", simplify_repl=_enquote_repl),
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
    text_db.set_unknown_macro_spec(MacroTextSpec("", simplify_repl=_mandatory_args_repl))
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


# xspace adds a space only before a word: not before punctuation, a closing brace or the end of a line.
_XSPACE_RE = re.compile(r"\\xspace(?![A-Za-z@])[ \t]*")
_NO_XSPACE_BEFORE = frozenset(",.;:!?')]}/-~\"\n")
# Plain TeX skips take a bare length, which would otherwise be printed: \vskip -2mm, \hskip 0.5\linewidth.
_SKIP_RE = re.compile(
    r"\\[vh]skip(?![A-Za-z@])(?:\s*-?\s*(?:\d+(?:\.\d*)?|\.\d+)\s*"
    r"(?:(?:pt|mm|cm|in|em|ex|bp|pc|sp|dd|cc)(?![A-Za-z])|\\[A-Za-z@]+)?|\s*\\[A-Za-z@]+)?"
)


def _xspace(m: re.Match[str]) -> str:
    nxt = m.string[m.end() : m.end() + 1]
    return " " if nxt and nxt not in _NO_XSPACE_BEFORE else ""


def _prepare(latex: str) -> str:
    if "xspace" in latex:
        latex = _XSPACE_RE.sub(_xspace, latex)
    if "skip" in latex:
        latex = _SKIP_RE.sub(" ", latex)
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
