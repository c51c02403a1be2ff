"""A bound on what provider requests may cost while a run goes on, checked before each request; and who pays.

A month's judging has a budget (DEEPSCHOLAR_JUDGE_BUDGET_USD). Before anything is sent the prediction is
compared with it (evaluation/money/budget.py); while the run goes on, a `SpendLimit` is active for its requests
(`spend_limit()`, a context variable, so the judge's worker threads see it as the usage tracking does). The
client asks it before every provider request (`before_request`; an answer from the cache costs nothing and
asks nothing) and tells it each answer's cost (`record`). Past the limit the next request raises OverBudget:
the request is not sent, the judge task's chunk is not stored (as for a provider outage), the answers already
had stay in llm_calls, so a re-run with a raised budget asks none of them again.

Who pays: every answer paid for inside `billing(scope)` is stored with that scope (llm_calls.billed_to; a
request recorded for a batch carries it to its answer), whether or not a judgment ever names it. `paid_usd`
sums a scope's rows, so a budget counts what was paid: the earlier rounds of a question asked in several
(nugget coverage, RACE through batches), a chunk cut short, another judge task's answers. A call without a
price counts its tokens at the stated fallback price (llm/prices.py `counted_cost_usd`), never $0.

What counts as spent: the warehouse's figure (`audited`) plus what this process's requests cost since that
read. The figure is read at the start, every `refresh_seconds`, and again each time this process has spent
READ_SHARE of the room the last read left under the limit: the closer the month gets to its limit, the more
often each judge task looks, until it reads before every request, so judge tasks spending at once see each
other's answers and stop together at the limit, not each at its own. What the limit cannot see is the
requests in flight when it is crossed (at most every task's concurrency): the margin is for those and for
the prediction's own error.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from deepscholar.errors import OverBudget
from deepscholar.llm import prices

__all__ = ["SpendLimit", "spend_limit", "scope_limit", "billing", "current_scope", "scope_of", "before_request", "record",
           "Paid", "paid_usd", "count_paid", "PAID_COLUMNS", "READ_SHARE"]

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
    from deepscholar.settings import current_settings

    settings = current_settings()
    total = Paid()
    for r in rows:
        counted = float(r.priced_usd)
        notes: tuple[str, ...] = ()
        if r.unpriced:
            prompt = int(r.prompt_tokens) + int(r.no_prompt) * settings.cost_prompt_tokens
            completion = int(r.completion_tokens) + int(r.no_completion) * settings.cost_completion_tokens
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

class SpendLimit:
    """Stops requests once `spent` passes `limit_usd` (the budget, or what an operator approved, with the
    margin already added). `audited` reads the spend from the warehouse; it is called with no lock held and
    no connection of the caller's (it takes its own). `scope`: the budget the requests are paid from."""

    def __init__(self, limit_usd: float, what: str, *, audited: Callable[[], float] | None = None,
                 refresh_seconds: float = 30.0, how_to_go_on: str = "", scope: str | None = None) -> None:
        self.limit_usd = limit_usd
        self.what = what
        self.how_to_go_on = how_to_go_on
        self.scope = scope
        self._audited = audited
        self._refresh_seconds = refresh_seconds
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()  # one read at a time; threads arriving meanwhile take its figure
        self._base = audited() if audited else 0.0
        self._read_at = time.monotonic()
        self._since_read = 0.0
        self.unpriced_requests = 0

    @property
    def spent(self) -> float:
        with self._lock:
            return self._base + self._since_read

    def _refresh_if_due(self) -> None:
        if self._audited is None:
            return
        with self._lock:
            closing_in = self._since_read >= READ_SHARE * (self.limit_usd - self._base)
        if closing_in or time.monotonic() - self._read_at >= self._refresh_seconds:
            self._reread(coalesce=True, wait=closing_in)

    def _reread(self, *, coalesce: bool = False, wait: bool = True) -> None:
        """Read the warehouse's figure. `coalesce`: a thread that arrived while another read ran takes that
        read's figure; `wait` False: it does not wait for it (far from the limit, the figure it has will do)."""
        assert self._audited is not None
        arrived = time.monotonic()
        if not self._read_lock.acquire(blocking=wait):
            return
        try:
            if coalesce and self._read_at >= arrived:
                return
            base = self._audited()
            with self._lock:
                self._base, self._since_read, self._read_at = base, 0.0, time.monotonic()
        finally:
            self._read_lock.release()

    def refreshed(self) -> float:
        """The spend with the warehouse's figure re-read now: what a batch submission is checked against (the
        answers it paid for arrive as stored batches, never as this process's requests)."""
        if self._audited is not None:
            self._reread()
        return self.spent

    def before_request(self) -> None:
        """Raises OverBudget when the spend is past the limit: the request is not sent."""
        self._refresh_if_due()
        spent = self.spent
        if spent > self.limit_usd:
            unpriced = (f", counting {self.unpriced_requests} requests of unpriced models at their fallback price"
                        if self.unpriced_requests else "")
            raise OverBudget(f"{self.what}: stopped at {prices.usd_text(spent)} of {prices.usd_text(self.limit_usd)}{unpriced}; the "
                             f"answers so far are kept and will not be asked again{self.how_to_go_on}")

    def record(self, cost_usd: float | None, counted_usd: float) -> None:
        """One answer paid for: its audited cost (None: no price) and what the budget counts for it."""
        with self._lock:
            if cost_usd is None:
                self.unpriced_requests += 1
            self._since_read += counted_usd


def scope_limit(engine: Any, scope: str, budget_usd: float | None, what: str, how_to_go_on: str = ""
                ) -> SpendLimit | None:
    """A limit of what was paid from one budget (`scope`), read from the warehouse (paid_usd): stopped once it
    passes `budget_usd` (no margin: at most the requests in flight pass it). None without a budget."""
    if budget_usd is None:
        return None

    def audited() -> float:
        with engine.connect() as conn:
            return paid_usd(conn, [scope]).counted_usd

    return SpendLimit(budget_usd, what, audited=audited, refresh_seconds=5.0, how_to_go_on=how_to_go_on, scope=scope)


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
            batch=call.transport is not None))
