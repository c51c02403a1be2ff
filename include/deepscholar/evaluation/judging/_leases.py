"""Leases on judgments, so two evaluations of one month at once ask the provider once per judgment.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.judging._leases`.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.evaluation.judging._pending import PENDING_CONDITION, pending_params
from deepscholar.evaluation.metrics.base import Metric
from deepscholar.settings import current_settings

__all__ = ["Leases", "HEARTBEAT", "take_leases", "holders_of", "process_holder", "return_leases", "renew", "wait_for_turn"]

log = logging.getLogger("deepscholar.evaluation")

MAX_POLL_SECONDS = 2.0  # how often a waiting process looks again (a quarter of the lease when that is shorter)

_LEASE = "now() + make_interval(secs => :lease)"

# The reports of :ids still pending (ok, no current headline score), ours to judge: no row yet, our own row
# (a retry of this process), or a row whose lease ran out. Sorted, so two holders leasing overlapping
# chunks lock rows in one order (no deadlock).
_CLAIM = sa.text(f"""
    INSERT INTO judge_claims AS c (report_id, metric, judge_config, holder, claimed_at, lease_expires_at)
    SELECT r.report_id, :m, :j, :holder, now(), {_LEASE}
    FROM reports r
    WHERE r.report_id = ANY(:ids) AND r.status = 'ok' AND {PENDING_CONDITION}
    ORDER BY r.report_id
    ON CONFLICT (report_id, metric, judge_config) DO UPDATE SET
        holder = EXCLUDED.holder, lease_expires_at = EXCLUDED.lease_expires_at,
        claimed_at = CASE WHEN c.holder = EXCLUDED.holder THEN c.claimed_at ELSE EXCLUDED.claimed_at END
    WHERE c.holder = EXCLUDED.holder OR c.lease_expires_at <= now()
    RETURNING c.report_id""")
# Returning locks its rows in the lease's order (no deadlock with a concurrent lease, which locks the rows it
# conflicts with); renewal never waits for a lock (it skips a row locked right now: the next beat renews
# it), so it needs no order, and reads the holder's rows on the judge_claims_holder index.
_RENEW = sa.text(f"""
    WITH mine AS MATERIALIZED (
        SELECT report_id, metric, judge_config FROM judge_claims WHERE holder = :holder FOR UPDATE SKIP LOCKED)
    UPDATE judge_claims c SET lease_expires_at = {_LEASE}
    FROM mine
    WHERE c.holder = :holder
      AND (c.report_id, c.metric, c.judge_config) = (mine.report_id, mine.metric, mine.judge_config)""")
# Both statements name their rows by the key's leading column too (`c.report_id = ANY`, `c.holder`): on a
# table the planner believes empty (just analysed, or churned without autovacuum) it otherwise scanned the
# whole primary key for every chunk released, and a month's releases queued behind each other. The rows
# to lock are a MATERIALIZED CTE, run once: as a subquery joined by nested loop it was locked again for
# every row deleted (25 times per chunk, each time through the holder's dead rows: 10 ms per chunk).
_RELEASE = sa.text("""
    WITH mine AS MATERIALIZED (
        SELECT report_id FROM judge_claims
        WHERE holder = :holder AND metric = :m AND judge_config = :j AND report_id = ANY(:ids)
        ORDER BY report_id FOR UPDATE)
    DELETE FROM judge_claims c
    USING mine
    WHERE c.report_id = ANY(:ids) AND c.report_id = mine.report_id AND c.metric = :m AND c.judge_config = :j
      AND c.holder = :holder""")
# The reports of :ids still pending, counted per live holder (NULL: nobody holds a live lease on them).
_HOLDERS = sa.text(f"""
    SELECT c.holder, count(*), max(c.lease_expires_at)
    FROM reports r
    LEFT JOIN judge_claims c ON c.report_id = r.report_id AND c.metric = :m AND c.judge_config = :j
                             AND c.lease_expires_at > now()
    WHERE r.report_id = ANY(:ids) AND r.status = 'ok' AND {PENDING_CONDITION}
    GROUP BY c.holder""")

_holder: tuple[int, str] | None = None


def process_holder() -> str:
    """This process's holder id, `host:pid:uuid` (a new one after a fork)."""
    global _holder
    if _holder is None or _holder[0] != os.getpid():
        _holder = (os.getpid(), f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}")
    return _holder[1]


def _lease(lease_seconds: float | None) -> float:
    return lease_seconds if lease_seconds is not None else current_settings().judge_claim_lease_seconds


def take_leases(engine: Engine, metric: Metric, judge_config: str, report_ids: Sequence[int], *,
          holder: str | None = None, lease_seconds: float | None = None) -> list[int]:
    """Claim the reports of `report_ids` that are still pending and not held by another live lease: the ones
    now held by `holder` (default: this process), sorted. One statement, on a connection held for it only."""
    if not report_ids:
        return []
    with engine.begin() as conn:
        got = conn.execute(_CLAIM, {**pending_params(metric, judge_config), "ids": list(report_ids),
                                    "holder": holder or process_holder(),
                                    "lease": _lease(lease_seconds)}).scalars().all()
    return sorted(got)


def renew(engine: Engine, *, holder: str | None = None, lease_seconds: float | None = None) -> int:
    """Push every lease of `holder` one lease length past now; the number of rows renewed."""
    with engine.begin() as conn:
        return conn.execute(_RENEW, {"holder": holder or process_holder(), "lease": _lease(lease_seconds)}).rowcount


def return_leases(engine: Engine, metric_name: str, judge_config: str, report_ids: Sequence[int], *,
            holder: str | None = None) -> int:
    """Delete `holder`'s leases on these reports (its results are stored, or it gave up); rows deleted."""
    if not report_ids:
        return 0
    with engine.begin() as conn:
        return conn.execute(_RELEASE, {"holder": holder or process_holder(), "m": metric_name,
                                       "j": judge_config, "ids": list(report_ids)}).rowcount


def holders_of(engine: Engine, metric: Metric, judge_config: str,
               report_ids: Sequence[int]) -> dict[str | None, tuple[int, object]]:
    """The reports of `report_ids` still pending, per live holder (None: held by nobody):
    holder -> (number of reports, latest lease expiry)."""
    if not report_ids:
        return {}
    with engine.connect() as conn:
        rows = conn.execute(_HOLDERS, {**pending_params(metric, judge_config), "ids": list(report_ids)}).all()
    return {holder: (n, until) for holder, n, until in rows}


def wait_for_turn(engine: Engine, metric: Metric, judge_config: str, report_ids: Sequence[int], *,
                  label: str = "", holder: str | None = None, lease_seconds: float | None = None) -> list[int]:
    """Wait until none of `report_ids` is pending any more (returns []) or some of the pending ones are free
    (their holder released them without scores, or its lease ran out): leases and returns those. Polls,
    holding no connection between looks; logs one line whenever the set of holders it waits on changes."""
    holder = holder or process_holder()
    poll = max(0.05, min(MAX_POLL_SECONDS, _lease(lease_seconds) / 4))
    announced: set[str] = set()
    while True:
        held = holders_of(engine, metric, judge_config, report_ids)
        if not held:
            return []
        if None in held or holder in held:
            got = take_leases(engine, metric, judge_config, report_ids, holder=holder, lease_seconds=lease_seconds)
            if got:
                return got
            time.sleep(0.05)  # another process took them between the two statements: look again
            continue
        others = {h for h in held if h is not None}
        if not others <= announced:
            for other in sorted(others - announced):
                n, until = held[other]
                log.warning("%s: waiting for %d reports judged by another process (holder %s, lease until %s)",
                         label or f"{metric.name} ({judge_config})", n, other, until)
            announced |= others
        time.sleep(poll)


class _Heartbeat:
    """One thread per process renewing the leases of every (engine, holder) with leases in use, every third
    of the lease; it ends when nobody uses it and starts again with the next user."""

    def __init__(self) -> None:
        self._reset()

    def _reset(self) -> None:  # also in a forked child: it has no heartbeat thread and no leases in use
        self._lock = threading.Lock()
        self._users: Counter[tuple[Engine, str]] = Counter()
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None

    def join(self, engine: Engine, holder: str) -> None:
        with self._lock:
            self._users[(engine, holder)] += 1
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="judge-leases-heartbeat", daemon=True)
                self._thread.start()

    def leave(self, engine: Engine, holder: str) -> None:
        with self._lock:
            self._users[(engine, holder)] -= 1
            if self._users[(engine, holder)] <= 0:
                del self._users[(engine, holder)]
            if not self._users:
                self._wake.set()

    def _run(self) -> None:
        while True:
            self._wake.wait(_lease(None) / 3)
            with self._lock:
                self._wake.clear()
                targets = list(self._users)
                if not targets:
                    self._thread = None
                    return
            for engine, holder in targets:
                try:
                    renew(engine, holder=holder)
                except Exception as exc:  # a warehouse outage: the work itself fails and is retried
                    log.warning("renewing the judge leases of %s failed: %s", holder, exc)



HEARTBEAT = _Heartbeat()
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=HEARTBEAT._reset)


class Leases:
    """`with Leases(engine, metric, judge_config) as held: for ids in held.chunks(pending, size): ...`

    Each chunk yielded is leased by this process; it is released when the caller asks for the next one
    (after storing its results), and whatever is still held when the block ends (an error) is released then.
    Reports another live holder has are skipped, then waited for at the end (`wait_for_turn`) and judged
    here if their holder gives them up or dies. The heartbeat renews the leases the whole time."""

    def __init__(self, engine: Engine, metric: Metric, judge_config: str, label: str = "", *,
                 holder: str | None = None) -> None:
        self.engine, self.metric, self.judge_config, self.label = engine, metric, judge_config, label
        self.holder = holder or process_holder()
        self.held: list[int] = []

    def __enter__(self) -> Leases:
        HEARTBEAT.join(self.engine, self.holder)
        return self

    def __exit__(self, *exc_info) -> None:
        try:
            self._return_all()
        except Exception as exc:  # never hide the error that ended the block; the leases run out anyway
            log.warning("releasing the judge leases of %s failed: %s", self.holder, exc)
        finally:
            HEARTBEAT.leave(self.engine, self.holder)

    def _return_all(self) -> None:
        if self.held:
            return_leases(self.engine, self.metric.name, self.judge_config, self.held, holder=self.holder)
            self.held = []

    def _parts(self, mine: list[int], size: int) -> Iterator[list[int]]:
        """`mine` (leased) a chunk at a time, each released once the caller asks for the next; the later
        chunks stay leased, and renewed, while the first ones are judged."""
        self.held = list(mine)
        for start in range(0, len(mine), size):
            ids = mine[start:start + size]
            yield ids
            return_leases(self.engine, self.metric.name, self.judge_config, ids, holder=self.holder)
            self.held = mine[start + size:]

    def chunks(self, pending: Sequence[int], size: int) -> Iterator[list[int]]:
        """The pending reports in chunks of at most `size`, each leased by this process: first what nobody
        else holds, in order, then the rest as their holders give them up (none left pending: the end)."""
        skipped: list[int] = []
        for start in range(0, len(pending), size):
            chunk = list(pending[start:start + size])
            got = set(take_leases(self.engine, self.metric, self.judge_config, chunk, holder=self.holder))
            mine = [r for r in chunk if r in got]
            skipped += [r for r in chunk if r not in got]
            yield from self._parts(mine, size)
        done: set[int] = set()
        while skipped:
            mine = wait_for_turn(self.engine, self.metric, self.judge_config, skipped, label=self.label,
                                 holder=self.holder)
            if not mine:
                return
            done.update(mine)  # judged here: never waited for again, even if it were still pending
            skipped = [r for r in skipped if r not in done]
            yield from self._parts(mine, size)
