"""Several worker processes keep one host's rate limit together (real Postgres, real pyalex over HTTP).

Three processes look up OpenAlex works at once, as three mapped Airflow tasks of one release do. With
the slots in the warehouse (what the release steps use), the replay server — which keeps the interval
the way the real host does — sees requests at least one interval apart, none throttled, and the host
used close to its full rate. With each process keeping only its own slots, the same work bursts past
the limit and is throttled: the shared slots are what keep it.
"""

from __future__ import annotations

import multiprocessing as mp
import os

import pytest

from deepscholar.replay.demo_snapshot import write_demo_snapshot
from deepscholar.replay.server import ReplayServer

pytestmark = pytest.mark.slow  # several processes

INTERVAL = 0.1
PROCESSES = 3
LOOKUPS = 8


def _worker(db_url: str | None, openalex_url: str, dois: list[str], start, done) -> None:
    os.environ["DEEPSCHOLAR_HTTP_RETRIES"] = "3" if db_url else "0"  # a throttled burst: no 1 s Retry-After
    from deepscholar import db, rate_limit
    from deepscholar.sources.openalex import OpenAlexSource

    if db_url:
        rate_limit.use_warehouse(db.get_engine(db_url))
    source = OpenAlexSource(base_url=openalex_url, interval_seconds=INTERVAL)
    start.wait(60)  # every process starts looking up at the same moment
    found = 0
    try:
        for doi in dois:
            try:
                found += source.work_by_doi(doi) is not None
            except Exception:  # throttled past the retries: counted by the server, not here
                pass
    finally:
        done.put(found)


def _run(db_url: str | None, server: ReplayServer, dois: list[str]) -> dict:
    ctx = mp.get_context("spawn")
    start, done = ctx.Event(), ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(db_url, server.openalex_url, dois[k::PROCESSES], start, done))
             for k in range(PROCESSES)]
    for p in procs:
        p.start()
    import time

    time.sleep(3)  # let the spawned interpreters import before the gun
    server.app.pacing.clear()
    start.set()
    found = sum(done.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(30)
    return {"found": found, **server.app.pacing["/works"]}


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    root = tmp_path_factory.mktemp("snapshot")
    write_demo_snapshot(root)
    with ReplayServer(root) as server:
        server.app.min_intervals = {"/works": INTERVAL}
        dois = [w["doi"] for w in server.snapshot.works][: PROCESSES * LOOKUPS]
        yield server, dois


def test_processes_sharing_the_warehouse_keep_the_hosts_rate_together(db_url, engine, served):
    server, dois = served
    stats = _run(db_url, server, dois)
    assert stats["found"] == len(dois)
    assert stats["requests"] == len(dois) and stats["throttled"] == 0
    # Closer than 90% of the interval only by a busy machine's wake-up jitter, now and then.
    assert stats["early"] <= 3, f"requests closer than 90% of the interval: {stats}"
    span = stats["last"] - stats["first"]
    floor = (len(dois) - 1) * INTERVAL
    # At the limit, not far under it: within 40% of the floor (the machine is shared and noisy).
    assert floor * 0.9 <= span <= floor * 1.4, f"{len(dois)} requests took {span:.2f} s, floor {floor:.2f} s"


def test_processes_keeping_their_own_slots_exceed_the_limit(served):
    server, dois = served
    stats = _run(None, server, dois)
    assert stats["throttled"] > 0 and stats["early"] > 0
