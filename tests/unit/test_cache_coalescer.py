"""Concurrent cache reads and writes share statements: every caller gets its own answer, failures reach
every caller of the failed batch, and a lone caller is served at once."""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from deepscholar.llm.cache import Coalescer


def test_concurrent_callers_are_served_in_batches_each_with_its_own_result():
    batches: list[int] = []

    def run(items):
        batches.append(len(items))
        time.sleep(0.02)  # a round trip: callers arriving meanwhile wait for the next batch
        return [f"answer {i}" for i in items]

    ask = Coalescer(run, max_batch=50)
    with ThreadPoolExecutor(64) as pool:
        answers = list(pool.map(ask, range(400)))
    assert answers == [f"answer {i}" for i in range(400)]
    assert sum(batches) == 400 and max(batches) <= 50
    assert len(batches) < 100  # batched, not one statement per caller


def test_a_lone_caller_runs_its_own_batch_at_once():
    ask = Coalescer(lambda items: [i * 2 for i in items])
    started = time.perf_counter()
    assert ask(21) == 42
    assert time.perf_counter() - started < 0.05


def test_a_failed_batch_raises_in_each_of_its_callers_and_the_next_batch_works():
    gate = threading.Event()
    calls = []

    def run(items):
        calls.append(list(items))
        if len(calls) == 1:
            gate.wait(2)  # hold the first batch so the others queue behind it
            raise ConnectionError("warehouse gone")
        return list(items)

    ask = Coalescer(run)
    results: dict[int, object] = {}

    def call(i):
        try:
            results[i] = ask(i)
        except ConnectionError as exc:
            results[i] = exc

    first = threading.Thread(target=call, args=(0,))
    first.start()
    time.sleep(0.05)
    others = [threading.Thread(target=call, args=(i,)) for i in range(1, 6)]
    for t in others:
        t.start()
    time.sleep(0.05)
    gate.set()
    for t in [first, *others]:
        t.join(5)
    assert isinstance(results[0], ConnectionError)
    assert [results[i] for i in range(1, 6)] == [1, 2, 3, 4, 5]  # served by the batch after the failure
    assert calls[0] == [0] and sorted(calls[1]) == [1, 2, 3, 4, 5]


@pytest.mark.parametrize("size", [1, 3])
def test_more_callers_than_a_batch_are_all_served(size):
    ask = Coalescer(lambda items: [i + 1 for i in items], max_batch=size)
    with ThreadPoolExecutor(8) as pool:
        assert list(pool.map(ask, range(30))) == list(range(1, 31))
