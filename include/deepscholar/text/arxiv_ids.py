"""arXiv identifiers: their shapes, versions, and finding them in free text.

Two finders, because two callers want different answers: `find_arxiv_id` takes the first id a .bib
field mentions (None when there is none usable), `arxiv_id_or_problem` also says why a report's
reference entry that names an id ("arXiv:2306.XXXXX") cannot be resolved.
"""

from __future__ import annotations

import re
from datetime import date

__all__ = [
    "ARXIV_NEW_ID_RE",
    "ARXIV_OLD_ID_RE",
    "ARXIV_URL_RE",
    "BARE_ARXIV_ID_RE",
    "arxiv_id_lower_bound_date",
    "arxiv_id_of_token",
    "arxiv_id_or_problem",
    "canonical_arxiv_id",
    "clean_arxiv_id",
    "find_arxiv_id",
    "strip_arxiv_version",
]

# New-style ids (April 2007 on): YYMM.NNNN (until 2014) or YYMM.NNNNN, optional vN.
ARXIV_NEW_ID_RE = re.compile(r"(?P<id>\d{2}(?:0[1-9]|1[0-2])\.\d{4,5})(?:v(?P<version>\d+))?")
# Old-style ids: archive[.SUBJ]/YYMMNNN, e.g. cs/0601001v2, math.GT/0309136.
ARXIV_OLD_ID_RE = re.compile(
    r"(?P<id>[a-z]+(?:-[a-z]+)*(?:\.[A-Z]{2})?/\d{2}(?:0[1-9]|1[0-2])\d{3})(?:v(?P<version>\d+))?"
)


def strip_arxiv_version(arxiv_id: str) -> tuple[str, int | None]:
    """Split '2506.02838v1' into ('2506.02838', 1); papers are keyed without the version."""
    text = arxiv_id.strip()
    for prefix in ("arXiv:", "arxiv:", "ARXIV:"):
        if text.startswith(prefix):
            text = text[len(prefix):]
    m = ARXIV_NEW_ID_RE.fullmatch(text) or ARXIV_OLD_ID_RE.fullmatch(text)
    if m is None:
        # Unknown shape: still peel a trailing vN so callers get a stable key.
        m2 = re.fullmatch(r"(.+?)v(\d+)", text)
        if m2:
            return m2.group(1), int(m2.group(2))
        return text, None
    version = m.group("version")
    return m.group("id"), int(version) if version else None


def arxiv_id_lower_bound_date(arxiv_id: str) -> date | None:
    """First day of the month a new-style id was assigned: a paper cannot predate it."""
    base, _ = strip_arxiv_version(arxiv_id)
    m = ARXIV_NEW_ID_RE.fullmatch(base)
    if m is None:
        return None
    yy, mm = int(base[:2]), int(base[2:4])
    return date(2000 + yy, mm, 1)


# --- ids in .bib fields ---------------------------------------------------------------------------

_NEW_ID = r"(?:0[7-9]|[1-9]\d)(?:0[1-9]|1[0-2])\.\d{4,5}"
_OLD_ID = r"[a-z]+(?:-[a-z]+)?(?:\.[A-Z]{2})?/\d{7}"
_ID = rf"(?P<id>{_NEW_ID}|{_OLD_ID})(?:v\d+)?"
_BIB_ARXIV_PATTERNS = [
    re.compile(rf"arxiv\.org/(?:abs|pdf|format|html|ps)/{_ID}(?![\d])", re.IGNORECASE),
    re.compile(rf"10\.48550/arxiv\.{_ID}(?![\d])", re.IGNORECASE),
    re.compile(
        rf"\barxiv\s*(?:preprint)?\s*[:/]?\s*(?:arxiv\s*[:/]\s*)?(?:abs/)?{_ID}(?![\d])", re.IGNORECASE
    ),
    re.compile(rf"\bcorr\b[\s,:]*(?:abs/)?{_ID}(?![\d])", re.IGNORECASE),
]
BARE_ARXIV_ID_RE = re.compile(rf"^\s*(?:arxiv\s*:\s*)?{_ID}\s*$", re.IGNORECASE)


def clean_arxiv_id(raw: str) -> str:
    """An id as a .bib field writes it, in arXiv's own case."""
    # Old-style archive names are lowercase but their subject class is not (math.GT/0309136).
    if "/" in raw:
        archive, number = raw.split("/", 1)
        if "." in archive:
            name, subject = archive.split(".", 1)
            return f"{name.lower()}.{subject.upper()}/{number}"
        return f"{archive.lower()}/{number}"
    return raw


def canonical_arxiv_id(text: str) -> str | None:
    """The version-less id `text` is, in arXiv's own case (`HEP-TH/9901001v1` is `hep-th/9901001`), when it has
    a known shape; else None. Every reader of ids ends here, so whatever case a writer used, one id is one
    string."""
    base, _ = strip_arxiv_version(text)
    base = clean_arxiv_id(base) if "/" in base else base
    return base if ARXIV_NEW_ID_RE.fullmatch(base) or ARXIV_OLD_ID_RE.fullmatch(base) else None


def find_arxiv_id(text: str | None) -> str | None:
    """The first version-less arXiv id mentioned in free text (URL, DOI, 'arXiv:...', 'CoRR abs/...');
    text naming an unusable id gives None, no reason (compare `arxiv_id_or_problem`). Reads .bib fields."""
    if not text:
        return None
    for pattern in _BIB_ARXIV_PATTERNS:
        m = pattern.search(text)
        if m:
            return clean_arxiv_id(m.group("id"))
    return None


# --- ids in a report's reference entries ---------------------------------------------------------

ARXIV_URL_RE = re.compile(r"arxiv\.org/(?:abs|pdf|html)/(?P<id>[^\s?#)\]]+)", re.IGNORECASE)
# "arXiv:2308.10363", "arXiv.2308.10363" (DOIs 10.48550/arXiv.…), "arXiv 2308.10363".
_ARXIV_MENTION_RE = re.compile(r"\barxiv\s*[:.]\s*(?P<tok>[^\s,;)\]]+)|\barxiv\s+(?P<bare>\d{4}\.\d{4,5}(?:v\d+)?)\b",
                               re.IGNORECASE)


def arxiv_id_of_token(token: str) -> str | None:
    """The version-less id a token (URL path part, 'arXiv:' operand) is, in arXiv's own case, or None."""
    token = token.strip().strip("<>").rstrip(".*_`'\"").removesuffix(".pdf")
    return canonical_arxiv_id(token)


def arxiv_id_or_problem(text: str | None) -> tuple[str | None, str | None]:
    """(version-less id, problem): the arXiv id a URL or reference names, or why the named one is unusable
    (a report's reference entries; compare `find_arxiv_id`, which gives no reason)."""
    text = text or ""
    bad: list[str] = []
    for m in ARXIV_URL_RE.finditer(text):
        if found := arxiv_id_of_token(m.group("id")):
            return found, None
        bad.append(m.group("id"))
    for m in _ARXIV_MENTION_RE.finditer(text):
        tok = m.group("tok") or m.group("bare")
        if found := arxiv_id_of_token(tok):
            return found, None
        if re.search(r"\d", tok) or re.search(r"[Xx?]{3,}", tok):  # "arXiv:2306.XXXXX", not "arXiv: A survey"
            bad.append(tok.rstrip(".*_`"))
    if bad:
        return None, f"names no resolvable arXiv id ({bad[0]!r})"
    return None, None
