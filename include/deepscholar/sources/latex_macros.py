"""Expand a paper's simple user macros before its LaTeX becomes plain text.

Design notes: docs/MODULE_NOTES.md, `deepscholar.sources.latex_macros`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .latex_source import brace_group_end

__all__ = ["ACRONYM_DEFINITIONS", "ACRONYM_USES", "MAX_ADDED_CHARS", "MAX_EXPANSIONS", "MacroTable", "acronym_text"]

log = logging.getLogger(__name__)

MAX_EXPANSIONS = 2000
MAX_ADDED_CHARS = 100_000
_MAX_BODY = 300

_DEF_RE = re.compile(
    r"\\(?P<cmd>newcommand|renewcommand|providecommand|DeclareRobustCommand)\*?\s*"
    r"(?:\{\s*\\(?P<n1>[A-Za-z]+)\s*\}|\\(?P<n2>[A-Za-z]+)(?![A-Za-z@]))"
    r"\s*(?P<args>(?:\[[^\]]*\]\s*)*)\{"
    r"|\\(?P<dcmd>[gex]?def)\s*\\(?P<n3>[A-Za-z]+)(?![A-Za-z@])\s*(?P<params>[^{\\]*)\{"
)
# A control word (or a definition starting with one); control symbols (\%, \\) are never macros here.
_CONTROL_WORD_RE = re.compile(r"\\([A-Za-z]+)(?![A-Za-z@])")
_DEFINING = frozenset({"newcommand", "renewcommand", "providecommand", "DeclareRobustCommand",
                       "def", "gdef", "edef", "xdef"})
_DEFINING_IN_BODY_RE = re.compile(r"\\(?:" + "|".join(sorted(_DEFINING)) + r")(?![A-Za-z@])")
# Never expanded over: names whose meaning the extractor relies on (citations, headings, floats, files).
PROTECTED = frozenset({
    "cite", "label", "ref", "footnote", "url", "href", "item", "caption", "input", "include",
    "part", "chapter", "section", "subsection", "subsubsection", "paragraph", "subparagraph",
    "begin", "end", "appendix", "bibliography", "bibliographystyle", "printbibliography",
    "documentclass", "usepackage", "endinput", "iffalse", "fi", "else", "xspace",
})


def _acronym_uses() -> dict[str, tuple[str, bool, str]]:
    """Acronym uses: command -> (form printed, plural, capitalisation).

    Forms: "short", "long", "full" ("long (short)"); capitalisation: "", "first" (``\\Ac``), "all" (``\\GLS``).
    """
    uses: dict[str, tuple[str, bool, str]] = {}
    for base, form in (("ac", "short"), ("acs", "short"), ("acl", "long"), ("acf", "full")):  # acronym, acro
        for plural in (False, True):
            name = base + ("p" if plural else "")
            uses[name] = (form, plural, "")
            uses[name.capitalize()] = (form, plural, "first")
    uses.update({"acsu": ("short", False, ""), "aclu": ("long", False, ""), "acfi": ("full", False, "")})
    for base, form in (("gls", "short"), ("acrshort", "short"), ("acrlong", "long"), ("acrfull", "full"),
                       ("glsxtrshort", "short"), ("glsxtrlong", "long"), ("glsxtrfull", "full")):  # glossaries
        for plural in (False, True):
            name = base + ("pl" if plural else "")
            uses[name] = (form, plural, "")
            uses[name.capitalize()] = (form, plural, "first")
            uses[name[:3].upper() + name[3:]] = (form, plural, "all")  # \GLS, \ACRshort
    for name, form in (("glstext", "short"), ("glsentryshort", "short"), ("glsentrylong", "long")):
        uses[name] = (form, False, "")
        uses[name.capitalize()] = (form, False, "first")
    return uses


ACRONYM_USES = _acronym_uses()
# Definitions: command -> argument spec ("[" optional, "{" braced), as :func:`_call_args` reads them.
ACRONYM_DEFINITIONS: dict[str, str] = {
    "newacronym": "[{{{", "acrodef": "{[{", "acro": "{[{", "newacro": "{[{", "DeclareAcronym": "{{",
    "newglossaryentry": "{{",
}


def acronym_text(short: str, long: str, form: str, plural: bool, capital: str) -> str:
    """What an acronym use prints (plurals add "s", as the packages do by default)."""
    s, lng = (short + "s", long + "s") if plural else (short, long)
    text = s if form == "short" else lng if form == "long" else f"{lng} ({s})"
    if capital == "all" and "\\" not in text:
        return text.upper()
    if capital and text[:1].isalpha():
        return text[:1].upper() + text[1:]
    return text


def _bracket_end(text: str, open_pos: int) -> int | None:
    """Index just past the ``]`` closing the optional argument that opens at ``open_pos``."""
    depth = 0
    for i in range(open_pos + 1, len(text)):
        c = text[i]
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth < 0:
                return None
        elif c == "]" and depth == 0:
            return i + 1
    return None


def _call_args(text: str, pos: int, spec: str) -> tuple[list[str | None], int] | None:
    """Arguments of the command whose name ends at ``pos``: ``*`` a star, ``[`` optional, ``{`` braced."""
    out: list[str | None] = []
    n = len(text)
    for kind in spec:
        j = pos
        while j < n and text[j] in " \t\n":
            j += 1
        if kind == "*" or kind == "[":
            opener = "*" if kind == "*" else "["
            if j >= n or text[j] != opener:
                out.append(None)
                continue
            close = j + 1 if kind == "*" else _bracket_end(text, j)
            if close is None:
                return None
            out.append(text[j + 1 : close - 1] if kind == "[" else "*")
            pos = close
            continue
        if j >= n or text[j] != "{":
            return None
        close = brace_group_end(text, j)
        if close is None:
            return None
        out.append(text[j + 1 : close - 1])
        pos = close
    return out, pos


def _key_values(text: str) -> dict[str, str]:
    """``short = CNN, long = {a, b}`` -> {"short": "CNN", "long": "a, b"} (commas inside braces kept)."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, c in enumerate(text):
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
        elif c == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    out: dict[str, str] = {}
    for part in parts:
        key, eq, value = part.partition("=")
        value = value.strip()
        if eq and value.startswith("{") and brace_group_end(value, 0) == len(value):
            value = value[1:-1].strip()
        if eq:
            out.setdefault(key.strip(), value)
    return out


def _acronym_definition(name: str, args: list[str | None]) -> tuple[str, str, str] | None:
    """(key, short, long) defined by a call of ``name`` with ``args``; None if it defines nothing usable."""
    if name == "newacronym":
        key, short, long = args[1], args[2], args[3]
    elif name == "DeclareAcronym":
        values = _key_values(args[1] or "")
        key, short, long = args[0], values.get("short"), values.get("long")
    elif name == "newglossaryentry":
        values = _key_values(args[1] or "")
        key = args[0]
        short = long = values.get("text") or values.get("name")
    else:  # \acrodef{key}[short]{long}: the short form defaults to the key
        key, short, long = args[0], args[1], args[2]
        short = key if short is None else short
    if key is None or short is None:
        return None
    key = key.strip()
    if not key or len(short) > _MAX_BODY or len(long or "") > _MAX_BODY:
        return None
    return key, short.strip(), (long if long is not None else short).strip()


_ACRONYM_DEF_RE = re.compile(r"\\(" + "|".join(sorted(ACRONYM_DEFINITIONS)) + r")(?![A-Za-z@])")


@dataclass
class _Budget:
    expansions: int = 0
    added: int = 0
    exhausted: bool = False

    def spend(self, chars: int) -> bool:
        if self.exhausted or self.expansions >= MAX_EXPANSIONS or self.added + chars > MAX_ADDED_CHARS:
            self.exhausted = True
            return False
        self.expansions += 1
        self.added += chars
        return True


@dataclass
class MacroTable:
    """Argument-free macro definitions, read from LaTeX in the order TeX would meet them."""

    macros: dict[str, str] = field(default_factory=dict)
    # key -> (short, long) of acronyms and glossary entries
    acronyms: dict[str, tuple[str, str]] = field(default_factory=dict)

    @classmethod
    def from_sources(cls, sources: Iterable[str]) -> MacroTable:
        table = cls()
        for live in sources:
            table.read(live)
        return table

    def read(self, live: str) -> None:
        """Record every definition in comment-free LaTeX (a preamble, a package, an input file)."""
        for m in _DEF_RE.finditer(live):
            self._define(live, m)
        if "\\" in live:
            for m in _ACRONYM_DEF_RE.finditer(live):
                self._define_acronym(live, m.group(1), m.end())

    def expand(self, live: str) -> str:
        """``live`` with each use of a known macro replaced by ``{body}``, bodies expanded in turn.

        Definitions met along the way count from there on, as in TeX; their own text is kept.
        """
        budget = _Budget()
        out = self._expand(live, (), budget, defining=True)
        if budget.exhausted:
            log.warning("macro expansion stopped after %d expansions (%d characters added); "
                        "later uses are left as written", budget.expansions, budget.added)
        return out

    # ----------------------------------------------------------------------------------------------
    def _define(self, live: str, m: re.Match[str]) -> int:
        """Record the definition at ``m``; return where it ends (just past its body)."""
        close = brace_group_end(live, m.end() - 1)
        if close is None:
            return m.end()
        name = m.group("n1") or m.group("n2") or m.group("n3")
        body = live[m.end() : close - 1]
        cmd = m.group("cmd") or m.group("dcmd")
        if not self._is_simple(m, name, body):
            return close
        if cmd in ("newcommand", "providecommand") and name in self.macros:
            return close
        self.macros[name] = body
        return close

    def _define_acronym(self, text: str, name: str, pos: int) -> int:
        """Record the acronym defined by ``name`` whose name ends at ``pos``; return where the call ends."""
        call = _call_args(text, pos, ACRONYM_DEFINITIONS[name])
        if call is None:
            return pos
        args, end = call
        found = _acronym_definition(name, args)
        if found is not None:
            key, short, long = found
            self.acronyms.setdefault(key, (short, long))
        return end

    def _acronym_use(
        self, text: str, name: str, pos: int, stack: tuple[str, ...], budget: _Budget
    ) -> tuple[str, int] | None:
        """``(text it prints, end of the call)`` for a use of a known acronym at ``pos``; else None."""
        call = _call_args(text, pos, "*[{")
        if call is None:
            return None
        args, end = call
        key = (args[2] or "").strip()
        entry = self.acronyms.get(key)
        marker = "ac:" + key
        if entry is None or marker in stack:
            return None
        form, plural, capital = ACRONYM_USES[name]
        printed = acronym_text(entry[0], entry[1], form, plural, capital)
        if not budget.spend(len(printed) + 2):
            return None
        return self._expand(printed, (*stack, marker), budget, defining=False), end

    @staticmethod
    def _is_simple(m: re.Match[str], name: str, body: str) -> bool:
        if m.group("dcmd"):
            if m.group("params").strip():  # \def\x#1{...}: takes arguments
                return False
        else:
            args = re.findall(r"\[([^\]]*)\]", m.group("args") or "")
            if args and (len(args) > 1 or args[0].strip() != "0"):
                return False
        if name in PROTECTED or "cite" in name.lower():
            return False
        return len(body) <= _MAX_BODY and "#" not in body and not _DEFINING_IN_BODY_RE.search(body)

    def _expand(self, text: str, stack: tuple[str, ...], budget: _Budget, *, defining: bool) -> str:
        if "\\" not in text or (not self.macros and not self.acronyms and not defining):
            return text
        out: list[str] = []
        pos = 0
        for m in _CONTROL_WORD_RE.finditer(text):
            if m.start() < pos:  # inside a definition already copied
                continue
            name = m.group(1)
            if name in _DEFINING:
                d = _DEF_RE.match(text, m.start())
                if d is not None:
                    end = self._define(text, d) if defining else (brace_group_end(text, d.end() - 1) or d.end())
                    out.append(text[pos:end])
                    pos = end
                continue
            if name in ACRONYM_DEFINITIONS:
                if defining:
                    end = self._define_acronym(text, name, m.end())
                    out.append(text[pos:end])
                    pos = end
                continue
            if name in ACRONYM_USES and self.acronyms:
                use = self._acronym_use(text, name, m.end(), stack, budget)
                if use is not None:
                    out.append(text[pos : m.start()])
                    out.append("{" + use[0] + "}")
                    pos = use[1]
                    continue
            body = self.macros.get(name)
            if body is None or name in stack or not budget.spend(len(body) + 2):
                continue
            expanded = self._expand(body, (*stack, name), budget, defining=False)
            out.append(text[pos : m.start()])
            out.append("{" + expanded + "}")
            pos = m.end()
        out.append(text[pos:])
        return "".join(out)
