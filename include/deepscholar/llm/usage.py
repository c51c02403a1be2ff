"""What LLM calls cost, collected per block of work: `track_usage()` sums calls, tokens, cost and attempts,
`track_requests()` lists the request hashes (llm_calls keys) that a judgment used. `LLMResult`, one
answer, lives here because usage is summed from it.

Design notes: docs/MODULE_NOTES.md, `deepscholar.llm.usage`.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass(frozen=True)
class LLMResult:
    """One answer of the client (deepscholar.llm.client, which re-exports it): what usage is summed from."""

    text: str
    message: dict
    cached: bool
    provider_model: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_ms: float | None  # of the original call, also when served from the cache
    request_hash: str
    finish_reason: str | None = None  # "stop", or "length" when the answer reached its max_tokens


@dataclass
class Usage:
    """LLM calls made inside a `track_usage()` block (e.g. while one system writes one report).

    `calls` counts every answer the caller got, `cached_calls` those replayed from `llm_calls` (no
    request made); tokens and cost are summed over all calls (a replayed call carries its original
    request's numbers) and, in the `request_*` fields, over provider requests only: what this block
    cost. `attempts` counts HTTP requests sent to providers, retried failures included.
    """

    calls: int = 0
    cached_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost_usd: float | None = None
    request_prompt_tokens: int = 0
    request_completion_tokens: int = 0
    request_cost_usd: float | None = None
    attempts: int = 0
    latency_ms: float = 0.0
    # time.monotonic() of the first request sent and of the last answer received (None: none yet), so a
    # task can say how much of its life went to starting up and how much to the provider.
    first_attempt_at: float | None = None
    last_answer_at: float | None = None

    def __post_init__(self):
        self._lock = threading.Lock()

    @property
    def requests(self) -> int:
        """Calls that reached a provider and were answered (each once, however many attempts it took)."""
        return self.calls - self.cached_calls

    def add(self, result: LLMResult) -> None:
        with self._lock:
            self.calls += 1
            self.cached_calls += result.cached
            self.prompt_tokens += result.prompt_tokens or 0
            self.completion_tokens += result.completion_tokens or 0
            if result.cost_usd is not None:
                self.cost_usd = (self.cost_usd or 0.0) + result.cost_usd
            if not result.cached:
                self.request_prompt_tokens += result.prompt_tokens or 0
                self.request_completion_tokens += result.completion_tokens or 0
                if result.cost_usd is not None:
                    self.request_cost_usd = (self.request_cost_usd or 0.0) + result.cost_usd
                self.latency_ms += result.latency_ms or 0.0
                self.last_answer_at = time.monotonic()

    def add_attempt(self) -> None:
        with self._lock:
            self.attempts += 1
            if self.first_attempt_at is None:
                self.first_attempt_at = time.monotonic()

    def as_dict(self) -> dict:
        return {"calls": self.calls, "cached_calls": self.cached_calls, "requests": self.requests,
                "attempts": self.attempts, "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens, "cost_usd": self.cost_usd,
                "request_prompt_tokens": self.request_prompt_tokens,
                "request_completion_tokens": self.request_completion_tokens,
                "request_cost_usd": self.request_cost_usd}


_ACTIVE_USAGE: contextvars.ContextVar[tuple[Usage, ...]] = contextvars.ContextVar("llm_usage", default=())


@contextmanager
def track_usage() -> Iterator[Usage]:
    """Collect the usage of every LLM call made in this block (nested blocks each see their calls)."""
    usage = Usage()
    token = _ACTIVE_USAGE.set(_ACTIVE_USAGE.get() + (usage,))
    try:
        yield usage
    finally:
        _ACTIVE_USAGE.reset(token)


_ACTIVE_REQUESTS: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("llm_requests", default=None)


@contextmanager
def track_requests() -> Iterator[list[str]]:
    """The request hashes (llm_calls keys) of every LLM call made in this block, cached ones included: what
    links a judgment to its rows of the audit trail, so costs can be attributed (the innermost block only)."""
    found: list[str] = []
    token = _ACTIVE_REQUESTS.set(found)
    try:
        yield found
    finally:
        _ACTIVE_REQUESTS.reset(token)


def _record_usage(result: LLMResult) -> LLMResult:
    for usage in _ACTIVE_USAGE.get():
        usage.add(result)
    if (found := _ACTIVE_REQUESTS.get()) is not None:
        found.append(result.request_hash)
    return result


def _record_attempt() -> None:
    for usage in _ACTIVE_USAGE.get():
        usage.add_attempt()
