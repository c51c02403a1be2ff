"""Backfill on registration: the eligible months after a system's knowledge cutoff and the frozen slice, the
cost estimate printed first, and the runs queued through Airflow's REST API (a local HTTP server answering
as Airflow's API server does, over real HTTP)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from integration.test_leaderboard import Board
from pytest_httpserver import HTTPServer

from deepscholar import cli
from deepscholar.evaluation.metrics import registry
from deepscholar.llm.prices import price_of
from deepscholar.systems.backfill import plan_backfill
from deepscholar.systems.registry import add_system

JUDGE = "openai/gpt-4o-mini"  # a model litellm prices


@pytest.fixture
def months(engine):
    """Three published months of 4 queries (the first day of each month onward); 'old' has every report."""
    with engine.begin() as conn:
        b = Board(conn)
        for month in ("2025-01", "2025-05", "2025-06"):
            ids = b.release(month, 4)
            conn.execute(sa.text("UPDATE release_queries SET published = to_date(:m, 'YYYY-MM') WHERE release_id = :m"),
                         {"m": month})
            b.system("old")
            for a in ids:
                b.report(month, "old", a)
    return engine


def test_the_plan_follows_the_cutoff_and_the_slice_and_prices_the_judging(months, monkeypatch):
    engine = months
    monkeypatch.setenv("DEEPSCHOLAR_FROZEN_SLICE", "2025-01")
    add_system(engine, "newbie", "deepscholar_base", {"model": "openai/gpt-4o"}, knowledge_cutoff="2025-05-15")
    with engine.begin() as conn:  # newbie already wrote one June report, for $0.02
        report = Board(conn).report("2025-06", "newbie", "2506.00001")
        conn.execute(sa.text("UPDATE reports SET n_llm_calls = 3, cost_usd = 0.02 WHERE report_id = :r"),
                     {"r": report})
    plan = plan_backfill(engine, "newbie", judge=JUDGE, tracks=[])
    assert [(t.release_id, t.month, t.reason, t.missing) for t in plan.targets] == [
        ("2025-01", "2025-01", "frozen comparison slice", 4), ("2025-06", "2025-06", "after its knowledge cutoff", 3)]
    assert [r for r, _ in plan.skipped] == ["2025-05"]
    assert "2025-05-01" in plan.skipped[0][1] and "may have seen" in plan.skipped[0][1]
    # Calls per report per metric x missing reports x the price of a call (default tokens: nothing audited).
    from deepscholar.evaluation.metrics.registry import get

    per_report = sum(get(m).calls_per_report for m in registry.metric_names(registry.CORE)
                     if getattr(get(m), "purpose", None))
    prompt, completion = price_of(JUDGE)
    june = next(t for t in plan.targets if t.release_id == "2025-06")
    assert june.judge_calls == pytest.approx(per_report * 3)
    assert june.judge_cost_usd == pytest.approx(per_report * 3 * (1500 * prompt + 150 * completion))
    assert plan.generation_cost_usd == pytest.approx(0.02 * 7)  # its mean cost per report x the 4 + 3 missing
    with engine.begin() as conn:  # a report whose calls have no price: the estimate is unknown, not $0
        conn.execute(sa.text("UPDATE reports SET cost_usd = NULL WHERE system_id = 'newbie'"))
    assert plan_backfill(engine, "newbie", judge=JUDGE, tracks=[]).generation_cost_usd is None

    # A model-free kind, or an unknown cutoff: every month.
    add_system(engine, "baseline", "extractive")
    assert [t.release_id for t in plan_backfill(engine, "baseline", judge="local").targets] == [
        "2025-01", "2025-05", "2025-06"]


def test_the_cli_prints_the_estimate_then_queues_one_backfill_and_the_slice_run(months, db_url, monkeypatch, capsys):
    engine = months
    add_system(engine, "newbie", "deepscholar_base", {"model": "openai/gpt-4o"}, knowledge_cutoff="2025-04-30")
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
    monkeypatch.setenv("DEEPSCHOLAR_JUDGE", JUDGE)
    monkeypatch.setenv("DEEPSCHOLAR_FROZEN_SLICE", "2025-01")

    # Without an Airflow to queue on: the plan, and a clear refusal (exit 1) saying what to set.
    capsys.readouterr()
    assert cli.main(["systems", "backfill", "newbie"]) == 1
    out = capsys.readouterr()
    assert "Estimate: judging $" in out.out and "DEEPSCHOLAR_AIRFLOW_API_URL is not set" in out.err

    with HTTPServer() as airflow:
        airflow.expect_request("/auth/token", method="POST",
                               json={"username": "operator", "password": "s3cret"}).respond_with_json(
            {"access_token": "tok"})
        airflow.expect_request("/api/v2/backfills", method="POST", headers={"Authorization": "Bearer tok"},
                               json={"dag_id": "deepscholar_benchmark", "from_date": "2025-05-01T00:00:00Z",
                                     "to_date": "2025-06-01T00:00:00Z", "dag_run_conf": {"systems": ["newbie"]},
                                     "reprocess_behavior": "completed"}).respond_with_json(
            {"id": 7, "dag_id": "deepscholar_benchmark"})
        airflow.expect_request("/api/v2/dags/deepscholar_benchmark/dagRuns", method="POST",
                               json={"logical_date": None, "conf": {"systems": ["newbie"], "month": "2025-01"}}
                               ).respond_with_json({"dag_run_id": "manual__slice"})
        monkeypatch.setenv("DEEPSCHOLAR_AIRFLOW_API_URL", airflow.url_for("/").rstrip("/"))
        monkeypatch.setenv("DEEPSCHOLAR_AIRFLOW_USERNAME", "operator")
        monkeypatch.setenv("AIRFLOW_API_PASSWORD", "s3cret")
        assert cli.main(["systems", "backfill", "newbie"]) == 0
        airflow.check_assertions()
    out = capsys.readouterr().out
    assert out.index("Estimate:") < out.index("queued backfill 7")
    assert "queued backfill 7 of deepscholar_benchmark for 2025-05..2025-06" in out
    assert "queued run manual__slice of deepscholar_benchmark for 2025-01" in out


def test_the_page_registers_behind_airflow_sign_in_shows_the_estimate_then_queues(months, monkeypatch):
    """The page's registration: off without an Airflow API; a wrong Airflow password writes nothing; the
    right one registers the system, shows the plan with its cost first, and queues on confirmation with
    that user's token (real HTTP: the app under uvicorn, Airflow's API answered by a local server)."""
    import html

    import requests
    from support.chromium import parse_html, serve

    from deepscholar.web import create_app

    engine = months
    monkeypatch.setenv("DEEPSCHOLAR_JUDGE", JUDGE)
    monkeypatch.delenv("DEEPSCHOLAR_FROZEN_SLICE", raising=False)
    form = {"name": "webbie", "kind": "deepscholar_base", "config": '{"model": "openai/gpt-4o"}', "version": "1",
            "knowledge_cutoff": "2025-04-30", "username": "operator", "password": "s3cret"}

    def systems() -> list[str]:
        with engine.connect() as conn:
            return list(conn.execute(sa.text("SELECT system_id FROM systems ORDER BY 1")).scalars())

    before = systems()
    with serve(create_app(lambda: engine)) as url:
        monkeypatch.delenv("DEEPSCHOLAR_AIRFLOW_API_URL", raising=False)
        page = requests.get(f"{url}/systems/new", timeout=30)
        assert page.status_code == 200 and 'data-registration="off"' in page.text
        refused = requests.post(f"{url}/systems/new", data=form, timeout=30)
        assert refused.status_code == 403 and "DEEPSCHOLAR_AIRFLOW_API_URL is not set" in refused.text
        assert systems() == before

        with HTTPServer() as airflow:
            airflow.expect_request("/auth/token", method="POST",
                                   json={"username": "operator", "password": "s3cret"}).respond_with_json(
                {"access_token": "user-tok"})
            airflow.expect_request("/auth/token", method="POST").respond_with_data("bad credentials", status=401)
            # The permission check: a backfill dry run of the benchmark DAG (creates nothing).
            airflow.expect_request("/api/v2/backfills/dry_run", method="POST",
                                   headers={"Authorization": "Bearer user-tok"}).respond_with_json(
                {"backfills": [], "total_entries": 0})
            airflow.expect_request("/api/v2/backfills", method="POST", headers={"Authorization": "Bearer user-tok"},
                                   json={"dag_id": "deepscholar_benchmark", "from_date": "2025-05-01T00:00:00Z",
                                         "to_date": "2025-06-01T00:00:00Z", "dag_run_conf": {"systems": ["webbie"]},
                                         "reprocess_behavior": "completed"}).respond_with_json({"id": 9})
            monkeypatch.setenv("DEEPSCHOLAR_AIRFLOW_API_URL", airflow.url_for("/").rstrip("/"))

            wrong = requests.post(f"{url}/systems/new", data={**form, "password": "guess"}, timeout=30)
            assert wrong.status_code == 403 and "refused to sign in 'operator'" in html.unescape(wrong.text)
            assert systems() == before
            bad = requests.post(f"{url}/systems/new", data={**form, "config": "[1, 2]"}, timeout=30)
            assert bad.status_code == 400 and "config must be a JSON object" in bad.text
            assert systems() == before

            shown = requests.post(f"{url}/systems/new", data=form, timeout=30)
            assert shown.status_code == 200, shown.text
            assert systems() == sorted([*before, "webbie"])
            with engine.connect() as conn:
                assert str(conn.execute(sa.text(
                    "SELECT knowledge_cutoff FROM systems WHERE system_id = 'webbie'")).scalar()) == "2025-04-30"
            plan = parse_html(shown.text).one("pre", {"data-plan": "webbie"})
            assert "Estimate: judging $" in plan.text() and "2025-05" in plan.text()
            assert not any(r.path == "/api/v2/backfills" for r, _ in airflow.log)  # nothing queued yet

            queued = requests.post(f"{url}/systems/webbie/backfill",
                                   data={"username": "operator", "password": "s3cret"}, timeout=30)
            assert queued.status_code == 200, queued.text
            assert "queued backfill 9 of deepscholar_benchmark for 2025-05..2025-06" in queued.text
            assert [r.path for r, _ in airflow.log if r.path == "/api/v2/backfills"] == ["/api/v2/backfills"]
