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
- markdown: any other .md report; [n] follow its trailing numbered reference list.

What a folder holds is decided by content: a deepscholar-base folder (intro.md + paper.csv) whose text
has no arXiv links but [n] markers and a numbered reference list is read through that list, like any
markdown report. A reference entry names an arXiv id, a URL or DOI, or only a title (resolved later
against the corpus by the importer); an entry naming a placeholder (`arXiv:2301.XXXXX`) is unresolved
and listed in the trace (`import.unresolved`), never dropped silently.

Sources with `cited` true are the report's bibliography: what its text cites or lists. What the system
says it retrieved but does not list (paper.csv rows, ctxs) is kept with `cited` false, numbered after
every number the text uses, for the leakage check only.
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
from datetime import datetime
from pathlib import Path
from typing import Any

from deepscholar.clock import assume_utc
from deepscholar.systems.base import Report, Source
from deepscholar.text import (
    ARXIV_NEW_ID_RE,
    ARXIV_OLD_ID_RE,
    normalise_title,
    strip_arxiv_version,
    title_similarity,
)
from deepscholar.text.arxiv_ids import arxiv_id_or_problem
from deepscholar.text.citations import (
    ParsedReference,
    arxiv_links_to_numbers,
    citation_numbers,
    parse_reference_list,
    remap_citation_numbers,
)
from deepscholar.text.sentences import split_report_sentences

__all__ = [
    "FORMATS",
    "ExternalOutput",
    "detect_format",
    "read_deepresearcher",
    "read_deepscholar_base",
    "read_jsonl",
    "read_markdown",
    "read_openscholar",
    "read_outputs",
    "read_search_ai",
    "read_storm",
    "report_from_json",
]

log = logging.getLogger(__name__)

FORMATS = ("jsonl", "deepscholar-base", "search-ai", "openscholar", "deepresearcher", "storm", "markdown")
_JSON_FORMATS = ("search-ai", "openscholar", "deepresearcher")
_STORM_ARTICLES = ("storm_gen_article_polished.md", "storm_gen_article_polished.txt", "storm_gen_article.md",
                   "storm_gen_article.txt")
_DSB_TEXTS = ("intro.md", "final_report.md")
_MARKDOWN_SUFFIXES = (".md", ".markdown")
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
    skipped: str | None = None  # a file looked at and not taken as an output, and why (listed, never stored)


# ------------------------------------------------------------------------------------ helpers


def _arxiv_id(value: Any) -> str | None:
    """A version-less arXiv id from an id, 'arXiv:…' or an arXiv URL; None otherwise."""
    text = str(value or "").strip()
    if not text:
        return None
    found, _ = arxiv_id_or_problem(text)
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
    return assume_utc(ts)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def _load_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as fh:
        return json.load(fh)


def _trace(fmt: str, path: Path, notes: list[str], unresolved: list[dict] | None = None, **extra: Any) -> dict:
    info = {"format": fmt, "file": str(path), **{k: v for k, v in extra.items() if v not in (None, [], {})}}
    if notes:
        info["notes"] = notes
    info["unresolved"] = list(unresolved or [])
    return {"import": info}


def unresolved_entry(n: int, entry: str, reason: str, in_text: bool = True) -> dict:
    """One unresolved citation as listed in a report's trace (`import.unresolved`)."""
    return {"n": n, "entry": entry, "reason": reason, "in_text": in_text}


def body_citations(text: str) -> list[int]:
    """Numbers the report body cites (its reference list excluded), first appearance first."""
    return list(dict.fromkeys(n for s in split_report_sentences(text) for n in s.citations))


def _list_sources(text: str, refs: dict[int, ParsedReference], retrieved: list[Source],
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
            continue
        if ref.problem or not (ref.arxiv_id or ref.url or ref.title):
            unresolved.append(unresolved_entry(n, ref.text, ref.problem or "the entry names nothing",
                                               in_text=n in cited))
            continue
        pos = _match_ctx(ref, retrieved)
        if pos is not None:
            used.add(pos)
            r = retrieved[pos]
            sources.append(Source(idx=n, title=r.title or ref.title, snippet=r.snippet,
                                  arxiv_id=ref.arxiv_id or r.arxiv_id, url=ref.url or r.url, published=r.published))
        else:
            sources.append(Source(idx=n, title=ref.title, snippet="", arxiv_id=ref.arxiv_id, url=ref.url))
    return sources, used


def _retrieved_only(text: str, sources: list[Source], retrieved: list[Source], used: set[int]) -> list[Source]:
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
    unresolved: list[dict] = []
    sources = _normalise_sources(obj.get("sources"), notes)
    if not sources:
        text, sources, numbering, _ = _markdown_sources(text, unresolved)
        if numbering:
            notes.append(f"sources from the text's {numbering.replace('_', ' ')}")
    trace = dict(obj["trace"]) if isinstance(obj.get("trace"), dict) else {}
    trace.update(_trace(fmt, Path(path) if path else Path(""), notes, unresolved))
    return Report(text=text, sources=sources, trace=trace)


def _markdown_sources(text: str, unresolved: list[dict], retrieved: list[Source] | None = None
                      ) -> tuple[str, list[Source], str | None, set[int]]:
    """(text, sources, numbering, retrieved positions used) of a markdown report that brings no source
    list of its own: arXiv links become [n] (numbered in order of first appearance), else [n] follow the
    trailing reference list."""
    retrieved = retrieved or []
    numbered, ids = arxiv_links_to_numbers(text)
    if ids:
        sources, used = [], set()
        for n, a in sorted(ids.items()):
            pos = next((i for i, x in enumerate(retrieved) if x.arxiv_id == a), None)
            r = retrieved[pos] if pos is not None else None
            if pos is not None:
                used.add(pos)
            sources.append(Source(idx=n, title=r.title if r else "", snippet=r.snippet if r else "", arxiv_id=a,
                                  url=(r.url if r and r.url else f"https://arxiv.org/abs/{a}"),
                                  published=r.published if r else None))
        return numbered, sources, "arxiv_links", used
    refs = parse_reference_list(text)
    if refs:
        sources, used = _list_sources(text, refs, retrieved, unresolved)
        return text, sources, "reference_list", used
    return text, [], None, set()


# ------------------------------------------------------------------------------ unit discovery


@dataclass
class _Unit:
    fmt: str  # a format, or "unreadable" / "skipped" (with `why`)
    path: Path
    key: str | int | None = None
    data: Any = field(default=None, repr=False)
    why: str | None = None


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


def _has_citations(text: str) -> bool:
    """A markdown file is a report when it cites: [n] markers, arXiv links or a numbered reference list."""
    return bool(citation_numbers(text) or arxiv_links_to_numbers(text)[1] or parse_reference_list(text))


def _read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _is_leaf_output(d: Path) -> str | None:
    """A folder that is one output whatever else it holds (its subfolders are the system's state)."""
    if (d / "url_to_info.json").is_file() and any((d / a).is_file() for a in _STORM_ARTICLES):
        return "storm"
    if (d / "paper.csv").is_file() and any((d / t).is_file() for t in _DSB_TEXTS):
        return "deepscholar-base"
    return None


def _file_unit(p: Path, explicit: bool) -> _Unit | None:
    """One file as an output; unreadable files become units that report why, never silent skips."""
    key = _name_key(p.stem)
    if p.suffix == ".jsonl":
        return _Unit("jsonl", p, key)
    if p.suffix == ".json":
        try:
            data = _load_json(p)
        except (OSError, ValueError) as exc:
            return _Unit("unreadable", p, key, why=f"not readable as JSON: {exc}")
        flavor = _json_flavor(data)
        if flavor is None:  # in a folder: the system's other files (config, usage); given itself: a mistake
            return _Unit("unreadable", p, key, why="not a system output (no 'output' or 'ctxs')") if explicit else None
        return _Unit(flavor, p, key, data)
    if p.suffix.lower() in _MARKDOWN_SUFFIXES:
        try:
            text = _read_text(p)
        except (OSError, UnicodeDecodeError) as exc:
            return _Unit("unreadable", p, key, why=f"not readable as UTF-8 text: {exc}")
        if not explicit and not _has_citations(text):
            return _Unit("skipped", p, key, why="no [n] markers, arXiv links or reference list "
                                                "(give the file itself to import it as a report)")
        return _Unit("markdown", p, key, text)
    return None


def _dir_units(d: Path) -> list[_Unit]:
    """Outputs lying directly in folder d."""
    if leaf := _is_leaf_output(d):
        return [_Unit(leaf, d)]
    files = sorted(p for p in d.iterdir() if p.is_file() and not p.name.startswith("."))
    units = [u for p in files if p.suffix in (".jsonl", ".json") and (u := _file_unit(p, False))]
    # A .md beside a JSON output (even an unreadable one) is that output's text.
    if not any(u.fmt in _JSON_FORMATS or u.path.suffix == ".json" for u in units):
        units += [u for p in files if p.suffix.lower() in _MARKDOWN_SUFFIXES and (u := _file_unit(p, False))]
    return units


def _natural(p: Path) -> tuple:
    return (0, int(p.name), "") if p.name.isdigit() else (1, 0, p.name)


def _discover(path: Path, depth: int = 0) -> list[_Unit]:
    if path.is_file():
        if path.name in _STORM_ARTICLES or path.name in _DSB_TEXTS or path.name == "url_to_info.json":
            if _is_leaf_output(path.parent):
                return _discover(path.parent, depth)
        unit = _file_unit(path, True)
        if unit is None:
            raise ValueError(f"{path}: unsupported file type (give the output's folder, a .json, .jsonl or .md)")
        return [unit]
    if not path.is_dir():
        raise FileNotFoundError(path)
    units = _dir_units(path)
    if _is_leaf_output(path) or depth >= 3:
        return units
    for child in sorted((c for c in path.iterdir() if c.is_dir() and not c.name.startswith(".")), key=_natural):
        found = _discover(child, depth + 1)
        key = _name_key(child.name)
        # A folder named by a row or an id holding one output keys that output.
        outputs = [u for u in found if u.fmt != "skipped"]
        if key is not None and len(outputs) == 1 and outputs[0].key is None:
            outputs[0].key = key
        units.extend(found)
    return units


def detect_format(path: Path | str) -> str:
    """The format of one output or of a folder of outputs (all of one format)."""
    units = _discover(Path(path))
    kinds = sorted({u.fmt for u in units} - {"unreadable", "skipped"})
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
    unresolved: list[dict] = []
    text = _text(data.get("output"))
    if not text.strip():
        md = sorted(unit.path.parent.glob("*.md"))
        if len(md) == 1:
            text = _read_text(md[0])
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
    used: set[int] = set()
    extra: dict[str, Any] = {}

    if fmt == "openscholar" and ctxs:
        base = 0
        passages = data.get("final_passages")
        if isinstance(passages, str) and (m := re.match(r"\s*\[(\d+)\]", passages)):
            base = int(m.group(1))
        if base == 0:
            text = remap_citation_numbers(text, lambda n: n + 1)
            notes.append("0-based passage citations shifted to 1-based")
        extra["citation_base"] = base
        # The reference list's numbers say which passages it means; its text is the model's echo.
        cited = body_citations(text)
        wanted = sorted(set(cited) | set(parse_reference_list(text)))
        for n in wanted:
            if 1 <= n <= len(ctx_sources):
                sources.append(ctx_sources[n - 1])
                used.add(n - 1)
            elif n in cited:
                unresolved.append(unresolved_entry(n, "", f"no passage {n - 1 + base} among the {len(ctxs)} ctxs"))
    else:
        refs = parse_reference_list(text)
        cited = body_citations(text)
        numbers = sorted(set(cited) | set(refs))
        moved = []
        for n in numbers:
            ref = refs.get(n)
            if ref is not None and (ref.problem or not (ref.arxiv_id or ref.url or ref.title)):
                unresolved.append(unresolved_entry(n, ref.text, ref.problem or "the entry names nothing",
                                                   in_text=n in cited))
                continue
            if ref is not None:
                pos = _match_ctx(ref, ctx_sources)
                if pos is not None:
                    used.add(pos)
                    ctx = ctx_sources[pos]
                    if pos != n - 1:
                        moved.append(f"[{n}]=ctxs[{pos}]")
                    sources.append(Source(idx=n, title=ctx.title or ref.title, snippet=ctx.snippet,
                                          arxiv_id=ref.arxiv_id or ctx.arxiv_id, url=ref.url or ctx.url,
                                          published=ctx.published))
                else:
                    sources.append(Source(idx=n, title=ref.title, snippet="", arxiv_id=ref.arxiv_id, url=ref.url))
            elif 1 <= n <= len(ctx_sources):
                used.add(n - 1)
                ctx = ctx_sources[n - 1]
                sources.append(Source(idx=n, title=ctx.title, snippet=ctx.snippet, arxiv_id=ctx.arxiv_id,
                                      url=ctx.url, published=ctx.published))
            else:
                unresolved.append(unresolved_entry(
                    n, "", f"no entry with this number in the reference list and no ctxs[{n - 1}]"))
        extra["numbering"] = "reference_list" if refs else "ctxs"
        if moved:
            extra["reference_list_vs_ctx_order"] = moved
        unmatched = [n for n, r in refs.items() if not r.problem and not any(
            s.idx == n and s.snippet for s in sources)]
        if refs and unmatched:
            notes.append(f"{len(unmatched)} reference entries match no retrieved passage: no snippet")
    retrieved = _retrieved_only(text, sources, ctx_sources, used)
    if retrieved:
        extra["n_retrieved_uncited"] = len(retrieved)

    key, row = _resolve_key(unit, _arxiv_id(data.get("arxiv_id")) or _arxiv_id(data.get("abs_url")))
    latency = data.get("latency")
    usage = data.get("usage") if isinstance(data.get("usage"), dict) else {}
    cost = usage.get("total_cost_usd_dollar", usage.get("total_cost"))
    return ExternalOutput(
        key=key, row=row, path=str(unit.path), format=fmt,
        report=Report(text=text, sources=sources + retrieved,
                      trace=_trace(fmt, unit.path, notes, unresolved, **extra)),
        latency_ms=float(latency) * 1000 if isinstance(latency, int | float) else None,
        cost_usd=float(cost) if isinstance(cost, int | float) else None)


def _csv_rows(path: Path) -> list[dict[str, str]]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # snippets and LLM notes are long cells
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _parse_deepscholar_base(unit: _Unit, fmt: str) -> ExternalOutput:
    """intro.md cites with arXiv links, or with [n] and a numbered reference list (decided by content);
    paper.csv is what the system retrieved: the snippets of what it cites, and the rest kept uncited."""
    d = unit.path
    text_file = next(d / t for t in _DSB_TEXTS if (d / t).is_file())
    raw = _read_text(text_file)
    notes: list[str] = []
    unresolved: list[dict] = []
    retrieved = []
    for row in _csv_rows(d / "paper.csv"):
        aid = _arxiv_id(row.get("id")) or _arxiv_id(row.get("url"))
        url = (row.get("url") or "").strip() or (f"https://arxiv.org/abs/{aid}" if aid else None)
        retrieved.append(Source(idx=len(retrieved) + 1, title=(row.get("title") or "").strip(),
                                snippet=row.get("snippet") or "", arxiv_id=aid, url=url,
                                published=_published(row.get("date"))))
    text, sources, numbering, used = _markdown_sources(raw, unresolved, retrieved)
    if numbering == "arxiv_links":
        known = {r.arxiv_id for r in retrieved if r.arxiv_id}
        missing = [s.arxiv_id for s in sources if s.arxiv_id not in known]
        if missing:
            notes.append(f"not in paper.csv (no snippet): {', '.join(missing)}")
        if not all(s.title for s in sources):  # a linked paper missing from paper.csv: the list's title
            refs = parse_reference_list(text)
            for s in sources:
                s.title = s.title or (refs[s.idx].title if s.idx in refs else "")
    elif numbering is None and body_citations(text):
        notes.append("the text has [n] markers but neither arXiv links nor a numbered reference list")
    uncited = _retrieved_only(text, sources, retrieved, used)
    return ExternalOutput(key=unit.key, path=str(text_file), format=fmt,
                          report=Report(text=text, sources=sources + uncited,
                                        trace=_trace(fmt, text_file, notes, unresolved, numbering=numbering or "none",
                                                     n_retrieved_uncited=len(uncited) or None)))


def _parse_markdown(unit: _Unit, fmt: str) -> ExternalOutput:
    """A markdown report on its own: arXiv links, else [n] through its trailing reference list."""
    raw = unit.data if isinstance(unit.data, str) else _read_text(unit.path)
    if not raw.strip():
        raise ValueError("the file is empty")
    notes: list[str] = []
    unresolved: list[dict] = []
    text, sources, numbering, _ = _markdown_sources(raw, unresolved)
    if numbering is None and body_citations(text):
        notes.append("the text has [n] markers but neither arXiv links nor a numbered reference list")
    key, row = _resolve_key(unit, None)
    return ExternalOutput(key=key, row=row, path=str(unit.path), format=fmt,
                          report=Report(text=text, sources=sources,
                                        trace=_trace(fmt, unit.path, notes, unresolved, numbering=numbering or "none")))


def _parse_storm(unit: _Unit, fmt: str) -> ExternalOutput:
    d = unit.path
    article = next(d / a for a in _STORM_ARTICLES if (d / a).is_file())
    text = _read_text(article)
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
    "markdown": _parse_markdown,
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
        if unit.fmt in ("unreadable", "skipped"):
            outputs.append(ExternalOutput(key=unit.key, report=None, path=str(unit.path), format=unit.fmt,
                                          **{"error" if unit.fmt == "unreadable" else "skipped": unit.why}))
            continue
        if fmt != "auto" and unit.fmt != fmt and not (fmt in _JSON_FORMATS and unit.fmt in _JSON_FORMATS):
            outputs.append(ExternalOutput(key=unit.key, report=None, path=str(unit.path), format=unit.fmt,
                                          error=f"a {unit.fmt} output, not {fmt} (--format auto reads it)"))
            continue
        use = unit.fmt if fmt == "auto" else fmt
        try:
            if use == "jsonl":
                outputs.extend(_read_jsonl(unit))
            else:
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


def read_markdown(path: Path | str) -> list[ExternalOutput]:
    return read_outputs(path, "markdown")
