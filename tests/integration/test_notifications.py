"""Notifications reach a real SMTP server (aiosmtpd), a local webhook receiver and a Slack-webhook stand-in
(pytest_httpserver), through Airflow's notifiers and connections defined as AIRFLOW_CONN_* variables, routed
by DEEPSCHOLAR_NOTIFY; a notifier that fails is logged and never raises; the callbacks read the warehouse."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import sqlalchemy as sa
from support.notification_catchers import posted, smtp_inbox
from support.warehouse import one_query_release

from deepscholar import db
from deepscholar.local_airflow import free_port
from deepscholar.notifications import callbacks, messages
from deepscholar.notifications.notifiers import send

HOSTILE = '{{ 7 * 7 }} <b>bold</b> & "q" <!channel>'


@pytest.fixture
def inbox(monkeypatch):
    with smtp_inbox() as box:
        monkeypatch.setenv("AIRFLOW_CONN_SMTP_TEST", box.connection())
        yield box


@pytest.fixture
def hook(httpserver, monkeypatch):
    monkeypatch.setenv("AIRFLOW_CONN_HOOK_TEST", json.dumps({"conn_type": "http", "extra": {
        "url": httpserver.url_for("/hook")}, "password": "s3cret"}))
    monkeypatch.setenv("AIRFLOW_CONN_SLACK_TEST", json.dumps({
        "conn_type": "slackwebhook", "host": httpserver.url_for("/slack/"), "password": "T0/B0/X"}))
    httpserver.expect_request("/hook", method="POST").respond_with_data("ok")
    httpserver.expect_request("/slack/T0/B0/X", method="POST").respond_with_data("ok")
    return httpserver


_bodies = posted


def test_an_event_reaches_every_medium_once_escaped(inbox, hook, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_NOTIFY", "run_failed:smtp_test,hook_test;run_failed,board_published:slack_test")
    message = messages.run_failed("2025-06", "deepscholar_benchmark", "judge", HOSTILE, "https://airflow.example/l")
    assert send(message) == {"hook_test": "sent", "slack_test": "sent", "smtp_test": "sent"}
    assert inbox.arrived.wait(10) and len(inbox.received) == 1
    mail = inbox.received[0]
    assert mail["To"] == "ops@example.org" and "judge failed" in mail["Subject"]
    body = mail.get_body(("html",)).get_content()
    assert "{{ 7 * 7 }}" in body and "49" not in body  # sent as given, never rendered as a template
    assert "&lt;b&gt;bold&lt;/b&gt;" in body and "<b>bold" not in body
    (posted,) = _bodies(hook, "/hook")
    assert posted["event"] == "run_failed" and posted["error"] == HOSTILE and posted["month"] == "2025-06"
    assert [r.headers["Authorization"] for r, _ in hook.log if r.path == "/hook"] == ["Bearer s3cret"]
    (slack,) = _bodies(hook, "/slack/T0/B0/X")
    assert "&lt;!channel&gt;" in slack["text"] and "<!channel>" not in slack["text"]


def test_unrouted_events_go_nowhere(hook, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_NOTIFY", "board_published:hook_test")
    assert send(messages.release_failed("2025-06", ["x"], "cmd")) == {}
    assert hook.log == []


def test_a_failing_notifier_is_logged_and_never_raises(hook, monkeypatch, caplog):
    monkeypatch.setenv("AIRFLOW_CONN_DEAD_TEST", json.dumps({"conn_type": "http", "host": "127.0.0.1",
                                                             "port": free_port()}))
    monkeypatch.setenv("DEEPSCHOLAR_NOTIFY", "release_failed:dead_test,hook_test,missing_conn")
    outcome = send(messages.release_failed("2025-06", ["x"], "cmd"))
    assert outcome["hook_test"] == "sent"
    assert outcome["dead_test"].startswith("failed:") and outcome["missing_conn"].startswith("failed:")
    assert "notification release_failed to dead_test failed" in caplog.text
    assert len(_bodies(hook, "/hook")) == 1


def test_the_gate_callback_names_the_failing_checks(engine, hook, monkeypatch):
    with engine.begin() as conn:
        one_query_release(conn, "2025-06", "2506.00001")
        conn.execute(sa.text("UPDATE releases SET status = 'failed', gx_result = CAST(:g AS jsonb)"), {"g": json.dumps(
            {"checks": [{"name": "references_resolved", "success": False, "summary": "12% resolved"},
                        {"name": "no_duplicates", "success": True}]})})
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", engine.url.render_as_string(hide_password=False))
    monkeypatch.setenv("DEEPSCHOLAR_NOTIFY", "release_failed:hook_test")
    ti = SimpleNamespace(xcom_pull=lambda task_ids: "2025-06" if task_ids == "open_release" else None,
                         log_url="https://airflow.example/log", dag_id="deepscholar_release", task_id="quality_gate")
    callbacks.release_gate_failed({"ti": ti, "exception": RuntimeError("gate failed")})
    (posted,) = _bodies(hook, "/hook")
    assert posted["failing_checks"] == ["references_resolved: 12% resolved"]
    assert "deepscholar release build 2025-06" in posted["command"]


def test_callbacks_never_raise(monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_NOTIFY", "run_failed:missing_conn")
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", "postgresql://nobody@127.0.0.1:1/none")
    monkeypatch.setenv("DEEPSCHOLAR_DB_CONNECT_RETRIES", "0")
    callbacks.task_failed({})  # no ti, no month: still one message attempted, nothing raised
    callbacks.release_gate_failed({})  # the warehouse unreachable: logged
    callbacks.approval_asked({}, {}, ["admin"])


def test_the_deadline_says_what_the_run_waits_on(engine, hook, monkeypatch):
    import asyncio

    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": "2025-07", "status": "building"}], key=["release_id"])
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", engine.url.render_as_string(hide_password=False))
    monkeypatch.setenv("DEEPSCHOLAR_NOTIFY", "deadline_missed:hook_test")
    from airflow.api_fastapi.core_api.datamodels.dag_run import DAGRunResponse

    # The run as the triggerer sends it: DAGRunResponse dumped to JSON (its id is `dag_run_id`, not `run_id`).
    run = {"dag_id": "deepscholar_benchmark", "dag_run_id": "scheduled__2025-07-01T00:00:00+00:00",
           "data_interval_start": "2025-07-01T00:00:00Z"}
    assert set(run) <= set(DAGRunResponse.model_fields)
    context = {"dag_run": run, "deadline": {"deadline_time": "2025-08-02T12:00:00Z"}}
    asyncio.run(callbacks.publication_deadline_missed(context, hours=36))
    (posted,) = _bodies(hook, "/hook")
    assert posted["event"] == "deadline_missed" and posted["month"] == "2025-07"
    assert posted["facts"]["run"] == run["dag_run_id"]
    assert posted["waiting_on"].startswith("wait_for_release (release 2025-07 is building")
