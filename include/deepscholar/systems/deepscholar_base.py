"""`deepscholar_base`: the DeepScholar paper's reference pipeline, re-implemented on litellm.

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.deepscholar_base`.
"""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from deepscholar.errors import MissingCredentials, SystemFailure
from deepscholar.llm.client import Judged, LLMClient, ParseError, parse_json_array
from deepscholar.prompts import Prompt, load_prompt_file
from deepscholar.search.base import SearchResult, SearchTool
from deepscholar.systems.base import (
    Query,
    Report,
    Source,
    System,
    SystemContext,
    register_system,
)

__all__ = [
    "DeepScholarBase",
    "load_system_prompt",
    "build_llm_client",
    "source_key",
    "make_snippet",
    "cited_numbers",
    "parse_section",
]

STAGES = ("queries", "filter", "rank", "aggregate")
DEFAULTS: dict[str, Any] = {
    "Q": 2,  # search queries written per round
    "N": 2,  # rounds
    "search_K": 50,  # results asked of the search tool per query
    "K": 30,  # papers the ranking keeps for the section
    "concurrency": 8,  # LLM calls in flight (filter batches run in parallel)
    "filter_batch": 10,  # candidates judged per filter call
    "snippet_chars": 1200,  # of each abstract shown to the LLM (and stored as the source's snippet)
}


@dataclass(frozen=True)
class Candidate:
    key: str
    result: SearchResult
    snippet: str
    found_by: str  # the first query that returned it


def llm_system_settings(kind: str, config: dict[str, Any], defaults: dict[str, int]) -> dict[str, int]:
    """Defaults overlaid with the config's integer settings; a bad value or a missing model fails early."""
    settings = {**defaults, **{k: v for k, v in config.items() if k in defaults}}
    for key, value in settings.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{kind} config {key!r} must be a positive integer, got {value!r}")
    if not config.get("model"):
        raise ValueError(f"{kind} config needs a 'model' (a litellm model string)")
    return settings


def llm_config_schema(defaults: dict[str, Any]) -> dict[str, Any]:
    """The config keys of a kind that calls a model: its integer settings, the model and where it runs."""
    from deepscholar.systems import config_schema as cs

    return {**dict.fromkeys(defaults, cs.positive_int), "model": cs.text, "api_base": cs.base_url,
            "api_key_env": cs.key_variable, "search": cs.text}


@register_system("deepscholar_base")
class DeepScholarBase(System):
    """Query writing, search, relevance filter, top-K ranking, aggregation (see the module docstring)."""

    version = "2"  # bump rule: systems/base.py System.version; 2: `local` search ranks with BM25
    defaults = DEFAULTS
    config_schema = llm_config_schema(DEFAULTS)

    def __init__(self, name: str, config: dict[str, Any], context: SystemContext):
        super().__init__(name, config, context)
        self.settings = llm_system_settings(self.kind, self.config, DEFAULTS)
        self.prompts = self.load_prompts()

    @classmethod
    def load_prompts(cls) -> dict[str, Prompt]:
        return {stage: load_system_prompt(f"deepscholar_base_{stage}_v1") for stage in STAGES}

    def generate(self, query: Query, search: SearchTool) -> Report:
        if search is None:
            raise SystemFailure("deepscholar_base needs a search tool")
        s = self.settings
        client = build_llm_client(self.config, self.context, concurrency=s["concurrency"])
        calls = CallCounter(STAGES)
        rounds: list[dict[str, Any]] = []
        seen: set[str] = set()
        kept: list[Candidate] = []
        searched = 0

        for number in range(1, s["N"] + 1):
            queries = self._ask(client, "queries", calls, self.prompts["queries"].render(
                title=query.title, abstract=query.abstract, cutoff=_day(query.cutoff), q=s["Q"],
                earlier_rounds=_summarise_rounds(rounds)), lambda text: parse_queries(text, s["Q"]))
            new: list[Candidate] = []
            results_this_round = 0
            for text in queries:
                results = search.search(text, k=s["search_K"])
                results_this_round += len(results)
                for result in results:
                    key = source_key(result.arxiv_id, result.title)
                    if key and key not in seen:
                        seen.add(key)
                        new.append(Candidate(key, result, make_snippet(result.abstract, s["snippet_chars"]), text))
            searched += results_this_round
            batches = [new[i:i + s["filter_batch"]] for i in range(0, len(new), s["filter_batch"])]
            kept_now = [c for kept_batch in client.map(lambda b: self._filter(client, query, b, calls), batches)
                        for c in kept_batch]
            kept.extend(kept_now)
            rounds.append({"round": number, "queries": queries, "results": results_this_round,
                           "new_candidates": len(new), "filter_batches": len(batches), "kept": len(kept_now),
                           "kept_titles": [c.result.title for c in kept_now]})

        if not kept:
            raise SystemFailure(f"nothing to cite: the relevance filter kept none of {len(seen)} candidates "
                                f"from {searched} search results")
        order = self._ask(client, "rank", calls, self.prompts["rank"].render(
            title=query.title, abstract=query.abstract, k=s["K"], candidates=_numbered(kept)),
            lambda text: parse_ranking(text, len(kept), s["K"]))
        chosen = [kept[i - 1] for i in order]
        sources = [Source(idx=i, title=c.result.title, snippet=c.snippet, arxiv_id=c.result.arxiv_id,
                          url=c.result.url, published=c.result.published) for i, c in enumerate(chosen, start=1)]
        text = self._ask(client, "aggregate", calls, self.prompts["aggregate"].render(
            title=query.title, abstract=query.abstract, sources=_numbered(chosen)),
            lambda answer: parse_section(answer, len(sources)))

        for r in rounds:
            r.pop("kept_titles")
        trace = {
            "kind": self.kind, "model": client.model, "settings": s,
            "prompts": {stage: p.version for stage, p in self.prompts.items()},
            "rounds": rounds,
            "counts": {"search_results": searched, "candidates": len(seen), "kept_by_filter": len(kept),
                       "ranked": len(chosen), "cited": len(set(cited_numbers(text)))},
            "found_by": [c.found_by for c in chosen],  # the query that first returned source [n]
            "calls": calls.as_dict(),
        }
        return Report(text=text, sources=sources, trace=trace)

    def _ask(self, client: LLMClient, stage: str, calls: CallCounter, prompt: str,
             parse: Callable[[str], Any]) -> Any:
        # No answer budget: a system's answers are its work (a query list, a filter, the section itself).
        judged = client.ask([{"role": "user", "content": prompt}], parse, purpose=f"{self.kind}.{stage}",
                            max_tokens=None)
        return _value_or_fail(judged, stage, calls)

    def _filter(self, client: LLMClient, query: Query, batch: list[Candidate],
                calls: CallCounter) -> list[Candidate]:
        keep = self._ask(client, "filter", calls, self.prompts["filter"].render(
            title=query.title, abstract=query.abstract, candidates=_numbered(batch)),
            lambda text: parse_kept_numbers(text, len(batch)))
        return [c for i, c in enumerate(batch, start=1) if i in keep]


# --- parsing the stages' answers ----------------------------------------------------------------------

def parse_queries(text: str, q: int) -> list[str]:
    items = parse_json_array(text)
    if not all(isinstance(x, str) and x.strip() for x in items):
        raise ParseError("every query must be a non-empty string")
    if len(items) != q:
        raise ParseError(f"expected exactly {q} queries, got {len(items)}")
    return [" ".join(x.split()) for x in items]


def _numbers(text: str) -> list[int]:
    items = parse_json_array(text)
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in items):
        raise ParseError("every element must be an integer")
    return items


def parse_kept_numbers(text: str, n: int) -> set[int]:
    numbers = _numbers(text)
    bad = [x for x in numbers if not 1 <= x <= n]
    if bad:
        raise ParseError(f"{bad[0]} is not a result number (they run from 1 to {n})")
    return set(numbers)


def parse_ranking(text: str, n: int, k: int) -> list[int]:
    """Distinct candidate numbers, best first; fewer than K is the model's call, more is an error."""
    numbers = _numbers(text)
    bad = [x for x in numbers if not 1 <= x <= n]
    if bad:
        raise ParseError(f"{bad[0]} is not a candidate number (they run from 1 to {n})")
    if len(set(numbers)) != len(numbers):
        raise ParseError("each candidate number may appear only once")
    if not numbers:
        raise ParseError("the ranking is empty; return at least one candidate number")
    if len(numbers) > k:
        raise ParseError(f"expected at most {k} numbers, got {len(numbers)}")
    return numbers


_CITATION_RE = re.compile(r"\[(\d+(?:\s*[,;]\s*\d+)*)\]")
_WHOLE_FENCE_RE = re.compile(r"\A```[ \t]*(?:markdown|md)?[ \t]*\n(?P<body>.*?)\n?```\Z", re.DOTALL)


def cited_numbers(text: str) -> list[int]:
    """Every [n] (also [n, m]) in order of appearance, repeats included."""
    return [int(n) for group in _CITATION_RE.findall(text) for n in re.split(r"\s*[,;]\s*", group)]


def parse_section(text: str, n_sources: int) -> str:
    """The section as markdown; every [n] must name one of the n_sources, and some source must be cited."""
    section = (text or "").strip()
    fenced = _WHOLE_FENCE_RE.match(section)
    if fenced:
        section = fenced.group("body").strip()
    if not section:
        raise ParseError("empty answer")
    numbers = cited_numbers(section)
    bad = sorted({x for x in numbers if not 1 <= x <= n_sources})
    if bad:
        allowed = f"1 to {n_sources}" if n_sources else "none: no source was found"
        raise ParseError(f"the section cites [{bad[0]}], but the source numbers run from {allowed}")
    if n_sources and not numbers:
        raise ParseError("the section cites no source; cite the sources as [n]")
    return section


# --- shared helpers --------------------------------------------------------------------------------

def load_system_prompt(name: str) -> Prompt:
    return load_prompt_file("deepscholar.systems", name)


def build_llm_client(config: dict[str, Any], context: SystemContext, *, concurrency: int = 8) -> LLMClient:
    """From the system's stored config; the key comes from the environment variable it names, never the DB.
    Where it is sent and which variable it is read from are checked again here, when the system runs (a row
    stored before the checks, or written by hand): `api_base` under the page's allow-list for a system
    registered from the page (context.api_bases), and a base URL without userinfo (the client itself)."""
    from deepscholar.systems.config_schema import check_api_base, check_key_variable

    kwargs: dict[str, Any] = {"concurrency": concurrency}
    if context.api_bases is not None:
        check_api_base(config, context.api_bases)
    if config.get("api_base"):
        kwargs["api_base"] = config["api_base"]
    if env := config.get("api_key_env"):
        check_key_variable(env)  # again when it runs: a row stored before the allow-list, or written by hand
        if not os.environ.get(env):  # the deployment's to fix, not the system's failure
            raise MissingCredentials(env, str(config.get("model")))
        kwargs["api_key"] = os.environ[env]
    if context.llm is not None:
        return context.llm(config["model"], **kwargs)
    return LLMClient(context.engine, config["model"], **kwargs)


def source_key(arxiv_id: str | None, title: str | None) -> str:
    """Identity of a paper across searches: the version-less arXiv id, else the normalised title."""
    if arxiv_id:
        return "arxiv:" + re.sub(r"v\d+$", "", arxiv_id.strip().lower())
    words = re.findall(r"[a-z0-9]+", (title or "").lower())
    return "title:" + " ".join(words) if words else ""


def make_snippet(abstract: str | None, max_chars: int) -> str:
    """The abstract on one line, cut at a word boundary: what the LLM sees and what the source stores."""
    text = " ".join((abstract or "").split())
    if len(text) <= max_chars:
        return text
    cut = text[:max_chars].rsplit(" ", 1)[0]
    return cut + " …"


class CallCounter:
    """LLM calls per stage (cached ones included), added to from the filter's worker threads."""

    def __init__(self, stages: Sequence[str]) -> None:
        self._counts = dict.fromkeys(stages, 0)
        self._lock = threading.Lock()

    def add(self, stage: str, n: int) -> None:
        with self._lock:
            self._counts[stage] = self._counts.get(stage, 0) + n

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {**self._counts, "total": sum(self._counts.values())}


def _value_or_fail(judged: Judged, stage: str, calls: CallCounter) -> Any:
    calls.add(stage, judged.calls)
    if not judged.scored:
        raise SystemFailure(f"{stage} step: {judged.unscored_reason}")
    return judged.value


def _numbered(candidates: Sequence[Candidate]) -> str:
    return "\n\n".join(f"[{i}] {_describe(c.result, c.snippet)}" for i, c in enumerate(candidates, start=1))


def _describe(result: SearchResult, snippet: str) -> str:
    published = f" ({result.published.date().isoformat()})" if result.published else ""
    return f"Title: {result.title}{published}\nAbstract: {snippet or '(no abstract)'}"


def _summarise_rounds(rounds: list[dict[str, Any]]) -> str:
    if not rounds:
        return "(none: this is the first round)"
    parts = []
    for r in rounds:
        queries = "; ".join(f'"{q}"' for q in r["queries"])
        head = (f"Round {r['round']} searched {queries} and found {r['new_candidates']} new papers; "
                f"{r['kept']} were relevant")
        titles = r["kept_titles"]
        parts.append(head + (":\n" + "\n".join(f"- {t}" for t in titles) if titles else "."))
    return "\n\n".join(parts)


def _day(value) -> str:
    return value.date().isoformat() if hasattr(value, "date") else str(value)
