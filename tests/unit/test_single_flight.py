"""Identical work in flight at once is done once (llm/cache.py SingleFlight): waiters get the leader's
result, other keys run side by side, a failure stays the leader's and a waiter then runs the work itself,
and nothing is left behind."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from deepscholar.llm.cache import SingleFlight


def test_concurrent_callers_of_one_key_share_one_run():
    flights = SingleFlight()
    runs: list[int] = []
    release = threading.Event()

    def work():
        runs.append(1)
        release.wait(5)
        return "answer"

    with ThreadPoolExecutor(8) as pool:
        futures = [pool.submit(flights.run, "k", work) for _ in range(8)]
        time.sleep(0.2)  # every caller has arrived and waits on the one run
        assert len(flights) == 1
        release.set()
        results = [f.result(5) for f in futures]
    assert runs == [1]
    assert sorted(results) == [("answer", False)] + [("answer", True)] * 7
    assert len(flights) == 0  # nothing kept once the flight ended


def test_distinct_keys_run_side_by_side():
    flights = SingleFlight()
    barrier = threading.Barrier(4, timeout=5)  # passes only if all four run at once

    def work(key):
        barrier.wait()
        return key

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda k: flights.run(k, lambda: work(k)), ["a", "b", "c", "d"]))
    assert results == [("a", False), ("b", False), ("c", False), ("d", False)]


def test_a_failed_leader_raises_alone_and_a_waiter_runs_the_work_itself():
    flights = SingleFlight()
    started, release = threading.Event(), threading.Event()
    calls: list[str] = []

    def failing():
        calls.append("leader")
        started.set()
        release.wait(5)
        raise RuntimeError("provider said no")

    def succeeding():
        calls.append("waiter")
        return "second try"

    with ThreadPoolExecutor(2) as pool:
        leader = pool.submit(flights.run, "k", failing)
        started.wait(5)
        waiter = pool.submit(flights.run, "k", succeeding)
        time.sleep(0.1)  # the waiter is waiting on the leader's flight
        release.set()
        with pytest.raises(RuntimeError, match="provider said no"):
            leader.result(5)
        assert waiter.result(5) == ("second try", False)
    assert calls == ["leader", "waiter"]
    assert len(flights) == 0


def test_a_later_call_after_the_flight_runs_again():
    flights = SingleFlight()
    assert flights.run("k", lambda: 1) == (1, False)
    assert flights.run("k", lambda: 2) == (2, False)  # a flight is not a cache
