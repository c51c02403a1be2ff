"""Reading TeX files as LaTeX would: decoding, dropping what it never reads (comments, ``\\iffalse``,
comment environments) with a map back to the original text, and matching brace groups."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["StrippedText", "brace_group_end", "read_tex", "strip_comments"]

_MAX_TEX_BYTES = 20_000_000


def read_tex(path: Path) -> str:
    """Decode a TeX file: UTF-8 first, then cp1252 (``ansinew``) as old sources often are."""
    data = path.read_bytes()[:_MAX_TEX_BYTES]
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            text = data.decode(encoding)
            break
        except UnicodeDecodeError:
            continue
    else:
        text = data.decode("latin-1")
    # NUL is an ignored character to TeX (catcode 9) and PostgreSQL text and jsonb refuse it: a stray one
    # in a source used to make storing the paper's section fail and stop the whole extraction step.
    return text.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")


# Every construct starts with a backslash or a percent sign; leading with that character class lets
# the regex engine skip plain text quickly.
_SCAN_RE = re.compile(
    r"""
    [\\%]
    (?:
      (?<=\\)
      (?: (?P<env>begin\s*\{(?P<envname>comment|verbatim\*?|Verbatim\*?|lstlisting|minted)\})
        | (?P<iffalse>iffalse(?![A-Za-z@]))
        | (?P<url>(?:url|path|href)\s*\{[^{}\n]*\})
        | (?P<verb>verb\*?(?P<vdelim>[^A-Za-z\s*])[^\n]*?(?P=vdelim))
        | (?P<esc>[\\%])
      )
    | (?<=%)(?P<comment>[^\n]*+(?:\n[ \t]*+(?!\n))?)
    )
    """,
    re.VERBOSE | re.DOTALL,
)
_IF_SCAN_RE = re.compile(
    r"\\(?:(?P<if>if(?!f(?![A-Za-z@]))[A-Za-z@]*)|(?P<fi>fi)|(?P<else>else))(?![A-Za-z@])|\\.|%[^\n]*",
    re.DOTALL,
)


@dataclass
class StrippedText:
    """Text with comments removed, plus a map back to positions in the original."""

    raw: str
    live: str
    _live_starts: list[int] = field(default_factory=list, repr=False)
    _raw_starts: list[int] = field(default_factory=list, repr=False)

    def raw_pos(self, live_pos: int) -> int:
        i = bisect.bisect_right(self._live_starts, live_pos) - 1
        if i < 0:
            return live_pos
        return self._raw_starts[i] + (live_pos - self._live_starts[i])


def strip_comments(raw: str) -> StrippedText:
    """Drop what LaTeX never reads: ``%`` comments (not ``\\%``), comment environments, ``\\iffalse``.

    A ``%`` comment also eats its line end (as in TeX) unless the next line is blank, so paragraph
    breaks survive. Verbatim-like environments, ``\\verb`` and URLs are skipped so a ``%`` in them is
    not taken as a comment.
    """
    cuts: list[tuple[int, int]] = []
    pos = 0
    n = len(raw)
    while pos < n:
        m = _SCAN_RE.search(raw, pos)
        if m is None:
            break
        if m.group("env") is not None:
            name = m.group("envname")
            end_re = re.compile(r"\\end\s*\{" + re.escape(name) + r"\}")
            e = end_re.search(raw, m.end())
            stop = e.end() if e else n
            if name == "comment":
                cuts.append((m.start(), stop))
            pos = stop
            continue
        if m.group("iffalse") is not None:
            stop, else_at = _match_fi(raw, m.end())
            if else_at is not None:
                cuts.append((m.start(), else_at))
            else:
                cuts.append((m.start(), stop))
            pos = else_at if else_at is not None else stop
            continue
        if m.group("comment") is not None:
            cuts.append((m.start(), m.end()))
        pos = m.end()

    live_parts: list[str] = []
    live_starts: list[int] = []
    raw_starts: list[int] = []
    prev = 0
    live_len = 0
    for start, end in cuts:
        if start > prev:
            live_starts.append(live_len)
            raw_starts.append(prev)
            live_parts.append(raw[prev:start])
            live_len += start - prev
        prev = max(prev, end)
    live_starts.append(live_len)
    raw_starts.append(prev)
    live_parts.append(raw[prev:])
    return StrippedText(raw=raw, live="".join(live_parts), _live_starts=live_starts, _raw_starts=raw_starts)


def _match_fi(text: str, pos: int) -> tuple[int, int | None]:
    """End of an ``\\iffalse`` block; also where its ``\\else`` branch (which is live) starts."""
    depth = 1
    for m in _IF_SCAN_RE.finditer(text, pos):
        if m.group("if"):
            depth += 1
        elif m.group("fi"):
            depth -= 1
            if depth == 0:
                return m.end(), None
        elif m.group("else") and depth == 1:
            return m.end(), m.end()
    return len(text), None


def brace_group_end(text: str, open_pos: int) -> int | None:
    """Index just past the brace group that opens at ``open_pos``."""
    depth = 0
    i = open_pos
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None
