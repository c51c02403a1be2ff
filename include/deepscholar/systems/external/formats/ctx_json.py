"""What the {output, ctxs} JSON formats share (search-ai, openscholar, deepresearcher).

Each writes its report in `output` (else a single .md beside the file) and what it retrieved in
`ctxs`; they differ in how [n] map to ctxs, so each format module passes its own numbering. The
default numbering follows the text's own reference list, matched to ctxs by id, URL or title, and
falls back to ctxs[n-1] for a cited number without an entry.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from deepscholar.systems.base import Report, Source
from deepscholar.systems.external.formats.base import (
    JSON,
    ExternalOutput,
    Unit,
    arxiv_id,
    body_citations,
    load_json,
    published,
    read_text,
    resolve_key,
    text_of,
    trace,
    unresolved_entry,
)
from deepscholar.systems.external.formats.sources import (
    entry_names_nothing,
    match_ctx,
    retrieved_only,
    unusable_entry,
)
from deepscholar.text.citations import ParsedReference, parse_reference_list

__all__ = ["CtxReading", "COMPANIONS", "NOT_AN_OUTPUT", "SUFFIXES", "ctx_source", "is_ctx_output",
           "number_by_reference_list", "parse_ctx_json"]

SUFFIXES = (".json",)
COMPANIONS = (".md", ".markdown")  # a report text beside the JSON file, read when `output` is empty
NOT_AN_OUTPUT = "not a system output (no 'output' or 'ctxs')"
READER = JSON
S2_CORPUS_URL = "https://api.semanticscholar.org/CorpusID:{}"


def is_ctx_output(data: Any) -> bool:
    """An {output, ctxs} file (a system's config or usage file beside it is not)."""
    return isinstance(data, dict) and bool({"output", "ctxs"} & set(data))


def ctx_dicts(data: dict) -> list[dict]:
    ctxs = data.get("ctxs")
    if not isinstance(ctxs, list):
        ctxs = []
    return [c for c in ctxs if isinstance(c, dict)]


def ctx_source(idx: int, ctx: dict) -> Source:
    url = text_of(ctx.get("url")).strip() or None
    found = arxiv_id(url) or arxiv_id(ctx.get("arxiv_id")) or (
        arxiv_id(ctx.get("id")) if "arxiv" in text_of(ctx.get("id")).lower() else None)
    corpus = text_of(ctx.get("source")).lower()
    if url is None and corpus.startswith("pes2o") and text_of(ctx.get("id")).strip().isdigit():
        # peS2o ids are Semantic Scholar corpus ids: a URL that resolves to the paper.
        url = S2_CORPUS_URL.format(text_of(ctx.get("id")).strip())
    if url is None and found:
        url = f"https://arxiv.org/abs/{found}"
    snippet = next((text_of(ctx.get(k)) for k in ("text", "snippet", "quick_summary", "retrieval text")
                    if text_of(ctx.get(k)).strip()), "")
    return Source(idx=idx, title=text_of(ctx.get("title")).strip(), snippet=snippet, arxiv_id=found, url=url,
                  published=published(ctx.get("date") or ctx.get("published")))


@dataclass
class CtxReading:
    """One {output, ctxs} file being read: its text and ctxs, and what the numbering made of them."""

    unit: Unit
    data: dict
    text: str
    ctxs: list[dict]
    ctx_sources: list[Source]
    notes: list[str] = field(default_factory=list)
    unresolved: list[dict] = field(default_factory=list)
    sources: list[Source] = field(default_factory=list)
    used: set[int] = field(default_factory=set)  # positions in ctxs the sources took their snippets from
    extra: dict[str, Any] = field(default_factory=dict)  # for the trace


Answer = Callable[[str], tuple[str, str | None]]  # the report inside `output`, and a note on how found
Numbering = Callable[[CtxReading], None]


def _output_text(unit: Unit, data: dict, answer: Answer | None, notes: list[str]) -> str:
    """The report's text: `output`, else the one .md beside the file; the format's `answer` extracts it."""
    text = text_of(data.get("output"))
    if not text.strip():
        md = sorted(unit.path.parent.glob("*.md"))
        if len(md) == 1:
            text = read_text(md[0])
            notes.append(f"text from {md[0].name}")
    if answer is not None:
        text, note = answer(text)
        if note:
            notes.append(note)
    if not text.strip():
        raise ValueError("output has no text")
    return text


def start_reading(unit: Unit, answer: Answer | None = None) -> CtxReading:
    data = unit.data if unit.data is not None else load_json(unit.path)
    notes: list[str] = []
    text = _output_text(unit, data, answer, notes)
    ctxs = [c if isinstance(c, dict) else {} for c in (data.get("ctxs") or [])]
    return CtxReading(unit=unit, data=data, text=text, ctxs=ctxs, notes=notes,
                      ctx_sources=[ctx_source(i + 1, c) for i, c in enumerate(ctxs)])


def _entry_source(r: CtxReading, n: int, ref: ParsedReference, moved: list[str]) -> Source:
    """Source [n] from its reference entry, with the snippet of the ctx it names (noted when not ctxs[n-1])."""
    pos = match_ctx(ref, r.ctx_sources)
    if pos is None:
        return Source(idx=n, title=ref.title, snippet="", arxiv_id=ref.arxiv_id, url=ref.url)
    r.used.add(pos)
    ctx = r.ctx_sources[pos]
    if pos != n - 1:
        moved.append(f"[{n}]=ctxs[{pos}]")
    return Source(idx=n, title=ctx.title or ref.title, snippet=ctx.snippet, arxiv_id=ref.arxiv_id or ctx.arxiv_id,
                  url=ref.url or ctx.url, published=ctx.published)


def _positional_source(r: CtxReading, n: int) -> Source | None:
    """Source [n] as ctxs[n-1], for a cited number the reference list has no entry for."""
    if not 1 <= n <= len(r.ctx_sources):
        r.unresolved.append(unresolved_entry(
            n, "", f"no entry with this number in the reference list and no ctxs[{n - 1}]"))
        return None
    r.used.add(n - 1)
    ctx = r.ctx_sources[n - 1]
    return Source(idx=n, title=ctx.title, snippet=ctx.snippet, arxiv_id=ctx.arxiv_id, url=ctx.url,
                  published=ctx.published)


def number_by_reference_list(r: CtxReading) -> None:
    """[n] is the text's reference entry n (matched to a ctx for its snippet), else ctxs[n-1]."""
    refs = parse_reference_list(r.text)
    cited = body_citations(r.text)
    moved: list[str] = []
    for n in sorted(set(cited) | set(refs)):
        ref = refs.get(n)
        if ref is not None and entry_names_nothing(ref):
            r.unresolved.append(unusable_entry(n, ref, cited))
            continue
        source = _entry_source(r, n, ref, moved) if ref is not None else _positional_source(r, n)
        if source is not None:
            r.sources.append(source)
    r.extra["numbering"] = "reference_list" if refs else "ctxs"
    if moved:
        r.extra["reference_list_vs_ctx_order"] = moved
    unmatched = [n for n, ref in refs.items() if not ref.problem and not any(
        s.idx == n and s.snippet for s in r.sources)]
    if refs and unmatched:
        r.notes.append(f"{len(unmatched)} reference entries match no retrieved passage: no snippet")


def _run_costs(data: dict) -> tuple[float | None, float | None]:
    """(latency in ms, cost in USD) the output records about its own run, if it does."""
    latency = data.get("latency")
    usage = data.get("usage")
    if not isinstance(usage, dict):
        usage = {}
    cost = usage.get("total_cost_usd_dollar", usage.get("total_cost"))
    return (float(latency) * 1000 if isinstance(latency, int | float) else None,
            float(cost) if isinstance(cost, int | float) else None)


def finish_reading(r: CtxReading, name: str) -> ExternalOutput:
    """The output: the numbered sources, then the ctxs the report does not cite (`cited` false)."""
    retrieved = retrieved_only(r.text, r.sources, r.ctx_sources, r.used)
    if retrieved:
        r.extra["n_retrieved_uncited"] = len(retrieved)
    key, row = resolve_key(r.unit, arxiv_id(r.data.get("arxiv_id")) or arxiv_id(r.data.get("abs_url")))
    latency_ms, cost_usd = _run_costs(r.data)
    return ExternalOutput(
        key=key, row=row, path=str(r.unit.path), format=name,
        report=Report(text=r.text, sources=r.sources + retrieved,
                      trace=trace(name, r.unit.path, r.notes, r.unresolved, **r.extra)),
        latency_ms=latency_ms, cost_usd=cost_usd)


def parse_ctx_json(unit: Unit, name: str, *, answer: Answer | None = None,
                   numbering: Numbering = number_by_reference_list) -> list[ExternalOutput]:
    """One {output, ctxs} file as format `name`: its text (through `answer`), numbered by `numbering`."""
    reading = start_reading(unit, answer)
    numbering(reading)
    return [finish_reading(reading, name)]
