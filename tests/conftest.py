"""Shared fixtures: a real PostgreSQL for integration tests and the real test data (support/shared_data.py).

The warehouse fixture uses the server at 127.0.0.1:5432 when one answers (as on CI), creating a
throwaway database per test session; otherwise it starts the project's embedded PostgreSQL (pgserver).
`DEEPSCHOLAR_TEST_DB=embedded|server|<url>` forces one. tests/integration/test_db_embedded.py always
covers the embedded path.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
# The local replay servers need no pacing; tests of the rate limiter set their own intervals.
os.environ.setdefault("DEEPSCHOLAR_OPENALEX_INTERVAL_SECONDS", "0")
# The pool's rule, checked (db.py): a thread asking for a second pooled connection while it holds one, or
# waiting for a guarded lock while it holds one, fails naming both places. Set here, before anything starts,
# so the CLI, the demo and Airflow's processes the tests start inherit it.
os.environ.setdefault("DEEPSCHOLAR_POOL_GUARD", "1")
# Three pytest workers on two cores, each with Airflow task processes beside it: the local judge's torch
# spreading one encode over two threads only makes them wait on each other (the same encode took 15-19 s
# of CPU with two threads and 9-11 s with one on the loaded machine, 10.6 against 9.7 s when idle).
os.environ.setdefault("OMP_NUM_THREADS", "1")

import pytest  # noqa: E402
from support import shared_data  # noqa: E402
from support.warehouse import empty_warehouse, throwaway_warehouse  # noqa: E402

PROJECT_ROOT = Path(__file__).resolve().parents[1]
SHARED_FIXTURES = shared_data.shared_root()  # DEEPSCHOLAR_SHARED_FIXTURES, else ../shared/fixtures


@pytest.fixture(scope="session")
def shared_fixtures() -> Path:
    """The real test data folder; skips the test when it is missing, fails it when CI=true."""
    return shared_data.require()


@pytest.fixture(scope="session")
def db_url() -> str:
    """URL of an empty database for this test session, with the schema applied (support/warehouse.py)."""
    choice = os.environ.get("DEEPSCHOLAR_TEST_DB", "auto")
    with throwaway_warehouse("deepscholar_test_", database=choice, set_home=False) as (engine, _home):
        yield engine.url.render_as_string(hide_password=False)


@pytest.fixture(scope="session")
def demo_template(db_url) -> str:
    """URL of the demo month's template database on the session database's server, built once per code
    version for every worker (support/demo_month.py); a module clones it with served_demo_month."""
    from support.demo_month import demo_template_url

    return demo_template_url(db_url)


@pytest.fixture
def engine(db_url):
    """The session database, emptied before each test so tests never see each other's rows."""
    from deepscholar import db

    eng = db.get_engine(db_url)
    empty_warehouse(eng)
    return eng


@pytest.fixture(autouse=True)
def _pool_discipline():
    """A pool-guard finding fails the test even when the code under test caught the error. (A test that
    never imported the warehouse module has no pool: nothing to import for it.)"""
    if "deepscholar.db" in sys.modules:
        sys.modules["deepscholar.db"].take_pool_guard_violations()
    yield
    if "deepscholar.db" in sys.modules:
        found = sys.modules["deepscholar.db"].take_pool_guard_violations()
        assert not found, "\n".join(found)


@pytest.fixture(autouse=True)
def _closed_host_breakers():
    """Every test starts with every host's circuit breaker closed (http_guard keeps state per process)."""
    from deepscholar.http_guard import BREAKER

    BREAKER.reset()
    yield
    BREAKER.reset()


# The fault suite's figures at the end of any session that ran its cases (support/fault_tally.py).
def pytest_runtest_logreport(report) -> None:
    from support import fault_tally

    fault_tally.count_report(report)


def pytest_sessionfinish(session) -> None:
    from support import fault_tally

    fault_tally.send_from_worker(session.config)


def pytest_terminal_summary(terminalreporter) -> None:
    from support import fault_tally

    line = fault_tally.summary_line()
    if line:
        terminalreporter.write_line(line)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    from support import fault_tally

    fault_tally.merge_from_worker(node)


# The longest tests (minutes each: the Airflow end-to-end runs, the open-model judge's bench) start first.
_LONGEST = ("tests/dags/", "[local_judge.py]", "[benchmark_scale.py")


def pytest_collection_modifyitems(config, items) -> None:
    """The tests marked slow first, dealt round-robin over the workers' contiguous parts of the list (longest
    first): pytest-xdist's worksteal hands each of `make test`'s N workers one contiguous part, so each starts
    on its share of the long runs instead of one worker running them at the end while the others idle."""
    slow = [item for item in items if item.get_closest_marker("slow")]
    if not slow:
        return
    slow.sort(key=lambda item: not any(mark in item.nodeid for mark in _LONGEST))  # stable: longest first
    fast = [item for item in items if not item.get_closest_marker("slow")]
    try:  # -n 3 (make test); -n auto or no xdist: two parts, as before
        workers = max(2, int(getattr(config.option, "numprocesses", None) or 2))
    except (TypeError, ValueError):
        workers = 2
    ordered = []
    for k in range(workers):
        ordered += slow[k::workers] + fast[k * len(fast) // workers:(k + 1) * len(fast) // workers]
    items[:] = ordered
