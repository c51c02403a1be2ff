"""A bound on what provider requests may cost while a run goes on, checked before each request; and who pays.

Design notes: docs/MODULE_NOTES.md, `deepscholar.llm.spend`.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from deepscholar.errors import OverBudget
from deepscholar.llm import prices

__all__ = ["SpendLimit", "spend_limit", "scope_limit", "billing", "current_scope", "scope_of", "before_request", "record",
           "Paid", "paid_usd", "count_paid", "PAID_COLUMNS", "READ_SHARE", "audit_of", "Audited"]

READ_SHARE = 0.1  # the spend is read again once this process spent this share of the room left at the last read


def scope_of(stage: str, release_id: str, judge_config: str | None = None) -> str:
    """The budget a call is paid from (llm_calls.billed_to): `judging`, `drift` (a month's judging and its
    drift check, under one judge) or `release` (a release's release-time judging)."""
    return f"{stage}/{release_id}" + (f"/{judge_config}" if judge_config else "")


# --- what was paid ------------------------------------------------------------------------------------------

# Aggregated per model: priced rows summed as they are; unpriced ones as their tokens (and how many reported
# none), which count_paid prices at the fallback. `FROM llm_calls c` and a WHERE follow.
PAID_COLUMNS = """
    SELECT c.model, c.provider_model, c.transport IS NOT NULL AS batched,
           coalesce(sum(c.cost_usd), 0)::float8 AS priced_usd, count(*) AS calls,
           count(*) FILTER (WHERE c.cost_usd IS NULL) AS unpriced,
           coalesce(sum(c.prompt_tokens) FILTER (WHERE c.cost_usd IS NULL), 0) AS prompt_tokens,
           coalesce(sum(c.completion_tokens) FILTER (WHERE c.cost_usd IS NULL), 0) AS completion_tokens,
           count(*) FILTER (WHERE c.cost_usd IS NULL AND c.prompt_tokens IS NULL) AS no_prompt,
           count(*) FILTER (WHERE c.cost_usd IS NULL AND c.completion_tokens IS NULL) AS no_completion"""


@dataclass(frozen=True)
class Paid:
    """What a set of answers cost: `counted_usd` (what a budget counts: unpriced calls at the fallback),
    `priced_usd` (the audit trail's known costs), the calls and those of them without a price, and how the
    unpriced ones were counted (one note per model)."""

    counted_usd: float = 0.0
    priced_usd: float = 0.0
    calls: int = 0
    unpriced_calls: int = 0
    pricing: tuple[str, ...] = ()

    def __add__(self, other: Paid) -> Paid:
        return Paid(self.counted_usd + other.counted_usd, self.priced_usd + other.priced_usd,
                    self.calls + other.calls, self.unpriced_calls + other.unpriced_calls,
                    tuple(dict.fromkeys(self.pricing + other.pricing)))


def count_paid(rows: Iterable[Any]) -> Paid:
    """A Paid from PAID_COLUMNS rows: unpriced tokens at the served or requested model's price, else at its
    fallback price (the answers reporting no tokens at the prediction's default tokens)."""
    total = Paid()
    for r in rows:
        counted = float(r.priced_usd)
        notes: tuple[str, ...] = ()
        if r.unpriced:
            prompt = int(r.prompt_tokens) + int(r.no_prompt) * prices.DEFAULT_PROMPT_TOKENS
            completion = int(r.completion_tokens) + int(r.no_completion) * prices.DEFAULT_COMPLETION_TOKENS
            served = (prices.batch_price_of(r.provider_model) if r.batched else prices.price_of(r.provider_model))
            per_prompt, per_completion, note = (*served, None) if served else prices.budget_price_of(
                r.model, batch=r.batched)
            counted += prompt * per_prompt + completion * per_completion
            notes = (f"{r.model} at {note}",) if note else ()
        total = total + Paid(counted, float(r.priced_usd), int(r.calls), int(r.unpriced), notes)
    return total


def paid_usd(conn: sa.Connection, scopes: Sequence[str]) -> Paid:
    """What was paid from these budgets: every llm_calls row billed to them (llm_calls_billed_to_idx)."""
    return count_paid(conn.execute(sa.text(
        f"{PAID_COLUMNS} FROM llm_calls c WHERE c.billed_to = ANY(:s) GROUP BY 1, 2, 3"), {"s": list(scopes)}))


# --- the running limit ----------------------------------------------------------------------------------------

Audited = Callable[[Mapping[str, "str | None"]], "tuple[float, Collection[str]]"]


class SpendLimit:
    """Stops requests once `spent` passes `limit_usd` (the budget, or what an operator approved, with the
    margin already added). `spent` is the warehouse's figure at the last read plus this process's answers the
    read did not see. `audited(pending)` reads that figure and says which of `pending` (the answers recorded
    since, request hash to budget) it holds, from one snapshot (`audit_of`); it is called with no lock held
    and no connection of the caller's. `scope`: the budget the requests are paid from."""

    def __init__(self, limit_usd: float, what: str, *, audited: Audited | None = None,
                 refresh_seconds: float = 30.0, how_to_go_on: str = "", scope: str | None = None) -> None:
        self.limit_usd = limit_usd
        self.what = what
        self.how_to_go_on = how_to_go_on
        self.scope = scope
        self._audited = audited
        self._refresh_seconds = refresh_seconds
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()  # one read at a time; threads arriving meanwhile take its figure
        self._base = audited({})[0] if audited else 0.0
        self._read_at = time.monotonic()
        self._unseen: dict[str | None, tuple[str | None, float]] = {}  # answers no read has seen yet
        self._since_read = 0.0  # recorded since the last read began: when to read again
        self.unpriced_requests = 0

    @property
    def spent(self) -> float:
        with self._lock:
            return self._base + sum(usd for _, usd in self._unseen.values())

    def _refresh_if_due(self) -> None:
        if self._audited is None:
            return
        with self._lock:
            closing_in = self._since_read >= READ_SHARE * (self.limit_usd - self._base)
        if closing_in or time.monotonic() - self._read_at >= self._refresh_seconds:
            self._reread(coalesce=True, wait=closing_in)

    def _reread(self, *, coalesce: bool = False, wait: bool = True) -> bool:
        """Read the warehouse's figure; True when an answer was recorded during the read (the figure may
        hold it: it is counted beside it until the next read says). `coalesce`: a thread that arrived while
        another read ran takes that read's figure; `wait` False: it does not wait for it (far from the limit,
        the figure it has will do)."""
        assert self._audited is not None
        arrived = time.monotonic()
        if not self._read_lock.acquire(blocking=wait):
            return False
        try:
            if coalesce and self._read_at >= arrived:
                return False
            with self._lock:
                asked = {key: budget for key, (budget, _) in self._unseen.items() if key is not None}
                counted = self._since_read
            base, seen = self._audited(asked)
            with self._lock:
                for key in seen:
                    self._unseen.pop(key, None)
                self._base, self._since_read = base, self._since_read - counted
                self._read_at = time.monotonic()
                return any(key not in asked for key in self._unseen if key is not None)
        finally:
            self._read_lock.release()

    def refreshed(self) -> float:
        """The spend with the warehouse's figure re-read now: what a batch submission is checked against (the
        answers it paid for arrive as stored batches, never as this process's requests)."""
        if self._audited is not None:
            self._reread()
        return self.spent

    def before_request(self) -> None:
        """Raises OverBudget when the spend is past the limit: the request is not sent. Before it stops, it
        reads again until no answer arrived during the read, so the figure it stops at counts each answer once."""
        self._refresh_if_due()
        spent = self.spent
        if spent > self.limit_usd and self._audited is not None:
            for _ in range(3):
                if not self._reread():
                    break
            spent = self.spent
        if spent > self.limit_usd:
            unpriced = (f", counting {self.unpriced_requests} requests of unpriced models at their fallback price"
                        if self.unpriced_requests else "")
            raise OverBudget(f"{self.what}: stopped at {prices.usd_text(spent)} of {prices.usd_text(self.limit_usd)}{unpriced}; the "
                             f"answers so far are kept and will not be asked again{self.how_to_go_on}")

    def record(self, cost_usd: float | None, counted_usd: float, *, request_hash: str | None = None,
               billed_to: str | None = None) -> None:
        """One answer paid for and stored: its audited cost (None: no price), what the budget counts for it,
        and its llm_calls row's key and budget (what tells a read that its figure holds it; without them it
        is counted beside every figure)."""
        with self._lock:
            if cost_usd is None:
                self.unpriced_requests += 1
            self._since_read += counted_usd
            known = self._unseen.get(request_hash, (billed_to, 0.0))[1]  # None: every answer without a key
            self._unseen[request_hash] = (billed_to, known + counted_usd)


def audit_of(engine: Any, scopes: Sequence[str], unbilled_usd: float = 0.0) -> Audited:
    """A SpendLimit's read of the warehouse: what was paid from these budgets (paid_usd, plus `unbilled_usd`
    read once by the caller) and which of the answers recorded since the last read that figure holds, in one
    REPEATABLE READ snapshot. Two snapshots would let an answer stored between them be counted twice, or not
    at all (one request past the limit)."""
    def audited(pending: Mapping[str, str | None]) -> tuple[float, Collection[str]]:
        with engine.connect().execution_options(isolation_level="REPEATABLE READ") as conn, conn.begin():
            paid = paid_usd(conn, scopes).counted_usd + unbilled_usd
            if not pending:
                return paid, ()
            rows = conn.execute(sa.text("SELECT request_hash, billed_to FROM llm_calls WHERE request_hash = ANY(:k)"),
                                {"k": list(pending)}).all()
        return paid, [r.request_hash for r in rows if r.billed_to in scopes and r.billed_to == pending[r.request_hash]]

    return audited


def scope_limit(engine: Any, scope: str, budget_usd: float | None, what: str, how_to_go_on: str = ""
                ) -> SpendLimit | None:
    """A limit of what was paid from one budget (`scope`), read from the warehouse (paid_usd): stopped once it
    passes `budget_usd` (no margin: at most the requests in flight pass it). None without a budget."""
    if budget_usd is None:
        return None

    return SpendLimit(budget_usd, what, audited=audit_of(engine, [scope]), refresh_seconds=5.0, how_to_go_on=how_to_go_on, scope=scope)


_ACTIVE: contextvars.ContextVar[SpendLimit | None] = contextvars.ContextVar("spend_limit", default=None)
_SCOPE: contextvars.ContextVar[str | None] = contextvars.ContextVar("billed_to", default=None)


@contextlib.contextmanager
def spend_limit(limit: SpendLimit | None) -> Iterator[SpendLimit | None]:
    """The limit every provider request in this block (and the threads it hands work to) is held to; its
    scope, when it has one, is the block's `billing` too."""
    token = _ACTIVE.set(limit)
    scope = _SCOPE.set(limit.scope) if limit is not None and limit.scope else None
    try:
        yield limit
    finally:
        if scope is not None:
            _SCOPE.reset(scope)
        _ACTIVE.reset(token)


@contextlib.contextmanager
def billing(scope: str | None) -> Iterator[None]:
    """Every answer paid for in this block (and the threads it hands work to) is billed to `scope`."""
    token = _SCOPE.set(scope)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def current_scope() -> str | None:
    return _SCOPE.get()


def before_request() -> None:
    limit = _ACTIVE.get()
    if limit is not None:
        limit.before_request()


def record(call: Any) -> None:
    """An answer paid for (an llm_calls row, cache.CachedCall), told to the active limit."""
    limit = _ACTIVE.get()
    if limit is not None:
        limit.record(call.cost_usd, prices.counted_cost_usd(
            call.cost_usd, call.provider_model, call.model, call.prompt_tokens, call.completion_tokens,
            batch=call.transport is not None), request_hash=call.request_hash, billed_to=call.billed_to)
