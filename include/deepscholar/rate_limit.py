"""One request rate per external host, kept by every thread and every worker process of a run.

Design notes: docs/MODULE_NOTES.md, `deepscholar.rate_limit`.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from deepscholar.settings import Settings, current_settings

__all__ = ["LocalSlots", "WarehouseSlots", "openalex_interval", "service_key", "use_warehouse", "wait_for_slot",
           "OPENALEX_INTERVAL_ENV", "DEFAULT_OPENALEX_INTERVAL"]

log = logging.getLogger(__name__)

OPENALEX_INTERVAL_ENV = "DEEPSCHOLAR_OPENALEX_INTERVAL_SECONDS"
DEFAULT_OPENALEX_INTERVAL = Settings.openalex_interval_seconds  # the polite pool's 10 requests per second


def service_key(base_url: str) -> str:
    """The limiter's name for a service: host[:port] and the base path, so arXiv's API and e-print
    services count apart even when one server (the replay server) answers both."""
    from urllib.parse import urlsplit

    from deepscholar.http_guard import host_of

    return host_of(base_url) + urlsplit(base_url if "//" in base_url else f"//{base_url}").path.rstrip("/")


def openalex_interval() -> float:
    """Seconds between OpenAlex request starts (0: unpaced)."""
    return current_settings().openalex_interval_seconds


class LocalSlots:
    """Slots kept in this process: shared by its threads, not by other processes."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._next: dict[str, float] = {}
        self._lock = threading.Lock()

    def take(self, host: str, interval: float) -> float:
        """0 when the slot was free and is now this caller's; else the seconds until it frees up."""
        with self._lock:
            now = self._clock()
            free_at = self._next.get(host, now)
            if free_at > now:
                return free_at - now
            self._next[host] = now + interval
            return 0.0


class WarehouseSlots:
    """Slots kept in the warehouse (host_rate_limits), shared by every process that uses it."""

    _TAKE = """
        UPDATE host_rate_limits SET next_slot = clock_timestamp() + make_interval(secs => :interval),
                                    updated_at = now()
        WHERE host = :host AND next_slot <= clock_timestamp()"""
    _FREE_IN = "SELECT EXTRACT(EPOCH FROM (next_slot - clock_timestamp())) FROM host_rate_limits WHERE host = :host"
    _ADD = ("INSERT INTO host_rate_limits (host, next_slot) VALUES (:host, clock_timestamp()) "
            "ON CONFLICT (host) DO NOTHING")

    def __init__(self, engine) -> None:  # noqa: ANN001 - a SQLAlchemy Engine
        self.engine = engine

    def take(self, host: str, interval: float) -> float:
        """0 when the slot was free and is now this caller's; else the seconds until it frees up."""
        import sqlalchemy as sa

        # Each statement is its own short transaction: a row lock lasts microseconds, never a wait. Under
        # READ COMMITTED a caller that queued on the row lock re-checks `next_slot` once it gets it.
        with self.engine.begin() as conn:
            if conn.execute(sa.text(self._TAKE), {"host": host, "interval": float(interval)}).rowcount:
                return 0.0
            free_in = conn.execute(sa.text(self._FREE_IN), {"host": host}).scalar()
            if free_in is None:
                conn.execute(sa.text(self._ADD), {"host": host})
                return 0.001  # the host's first request: its row exists now, take the slot next time
        return max(0.001, float(free_in))


_LOCAL = LocalSlots()
_slots: LocalSlots | WarehouseSlots = _LOCAL
_slots_lock = threading.Lock()


def use_warehouse(engine) -> None:  # noqa: ANN001 - a SQLAlchemy Engine, or None for in-process slots
    """Keep this process's reservations in `engine`'s warehouse from now on (None: in this process)."""
    global _slots
    with _slots_lock:
        if engine is None:
            _slots = _LOCAL
        elif not (isinstance(_slots, WarehouseSlots) and _slots.engine is engine):
            _slots = WarehouseSlots(engine)


def wait_for_slot(host: str, interval: float) -> None:
    """Block until this caller has taken `host`'s slot (at once when the interval is 0)."""
    if interval <= 0:
        return
    while (wait := _slots.take(host, interval)) > 0:
        time.sleep(wait)
