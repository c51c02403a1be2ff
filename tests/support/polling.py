"""Waiting on a system that runs by itself (Airflow's scheduler, a backfill), as the end-to-end tests do."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

__all__ = ["wait_until"]

T = TypeVar("T")


def wait_until(predicate: Callable[[], T], timeout: float, what: str, diagnose: Callable[[], str],
               poll: float = 3.0) -> T:
    """The first true value of `predicate()`, asked every `poll` seconds; past `timeout`, an assertion naming
    `what` with `diagnose()`'s text (what the system was doing)."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}:\n{diagnose()}"
        time.sleep(poll)
