"""A paper's identifiers as comparable keys: every written form of one arXiv id or DOI gives one key.

Design notes: docs/MODULE_NOTES.md, `deepscholar.text.paper_ids`.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from deepscholar.text.arxiv_ids import arxiv_id_or_problem, canonical_arxiv_id, strip_arxiv_version

__all__ = ["arxiv_id_named", "arxiv_key", "doi_key", "arxiv_key_of_doi"]

_DOI_PREFIX_RE = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi\s*:\s*|doi\s+)", re.IGNORECASE)
_ARXIV_DOI_RE = re.compile(r"^10\.48550/arxiv\.(?P<id>.+)$", re.IGNORECASE)
_ARXIV_PREFIX_RE = re.compile(r"^arxiv\s*:\s*", re.IGNORECASE)
# The DOI handbook's shape: the directory "10.", a numeric registrant (subdivisions allowed), "/", a suffix.
_DOI_SHAPE_RE = re.compile(r"^10\.\d{4,9}(?:\.\d+)*/\S+$")


def arxiv_id_named(value: str | None) -> str | None:
    """The version-less arXiv id `value` names, in arXiv's own case: a bare id (any case, any version), an
    `arXiv:` id, an arxiv.org URL, an arXiv DOI, or free text mentioning one; None when it names none."""
    if not value or not value.strip():
        return None
    text = value.strip()
    if (from_doi := arxiv_key_of_doi(text)) is not None:
        return from_doi
    if (bare := canonical_arxiv_id(_ARXIV_PREFIX_RE.sub("", text).removesuffix(".pdf"))) is not None:
        return bare
    found, _ = arxiv_id_or_problem(text)
    return found


def arxiv_key(value: str | None) -> str | None:
    """The key of the arXiv id `value` names (`arxiv_id_named`), or None for an empty value. An id of no
    known shape is kept as written without a `vN` suffix, so a stored id always has a key."""
    if not value or not value.strip():
        return None
    if (named := arxiv_id_named(value)) is not None:
        return named
    base, _ = strip_arxiv_version(_ARXIV_PREFIX_RE.sub("", value.strip()).removesuffix(".pdf"))
    return base or None


def arxiv_key_of_doi(value: str | None) -> str | None:
    """The arXiv id an arXiv DOI (10.48550/arXiv.<id>, any resolver prefix) names; None for any other."""
    if not value or not value.strip():
        return None
    m = _ARXIV_DOI_RE.match(_DOI_PREFIX_RE.sub("", unquote(value.strip())).strip())
    if m is None:
        return None
    base, _ = strip_arxiv_version(m.group("id"))
    return canonical_arxiv_id(base) or base


def doi_key(value: str | None) -> str | None:
    """A DOI as a comparable key: no resolver URL or `doi:` prefix, percent-escapes decoded, case-folded;
    None when empty, not shaped like a DOI, or an arXiv DOI (that is an arXiv id: `arxiv_key`)."""
    if not value or not value.strip() or arxiv_key_of_doi(value) is not None:
        return None
    key = _DOI_PREFIX_RE.sub("", unquote(value.strip())).strip().rstrip(".").casefold()
    return key if _DOI_SHAPE_RE.fullmatch(key) else None
