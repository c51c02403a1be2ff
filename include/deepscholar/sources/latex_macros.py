"""Expand a paper's simple user macros before its LaTeX becomes plain text.

Papers name their own system or recurring terms with macros (``\\newcommand{\\sysname}{Obelia\\xspace}``);
without expansion the cleaned related-work text silently loses those words, and with them the paper's
name. Only argument-free macros are expanded:

- ``\\newcommand``, ``\\renewcommand``, ``\\providecommand``, ``\\DeclareRobustCommand`` (starred or not,
  name braced or not, an explicit ``[0]`` allowed), and ``\\def``/``\\gdef``/``\\edef``/``\\xdef``
  without parameters;
- ``\\newcommand`` and ``\\providecommand`` keep an existing definition (as LaTeX does: the first
  refuses to redefine, the second only defines what is missing); ``\\renewcommand`` and ``\\def`` replace it.

Left alone, on purpose: macros with arguments (``[1]``, ``#1``, an optional default), whose output depends
on the call and needs a TeX engine to be right; the text keeps their arguments and drops the name.
Also left alone: names the extractor relies on (citations, headings, floats, ``\\input``), ``@``
names, and bodies over 300 characters or that define macros themselves.

Expansion is lazy (at use, like ``\\newcommand``), recursive (a body may use other macros) and guarded:
a macro met again while it is being expanded (``\\def\\a{\\a}``, or ``\\a`` → ``\\b`` → ``\\a``) stays
unexpanded, and one call stops expanding after :data:`MAX_EXPANSIONS` uses or :data:`MAX_ADDED_CHARS`
added characters, leaving the rest as written and logging a warning.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from .latex_source import brace_group_end

__all__ = ["MAX_ADDED_CHARS", "MAX_EXPANSIONS", "MacroTable"]

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
        if "\\" not in text or (not self.macros and not defining):
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
            body = self.macros.get(name)
            if body is None or name in stack or not budget.spend(len(body) + 2):
                continue
            expanded = self._expand(body, (*stack, name), budget, defining=False)
            out.append(text[pos : m.start()])
            out.append("{" + expanded + "}")
            pos = m.end()
        out.append(text[pos:])
        return "".join(out)
