"""The LLM call cache and audit log (table llm_calls).

The key covers model, provider base URL, messages and every generation parameter, so one model's
answer is never served for another model, prompt or setting (STYLE.md: lm-evaluation-harness footgun).
Rows are write-once: the first stored answer for a key is the answer, which makes re-runs reproducible.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.db import upsert

__all__ = ["CachedCall", "Coalescer", "RecentCalls", "SingleFlight", "canonical_request", "hash_request", "request_hash",
           "lookup", "store", "store_in", "call_from_body"]


def _jsonable(value: Any) -> Any:
    """json.dumps fallback: pydantic schemas (response_format=SomeModel) hash by their JSON schema."""
    schema = getattr(value, "model_json_schema", None)
    if isinstance(value, type) and callable(schema):
        return {"pydantic_schema": schema()}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    return repr(value)


def canonical_request(
    model: str, api_base: str | None, messages: Sequence[Mapping], params: Mapping[str, Any]
) -> dict:
    """The request as stored and hashed; None-valued params are dropped because litellm treats them as unset."""
    body = {
        "model": model,
        "api_base": api_base.rstrip("/") if api_base else None,
        "messages": list(messages),
        "params": {k: v for k, v in params.items() if v is not None},
    }
    # Round-trip so the stored request equals exactly what was hashed.
    return json.loads(json.dumps(body, default=_jsonable))


_HASH_CHUNK = 2047  # below hashlib's GIL-release threshold (HASHLIB_GIL_MINSIZE, 2048 bytes)


def hash_request(body: Mapping[str, Any]) -> str:
    """The cache key of a request built by canonical_request (key order and spacing do not matter)."""
    data = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    digest = hashlib.sha256()
    # hashlib lets go of the GIL for any update of 2 KiB or more; with a judge's 16+ threads each one then
    # waits up to a switch interval (5 ms) to get it back, which made hashing a third of a judge task's
    # time. Smaller updates keep it, for the same digest.
    for start in range(0, len(data), _HASH_CHUNK):
        digest.update(data[start:start + _HASH_CHUNK])
    return digest.hexdigest()


def request_hash(
    model: str, api_base: str | None, messages: Sequence[Mapping], params: Mapping[str, Any]
) -> str:
    return hash_request(canonical_request(model, api_base, messages, params))


@dataclass(frozen=True)
class CachedCall:
    request_hash: str
    model: str
    api_base: str | None
    purpose: str | None
    request: dict
    response: dict | None
    response_text: str | None
    provider_model: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_ms: float | None
    created_at: datetime | None = None
    # None: sent one by one at the list price; else the batch API that answered it, at its batch price
    # (llm/batch_transport.py), so the audit trail says why its cost is what it is.
    transport: str | None = None
    # The budget it was paid from (llm/spend.py scope_of), whether or not a judgment ever names it.
    billed_to: str | None = None


def call_from_body(key: str, request: dict, model: str, api_base: str | None, purpose: str | None, body: dict, *,
                   cost_usd: float | None, latency_ms: float | None, transport: str | None = None,
                   billed_to: str | None = None) -> CachedCall:
    """The llm_calls row of a chat completion's response body: built here alike for an answer sent one by
    one (llm/client.py) and one read from a batch's output file (llm/batch_transport.py)."""
    usage = body.get("usage") or {}
    choices = body.get("choices") or []
    message = (choices[0].get("message") or {}) if choices else {}
    return CachedCall(
        request_hash=key,
        model=model,
        api_base=api_base,
        purpose=purpose,
        request=request,
        response=body,
        response_text=message.get("content") or "",
        provider_model=body.get("model"),
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        cost_usd=cost_usd,
        latency_ms=latency_ms,
        transport=transport,
        billed_to=billed_to,
    )


class RecentCalls:
    """The last `size` answers by request hash, least recently used dropped first (thread-safe)."""

    def __init__(self, size: int = 20_000) -> None:
        self._size = size
        self._calls: OrderedDict[str, CachedCall] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: str) -> CachedCall | None:
        with self._lock:
            call = self._calls.get(key)
            if call is not None:
                self._calls.move_to_end(key)
            return call

    def put(self, key: str, call: CachedCall) -> None:
        with self._lock:
            self._calls[key] = call
            self._calls.move_to_end(key)
            while len(self._calls) > self._size:
                self._calls.popitem(last=False)


class _Flight:
    """One key's work in progress: done is set when it ended; ok and result say how."""

    __slots__ = ("done", "ok", "result")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.ok = False
        self.result: Any = None


class SingleFlight:
    """Identical work asked for concurrently is done once: the first caller of a key (the leader) runs it,
    callers of the same key arriving while it runs wait for its result instead of running it again.

    Why: two judge metrics that ask the same question (FACT's citation accuracy and effective citations)
    or two systems with the same report put identical requests in flight side by side; without this, both
    miss the cache and both pay the provider. One lock guards the map of keys in flight; each flight has
    its own Event to wait on, so a call costs O(1) whatever else is in flight, and nobody polls.

    A failure is not shared: the leader's exception is raised in the leader alone (its traceback, its
    interrupt), and each waiter then tries the work itself, one at a time: the first becomes the leader
    of a new flight, the others wait for it. For a request whose failure is a property of the request
    (a 400) that repeats it once per waiter; a provider that is down (unreachable, 5xx) has usually tripped
    its circuit breaker by then (http_guard), so the repeats fail at once. The key leaves the map when its
    flight ends, whatever the outcome, so nothing outlives a flight.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._flights: dict[str, _Flight] = {}

    def run(self, key: str, work: Callable[[], Any]) -> tuple[Any, bool]:
        """(work's result, shared): shared is True when another caller's run of the key produced it."""
        while True:
            with self._lock:
                flight = self._flights.get(key)
                if flight is None:
                    flight = self._flights[key] = _Flight()
                    break
            flight.done.wait()
            if flight.ok:
                return flight.result, True
            # The leader failed: try again, as the next leader or behind it.
        try:
            flight.result = work()
            flight.ok = True
            return flight.result, False
        finally:
            with self._lock:
                del self._flights[key]
            flight.done.set()  # after the key left the map: a woken waiter that retries starts a new flight

    def __len__(self) -> int:
        """Keys in flight now (0 when idle: nothing is kept after a flight ends)."""
        with self._lock:
            return len(self._flights)


class Coalescer:
    """Concurrent callers' single-row reads or writes sent to the warehouse as one statement.

    Why: a judge task keeps 16 or more requests in flight, and every one of them reads the cache before
    and writes it after its request. One statement per call is two round trips (with the pool's ping) per
    call, on a server that the other judge tasks share; at thousands of calls per minute that, not the
    provider, set the pace. Leader and followers, no thread of its own: a caller that finds no batch
    running runs one with every item waiting (its own among them), the others wait for their result. Alone,
    a caller pays nothing extra; under load, one round trip serves up to `max_batch` callers.
    """

    def __init__(self, run_batch: Callable[[list], list], max_batch: int = 200) -> None:
        self._run_batch = run_batch
        self._max_batch = max_batch
        self._cond = threading.Condition()
        self._pending: list[list] = []  # [item, done, result, error]
        self._busy = False

    def __call__(self, item: Any) -> Any:
        entry = [item, False, None, None]
        with self._cond:
            self._pending.append(entry)
        while True:
            with self._cond:
                while not entry[1] and self._busy:
                    self._cond.wait()
                if entry[1]:
                    break
                self._busy = True
                batch, self._pending = self._pending[:self._max_batch], self._pending[self._max_batch:]
            try:
                results = self._run_batch([e[0] for e in batch])
                for e, result in zip(batch, results, strict=True):
                    e[2] = result
            except BaseException as exc:  # every caller of the batch sees the failure (e.g. an outage)
                for e in batch:
                    e[3] = exc
            finally:
                with self._cond:
                    for e in batch:
                        e[1] = True
                    self._busy = False
                    self._cond.notify_all()
        if entry[3] is not None:
            raise entry[3]
        return entry[2]


_COLUMNS = [f.name for f in fields(CachedCall) if f.name != "request"]  # a hit's request was hashed already
# What a store writes: every field but created_at (the server's); read off the call as is, not through
# dataclasses.asdict, which deep-copies the request and response of every call.
_STORED = [f.name for f in fields(CachedCall) if f.name != "created_at"]
_coalescers: dict[int, tuple[Engine, Coalescer, Coalescer]] = {}
_coalescers_lock = threading.Lock()


def _for(engine: Engine) -> tuple[Coalescer, Coalescer]:
    """This engine's (lookup, store) coalescers."""
    with _coalescers_lock:
        found = _coalescers.get(id(engine))
        if found is None or found[0] is not engine:
            found = (engine, Coalescer(lambda keys: _lookup_many(engine, keys)),
                     Coalescer(lambda rows: _store_many(engine, rows)))
            _coalescers[id(engine)] = found
        return found[1], found[2]


def _lookup_many(engine: Engine, hashes: list[str]) -> list[CachedCall | None]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"SELECT {', '.join(_COLUMNS)} FROM llm_calls WHERE request_hash = ANY(:h)"),
                            {"h": list(dict.fromkeys(hashes))}).mappings().all()
    found = {r["request_hash"]: CachedCall(request={}, **dict(r)) for r in rows}
    return [found.get(h) for h in hashes]


def _store_many(engine: Engine, calls: list[CachedCall]) -> list[None]:
    with engine.begin() as conn:
        store_in(conn, calls)
    return [None] * len(calls)


def store_in(conn: sa.Connection, calls: Sequence[CachedCall]) -> None:
    """Insert these calls on the caller's transaction unless their key exists (first write wins): for a
    writer that must store answers together with its own rows (a batch's results and their requests' state)."""
    rows = [{k: getattr(call, k) for k in _STORED} for call in calls]
    if rows:
        upsert(conn, "llm_calls", rows, key=["request_hash"], update=[])


def lookup(engine: Engine, hash_: str) -> CachedCall | None:
    """The stored call with this key, or None. Concurrent lookups share one statement (Coalescer); the
    returned call's `request` is empty (the caller built and hashed it)."""
    return _for(engine)[0](hash_)


def store(engine: Engine, call: CachedCall) -> None:
    """Insert the call unless its key exists (first write wins); concurrent stores share one transaction,
    committed before any of their callers goes on."""
    return _for(engine)[1](call)
