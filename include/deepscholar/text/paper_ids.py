"""A paper's identifiers as comparable keys: every written form of one arXiv id or DOI gives one key.

Metrics decide "same paper?" by these keys (evaluation/metrics/papers.py), so the forms a bibliography, a
system's reference list or a resolver writes must all meet: `2401.00001v2`, `arXiv:2401.00001`,
`https://arxiv.org/abs/2401.00001v3`, `arxiv.org/pdf/2401.00001.pdf` and the arXiv DOI
`10.48550/arXiv.2401.00001` are one arXiv key; `HEP-TH/9901001v1`, `arxiv.org/abs/HEP-TH/9901001v1` and
`hep-th/9901001` another (old-style ids keep arXiv's own case, `math.GT/0309136`); `https://doi.org/10.1145/ABC`,
`doi:10.1145/abc` and `10.1145/abc` one DOI key (DOIs are case-insensitive). An arXiv DOI is an arXiv id,
not a DOI key, so a paper cited once by its arXiv DOI and once by its id is one paper. A DOI key is made only
from something shaped like a DOI (`10.<registrant>/<suffix>`): a bibliography's `doi` field holding an ISBN,
a URL of another site or a note names no DOI.

The importers read ids with `arxiv_id_named` (None when a text names no id of a known shape), the metrics
with `arxiv_key`: the same forms, so whatever an import stores, the metrics read as the same key.
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
