"""Which source each [n] of an imported report is: reference lists, arXiv links, retrieved passages.

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.external.formats.sources`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepscholar.systems.base import Report, Source
from deepscholar.systems.external.formats.base import (
    arxiv_id,
    body_citations,
    published,
    text_of,
    trace,
    unresolved_entry,
)
from deepscholar.text import normalise_title, title_similarity
from deepscholar.text.citations import (
    ParsedReference,
    arxiv_links_to_numbers,
    citation_numbers,
    parse_reference_list,
)

__all__ = ["cap_sources", "has_citations", "list_sources", "markdown_sources", "match_ctx", "report_from_json",
           "retrieved_only", "MAX_SOURCE_TITLE_CHARS", "MAX_SOURCE_SNIPPET_CHARS", "MAX_SOURCE_URL_CHARS"]

# A source matches a reference entry by title only when nearly identical (typos, casing, punctuation).
TITLE_MATCH = 0.9
# What a report keeps of each source a third party describes. A paper title runs to a few hundred characters;
# a snippet is an abstract or a passage (our own systems keep 1,200 characters of one: snippet_chars); a URL
# longer than 2,048 characters is one no browser or server takes.
MAX_SOURCE_TITLE_CHARS = 1_000
MAX_SOURCE_SNIPPET_CHARS = 4_000
MAX_SOURCE_URL_CHARS = 2_048


def cap_sources(report: Report) -> int:
    """Cut each source's title and snippet to their caps (marked with " …") and drop a URL over its cap, each
    noted in the trace (`import.notes`); how many sources were cut."""
    cut = 0
    for s in report.sources:
        changed = []
        for field, cap in (("title", MAX_SOURCE_TITLE_CHARS), ("snippet", MAX_SOURCE_SNIPPET_CHARS)):
            value = getattr(s, field) or ""
            if len(value) > cap:
                setattr(s, field, value[:cap - 2] + " …")
                changed.append(f"{field} of {len(value)} characters cut to {cap}")
        if s.url is not None and len(s.url) > MAX_SOURCE_URL_CHARS:
            changed.append(f"URL of {len(s.url)} characters dropped (at most {MAX_SOURCE_URL_CHARS})")
            s.url = None
        if changed:
            cut += 1
            notes = report.trace.setdefault("import", {}).setdefault("notes", [])
            if len(notes) < 50:  # the trace stays small too
                notes.append(f"source {s.idx}: " + "; ".join(changed))
    return cut


def has_citations(text: str) -> bool:
    """A markdown file is a report when it cites: [n] markers, arXiv links or a numbered reference list."""
    return bool(citation_numbers(text) or arxiv_links_to_numbers(text)[1] or parse_reference_list(text))


def match_ctx(ref: ParsedReference, ctx_sources: list[Source]) -> int | None:
    """Position of the ctx a reference entry names: by arXiv id, URL, then a near-identical title."""
    for i, s in enumerate(ctx_sources):
        if ref.arxiv_id and s.arxiv_id == ref.arxiv_id:
            return i
    for i, s in enumerate(ctx_sources):
        if ref.url and s.url and ref.url.rstrip("/") == s.url.rstrip("/"):
            return i
    if ref.title and not ref.arxiv_id:
        key = normalise_title(ref.title)
        best = max(((title_similarity(key, s.title), i) for i, s in enumerate(ctx_sources) if s.title),
                   default=(0.0, None))
        if best[0] >= TITLE_MATCH:
            return best[1]
    return None


def entry_names_nothing(ref: ParsedReference) -> bool:
    """A reference entry that names a placeholder, or no id, URL or title: unresolved."""
    return bool(ref.problem) or not (ref.arxiv_id or ref.url or ref.title)


def unusable_entry(n: int, ref: ParsedReference, cited: list[int]) -> dict:
    return unresolved_entry(n, ref.text, ref.problem or "the entry names nothing", in_text=n in cited)


def source_from_entry(n: int, ref: ParsedReference, retrieved: list[Source], used: set[int]) -> Source:
    """Source [n] from its reference entry, with the snippet of the retrieved item it names, if any."""
    pos = match_ctx(ref, retrieved)
    if pos is None:
        return Source(idx=n, title=ref.title, snippet="", arxiv_id=ref.arxiv_id, url=ref.url)
    used.add(pos)
    r = retrieved[pos]
    return Source(idx=n, title=r.title or ref.title, snippet=r.snippet, arxiv_id=ref.arxiv_id or r.arxiv_id,
                  url=ref.url or r.url, published=r.published)


def list_sources(text: str, refs: dict[int, ParsedReference], retrieved: list[Source],
                 unresolved: list[dict]) -> tuple[list[Source], set[int]]:
    """Sources of a report whose [n] follow its own reference list, and the retrieved positions used.

    An entry is matched to what the system retrieved (id, URL, near-identical title) for the snippet it
    saw; an entry naming a placeholder, or a cited number without an entry, is unresolved.
    """
    cited = body_citations(text)
    sources: list[Source] = []
    used: set[int] = set()
    for n in sorted(set(cited) | set(refs)):
        ref = refs.get(n)
        if ref is None:
            if n >= 1:
                unresolved.append(unresolved_entry(n, "", "no entry with this number in the reference list"))
        elif entry_names_nothing(ref):
            unresolved.append(unusable_entry(n, ref, cited))
        else:
            sources.append(source_from_entry(n, ref, retrieved, used))
    return sources, used


def retrieved_only(text: str, sources: list[Source], retrieved: list[Source], used: set[int]) -> list[Source]:
    """What the system retrieved and the report does not list: `cited` false, numbered after every
    number the text or the sources use, so no [n] can ever reach one."""
    start = max([0, *citation_numbers(text), *(s.idx for s in sources)]) + 1
    seen_ids = {s.arxiv_id for s in sources if s.arxiv_id}
    seen_urls = {s.url.rstrip("/") for s in sources if s.url}
    out: list[Source] = []
    for pos, r in enumerate(retrieved):
        if pos in used or (r.arxiv_id and r.arxiv_id in seen_ids) or (r.url and r.url.rstrip("/") in seen_urls):
            continue
        if not (r.arxiv_id or r.url or r.title):
            continue
        if r.arxiv_id:
            seen_ids.add(r.arxiv_id)
        if r.url:
            seen_urls.add(r.url.rstrip("/"))
        out.append(Source(idx=start + len(out), title=r.title, snippet=r.snippet, arxiv_id=r.arxiv_id, url=r.url,
                          published=r.published, cited=False))
    return out


def _linked_sources(ids: dict[int, str], retrieved: list[Source]) -> tuple[list[Source], set[int]]:
    """Sources [n] of arXiv links numbered n, with what the system retrieved for each, if anything."""
    sources, used = [], set()
    for n, a in sorted(ids.items()):
        pos = next((i for i, x in enumerate(retrieved) if x.arxiv_id == a), None)
        r = retrieved[pos] if pos is not None else None
        if pos is not None:
            used.add(pos)
        sources.append(Source(idx=n, title=r.title if r else "", snippet=r.snippet if r else "", arxiv_id=a,
                              url=(r.url if r and r.url else f"https://arxiv.org/abs/{a}"),
                              published=r.published if r else None))
    return sources, used


def markdown_sources(text: str, unresolved: list[dict], retrieved: list[Source] | None = None
                     ) -> tuple[str, list[Source], str | None, set[int]]:
    """(text, sources, numbering, retrieved positions used) of a markdown report that brings no source
    list of its own: arXiv links become [n] (numbered in order of first appearance), else [n] follow the
    trailing reference list."""
    retrieved = retrieved or []
    numbered, ids = arxiv_links_to_numbers(text)
    if ids:
        sources, used = _linked_sources(ids, retrieved)
        return numbered, sources, "arxiv_links", used
    refs = parse_reference_list(text)
    if refs:
        sources, used = list_sources(text, refs, retrieved, unresolved)
        return text, sources, "reference_list", used
    return text, [], None, set()


def _given_source(position: int, item: Any, seen: set[int], notes: list[str]) -> Source | None:
    """One entry of a report's own `sources` list; None for a repeated idx (the first is kept)."""
    if not isinstance(item, dict):
        raise ValueError(f"source {position} is not an object")
    idx = item.get("idx", position)
    if isinstance(idx, bool) or not isinstance(idx, int | str) or not str(idx).strip().isdigit():
        raise ValueError(f"source {position} has a non-integer idx {idx!r}")
    idx = int(idx)
    if idx in seen:
        notes.append(f"source idx {idx} given twice; first kept")
        return None
    seen.add(idx)
    url = text_of(item.get("url")).strip() or None
    given_id = text_of(item.get("arxiv_id")).strip()
    found_id = arxiv_id(given_id) or arxiv_id(url)
    if given_id and found_id is None:
        notes.append(f"source {idx}: {given_id!r} is not an arXiv id")
    return Source(idx=idx, title=text_of(item.get("title")).strip(), snippet=text_of(item.get("snippet")),
                  arxiv_id=found_id, url=url, published=published(item.get("published")))


def normalise_sources(raw: Any, notes: list[str]) -> list[Source]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"sources must be a list, not {type(raw).__name__}")
    seen: set[int] = set()
    given = (_given_source(position, item, seen, notes) for position, item in enumerate(raw, start=1))
    return [s for s in given if s is not None]


def report_from_json(obj: Any, fmt: str = "jsonl", path: Path | str = "") -> Report:
    """A report given as {text, sources:[{idx, arxiv_id|url, title, snippet, published?}]} (JSONL, HTTP).

    Without sources, arXiv links in the text are numbered, else the text's own reference list is used.
    """
    if not isinstance(obj, dict):
        raise ValueError("a report must be a JSON object")
    text = obj.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("report has no text")
    notes: list[str] = []
    unresolved: list[dict] = []
    sources = normalise_sources(obj.get("sources"), notes)
    if not sources:
        text, sources, numbering, _ = markdown_sources(text, unresolved)
        if numbering:
            notes.append(f"sources from the text's {numbering.replace('_', ' ')}")
    info = dict(obj["trace"]) if isinstance(obj.get("trace"), dict) else {}
    info.update(trace(fmt, Path(path) if path else Path(""), notes, unresolved))
    return Report(text=text, sources=sources, trace=info)
