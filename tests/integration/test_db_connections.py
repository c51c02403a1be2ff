"""Warehouse connections on a real PostgreSQL that runs out of them: bounded pools, connect-time retries,
outages retried then raised as InfrastructureError, and the budget against the server's limit.

Each test here that needs a full server starts an embedded PostgreSQL of its own with a small
max_connections (DEEPSCHOLAR_EMBEDDED_MAX_CONNECTIONS), so nothing else on the machine is disturbed.
"""

from __future__ import annotations

import logging
import threading
import time

import pytest
import sqlalchemy as sa
from support.warehouse import throwaway_warehouse

from deepscholar import db
from deepscholar.connection_budget import describe_budget, server_limit
from deepscholar.errors import InfrastructureError

pytestmark = pytest.mark.slow  # starts embedded PostgreSQL servers

SMALL = 12  # the server's max_connections in these tests (3 of them reserved for superusers)


@pytest.fixture
def small_server(monkeypatch):
    """An embedded warehouse whose server takes SMALL connections; connect retries kept short."""
    monkeypatch.setenv("DEEPSCHOLAR_EMBEDDED_MAX_CONNECTIONS", str(SMALL))
    monkeypatch.setenv("DEEPSCHOLAR_DB_CONNECT_RETRIES", "3")
    monkeypatch.setenv("DEEPSCHOLAR_DB_CONNECT_BACKOFF_SECONDS", "0.2")
    with throwaway_warehouse("deepscholar_small_", database="embedded") as (engine, _home):
        yield engine


def _url(engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def _hog(engine) -> list:
    """Every connection the server will still give (pgserver connects as a superuser: reserve included)."""
    raw = sa.create_engine(_url(engine), poolclass=sa.pool.NullPool)
    held = []
    while True:
        try:
            held.append(raw.raw_connection())
        except Exception as exc:  # the driver's OperationalError, as SQLAlchemy passes it on here
            assert "too many clients" in str(exc), exc
            return held


def test_embedded_server_takes_the_configured_max_connections(small_server):
    with small_server.connect() as conn:
        assert conn.execute(sa.text("SHOW max_connections")).scalar_one() == str(SMALL)
        assert conn.execute(sa.text(
            "SELECT application_name FROM pg_stat_activity WHERE pid = pg_backend_pid()")).scalar_one() == "deepscholar"
    assert server_limit(small_server) == SMALL - 3


def test_a_process_never_holds_more_connections_than_its_pool(small_server, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_DB_POOL_SIZE", "3")
    small_server.dispose()  # the fixture's own idle connection would count too
    engine = db.get_engine(_url(small_server))
    assert engine is not small_server and engine.pool.size() == 3
    peak, lock = [0], threading.Lock()

    def work(_):
        with engine.connect() as conn:
            n = conn.execute(sa.text("SELECT count(*) FROM pg_stat_activity WHERE application_name = 'deepscholar' "
                                     "AND backend_type = 'client backend'")).scalar_one()
            conn.execute(sa.text("SELECT pg_sleep(0.02)"))
        with lock:
            peak[0] = max(peak[0], n)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(40)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 40 threads at once took turns on 3 connections.
    assert 2 <= peak[0] <= 3
    assert engine.pool.checkedout() == 0 and engine.pool.size() == 3
    engine.dispose()


def test_a_full_server_is_waited_for_then_reported_as_an_outage(small_server, caplog):
    small_server.dispose()
    held = _hog(small_server)
    try:
        engine = db.get_engine(_url(small_server), pool_size=1)
        caplog.set_level(logging.WARNING, logger="deepscholar.db")
        started = time.monotonic()
        with pytest.raises(InfrastructureError, match="too many clients"):
            with engine.connect():
                pass
        # Bounded: 3 retries with 0.2 s doubling backoff (+ jitter), not forever and not at once.
        assert 0.5 < time.monotonic() - started < 10
        retries = [r for r in caplog.records if "refused a connection" in r.getMessage()]
        assert len(retries) == 3 and "attempt 1 of 4" in retries[0].getMessage()

        # A slot freed while it waits: the same call now gets through after a logged retry.
        caplog.clear()
        threading.Timer(0.3, lambda: held.pop().close()).start()
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT 1")).scalar_one() == 1
        assert any("refused a connection" in r.getMessage() for r in caplog.records)
        engine.dispose()
    finally:
        for conn in held:
            conn.close()


def test_a_connection_lost_mid_work_is_retried_then_an_outage(small_server, caplog):
    engine = db.get_engine(_url(small_server), pool_size=1)
    admin = sa.create_engine(_url(small_server), poolclass=sa.pool.NullPool, isolation_level="AUTOCOMMIT")
    calls = []

    def work(kill_times: int):
        calls.append(1)
        with engine.connect() as conn:
            pid = conn.execute(sa.text("SELECT pg_backend_pid()")).scalar_one()
            if len(calls) <= kill_times:  # the server drops this session under us
                with admin.connect() as other:
                    other.execute(sa.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
            return conn.execute(sa.text("SELECT 42")).scalar_one()

    caplog.set_level(logging.WARNING, logger="deepscholar.db")
    assert db.with_outage_retries(lambda: work(1), "test work") == 42
    assert len(calls) == 2 and any("test work: the warehouse failed" in r.getMessage() for r in caplog.records)

    calls.clear()
    with pytest.raises(InfrastructureError, match="the warehouse unavailable"):
        db.with_outage_retries(lambda: work(99), "test work")
    assert len(calls) == 4  # the first try and DEEPSCHOLAR_DB_CONNECT_RETRIES=3 more
    admin.dispose()
    engine.dispose()


def test_the_budget_is_set_against_the_servers_limit(small_server, monkeypatch):
    # The test defaults: 8 judge processes x (6 + 1 lock) + 24 other tasks x 4 + 2 x 4 + 1 lock = 161, far over 12 - 3.
    budget, limit, lines = describe_budget(small_server, environ={})
    assert limit == SMALL - 3 and budget.worst_case == 161
    assert lines[-1].startswith("WARNING: this configuration can open 161 connections, 152 more")
    # A deployment sized for this server: parallelism 1, one judge task of 2 connections + its lock's, pools
    # of 1 for the page and the CLI + the CLI's lock connection.
    monkeypatch.setenv("DEEPSCHOLAR_DB_POOL_SIZE", "1")
    monkeypatch.setenv("DEEPSCHOLAR_JUDGE_DB_POOL_SIZE", "2")
    budget, limit, lines = describe_budget(small_server, environ={"AIRFLOW__CORE__PARALLELISM": "1"})
    assert budget.worst_case == (2 + 1) + (2 + 1) and not lines[-1].startswith("WARNING")


def test_db_status_and_settings_print_the_budget_and_warn_when_it_cannot_fit(small_server, monkeypatch, capsys):
    from deepscholar import cli

    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", _url(small_server))
    assert cli.main(["db", "status"]) == 0
    out, err = capsys.readouterr()
    assert "worst case:         161" in out and f"server limit:       {SMALL - 3}" in out
    assert "warning: this configuration can open 161 connections" in err
    assert cli.main(["settings"]) == 0
    out, err = capsys.readouterr()
    assert "DEEPSCHOLAR_JUDGE_DB_POOL_SIZE" in out and "worst case:         161" in out and "warning:" in err


def test_db_stop_stops_the_embedded_server_and_the_next_command_starts_it(tmp_path, monkeypatch, capsys):
    from deepscholar import cli

    monkeypatch.setenv("DEEPSCHOLAR_HOME", str(tmp_path))
    monkeypatch.delenv("DEEPSCHOLAR_DB_URL", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_DEEPSCHOLAR_DB", raising=False)
    assert cli.main(["db", "stop"]) == 0 and "was not running" in capsys.readouterr().out
    assert cli.main(["db", "init"]) == 0
    assert (tmp_path / "pgdata" / "postmaster.pid").exists()
    assert cli.main(["db", "stop"]) == 0 and "stopped" in capsys.readouterr().out
    assert not (tmp_path / "pgdata" / "postmaster.pid").exists()
    assert cli.main(["db", "status"]) == 0  # started again on demand, its schema kept
    assert "state:     versioned" in capsys.readouterr().out
    assert cli.main(["db", "stop"]) == 0
