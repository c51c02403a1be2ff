"""Readers for the output formats of systems run elsewhere, each turning one output into a Report.

The six published systems each number their citations differently (FORMATS.md, and what their files
actually do):
- deepscholar-base cites with arXiv links: numbered here in order of first appearance, matched to
  paper.csv for titles and the snippets the system saw.
- search-ai writes its own numbered reference list, and that list, not the position in `ctxs`, says
  what [n] is (its [2] is ctxs[29] in the published output); ctxs give the snippets, matched by id.
- openscholar cites passages 0-based, in the order of `ctxs` (its `final_passages` starts at [0]); the
  text is shifted to 1-based so [n] means sources idx n everywhere. The reference list it appends is
  the model's own echo (partly copied from its prompt's examples) and is not used when ctxs exist.
- deepresearcher writes a reference list of its own; its `output` can hold agent markup and a second,
  truncated answer, so the complete answer is extracted first.
- storm: url_to_info.json maps each URL to the unified citation index its [n] use; the reference
  lists the polishing model writes into the article are not used.
- jsonl: one report a line with explicit sources.

Sources are the report's bibliography: what its text cites or lists, not every passage retrieved.
A PATH is one output or a folder of them; folders named by a number are rows of the dataset the
outputs were made for, folders or files named by an arXiv id are that paper.
"""

from __future__ import annotations

import csv
import json
import logging
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deepscholar.systems.base import Report, Source
from deepscholar.systems.citations import (
    ParsedReference,
    arxiv_id_from_text,
    arxiv_links_to_numbers,
    citation_numbers,
    parse_reference_list,
    renumber_citations,
)
from deepscholar.text import (
    ARXIV_NEW_ID_RE,
    ARXIV_OLD_ID_RE,
    normalise_title,
    strip_arxiv_version,
    title_similarity,
)

__all__ = [
    "FORMATS",
    "ExternalOutput",
    "detect_format",
    "read_deepresearcher",
    "read_deepscholar_base",
    "read_jsonl",
    "read_openscholar",
    "read_outputs",
    "read_search_ai",
    "read_storm",
    "report_from_json",
]

log = logging.getLogger(__name__)

FORMATS = ("jsonl", "deepscholar-base", "search-ai", "openscholar", "deepresearcher", "storm")
_JSON_FORMATS = ("search-ai", "openscholar", "deepresearcher")
_STORM_ARTICLES = ("storm_gen_article_polished.md", "storm_gen_article_polished.txt", "storm_gen_article.md",
                   "storm_gen_article.txt")
_DSB_TEXTS = ("intro.md", "final_report.md")
S2_CORPUS_URL = "https://api.semanticscholar.org/CorpusID:{}"
# A source matches a reference entry by title only when nearly identical (typos, casing, punctuation).
_TITLE_MATCH = 0.9


@dataclass
class ExternalOutput:
    """One system output: its key (version-less arXiv id, else a dataset row from a folder name) and report."""

    key: str | int | None
    report: Report | None
    path: str = ""
    format: str = ""
    row: int | None = None  # the folder's row number when the key came from the output itself
    error: str | None = None  # why this output could not be read (it is reported, never stored)
    latency_ms: float | None = None
    cost_usd: float | None = None


# ------------------------------------------------------------------------------------ helpers


def _arxiv_id(value: Any) -> str | None:
    """A version-less arXiv id from an id, 'arXiv:…' or an arXiv URL; None otherwise."""
    text = str(value or "").strip()
    if not text:
        return None
    found, _ = arxiv_id_from_text(text)
    if found:
        return found
    base, _ = strip_arxiv_version(text)
    if ARXIV_NEW_ID_RE.fullmatch(base) or ARXIV_OLD_ID_RE.fullmatch(base):
        return base
    return None


def _name_key(name: str) -> str | int | None:
    """Key named by a folder or file: a dataset row ('0') or an arXiv id ('2506.02838v1')."""
    if re.fullmatch(r"\d+", name):
        return int(name)
    return _arxiv_id(name)


def _published(value: Any) -> datetime | None:
    text = str(value or "").strip()
    if not text:
        return None
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return ts if ts.tzinfo else ts.replace(tzinfo=UTC)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _load_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as fh:
        return json.load(fh)


def _trace(fmt: str, path: Path, notes: list[str], **extra: Any) -> dict:
    info = {"format": fmt, "file": str(path), **{k: v for k, v in extra.items() if v not in (None, [], {})}}
    if notes:
        info["notes"] = notes
    return {"import": info}


def _sources_from_references(refs: dict[int, ParsedReference], notes: list[str]) -> list[Source]:
    """An entry naming a placeholder id gives no source: its citations count as unresolved."""
    out = []
    for n, ref in sorted(refs.items()):
        if ref.problem:
            notes.append(f"[{n}] {ref.problem}")
            continue
        out.append(Source(idx=n, title=ref.title, snippet="", arxiv_id=ref.arxiv_id, url=ref.url))
    return out


def _normalise_sources(raw: Any, notes: list[str]) -> list[Source]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise ValueError(f"sources must be a list, not {type(raw).__name__}")
    out: list[Source] = []
    seen: set[int] = set()
    for position, item in enumerate(raw, start=1):
        if not isinstance(item, dict):
            raise ValueError(f"source {position} is not an object")
        idx = item.get("idx", position)
        if isinstance(idx, bool) or not isinstance(idx, int | str) or not str(idx).strip().isdigit():
            raise ValueError(f"source {position} has a non-integer idx {idx!r}")
        idx = int(idx)
        if idx in seen:
            notes.append(f"source idx {idx} given twice; first kept")
            continue
        seen.add(idx)
        url = _text(item.get("url")).strip() or None
        given_id = _text(item.get("arxiv_id")).strip()
        arxiv_id = _arxiv_id(given_id) or _arxiv_id(url)
        if given_id and arxiv_id is None:
            notes.append(f"source {idx}: {given_id!r} is not an arXiv id")
        out.append(Source(idx=idx, title=_text(item.get("title")).strip(), snippet=_text(item.get("snippet")),
                          arxiv_id=arxiv_id, url=url, published=_published(item.get("published"))))
    return out


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
    sources = _normalise_sources(obj.get("sources"), notes)
    if not sources:
        numbered, ids = arxiv_links_to_numbers(text)
        if ids:
            text = numbered
            sources = [Source(idx=n, title="", snippet="", arxiv_id=a, url=f"https://arxiv.org/abs/{a}")
                       for n, a in sorted(ids.items())]
            notes.append("sources from the text's arXiv links")
        elif refs := parse_reference_list(text):
            sources = _sources_from_references(refs, notes)
            notes.append("sources from the text's reference list")
    trace = dict(obj["trace"]) if isinstance(obj.get("trace"), dict) else {}
    trace.update(_trace(fmt, Path(path) if path else Path(""), notes))
    return Report(text=text, sources=sources, trace=trace)


# ------------------------------------------------------------------------------ unit discovery


@dataclass
class _Unit:
    fmt: str
    path: Path
    key: str | int | None = None
    data: Any = field(default=None, repr=False)


def _json_flavor(data: Any) -> str | None:
    """Which system wrote an {output, ctxs} JSON file (None: not a system output)."""
    if not isinstance(data, dict) or not ({"output", "ctxs"} & set(data)):
        return None
    ctxs = data.get("ctxs") if isinstance(data.get("ctxs"), list) else []
    ctx_dicts = [c for c in ctxs if isinstance(c, dict)]
    if {"final_passages", "id_mapping", "feedbacks"} & set(data) or any(
            "pes2o" in _text(c.get("source")).lower() for c in ctx_dicts):
        return "openscholar"
    if {"messages", "tool_response", "tool_calls"} & set(data) or any("search_query" in c for c in ctx_dicts):
        return "deepresearcher"
    return "search-ai"


def _dir_units(d: Path) -> list[_Unit]:
    """Outputs lying directly in folder d."""
    if (d / "url_to_info.json").is_file() and any((d / a).is_file() for a in _STORM_ARTICLES):
        return [_Unit("storm", d)]
    if (d / "paper.csv").is_file() and any((d / t).is_file() for t in _DSB_TEXTS):
        return [_Unit("deepscholar-base", d)]
    units = [_Unit("jsonl", p, _name_key(p.stem)) for p in sorted(d.glob("*.jsonl"))]
    for p in sorted(d.glob("*.json")):
        try:
            data = _load_json(p)
        except (OSError, ValueError):
            continue
        flavor = _json_flavor(data)
        if flavor:
            units.append(_Unit(flavor, p, _name_key(p.stem), data))
    return units


def _natural(p: Path) -> tuple:
    return (0, int(p.name), "") if p.name.isdigit() else (1, 0, p.name)


def _discover(path: Path, depth: int = 0) -> list[_Unit]:
    if path.is_file():
        if path.suffix == ".jsonl":
            return [_Unit("jsonl", path, _name_key(path.stem))]
        if path.suffix == ".json":
            data = _load_json(path)
            if (flavor := _json_flavor(data)) is None:
                raise ValueError(f"{path} is not a system output (no 'output' or 'ctxs')")
            return [_Unit(flavor, path, _name_key(path.stem), data)]
        if path.name in _STORM_ARTICLES or path.name in _DSB_TEXTS or path.name == "url_to_info.json":
            return _discover(path.parent, depth)
        raise ValueError(f"{path}: unsupported file type (give the output's folder, a .json or a .jsonl)")
    if not path.is_dir():
        raise FileNotFoundError(path)
    units = _dir_units(path)
    if not units and depth < 3:
        for child in sorted((c for c in path.iterdir() if c.is_dir() and not c.name.startswith(".")), key=_natural):
            found = _discover(child, depth + 1)
            key = _name_key(child.name)
            # A folder named by a row or an id holding one output keys that output.
            if key is not None and len(found) == 1 and found[0].key is None:
                found[0].key = key
            units.extend(found)
    return units


def detect_format(path: Path | str) -> str:
    """The format of one output or of a folder of outputs (all of one format)."""
    units = _discover(Path(path))
    kinds = sorted({u.fmt for u in units})
    if not kinds:
        raise ValueError(f"no system outputs recognised under {path}")
    if len(kinds) > 1:
        raise ValueError(f"{path} mixes formats {kinds}; import each format separately")
    return kinds[0]


# ----------------------------------------------------------------------------------- parsers


def _resolve_key(unit: _Unit, content_id: str | None) -> tuple[str | int | None, int | None]:
    """(key, row): an arXiv id the output names wins; the folder's row is then kept for a cross-check."""
    if content_id is None:
        return unit.key, None
    if isinstance(unit.key, str) and unit.key != content_id:
        raise ValueError(f"named {unit.key} by its path but the output is for {content_id}")
    return content_id, unit.key if isinstance(unit.key, int) else None


def _ctx_source(idx: int, ctx: dict) -> Source:
    url = _text(ctx.get("url")).strip() or None
    arxiv_id = _arxiv_id(url) or _arxiv_id(ctx.get("arxiv_id")) or (
        _arxiv_id(ctx.get("id")) if "arxiv" in _text(ctx.get("id")).lower() else None)
    corpus = _text(ctx.get("source")).lower()
    if url is None and corpus.startswith("pes2o") and _text(ctx.get("id")).strip().isdigit():
        # peS2o ids are Semantic Scholar corpus ids: a URL that resolves to the paper.
        url = S2_CORPUS_URL.format(_text(ctx.get("id")).strip())
    if url is None and arxiv_id:
        url = f"https://arxiv.org/abs/{arxiv_id}"
    snippet = next((_text(ctx.get(k)) for k in ("text", "snippet", "quick_summary", "retrieval text")
                    if _text(ctx.get(k)).strip()), "")
    return Source(idx=idx, title=_text(ctx.get("title")).strip(), snippet=snippet, arxiv_id=arxiv_id, url=url,
                  published=_published(ctx.get("date") or ctx.get("published")))


def _match_ctx(ref: ParsedReference, ctx_sources: list[Source]) -> int | None:
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
        if best[0] >= _TITLE_MATCH:
            return best[1]
    return None


def _answer_text(output: str) -> tuple[str, str | None]:
    """The report inside an agent transcript: a closed <answer> block, else the fullest prose segment."""
    closed = re.findall(r"<answer>(.*?)</answer>", output, flags=re.S)
    if closed and closed[-1].strip():
        return closed[-1].strip(), "text from the closed <answer> block"
    pieces = re.split(r"</?(?:think|answer|tool_calls?|tool_response|tool_call)>", output)
    prose = [p.strip() for p in pieces if p.strip() and not p.strip().startswith(("[{", "{"))]
    if len(prose) <= 1:
        return (prose[0] if prose else output.strip()), None
    best = max(prose, key=lambda p: (bool(parse_reference_list(p)), len(p)))
    return best, f"text is the fullest of {len(prose)} answer segments (agent markup and a truncated repeat dropped)"


def _parse_ctx_json(unit: _Unit, fmt: str) -> ExternalOutput:
    data = unit.data if unit.data is not None else _load_json(unit.path)
    notes: list[str] = []
    text = _text(data.get("output"))
    if not text.strip():
        md = sorted(unit.path.parent.glob("*.md"))
        if len(md) == 1:
            text = md[0].read_text(encoding="utf-8")
            notes.append(f"text from {md[0].name}")
    if fmt == "deepresearcher":
        text, note = _answer_text(text)
        if note:
            notes.append(note)
    if not text.strip():
        raise ValueError("output has no text")
    ctxs = [c if isinstance(c, dict) else {} for c in (data.get("ctxs") or [])]
    ctx_sources = [_ctx_source(i + 1, c) for i, c in enumerate(ctxs)]
    sources: list[Source] = []
    extra: dict[str, Any] = {}

    if fmt == "openscholar" and ctxs:
        base = 0
        passages = data.get("final_passages")
        if isinstance(passages, str) and (m := re.match(r"\s*\[(\d+)\]", passages)):
            base = int(m.group(1))
        if base == 0:
            text = renumber_citations(text, lambda n: n + 1)
            notes.append("0-based passage citations shifted to 1-based")
        extra["citation_base"] = base
        # The reference list's numbers say which passages it means; its text is the model's echo.
        wanted = sorted(set(citation_numbers(text)) | set(parse_reference_list(text)))
        sources = [ctx_sources[n - 1] for n in wanted if 1 <= n <= len(ctx_sources)]
    else:
        refs = parse_reference_list(text)
        cited = citation_numbers(text)
        numbers = sorted(set(cited) | set(refs))
        moved = []
        for n in numbers:
            ref = refs.get(n)
            if ref is not None and ref.problem:
                notes.append(f"[{n}] {ref.problem}")
                continue
            if ref is not None:
                pos = _match_ctx(ref, ctx_sources)
                if pos is not None:
                    ctx = ctx_sources[pos]
                    if pos != n - 1:
                        moved.append(f"[{n}]=ctxs[{pos}]")
                    sources.append(Source(idx=n, title=ctx.title or ref.title, snippet=ctx.snippet,
                                          arxiv_id=ref.arxiv_id or ctx.arxiv_id, url=ref.url or ctx.url,
                                          published=ctx.published))
                else:
                    sources.append(Source(idx=n, title=ref.title, snippet="", arxiv_id=ref.arxiv_id, url=ref.url))
            elif 1 <= n <= len(ctx_sources):
                ctx = ctx_sources[n - 1]
                sources.append(Source(idx=n, title=ctx.title, snippet=ctx.snippet, arxiv_id=ctx.arxiv_id,
                                      url=ctx.url, published=ctx.published))
        extra["numbering"] = "reference_list" if refs else "ctxs"
        if moved:
            extra["reference_list_vs_ctx_order"] = moved
        unmatched = [n for n, r in refs.items() if not r.problem and not any(
            s.idx == n and s.snippet for s in sources)]
        if refs and unmatched:
            notes.append(f"{len(unmatched)} reference entries match no retrieved passage: no snippet")

    key, row = _resolve_key(unit, _arxiv_id(data.get("arxiv_id")) or _arxiv_id(data.get("abs_url")))
    latency = data.get("latency")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    cost = usage.get("total_cost_usd_dollar", usage.get("total_cost"))
    return ExternalOutput(
        key=key, row=row, path=str(unit.path), format=fmt,
        report=Report(text=text, sources=sources, trace=_trace(fmt, unit.path, notes, **extra)),
        latency_ms=float(latency) * 1000 if isinstance(latency, int | float) else None,
        cost_usd=float(cost) if isinstance(cost, int | float) else None)


def _csv_rows(path: Path) -> list[dict[str, str]]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # snippets and LLM notes are long cells
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _parse_deepscholar_base(unit: _Unit, fmt: str) -> ExternalOutput:
    d = unit.path
    text_file = next(d / t for t in _DSB_TEXTS if (d / t).is_file())
    raw = text_file.read_text(encoding="utf-8")
    text, ids = arxiv_links_to_numbers(raw)
    notes: list[str] = []
    by_id: dict[str, dict[str, str]] = {}
    for row in _csv_rows(d / "paper.csv"):
        aid = _arxiv_id(row.get("id")) or _arxiv_id(row.get("url"))
        if aid:
            by_id.setdefault(aid, row)
    refs = parse_reference_list(text)
    sources, missing = [], []
    for n, aid in sorted(ids.items()):
        row = by_id.get(aid)
        if row is None:
            missing.append(aid)
        title = (row or {}).get("title", "").strip() or (refs[n].title if n in refs else "")
        sources.append(Source(idx=n, title=title, snippet=(row or {}).get("snippet", ""), arxiv_id=aid,
                              url=((row or {}).get("url") or "").strip() or f"https://arxiv.org/abs/{aid}",
                              published=_published((row or {}).get("date"))))
    if missing:
        notes.append(f"not in paper.csv (no snippet): {', '.join(missing)}")
    return ExternalOutput(key=unit.key, path=str(text_file), format=fmt,
                          report=Report(text=text, sources=sources,
                                        trace=_trace(fmt, text_file, notes, numbering="arxiv_links")))


def _parse_storm(unit: _Unit, fmt: str) -> ExternalOutput:
    d = unit.path
    article = next(d / a for a in _STORM_ARTICLES if (d / a).is_file())
    text = article.read_text(encoding="utf-8")
    info = _load_json(d / "url_to_info.json")
    notes: list[str] = []
    by_url = info.get("url_to_info", {}) if isinstance(info, dict) else {}
    index = info.get("url_to_unified_index") if isinstance(info, dict) else None
    if not isinstance(index, dict):
        index = {url: i for i, url in enumerate(by_url, start=1)}
        notes.append("no url_to_unified_index: sources numbered in url_to_info order")
    sources: list[Source] = []
    seen: set[int] = set()
    for url, n in sorted(index.items(), key=lambda kv: int(kv[1])):
        n = int(n)
        if n in seen:
            notes.append(f"index {n} given to several URLs; first kept")
            continue
        seen.add(n)
        item = by_url.get(url) or {}
        snippets = item.get("snippets") if isinstance(item.get("snippets"), list) else []
        snippet = "\n\n".join(_text(s) for s in snippets if _text(s).strip()) or _text(item.get("description"))
        sources.append(Source(idx=n, title=_text(item.get("title")).strip(), snippet=snippet,
                              arxiv_id=_arxiv_id(url), url=url))
    return ExternalOutput(key=unit.key, path=str(article), format=fmt,
                          report=Report(text=text, sources=sources,
                                        trace=_trace(fmt, article, notes, numbering="url_to_unified_index")))


def _read_jsonl(unit: _Unit) -> list[ExternalOutput]:
    out = []
    with unit.path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{unit.path}:{lineno}"
            key: str | int | None = None
            try:
                obj = json.loads(line)
                if isinstance(obj, dict):
                    key = _arxiv_id(obj.get("arxiv_id"))
                    if key is None and isinstance(obj.get("row"), int):
                        key = obj["row"]
                report = report_from_json(obj, "jsonl", where)
            except Exception as exc:  # one bad line is reported, the others still import
                out.append(ExternalOutput(key=key, report=None, path=where, format="jsonl", error=str(exc)))
                continue
            out.append(ExternalOutput(key=key, report=report, path=where, format="jsonl"))
    return out


_PARSERS: dict[str, Callable[[_Unit, str], ExternalOutput]] = {
    "deepscholar-base": _parse_deepscholar_base,
    "storm": _parse_storm,
    "search-ai": _parse_ctx_json,
    "openscholar": _parse_ctx_json,
    "deepresearcher": _parse_ctx_json,
}


def read_outputs(path: Path | str, fmt: str = "auto") -> list[ExternalOutput]:
    """Every output under PATH; an output that cannot be read comes back with `error` set."""
    if fmt != "auto" and fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}; known: {', '.join(FORMATS)}")
    outputs: list[ExternalOutput] = []
    for unit in _discover(Path(path)):
        if fmt != "auto" and unit.fmt != fmt and not (fmt in _JSON_FORMATS and unit.fmt in _JSON_FORMATS):
            outputs.append(ExternalOutput(key=unit.key, report=None, path=str(unit.path), format=unit.fmt,
                                          error=f"a {unit.fmt} output, not {fmt}"))
            continue
        use = unit.fmt if fmt == "auto" else fmt
        if use == "jsonl":
            outputs.extend(_read_jsonl(unit))
            continue
        try:
            outputs.append(_PARSERS[use](unit, use))
        except Exception as exc:  # a broken output is reported with its path, the others still import
            log.warning("cannot read %s output %s: %s", use, unit.path, exc)
            outputs.append(ExternalOutput(key=unit.key, report=None, path=str(unit.path), format=use,
                                          error=f"{type(exc).__name__}: {exc}"))
    return outputs


def read_jsonl(path: Path | str) -> list[ExternalOutput]:
    return read_outputs(path, "jsonl")


def read_deepscholar_base(path: Path | str) -> list[ExternalOutput]:
    return read_outputs(path, "deepscholar-base")


def read_search_ai(path: Path | str) -> list[ExternalOutput]:
    return read_outputs(path, "search-ai")


def read_openscholar(path: Path | str) -> list[ExternalOutput]:
    return read_outputs(path, "openscholar")


def read_deepresearcher(path: Path | str) -> list[ExternalOutput]:
    return read_outputs(path, "deepresearcher")


def read_storm(path: Path | str) -> list[ExternalOutput]:
    return read_outputs(path, "storm")
