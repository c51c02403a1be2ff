"""Citation commands in LaTeX: which macros cite (natbib, biblatex, ACM and others) and the keys they cite."""

from __future__ import annotations

import re

__all__ = ["CITE_CALL_RE", "CITE_MACROS", "CITE_NAME_RE", "NOT_CITATIONS", "cite_keys_in_latex", "split_keys"]

CITE_NAME_RE = re.compile(r"\\((?:[A-Za-z]*cite[A-Za-z]*|citeA|citeN|shortcite|bibentry))(?![A-Za-z@])")
# Macros with "cite" in their name that do not cite anything in the text.
NOT_CITATIONS = frozenset(
    {"nocite", "citestyle", "citeindextrue", "citeindexfalse", "citetext", "defcitealias"}
)
CITE_CALL_RE = re.compile(
    r"\\(?P<name>[A-Za-z]*cite[A-Za-z]*|citeA|citeN|shortcite|bibentry)(?![A-Za-z@])\*?\s*"
    r"(?P<args>(?:(?:\[(?:[^\[\]{}]|\{[^{}]*\})*\]\s*|\((?:[^()]*)\)\s*)*\{[^{}]*\}\s*)+)"
)
# The citation macros known by name; others with "cite" in their name are found per document (CITE_NAME_RE).
CITE_MACROS = (
    "cite", "Cite", "citep", "Citep", "citet", "Citet", "citealp", "Citealp", "citealt", "Citealt",
    "citeauthor", "Citeauthor", "citeyear", "citeyearpar", "citenum", "citeA", "citeN", "shortcite",
    "parencite", "Parencite", "textcite", "Textcite", "autocite", "Autocite", "footcite", "footcitetext",
    "smartcite", "Smartcite", "supercite", "fullcite", "footfullcite", "citetitle", "citeurl",
    "citetalias", "citepalias", "cites", "parencites", "textcites", "autocites",
)
_CITE_GROUP_RE = re.compile(r"(?:\[(?:[^\[\]{}]|\{[^{}]*\})*\]|\([^()]*\))|\{(?P<keys>[^{}]*)\}")


def split_keys(keys: str) -> list[str]:
    return [k.strip() for k in keys.split(",") if k.strip() and k.strip() != "*"]


def cite_keys_in_latex(latex: str) -> list[str]:
    """Sorted unique keys cited in comment-free LaTeX (floats included)."""
    keys: set[str] = set()
    for m in CITE_CALL_RE.finditer(latex):
        if m.group("name") in NOT_CITATIONS:
            continue
        groups = [g.group("keys") for g in _CITE_GROUP_RE.finditer(m.group("args"))]
        groups = [g for g in groups if g is not None]
        if m.group("name").endswith("cites"):
            for g in groups:  # biblatex multicite: every mandatory group is a key list
                keys.update(split_keys(g))
        elif groups:
            keys.update(split_keys(groups[0]))
    return sorted(keys)
