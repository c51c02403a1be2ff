"""Where a report's numbered citations and its reference list are: [n] marker groups and their numbers,
headings and the lines of a numbered reference list.

Both `citations` (the statistics stored with a report, the parsed reference list) and `sentences` (what the
verifiability judges read) build on this reading, so they agree on what a citation is; it sits below both so
neither has to import the other back.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["CITATION_GROUP_RE", "MARKDOWN_HEADING_RE", "citation_numbers", "reference_spans",
           "remap_citation_numbers"]

# ------------------------------------------------------------------------------------------ markers

_DASHES = "-\u2010\u2011\u2012\u2013\u2014\u2212"
# Numbers have at most three digits: "[2020]" and "[2019-2021]" are years, not citations.
_ITEM = rf"\d{{1,3}}(?:\s*[{_DASHES}]\s*\d{{1,3}})?(?!\d)"
# A marker group: [3], [2, 7], [2; 7], [2-4], [2–4], and the escaped \[3\] markdown writers produce.
CITATION_GROUP_RE = re.compile(rf"\\?\[\s*(?P<body>{_ITEM}(?:\s*[,;]\s*{_ITEM})*)\s*\\?\]")
_ITEM_RE = re.compile(rf"(?P<lo>\d{{1,3}})(?:(?P<sep>\s*[{_DASHES}]\s*)(?P<hi>\d{{1,3}}))?")
# A range longer than this is a year span or a typo, not a citation of every number in between.
_MAX_RANGE = 100


def _group_numbers(body: str) -> list[int] | None:
    numbers: list[int] = []
    for m in _ITEM_RE.finditer(body):
        lo = int(m.group("lo"))
        if m.group("hi") is None:
            numbers.append(lo)
            continue
        hi = int(m.group("hi"))
        if hi < lo or hi - lo > _MAX_RANGE:
            return None
        numbers.extend(range(lo, hi + 1))
    return numbers


def citation_numbers(text: str) -> list[int]:
    """Distinct cited numbers in order of first appearance; [a] and link labels that aren't numbers are not citations."""
    seen: dict[int, None] = {}
    for m in CITATION_GROUP_RE.finditer(text or ""):
        for n in _group_numbers(m.group("body")) or []:
            seen.setdefault(n, None)
    return list(seen)


def remap_citation_numbers(text: str, mapping: Callable[[int], int | None]) -> str:
    """Rewrite every [n] marker's numbers through `mapping` (None keeps a number); used for 0-based systems.

    Compare `deepscholar.text.markers.markers_to_numbers`, which turns ``[@key]`` markers into [n]."""

    def fix_group(m: re.Match) -> str:
        if _group_numbers(m.group("body")) is None:
            return m.group(0)

        def fix_item(item: re.Match) -> str:
            lo = mapping(int(item.group("lo")))
            out = str(lo if lo is not None else item.group("lo"))
            if item.group("hi") is not None:
                hi = mapping(int(item.group("hi")))
                out += item.group("sep") + str(hi if hi is not None else item.group("hi"))
            return out

        body = _ITEM_RE.sub(fix_item, m.group("body"))
        return m.group(0).replace(m.group("body"), body, 1)

    return CITATION_GROUP_RE.sub(fix_group, text)



# ------------------------------------------------------------------------------- reference lists

_URL_RE = re.compile(r"https?://[^\s<>\"')\]]+")

MARKDOWN_HEADING_RE = re.compile(r"^\s{0,3}#{1,6}(?:\s|$)")
_REF_HEADING_RE = re.compile(
    r"^\s{0,3}(?:#{1,6}\s*)?(?:\*\*|__)?\s*(?:\d+\.?\s+)?"
    r"(?:references?|sources?|bibliography|works\s+cited|cited\s+works|citations|reference\s+list|literature\s+cited)"
    r"\s*:?\s*(?:\*\*|__)?\s*:?\s*$", re.IGNORECASE)
_REF_ENTRY_RE = re.compile(r"^\s{0,3}(?:[-*+]\s+)?(?:\\?\[\s*(?P<b>\d{1,4})\s*\\?\]|(?P<d>\d{1,4})[.)](?=\s))\s*")
_YEAR_RE = re.compile(r"\b(?:19|20)\d{2}\b")


def _entry_start(line: str) -> re.Match | None:
    return _REF_ENTRY_RE.match(line)


def _looks_bibliographic(text: str) -> bool:
    return bool(_URL_RE.search(text) or re.search(r"arxiv", text, re.I) or _YEAR_RE.search(text))


def _blocks(lines: list[str], start: int, end: int) -> list[tuple[int, int]]:
    """[a, b) ranges of consecutive non-blank lines."""
    out, i = [], start
    while i < end:
        if not lines[i].strip():
            i += 1
            continue
        j = i
        while j < end and lines[j].strip():
            j += 1
        out.append((i, j))
        i = j
    return out


def reference_spans(lines: list[str]) -> list[tuple[int, int]]:
    """[start, end) line ranges that are reference lists: a References/Sources heading up to the next
    heading, and a trailing run of numbered entries at the end of the text."""
    spans: list[tuple[int, int]] = []
    i = 0
    while i < len(lines):
        if _REF_HEADING_RE.match(lines[i]):
            j = i + 1
            while j < len(lines) and not MARKDOWN_HEADING_RE.match(lines[j]) and not _REF_HEADING_RE.match(lines[j]):
                j += 1
            spans.append((i, j))
            i = j
        else:
            i += 1
    covered = spans[-1][1] if spans else 0
    # Without a heading: trailing blocks whose first line is a numbered entry and whose other lines are
    # entries or their continuations. "1." lists must look bibliographic, or they are the body's own lists.
    blocks = _blocks(lines, covered, len(lines))
    run: list[tuple[int, int]] = []
    for a, b in reversed(blocks):
        if _entry_start(lines[a]) is None or MARKDOWN_HEADING_RE.match(lines[a]):
            break
        run.insert(0, (a, b))
    if not run:
        return spans
    starts = [lines[k] for a, b in run for k in range(a, b) if _entry_start(lines[k])]
    dotted = [x for x in starts if (start := _entry_start(x)) and start.group("d") is not None]
    if any(not _looks_bibliographic(x) for x in dotted):
        return spans
    if len(starts) < 2 and not all(_looks_bibliographic(x) for x in starts):
        return spans
    if not any(x.strip() for x in lines[covered:run[0][0]]) and not spans:
        return spans  # the whole text is a numbered list: that is a body, not references
    spans.append((run[0][0], run[-1][1]))
    return spans
