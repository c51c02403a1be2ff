"""Numbered citations: the [n] markers of a report, its numbered reference list, its arXiv links.

Design notes: docs/MODULE_NOTES.md, `deepscholar.text.citations`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from deepscholar.text.arxiv_ids import ARXIV_URL_RE, arxiv_id_of_token, arxiv_id_or_problem
from deepscholar.text.report_markup import (
    _URL_RE,
    CITATION_GROUP_RE,
    MARKDOWN_HEADING_RE,
    _entry_start,
    citation_numbers,
    reference_spans,
    remap_citation_numbers,
)
from deepscholar.text.sentences import split_report_sentences

__all__ = [
    "CITATION_GROUP_RE",
    "MARKDOWN_HEADING_RE",
    "CitationStats",
    "ParsedReference",
    "arxiv_links_to_numbers",
    "citation_numbers",
    "citation_stats",
    "parse_reference_list",
    "reference_spans",
    "reference_title",
    "remap_citation_numbers",
    "strip_citation_numbers",
]


# ------------------------------------------------------------------------------------ arXiv links

_MD_ARXIV_LINK_RE = re.compile(
    r"\[(?P<label>[^\[\]]*)\]\((?P<url>\s*<?https?://(?:www\.|export\.)?arxiv\.org/(?:abs|pdf|html)/[^)\s>]+>?\s*)\)",
    re.IGNORECASE)
# After links became [n]: "\[[1]\]", "[[1]]", "\[[1], [2]\]" collapse to plain markers.
_WRAPPED_MARKERS_RE = re.compile(r"\\?\[\s*(?P<inner>\[\d+\](?:\s*[,;]?\s*\[\d+\])*)\s*\\?\]")


def arxiv_links_to_numbers(markdown: str) -> tuple[str, dict[int, str]]:
    """Replace arXiv markdown links by [n] (one n per distinct paper, first appearance first).

    deepscholar-base cites as `[[Author 'YYYY-MM-DD](http://arxiv.org/abs/XXXX.XXXXXvN)]`; numbering them
    turns such a report into the common form. Returns the new text and n -> version-less arXiv id.
    """
    numbers: dict[str, int] = {}

    def repl(m: re.Match) -> str:
        # The link pattern admits URLs the id pattern does not ("arxiv.org/abs/?q"): those stay links.
        url = ARXIV_URL_RE.search(m.group("url"))
        arxiv_id = arxiv_id_of_token(url.group("id")) if url else None
        if arxiv_id is None:
            return m.group(0)
        n = numbers.setdefault(arxiv_id, len(numbers) + 1)
        return f"[{n}]"

    text = _MD_ARXIV_LINK_RE.sub(repl, markdown or "")

    def unwrap(m: re.Match) -> str:
        inner = re.findall(r"\[(\d+)\]", m.group("inner"))
        return "[" + ", ".join(inner) + "]"

    text = _WRAPPED_MARKERS_RE.sub(unwrap, text)
    return text, {n: a for a, n in numbers.items()}


# ------------------------------------------------------------------------------- reference lists

@dataclass
class ParsedReference:
    """One entry of a report's own numbered reference list."""

    number: int
    title: str
    arxiv_id: str | None = None  # version-less; None when the entry names none or a placeholder
    url: str | None = None
    text: str = ""  # the entry as written, marker removed
    problem: str | None = None  # why the entry cannot be resolved although it claims an id
    doi: str | None = None

    @property
    def resolvable(self) -> bool:
        return self.problem is None and bool(self.arxiv_id or self.url or self.title)




def _entries(lines: list[str]) -> list[tuple[int, str]]:
    """(number, text) of each entry; an entry's wrapped lines join it until a blank line."""
    numbers: list[int] = []
    texts: list[str] = []
    open_entry = False
    for line in lines:
        m = _entry_start(line)
        if m is not None:
            numbers.append(int(m.group("b") or m.group("d")))
            texts.append(line[m.end():].strip())
            open_entry = True
        elif line.strip() and open_entry and not MARKDOWN_HEADING_RE.match(line):
            texts[-1] = f"{texts[-1]} {line.strip()}".strip()
        elif not line.strip():
            open_entry = False
    return list(zip(numbers, texts, strict=True))


def reference_title(entry: str) -> str:
    """Best-effort title of a bibliography entry (APA, ACL, `Title (2023) URL`, `Title. *arXiv:…*`)."""
    s = re.sub(r"\[([^\[\]]*)\]\((?:[^()\s]+)\)", r"\1", entry or "")
    s = _URL_RE.sub(" ", s)
    s = re.sub(r"\(\s*\)|<\s*>", " ", s)
    s = re.sub(r"\barxiv(?:\s+preprint)?\s*[:.]?\s*[^\s,;)\]]*\d[^\s,;)\]]*", " ", s, flags=re.I)
    s = re.sub(r"\bdoi\s*:\s*\S+", " ", s, flags=re.I)
    s = s.replace("**", "").replace("__", "").replace("*", "").replace("`", "")
    s = re.sub(r"^\s*Document\s+\d+\s*:\s*", "", s.strip(), flags=re.I)
    s = re.sub(r"\s+", " ", s).strip(" \t.,;:-")
    if not s:
        return ""
    quoted = re.search(r"[\"\u201c]([^\"\u201d]{8,})[\"\u201d]", s)
    if quoted:
        return quoted.group(1).strip(" ,.")
    # APA: "Saez, E. (2010). Title. Journal…"
    apa = re.search(r"\((?:19|20)\d{2}[a-z]?(?:,[^)]*)?\)\s*[.,:]?\s+(?P<t>.+?[?!]?)(?:(?<=[?!])\s|\.\s|\.$|$)", s)
    if apa and len(apa.group("t").split()) >= 2:
        return apa.group("t").strip(" ,.")
    # "Title (2023)" with the year last (URLs already removed).
    tail = re.match(r"(?P<t>.+?)\s*\((?:19|20)\d{2}[a-z]?\)\s*[.,]?\s*$", s)
    if tail:
        return tail.group("t").strip(" ,.")
    # ACL: "Smith and Doe. 2020. Title. In Proceedings…"
    acl = re.search(r"(?:^|\.\s)(?:19|20)\d{2}[a-z]?\.\s+(?P<t>.+?)(?:\.\s|\.$|$)", s)
    if acl and len(acl.group("t").split()) >= 2:
        return acl.group("t").strip(" ,.")
    first = re.split(r"(?<=\w\w)\.\s|(?<=[)\]])\.\s", s, maxsplit=1)[0]
    return first.strip(" ,.")[:500]


# "doi:10.1145/3442188.3445922", "DOI 10.18653/v1/…", "https://doi.org/10.…" (a placeholder "10.xxxx/…" too).
_DOI_RE = re.compile(r"(?:\bdoi\s*[:=]?\s*|doi\.org/)(?P<doi>10\.[^\s/]+/[^\s,;)\]>]+)", re.IGNORECASE)


def _doi(body: str) -> tuple[str | None, str | None]:
    """(DOI, problem) named by a reference entry; a DOI with a placeholder ("10.xxxx/…") names nothing."""
    m = _DOI_RE.search(body)
    if m is None:
        return None, None
    doi = m.group("doi").rstrip(".*_`'\"")
    if not re.fullmatch(r"10\.\d{4,9}/\S+", doi) or re.search(r"[Xx?]{3,}", doi.split("/", 1)[1]):
        return None, f"names no resolvable DOI ({doi!r})"
    return doi, None


def _parse_entry(number: int, body: str) -> ParsedReference:
    urls = [u.rstrip(".,;*_`") for u in _URL_RE.findall(body)]
    arxiv_id, problem = arxiv_id_or_problem(body)
    url = next((u for u in urls if ARXIV_URL_RE.search(u)), urls[0] if urls else None)
    doi, doi_problem = _doi(body)
    if arxiv_id is not None:
        problem = None
    elif doi is not None and problem is None:
        url = url or f"https://doi.org/{doi}"  # a DOI names the paper as well as a URL does
    problem = problem or (doi_problem if arxiv_id is None and not url else None)
    return ParsedReference(number=number, title=reference_title(body), arxiv_id=arxiv_id, url=url, text=body,
                           problem=problem, doi=doi)


def parse_reference_list(markdown: str) -> dict[int, ParsedReference]:
    """The numbered reference list at the end of a report (the last one when a report has several)."""
    lines = (markdown or "").splitlines()
    spans = reference_spans(lines)
    if not spans:
        return {}
    start, end = spans[-1]
    refs: dict[int, ParsedReference] = {}
    for number, body in _entries(lines[start:end]):
        if number not in refs:  # a repeated number keeps its first entry
            refs[number] = _parse_entry(number, body)
    return refs


# Numbered markers ([3], [2][7], [2, 7], [2-4], [2–4], \[3\]) with the space before them.
_NUMBER_MARKER_RE = re.compile(r"\s*\\?\[\s*\d{1,3}(?:\s*[-\u2010-\u2014\u2212,;]\s*\d{1,3})*\s*\\?\]")


def strip_citation_numbers(text: str) -> str:
    """A sentence as a judge or an embedding should read it: numbered markers are noise there."""
    text = _NUMBER_MARKER_RE.sub("", text or "")
    text = re.sub(r"\s+([.,;:!?)])", r"\1", text)
    return " ".join(text.split())



# ------------------------------------------------------------------------------------ statistics


@dataclass(frozen=True)
class CitationStats:
    n_citations: int  # (sentence, cited number) pairs
    n_distinct: int
    n_unresolved: int  # distinct cited numbers without a usable source
    unresolved: tuple[int, ...] = ()


def _attr(source: Any, name: str) -> Any:
    return source.get(name) if isinstance(source, dict) else getattr(source, name, None)


def citation_stats(text: str, sources: Iterable[Any]) -> CitationStats:
    """Counts stored with every report; a cited number is unresolved without a source that names anything.

    Sources the system only retrieved (`cited` false) never resolve a number."""
    by_idx: dict[Any, Any] = {}
    for s in sources or []:
        if _attr(s, "cited") is not False:
            by_idx.setdefault(_attr(s, "idx"), s)
    pairs = 0
    distinct: dict[int, None] = {}
    for sentence in split_report_sentences(text or ""):
        pairs += len(sentence.citations)
        for n in sentence.citations:
            distinct.setdefault(n, None)
    unresolved = tuple(n for n in distinct if n not in by_idx or not any(
        (_attr(by_idx[n], k) or "").strip() for k in ("arxiv_id", "url", "title")))
    return CitationStats(n_citations=pairs, n_distinct=len(distinct), n_unresolved=len(unresolved),
                         unresolved=unresolved)
