"""The ``[@key]`` citation markers of cleaned related-work text: format, find, replace, strip.

The LaTeX cleaner (sources.latex) writes one marker per citation command, ``[@key]`` or
``[@key1; @key2]`` (pandoc style): `format_marker` writes it, `CITATION_MARKER_RE` matches exactly it and
`cite_keys_in_marker_text` reads its keys. Readers of a stored section (the release judges, the
human-exemplar report, the organisation metric) are lenient: any bracketed group holding an @key
(``[see @a, p. 3]``) is a marker, `LOOSE_CITATION_MARKER_RE`; `cited_keys`, `strip_citation_markers` and
`markers_to_numbers` read markers that way.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = [
    "CITATION_MARKER_RE",
    "LOOSE_CITATION_MARKER_RE",
    "cite_keys_in_marker_text",
    "cited_keys",
    "format_marker",
    "markers_to_numbers",
    "strip_citation_markers",
]

# --- the format the cleaner writes ------------------------------------------------------------------

# One marker per citation command: ``[@key]`` or ``[@key1; @key2]``. Keys never hold whitespace,
# ';', '[' or ']' (BibTeX keys cannot contain braces or commas either).
CITATION_MARKER_RE = re.compile(r"\[@[^\s;\[\]]+(?:; @[^\s;\[\]]+)*\]")
_MARKER_KEY_RE = re.compile(r"@([^\s;\[\]]+)")


def format_marker(keys: list[str]) -> str:
    """The marker for a citation of `keys` ("" for none)."""
    return "[" + "; ".join("@" + k for k in keys) + "]" if keys else ""


def cite_keys_in_marker_text(text: str) -> list[str]:
    """Keys of the citation markers in cleaned text, in order of first appearance."""
    seen: dict[str, None] = {}
    for marker in CITATION_MARKER_RE.findall(text):
        for key in _MARKER_KEY_RE.findall(marker):
            seen.setdefault(key, None)
    return list(seen)


# --- what readers accept ----------------------------------------------------------------------------

# A bracketed group holding at least one @key: [@a], [@a; @b], [see @a, p. 3].
LOOSE_CITATION_MARKER_RE = re.compile(r"\[[^\[\]]*@[^\[\]]*\]")
_CITE_KEY_RE = re.compile(r"@([^\s;,\[\]]+)")
_MARKER_WITH_SPACE_RE = re.compile(r"[~\s]*" + LOOSE_CITATION_MARKER_RE.pattern)
# What "(see [@a])" or "([@a], [@b])" leaves behind.
_EMPTY_PARENS_RE = re.compile(r"\(\s*(?:see|cf\.?|e\.g\.,?|i\.e\.,?)?[\s,;]*\)", re.IGNORECASE)


def _marker_keys(marker: str) -> list[str]:
    return [k.rstrip(".:") for k in _CITE_KEY_RE.findall(marker)]


def cited_keys(text: str) -> list[str]:
    """Cite keys in the order they appear, each once."""
    keys = []
    for marker in LOOSE_CITATION_MARKER_RE.findall(text):
        keys.extend(_marker_keys(marker))
    return list(dict.fromkeys(k for k in keys if k))


def strip_citation_markers(text: str) -> str:
    """The text a judge reads when cite keys would only be noise (nuggets, sentence similarity)."""
    text = _MARKER_WITH_SPACE_RE.sub("", text)
    text = _EMPTY_PARENS_RE.sub("", text)
    text = re.sub(r"\s+([.,;:!?)])", r"\1", text)
    return re.sub(r"\s+", " ", text).strip()


def markers_to_numbers(text: str, number_of: Mapping[str, int | None]) -> tuple[str, list[str]]:
    """Replace each marker by its [n][m] (deduplicated, in the marker's order); unknown keys dropped.

    `number_of[key]` is the key's number, None (or absent) for a key without a source. Returns the
    text and the dropped keys, once each. A marker left with no key disappears with its leading space.
    """
    dropped: list[str] = []

    def replace(m: re.Match) -> str:
        nums: list[int] = []
        for key in _marker_keys(m.group(0)):
            n = number_of.get(key)
            if n is None:
                if key not in dropped:
                    dropped.append(key)
            elif n not in nums:
                nums.append(n)
        return "".join(f"[{n}]" for n in nums)

    def substitute(m: re.Match) -> str:
        numbers = replace(m)
        lead = m.group(0)[:m.start(1) - m.start(0)]
        return (lead.replace("~", " ") + numbers) if numbers else ""

    out = re.sub(r"[~ \t]*(" + LOOSE_CITATION_MARKER_RE.pattern + ")", substitute, text)
    return out, dropped
