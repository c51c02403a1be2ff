"""The judge drift alarm on the demo month judged by an LLM judge (a local OpenAI-compatible stub over real
HTTP, relevance_rate only): the calibration slice re-judged month after month with the cache bypassed.

Two months: release 2025-05 is added as a bare row (the check is keyed by the month checked; the slice is
drawn once from the first published release the judge judged, the demo month 2025-06), then 2025-06.
"""

from __future__ import annotations

import hashlib
import json

import pytest
import sqlalchemy as sa
from support.demo_month import served_demo_month
from support.openai_stub import OpenAIStub, first_user_text

from deepscholar import cli
from deepscholar.evaluation.boards.leaderboard_quality import check_leaderboard
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.judge_validation.drift import check_drift
from deepscholar.evaluation.pipeline import evaluate_release
from deepscholar.scheduling import BenchmarkRun, finish_run, record_run

pytestmark = pytest.mark.slow  # builds and judges the demo month

MODEL = "openai/gpt-4o-mini"  # a model litellm prices: the cost bound has a price to predict with
CONFIG = JudgeSpec.parse(MODEL).config_id
EARLIER = "2025-05"
METRICS = ["relevance_rate"]


def _coin(body: dict) -> int:
    return int(hashlib.sha256(first_user_text(body).encode()).hexdigest(), 16)


def steady_judge(body: dict) -> str:
    """The same grade for the same question, every time."""
    return json.dumps({"grade": _coin(body) % 3, "explanation": "scripted"})


def changed_judge(body: dict) -> str:
    """The model behind the name changed: about two questions in three get another grade."""
    coin = _coin(body)
    return json.dumps({"grade": (coin + (coin // 3) % 3) % 3, "explanation": "scripted, changed"})


@pytest.fixture(scope="module")
def month(demo_template):
    """The demo month judged on relevance_rate by the steady stub judge and rolled up; the stub stays up
    (its URL is part of every cache key) and an earlier month's release row exists."""
    with served_demo_month(demo_template, "deepscholar_drift_") as built, OpenAIStub(model_suffix="") as stub, \
            pytest.MonkeyPatch.context() as mp:
        mp.setenv("OPENAI_API_KEY", "test")
        stub.default = steady_judge
        engine = built["engine"]
        evaluate_release(engine, built["month"], judge=MODEL, metrics=METRICS, api_base=stub.url)
        with engine.begin() as conn:
            conn.execute(sa.text("INSERT INTO releases (release_id) VALUES (:r)"), {"r": EARLIER})
        yield {**built, "stub": stub}
    stub.raise_errors()


@pytest.fixture
def fresh(month):
    """No drift check has run yet: no slice, no checks, no salted calls; the steady judge answers."""
    engine = month["engine"]
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM judge_drift_checks"))
        conn.execute(sa.text("DELETE FROM calibration_items"))
        conn.execute(sa.text("DELETE FROM llm_calls WHERE request ? 'cache_salt'"))
    month["stub"].default = steady_judge
    return month


def _check(month, release_id, **kwargs):
    return check_drift(month["engine"], release_id, JudgeSpec.parse(MODEL), metrics=METRICS, api_base=month["stub"].url, **kwargs)


def _shared_calls(engine) -> dict:
    """The cache rows the boards are answered from (unsalted), as stored."""
    with engine.connect() as conn:
        return {r[0]: tuple(r[1:]) for r in conn.execute(sa.text(
            "SELECT request_hash, response_text, created_at, cost_usd FROM llm_calls WHERE NOT request ? 'cache_salt'"))}


def _slice(engine) -> list[tuple]:
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT item_id, reference_label FROM calibration_items WHERE judge_config = :j AND metric = :m "
            "ORDER BY position"), {"j": CONFIG, "m": "relevance_rate"}).all()


def _row(engine, release_id) -> dict:
    with engine.connect() as conn:
        return dict(conn.execute(sa.text(
            "SELECT * FROM judge_drift_checks WHERE release_id = :r AND judge_config = :j AND metric = :m"),
            {"r": release_id, "j": CONFIG, "m": "relevance_rate"}).mappings().one())


def _drift_check_record(engine, release_id) -> tuple[dict, str]:
    result = check_leaderboard(engine, release_id, CONFIG)
    return next(c for c in result.checks if c["name"] == "no_judge_drift"), result.summary


def test_a_steady_judge_is_quiet_month_after_month_on_the_same_slice_asked_afresh(fresh):
    engine, stub = fresh["engine"], fresh["stub"]
    shared = _shared_calls(engine)
    assert shared  # the boards' answers are in llm_calls: a cached client would send nothing

    sent = stub.requests
    first = _check(fresh, EARLIER)
    slice_ = _slice(engine)
    (d,) = first.metrics
    assert 10 <= len(slice_) <= 40 and d.n_items == len(slice_)
    # Bypassed: every slice question reached the provider again, although llm_calls had its answer.
    assert stub.requests - sent == d.requests == len(slice_)
    assert (d.status, d.reference_kind, d.agreement, d.tripped) == ("checked", "first_judgment", 1.0, False)
    assert d.predicted_cost_usd == pytest.approx(d.cost_usd) and d.cost_usd > 0

    sent = stub.requests
    second = _check(fresh, fresh["month"])
    (d,) = second.metrics
    assert _slice(engine) == slice_  # the slice is fixed: the same items and reference labels
    assert stub.requests - sent == d.requests == len(slice_)  # asked afresh in the next month too
    assert (d.agreement, d.previous_release_id, d.previous_agreement, d.tripped) == (1.0, EARLIER, 1.0, False)
    row = _row(engine, fresh["month"])
    assert (row["status"], row["tripped"], row["n_items"], row["agreement"]) == ("checked", False, len(slice_), 1.0)
    assert len(row["request_hashes"]) == len(slice_)
    # The boards' cached answers were neither served nor overwritten; the check's calls are stored apart.
    assert _shared_calls(engine) == shared
    with engine.connect() as conn:
        salted = dict(conn.execute(sa.text(
            "SELECT request->>'cache_salt', count(*) FROM llm_calls WHERE request ? 'cache_salt' GROUP BY 1")).all())
    assert salted == {f"drift:{EARLIER}": len(slice_), f"drift:{fresh['month']}": len(slice_)}

    record, summary = _drift_check_record(engine, fresh["month"])
    assert record["success"] is True and "no_judge_drift" not in summary


def test_a_changed_judge_trips_the_alarm_blocks_the_board_and_the_run_says_why(fresh):
    engine, stub, release = fresh["engine"], fresh["stub"], fresh["month"]
    assert _check(fresh, EARLIER).metrics[0].agreement == 1.0
    stub.default = changed_judge
    check = _check(fresh, release)
    (d,) = check.metrics
    assert d.tripped and d.agreement < 0.8 and check.tripped == [d]
    expected = (f"judge drift: relevance_rate agreement {d.agreement:.2f} vs 1.00 last month "
                f"({d.agreement - 1:+.2f}, threshold 0.80")
    assert d.message.startswith(expected)
    row = _row(engine, release)
    assert (row["tripped"], row["previous_agreement"], row["message"]) == (True, 1.0, d.message)

    record, summary = _drift_check_record(engine, release)
    assert record["success"] is False
    assert [r["metric"] for r in record["details"]["unexpected_rows"]] == ["relevance_rate"]
    assert "no_judge_drift" in summary and expected in summary

    run = BenchmarkRun(release, "drift-run", judge_config=CONFIG)
    record_run(engine, run, "running")
    ok, message = finish_run(engine, run, ["check_leaderboard"])
    assert not ok and "failed: check_leaderboard" in message and expected in message
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT state, message FROM benchmark_runs WHERE run_id = 'drift-run'")).one() == (
            "failed", message)


def test_a_check_over_the_cost_bound_is_refused_before_anything_is_sent(fresh, monkeypatch, capsys):
    engine, stub = fresh["engine"], fresh["stub"]
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", fresh["db_url"])
    monkeypatch.setenv("DEEPSCHOLAR_CALIBRATION_MAX_COST_USD", "0.000001")
    sent = stub.requests
    capsys.readouterr()
    assert cli.main(["judges", "drift", "--release", fresh["month"], "--judge", MODEL, "--metrics",
                     *METRICS, "--api-base", stub.url]) == 0
    out = capsys.readouterr()
    assert stub.requests == sent  # nothing was paid
    assert "predicted cost $" in out.err
    assert "refused: the predicted cost $" in out.err and "DEEPSCHOLAR_CALIBRATION_MAX_COST_USD=1e-06" in out.err
    assert "relevance_rate" in out.out and "refused" in out.out
    row = _row(engine, fresh["month"])
    assert (row["status"], row["tripped"], row["agreement"], row["requests"]) == ("refused", False, None, 0)

    # Within the bound, the same command checks the month and prints its table; a refusal afterwards keeps it.
    monkeypatch.setenv("DEEPSCHOLAR_CALIBRATION_MAX_COST_USD", "1")
    assert cli.main(["judges", "drift", "--release", fresh["month"], "--judge", MODEL, "--metrics",
                     *METRICS, "--api-base", stub.url]) == 0
    assert "actual cost $" in capsys.readouterr().err
    assert _row(engine, fresh["month"])["status"] == "checked"
    monkeypatch.setenv("DEEPSCHOLAR_CALIBRATION_MAX_COST_USD", "0")
    assert cli.main(["judges", "drift", "--release", fresh["month"], "--judge", CONFIG]) == 0  # a config id too
    assert f"under {CONFIG} refused: the predicted cost $" in capsys.readouterr().err
    assert _row(engine, fresh["month"])["status"] == "checked"


def test_human_labels_are_the_reference_when_a_metric_has_them(fresh):
    """Items with a human majority label make the slice (a tie has no majority and is left out)."""
    from deepscholar.evaluation.judge_validation.annotation_units import judged_units

    engine, release = fresh["engine"], fresh["month"]
    units = list(judged_units(engine, release, "relevance_rate", CONFIG))[:3]
    with engine.begin() as conn:
        for u, labels in zip(units, [("2", "2", "1"), ("0",), ("1", "2")], strict=True):
            conn.execute(sa.text("""
                INSERT INTO annotation_items (item_id, release_id, report_id, metric, item_key, sub_key, question,
                                              allowed_labels, content)
                VALUES (:i, :r, :p, 'relevance_rate', :k, :s, 'q', ARRAY['2', '1', '0'], '{}')"""),
                dict(i=u.item_id, r=release, p=u.report_id, k=u.item_key, s=u.unit.sub_key))
            for n, label in enumerate(labels):
                conn.execute(sa.text("INSERT INTO human_labels (item_id, annotator, label) VALUES (:i, :a, :l)"),
                             {"i": u.item_id, "a": f"annotator{n}", "l": label})
    try:
        (d,) = _check(fresh, release).metrics
        assert (d.reference_kind, d.n_items) == ("human", 2)
        assert {i for i, _ in _slice(engine)} == {units[0].item_id, units[1].item_id}
        assert dict(_slice(engine)) == {units[0].item_id: "2", units[1].item_id: "0"}
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM annotation_items"))


def test_an_unknown_or_judge_free_metric_is_one_clear_error(fresh, monkeypatch, capsys):
    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", fresh["db_url"])
    capsys.readouterr()
    assert cli.main(["judges", "drift", "--release", fresh["month"], "--judge", MODEL, "--metrics",
                     "reference_coverage"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("deepscholar: error: metric 'reference_coverage'") and "annotatable metrics" in err
    assert cli.main(["judges", "drift", "--release", "2031-01", "--judge", MODEL]) == 2


def test_the_local_judge_is_checked_too_offline_and_free(fresh):
    engine, release = fresh["engine"], fresh["month"]
    evaluate_release(engine, release, judge="local", metrics=METRICS, roll_up=False)
    check = check_drift(engine, release, JudgeSpec.parse("local"), metrics=METRICS)
    (d,) = check.metrics
    assert (d.status, d.reference_kind, d.agreement, d.tripped) == ("checked", "first_judgment", 1.0, False)
    assert d.n_items > 0 and (d.requests, d.cost_usd, d.predicted_cost_usd) == (0, 0.0, 0.0)
    assert check.judge_config.startswith("local:")
