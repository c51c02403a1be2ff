"""A bound on what provider requests may cost while a run goes on, checked before each request.

A month's judging has a budget (DEEPSCHOLAR_JUDGE_BUDGET_USD). Before anything is sent the prediction is
compared with it (evaluation/budget.py); while the run goes on, a `SpendLimit` is active for its requests
(`spend_limit()`, a context variable, so the judge's worker threads see it as the usage tracking does). The
client asks it before every provider request (`before_request`; an answer from the cache costs nothing and
asks nothing) and tells it each answer's cost (`record`). Past the limit the next request raises OverBudget:
the request is not sent, the judge task's chunk is not stored (as for a provider outage), the answers already
had stay in llm_calls, so a re-run with a raised budget asks none of them again.

What counts as spent: the month's audited spend (the llm_calls rows its stored judgments name, read at the
start and again every `refresh_seconds`, which also brings in what other judge tasks stored meanwhile) plus
what this process's requests cost since that read. Answers whose judgments are not stored yet when the spend
is re-read are missing from it until they are (one chunk of reports per task at most): the margin is for
that and for the prediction's own error. A call whose model has no price adds nothing and is counted as
unpriced, so the message can say so.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator

from deepscholar.errors import OverBudget

__all__ = ["SpendLimit", "spend_limit", "before_request", "record", "dollars"]


def dollars(amount: float) -> str:
    """An amount as budgets are written in messages: cents from a dollar up, four decimals below it."""
    return f"${amount:,.2f}" if amount >= 1 else f"${amount:,.4f}"


class SpendLimit:
    """Stops requests once `spent` passes `limit_usd` (the budget, or what an operator approved, with the
    margin already added). `audited` reads the month's spend from the warehouse; it is called with no lock
    held and no connection of the caller's (it takes its own)."""

    def __init__(self, limit_usd: float, what: str, *, audited: Callable[[], float] | None = None,
                 refresh_seconds: float = 30.0, how_to_go_on: str = "") -> None:
        self.limit_usd = limit_usd
        self.what = what
        self.how_to_go_on = how_to_go_on
        self._audited = audited
        self._refresh_seconds = refresh_seconds
        self._lock = threading.Lock()
        self._refreshing = False
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
            if self._refreshing or time.monotonic() - self._read_at < self._refresh_seconds:
                return
            self._refreshing = True  # one thread reads; the others go on with the figure they have
        try:
            self._reread()
        finally:
            with self._lock:
                self._refreshing = False

    def _reread(self) -> None:
        assert self._audited is not None
        base = self._audited()
        with self._lock:
            self._base, self._since_read, self._read_at = base, 0.0, time.monotonic()

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
            unpriced = f", besides {self.unpriced_requests} requests of unpriced models" if self.unpriced_requests else ""
            raise OverBudget(f"{self.what}: stopped at {dollars(spent)} of {dollars(self.limit_usd)}{unpriced}; the "
                             f"answers so far are kept and will not be asked again{self.how_to_go_on}")

    def record(self, cost_usd: float | None) -> None:
        with self._lock:
            if cost_usd is None:
                self.unpriced_requests += 1
            else:
                self._since_read += cost_usd


_ACTIVE: contextvars.ContextVar[SpendLimit | None] = contextvars.ContextVar("spend_limit", default=None)


@contextlib.contextmanager
def spend_limit(limit: SpendLimit | None) -> Iterator[SpendLimit | None]:
    """The limit every provider request in this block (and the threads it hands work to) is held to."""
    token = _ACTIVE.set(limit)
    try:
        yield limit
    finally:
        _ACTIVE.reset(token)


def before_request() -> None:
    limit = _ACTIVE.get()
    if limit is not None:
        limit.before_request()


def record(cost_usd: float | None) -> None:
    limit = _ACTIVE.get()
    if limit is not None:
        limit.record(cost_usd)
