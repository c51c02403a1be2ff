"""A paper's identifiers as comparable keys: every written form of one arXiv id or DOI gives one key.

Metrics decide "same paper?" by these keys (evaluation/metrics/papers.py), so the forms a bibliography, a
system's reference list or a resolver writes must all meet: `2401.00001v2`, `arXiv:2401.00001`,
`https://arxiv.org/abs/2401.00001v3`, `arxiv.org/pdf/2401.00001.pdf` and the arXiv DOI
`10.48550/arXiv.2401.00001` are one arXiv key; `HEP-TH/9901001v1` and `hep-th/9901001` another (old-style
ids keep their subject class upper case, `math.GT/0309136`); `https://doi.org/10.1145/ABC`,
`doi:10.1145/abc` and `10.1145/abc` one DOI key (DOIs are case-insensitive). An arXiv DOI is an arXiv id,
not a DOI key, so a paper cited once by its arXiv DOI and once by its id is one paper.
"""

from __future__ import annotations

import re
from urllib.parse import unquote

from deepscholar.text.arxiv_ids import (
    ARXIV_NEW_ID_RE,
    ARXIV_OLD_ID_RE,
    arxiv_id_or_problem,
    clean_arxiv_id,
    strip_arxiv_version,
)

__all__ = ["arxiv_key", "doi_key", "arxiv_key_of_doi"]

_DOI_PREFIX_RE = re.compile(r"^(?:https?://(?:dx\.)?doi\.org/|doi\s*:\s*|doi\s+)", re.IGNORECASE)
_ARXIV_DOI_RE = re.compile(r"^10\.48550/arxiv\.(?P<id>.+)$", re.IGNORECASE)
_ARXIV_PREFIX_RE = re.compile(r"^arxiv\s*:\s*", re.IGNORECASE)


def _known(version_less: str) -> str | None:
    """The id in arXiv's own case (old-style archive lower case, subject class upper) when it has a known
    shape; else None."""
    text = clean_arxiv_id(version_less) if "/" in version_less else version_less
    return text if ARXIV_NEW_ID_RE.fullmatch(text) or ARXIV_OLD_ID_RE.fullmatch(text) else None


def arxiv_key(value: str | None) -> str | None:
    """The version-less arXiv id `value` names (a bare id, an `arXiv:` id, an arxiv.org URL or an arXiv
    DOI), or None when it names none. An id of no known shape is kept as written without a `vN` suffix,
    so a stored id always has a key."""
    if not value or not value.strip():
        return None
    text = value.strip()
    if (from_doi := arxiv_key_of_doi(text)) is not None:
        return from_doi
    base, _ = strip_arxiv_version(_ARXIV_PREFIX_RE.sub("", text).removesuffix(".pdf"))
    if (known := _known(base)) is not None:
        return known
    found, _ = arxiv_id_or_problem(text)
    if found and (known := _known(found)) is not None:
        return known
    return base or None


def arxiv_key_of_doi(value: str | None) -> str | None:
    """The arXiv id an arXiv DOI (10.48550/arXiv.<id>, any resolver prefix) names; None for any other."""
    if not value or not value.strip():
        return None
    m = _ARXIV_DOI_RE.match(_DOI_PREFIX_RE.sub("", unquote(value.strip())).strip())
    if m is None:
        return None
    base, _ = strip_arxiv_version(m.group("id"))
    return _known(base) or base


def doi_key(value: str | None) -> str | None:
    """A DOI as a comparable key: no resolver URL or `doi:` prefix, percent-escapes decoded, case-folded;
    None when empty or when it is an arXiv DOI (that is an arXiv id: `arxiv_key`)."""
    if not value or not value.strip() or arxiv_key_of_doi(value) is not None:
        return None
    key = _DOI_PREFIX_RE.sub("", unquote(value.strip())).strip().rstrip(".").casefold()
    return key or None
