"""One LLM client for every call in the project (judges and systems), built on litellm.

Design notes: docs/MODULE_NOTES.md, `deepscholar.llm.client`.
"""

from __future__ import annotations

import contextvars
import dataclasses
import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from sqlalchemy.engine import Engine
from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential_jitter

from deepscholar.errors import InfrastructureError, JudgeError, MissingCredentials
from deepscholar.http_guard import BREAKER, host_of
from deepscholar.llm import answer_shapes, busy_server, cache, prices, spend
from deepscholar.llm.answer_shapes import CONSTRAINED_OUTPUTS
from deepscholar.llm.usage import (
    LLMResult,
    Usage,
    _record_attempt,
    _record_usage,
    track_requests,
    track_usage,
)
from deepscholar.settings import current_settings
from deepscholar.url_bases import checked_api_base

if TYPE_CHECKING:
    from deepscholar.llm.batch_transport import BatchQueue

__all__ = [
    "AwaitingBatch",
    "BatchRequestFailed",
    "LLMClient",
    "LLMResult",
    "Judged",
    "ParseError",
    "parse_json_object",
    "parse_json_array",
    "is_transient_error",
    "CONSTRAINED_OUTPUTS",
    # usage tracking lives in llm/usage.py; its names stay importable from here, where callers look
    "Usage",
    "track_usage",
    "track_requests",
]

log = logging.getLogger(__name__)

T = TypeVar("T")
R = TypeVar("R")

# Deterministic by default: judges must give the same answer to the same question where the provider
# allows it. Providers that reject a parameter (e.g. seed) get it dropped by litellm (drop_params).
DEFAULT_PARAMS: dict[str, Any] = {"temperature": 0, "seed": 0}
MAX_BACKOFF_SECONDS = 30.0
# litellm 1.106.2 imports its MCP gateway (which needs the optional `mcp` package) for any call with
# tools, and fails with ModuleNotFoundError; our tools are plain functions, so skip that path.
_TOOLS_WORKAROUND = {"_skip_mcp_handler": True}


class AwaitingBatch(Exception):  # noqa: N818 (a state, not a failure)
    """A client in batch mode met a request the cache cannot answer: it is recorded for the next batch
    (llm/batch_transport.py) instead of sent. Not an API error: `ask` lets it through, and the judge runner
    leaves the report-metric whose item raised it unstored for the next round."""

    def __init__(self, request_hash: str) -> None:
        self.request_hash = request_hash
        super().__init__(f"request {request_hash[:12]} waits for a batch")


class BatchRequestFailed(Exception):
    """A request the batch API did not answer within batch_results.MAX_ATTEMPTS submissions: like a
    request the provider rejects on the direct path, the item asking it ends unscored with this reason."""

    def __init__(self, request_hash: str, attempts: int, last_error: str | None) -> None:
        self.request_hash, self.attempts, self.last_error = request_hash, attempts, last_error
        super().__init__(f"no answer from the batch API after {attempts} submissions: {last_error or 'unknown error'}")


class ParseError(JudgeError, ValueError):
    """A judge answer that does not have the required shape; triggers a re-ask, then *unscored*."""


@dataclass(frozen=True)
class Judged(Generic[T]):
    """A judge outcome: a value, or unscored with its reason. `calls` counts complete() calls (cached too)."""

    value: T | None
    unscored_reason: str | None
    calls: int
    explanation: str | None = None  # the judge's own reason for a scored value

    @property
    def scored(self) -> bool:
        return self.unscored_reason is None

    @property
    def reason(self) -> str | None:
        """Alias of `explanation` (release/steps.py reads `.reason` for importance labels)."""
        return self.explanation


# --- strict output parsing -------------------------------------------------------------------------

_FENCE_RE = re.compile(r"\A```[ \t]*(?:json|JSON)?[ \t]*\n(?P<body>.*?)\n?```\Z", re.DOTALL)


def _parse_json(text: str) -> Any:
    """Bare JSON, or JSON as the only content of one ``` fence; prose around it is a ParseError."""
    stripped = (text or "").strip()
    if not stripped:
        raise ParseError("empty answer")
    fenced = _FENCE_RE.match(stripped)
    if fenced:
        stripped = fenced.group("body").strip()
    try:
        return json.loads(stripped)
    except json.JSONDecodeError as exc:
        raise ParseError(f"not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})") from None


def parse_json_object(text: str) -> dict:
    value = _parse_json(text)
    if not isinstance(value, dict):
        raise ParseError(f"expected a JSON object, got a JSON {type(value).__name__}")
    return value


def parse_json_array(text: str) -> list:
    value = _parse_json(text)
    if not isinstance(value, list):
        raise ParseError(f"expected a JSON array, got a JSON {type(value).__name__}")
    return value


# --- retries ---------------------------------------------------------------------------------------

DIRECT_KEY_VARIABLE = "OPENAI_API_KEY"  # what the direct OpenAI-compatible path sends (openai_compatible.py)

_litellm = prices.litellm_module  # imported when first needed (seconds)


def _is_direct(model: str, api_base: str | None) -> bool:
    """`openai/<model>` at an explicit endpoint goes the direct way (llm/openai_compatible.py) unless
    DEEPSCHOLAR_LLM_TRANSPORT=litellm."""
    if current_settings().llm_transport == "litellm":
        return False
    return bool(api_base) and model.startswith("openai/") and len(model) > len("openai/")


# litellm reports a missing API key as an InternalServerError raised before any request is made.
_MISSING_KEY_MARKERS = ("Missing credentials", "api_key client option must be set")


def _missing_credentials(exc: BaseException) -> bool:
    return any(marker in str(exc) for marker in _MISSING_KEY_MARKERS)


def _key_variable(model: str) -> str:
    """The API key variable litellm reads for a model's provider (for the error message)."""
    missing = _litellm().validate_environment(model=model).get("missing_keys") or []
    return " or ".join(k for k in missing if k.endswith("_API_KEY")) or "the provider's API key"


def is_transient_error(exc: BaseException) -> bool:
    """429, 408, 5xx, timeouts and connection failures are worth retrying; 4xx answers are not.

    Classified on the OpenAI SDK's error classes, which litellm's own errors subclass, so the direct
    OpenAI-compatible path and the litellm path are judged alike (and this never imports litellm).
    """
    if _missing_credentials(exc):
        return False
    import openai

    if isinstance(exc, (openai.RateLimitError, openai.InternalServerError, openai.APIConnectionError)):
        return True  # APIConnectionError also covers APITimeoutError (litellm.Timeout)
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and (status in (408, 429) or status >= 500)


def _is_provider_down(exc: BaseException) -> bool:
    """For the host's circuit breaker: unreachable, timing out or failing (5xx); not a 429 or a refusal."""
    if _missing_credentials(exc):
        return False
    import openai

    if isinstance(exc, openai.APIConnectionError):
        return True
    status = getattr(exc, "status_code", None)
    return isinstance(status, int) and status >= 500


def _is_config_error(exc: BaseException) -> bool:
    """Errors that no item can survive (bad key, unknown model): raising beats marking everything unscored."""
    import openai

    return _missing_credentials(exc) or isinstance(
        exc, (openai.AuthenticationError, openai.PermissionDeniedError, openai.NotFoundError))


_LLM_SETTINGS = {"retries": "llm_retries", "timeout": "llm_timeout_seconds", "backoff": "llm_backoff_seconds"}


def llm_setting(kind: str, given: float | None, default: float) -> float:
    """How hard every LLM client tries (systems, judges): the caller's value, else the environment's,
    else the default. Bad values are logged and ignored (deepscholar.settings)."""
    if given is not None:
        return given
    value = getattr(current_settings(), _LLM_SETTINGS[kind])
    return default if value is None else value


# --- the client ------------------------------------------------------------------------------------

class LLMClient:
    def __init__(
        self,
        engine: Engine,
        model: str,
        *,
        api_base: str | None = None,
        api_key: str | None = None,
        concurrency: int = 8,
        max_retries: int | None = None,
        timeout: float | None = None,
        max_reasks: int = 2,
        backoff_base: float | None = None,
        extra_params: Mapping[str, Any] | None = None,
        cache_salt: str | None = None,
        batch: BatchQueue | None = None,
        constrained: str | None = None,
    ) -> None:
        if concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        self.engine = engine
        self.model = model
        self.api_base = checked_api_base(model, api_base)
        self._api_key = api_key
        self.concurrency = concurrency
        # None: DEEPSCHOLAR_LLM_RETRIES / _TIMEOUT_SECONDS / _BACKOFF_SECONDS when set, else 4, 60 s, 0.5 s;
        # DEEPSCHOLAR_LLM_SERVING's entry for this model comes first for the timeout and caps the concurrency.
        served_timeout, served_concurrency = busy_server.serving_of(model)
        self.max_retries = int(llm_setting("retries", max_retries, 4))
        self.timeout = llm_setting("timeout", timeout if timeout is not None else served_timeout, 60.0)
        if served_concurrency is not None and served_concurrency < concurrency:
            concurrency = self.concurrency = served_concurrency
        self.max_reasks = max_reasks
        self.backoff_base = llm_setting("backoff", backoff_base, 0.5)
        self.params: dict[str, Any] = {**DEFAULT_PARAMS, **(extra_params or {})}
        # Bypasses the shared cache (the judge drift check, evaluation/judge_validation/drift.py): every request is keyed and
        # stored with this salt, so it is never answered from, nor stored over, the answers other callers
        # get (a cached answer cannot show that a provider's model changed); the salted rows keep the audit
        # trail and the costs, and a retry with the same salt replays them rather than paying twice.
        self.cache_salt = cache_salt
        # Bounds requests in flight across all threads using this client, including nested map() calls;
        # a server found busy (a timeout while it answers a probe) takes one slot away (busy_server.InFlight).
        self._in_flight = busy_server.InFlight(concurrency)
        # Answers this client already had, kept in memory: llm_calls rows never change once written, and
        # the same question recurs across a judge task's systems (one paper's relevance, identical reports).
        self._recent = cache.RecentCalls()
        # Identical requests in flight at once are sent once: the others wait for that answer (cache.SingleFlight).
        self._flights = cache.SingleFlight()
        self._credentials_checked = False
        # Batch mode (llm/batch_transport.py): a request the cache cannot answer is recorded in this queue
        # (the month and judge config asking, and the run) and AwaitingBatch raised, never sent; what was
        # recorded is remembered, so a repeat costs nothing.
        self.batch = batch
        self._batch_states: dict[str, tuple[str, int, str | None]] = {}
        self._batch_lock = threading.Lock()
        # OpenAI-compatible endpoints skip litellm's per-call work (llm/openai_compatible.py).
        self._direct = _is_direct(model, self.api_base)
        # How judge answers are constrained (ask's `schema`): None, "json_schema" or "json_object".
        if constrained is not None and constrained not in CONSTRAINED_OUTPUTS:
            raise ValueError(f"constrained output must be one of {', '.join(CONSTRAINED_OUTPUTS)}, not {constrained!r}")
        self.constrained = constrained

    def __repr__(self) -> str:
        return f"LLMClient(model={self.model!r}, api_base={self.api_base!r}, concurrency={self.concurrency})"

    # -- one call --

    def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        purpose: str,
        tools: list | None = None,
        tool_choice: Any = None,
        response_format: Any = None,
        **params: Any,
    ) -> LLMResult:
        """One chat completion, from the cache when possible; raises after the retries are spent."""
        call_params = {**self.params, **params, "tools": tools, "tool_choice": tool_choice,
                       "response_format": response_format}
        call_params = {k: v for k, v in call_params.items() if v is not None}
        request = cache.canonical_request(self.model, self.api_base, messages, call_params)
        if self.cache_salt is not None:
            request["cache_salt"] = self.cache_salt  # stored with the row: why it is not the shared answer
        key = cache.hash_request(request)  # the body just built: built and serialised once
        hit = self._recent.get(key)
        if hit is not None:  # the common repeat, answered from memory without starting a flight
            return _record_usage(_result_from_row(hit, cached=True))
        (row, cached), shared = self._flights.run(
            key, lambda: self._lookup_or_call(key, request, messages, call_params, purpose))
        # A caller served by another's request in flight (shared) made no request: a cached call to it.
        return _record_usage(_result_from_row(row, cached=cached or shared))

    def _lookup_or_call(self, key, request, messages, call_params, purpose) -> tuple[cache.CachedCall, bool]:
        """(the answer to the request, whether it came from a cache): memory, else llm_calls, else the
        provider (then stored). Runs once per key at a time (complete's SingleFlight)."""
        hit = self._recent.get(key) or cache.lookup(self.engine, key)
        if hit is not None:
            self._recent.put(key, hit)
            return hit, True
        if self.batch:
            self._await_batch(key, request, purpose)
        self.check_credentials()
        spend.before_request()  # a budget's limit (llm/spend.py): past it, nothing more is sent
        try:
            row = self._call_with_retries(key, request, messages, call_params, purpose)
        except Exception as exc:
            if _missing_credentials(exc):
                variable = DIRECT_KEY_VARIABLE if self._direct else _key_variable(self.model)
                raise MissingCredentials(variable, self.model) from exc
            if isinstance(exc, busy_server.ServerBusy):  # a busy server's last retry was spent on another error
                raise exc.too_slow from exc.__cause__
            if is_transient_error(exc):  # the provider is down or throttling us past our retries
                raise InfrastructureError(self.service, exc) from exc
            raise
        row = dataclasses.replace(row, billed_to=spend.current_scope())  # who paid: the block's budget
        cache.store(self.engine, row)
        spend.record(row)
        self._recent.put(key, dataclasses.replace(row, request={}))
        return row, False

    def _await_batch(self, key: str, request: dict, purpose: str) -> None:
        """Record the request for a batch (once per client) and raise AwaitingBatch, or BatchRequestFailed
        when the batch API gave up on it."""
        with self._batch_lock:
            known = self._batch_states.get(key)
        if known is None:
            from deepscholar.llm import batch_transport

            assert self.batch is not None
            known = batch_transport.record_request(self.engine, self.batch, batch_transport.PendingRequest(
                key, self.model, self.api_base, purpose, request, billed_to=spend.current_scope()))
            with self._batch_lock:
                self._batch_states[key] = known
        state, attempts, error = known
        if state == "failed":
            raise BatchRequestFailed(key, attempts, error)
        raise AwaitingBatch(key)

    @property
    def service(self) -> str:
        """How errors name the provider: the model and, when not the provider's default, the endpoint."""
        return f"LLM provider {self.model}" + (f" at {self.api_base}" if self.api_base else "")

    @property
    def breaker_host(self) -> str:
        """The circuit breaker's key (http_guard): the endpoint's host, else the provider's default API."""
        if self.api_base:
            return host_of(self.api_base)
        return f"{self.model.split('/', 1)[0] if '/' in self.model else 'openai'} API"

    def check_credentials(self) -> None:
        """Before the first request: a missing API key is the caller's to fix, named, not a 500 to retry.

        Only `*_API_KEY` variables count: endpoints, regions and cloud credentials (AWS, Azure AD,
        Vertex) have other sources litellm's check cannot see, and must not block a working setup.
        """
        if self._credentials_checked or self._api_key:
            return
        if self._direct:  # the OpenAI SDK's key, checked without importing litellm (seconds of start-up)
            missing = [] if os.environ.get(DIRECT_KEY_VARIABLE) else [DIRECT_KEY_VARIABLE]
        else:
            missing = [k for k in _litellm().validate_environment(model=self.model, api_base=self.api_base).get(
                "missing_keys") or [] if k.endswith("_API_KEY")]
        if missing:
            raise MissingCredentials(" or ".join(missing), self.model)
        self._credentials_checked = True

    def _call_with_retries(self, key, request, messages, call_params, purpose) -> cache.CachedCall:
        retrying = Retrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=wait_exponential_jitter(initial=self.backoff_base, max=MAX_BACKOFF_SECONDS,
                                         jitter=self.backoff_base),
            retry=retry_if_exception(lambda exc: isinstance(exc, busy_server.ServerBusy) or is_transient_error(exc)),
            before_sleep=lambda rs: log.warning(
                "LLM call %s (%s) attempt %d failed: %s; retrying", self.model, purpose,
                rs.attempt_number, rs.outcome.exception() if rs.outcome else None),
            reraise=True,
        )
        host = self.breaker_host
        timeouts = 0

        def attempt() -> cache.CachedCall:
            nonlocal timeouts
            BREAKER.check(host)  # opened by another thread meanwhile: no more retries, fail at once
            try:
                return self._call_once(key, request, messages, call_params, purpose)
            except Exception as exc:
                if not busy_server.is_timeout(exc):
                    raise
                timeouts += 1
                raise busy_server.after_timeout(self, exc, timeouts, purpose) from exc

        # A provider that stays down trips its breaker after a few calls: the items still queued in
        # map() then fail at once instead of each waiting out its own retries.
        with BREAKER.guard(host, _is_provider_down):
            return retrying(attempt)

    def _call_once(self, key, request, messages, call_params, purpose) -> cache.CachedCall:
        with self._in_flight:
            _record_attempt()
            started = time.perf_counter()
            body = self._send(messages, call_params)
            latency_ms = (time.perf_counter() - started) * 1000.0
        usage = body.get("usage") or {}
        cost = (prices.cost_usd(body.get("model"), self.model, usage.get("prompt_tokens"),
                                usage.get("completion_tokens")) if self._direct
                else prices.litellm_cost(body.get("model"), self.model, usage))
        return cache.call_from_body(key, request, self.model, self.api_base, purpose, body, cost_usd=cost,
                                    latency_ms=latency_ms)

    def _send(self, messages, call_params) -> dict:
        """One request, no retries (ours alone count): the provider's response body as plain JSON."""
        if self._direct:
            from deepscholar.llm import openai_compatible  # lazily, as litellm: DAG files import this module

            assert self.api_base is not None  # _is_direct requires one

            return openai_compatible.chat_completion(self.model, messages, api_base=self.api_base,
                                                     api_key=self._api_key, timeout=self.timeout,
                                                     params=call_params)
        response = _litellm().completion(
            model=self.model,
            messages=list(messages),
            api_base=self.api_base,
            api_key=self._api_key,
            timeout=self.timeout,
            drop_params=True,
            num_retries=0,  # retries are ours alone, so the attempt count is the request count
            max_retries=0,  # and the OpenAI SDK underneath must not retry on its own either
            **_TOOLS_WORKAROUND if "tools" in call_params else {},
            **call_params,
        )
        return json.loads(json.dumps(response.model_dump(), default=str))

    # -- judged call --

    def ask(
        self,
        messages: Sequence[Mapping[str, Any]],
        parse: Callable[[str], T],
        *,
        purpose: str,
        max_tokens: int | None,
        schema: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Judged[T]:
        """A judged question: parsed strictly, re-asked on a bad answer, unscored when it cannot be had.

        `max_tokens`: the answer's budget, sent with the request (every judge question states one; None
        only where the answer is the work itself, a system's report). An answer that reached it (finish
        reason "length", or more completion tokens than asked: a server ignoring the field) is a parse
        failure like any other: re-asked, then unscored with the reason. `schema`: the answer's JSON
        schema, sent as `response_format` when this client constrains its output (`constrained`).

        Never raises for a bad answer or a request the provider rejects (e.g. a 400: the item becomes
        unscored with the reason). Raises InfrastructureError when the provider stays down or throttles
        past the retries (the task fails and is retried; the item is not the judge's to score) and
        configuration errors (missing key, authentication, unknown model), which would make every
        item unscored.
        """
        if max_tokens is not None:
            kwargs["max_tokens"] = max_tokens
        if schema is not None and self.constrained is not None:
            kwargs["response_format"] = answer_shapes.response_format(self.constrained, purpose, schema)
        conversation = list(messages)
        calls = 0
        while True:
            try:
                result = self.complete(conversation, purpose=purpose, **kwargs)
            except Exception as exc:
                if _is_config_error(exc) or not _is_api_error(exc):
                    raise
                return Judged(None, f"call failed: {type(exc).__name__}: {exc}", calls + 1)
            calls += 1
            try:
                if problem := answer_shapes.over_budget(result.finish_reason, result.completion_tokens, max_tokens):
                    raise ParseError(problem)
                return Judged(parse(result.text), None, calls)
            except ParseError as exc:
                error = str(exc)
            if calls > self.max_reasks:
                return Judged(None, f"unparseable after {calls} answers: {error}", calls)
            conversation = [
                *conversation,
                {"role": "assistant", "content": result.text},
                {"role": "user", "content": (
                    f"Your answer could not be used: {error}. Answer again with only the required "
                    "format, nothing else.")},
            ]

    # -- fan-out --

    def map(self, fn: Callable[[R], T], items: Iterable[R], pool: ThreadPoolExecutor | None = None) -> list[T]:
        """fn over items with at most `concurrency` running, results in input order.

        `pool`: run on these threads instead of new ones (a judge task's units share one pool of
        `concurrency` threads rather than each starting its own); only for fn that never calls map itself.
        """
        items = list(items)
        if not items:
            return []
        if pool is not None:
            return self._map_on(pool, fn, items)
        if self.concurrency == 1 or len(items) == 1:
            return [fn(item) for item in items]
        with ThreadPoolExecutor(max_workers=min(self.concurrency, len(items)), thread_name_prefix="llm") as pool:
            return self._map_on(pool, fn, items)

    @staticmethod
    def _map_on(pool: ThreadPoolExecutor, fn: Callable[[R], T], items: list[R]) -> list[T]:
        # One copy of the *caller's* context per item, taken here in the calling thread: a copy taken
        # inside a worker would be the worker's own empty context, and the calls made there would be
        # missing from the caller's track_usage() (one copy per item: a Context runs in one thread at a time).
        contexts = [contextvars.copy_context() for _ in items]
        futures = [pool.submit(ctx.run, fn, item) for ctx, item in zip(contexts, items, strict=True)]
        try:
            return [f.result() for f in futures]
        except BaseException:
            # e.g. the provider is down: items not started yet would each wait out their retries only
            # to fail the same way; the running ones finish, the rest are dropped.
            for f in futures:
                f.cancel()
            raise


def _is_api_error(exc: BaseException) -> bool:
    """litellm/openai errors (and a request the batch API gave up on) end an item as unscored; anything else
    (a bug, a DB failure, a request awaiting its batch) must surface."""
    if isinstance(exc, BatchRequestFailed):
        return True
    if isinstance(exc, AwaitingBatch):
        return False
    import openai

    return isinstance(exc, openai.OpenAIError) or is_transient_error(exc)


def _message_of(body: Mapping[str, Any]) -> dict:
    choices = body.get("choices") or []
    return dict(choices[0].get("message") or {}) if choices else {}


def _result_from_row(row: cache.CachedCall, *, cached: bool) -> LLMResult:
    # Built from the stored JSON in both cases, so a cached result is identical to the fresh one.
    message = {k: v for k, v in _message_of(row.response or {}).items() if v is not None}
    choices = (row.response or {}).get("choices") or []
    return LLMResult(
        text=row.response_text or "",
        message=message,
        finish_reason=(choices[0].get("finish_reason") if choices and isinstance(choices[0], dict) else None),
        cached=cached,
        provider_model=row.provider_model,
        prompt_tokens=row.prompt_tokens,
        completion_tokens=row.completion_tokens,
        cost_usd=row.cost_usd,
        latency_ms=row.latency_ms,
        request_hash=row.request_hash,
    )
