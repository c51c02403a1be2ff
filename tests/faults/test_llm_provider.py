"""The LLM provider misbehaving, as judge of the month and as the engine of a system, over real HTTP.

The demo month is judged on one LLM-judged metric (organization: two requests per report) by the
OpenAI-compatible stub answering through litellm, while the stub throttles (429 storms), fails (5xx),
stalls past the client's timeout, or answers with garbage, JSON with labels outside the allowed set, or
no choices at all. The rules each case checks:

- a provider that recovers within the retries leaves no trace but the extra requests: every report
  scored;
- a provider down or throttling past the retries is infrastructure: evaluate raises InfrastructureError
  (the Airflow task fails and is retried) and stores no score, no unscored row; a later run with a
  healthy provider scores every report exactly once;
- an answer the judge cannot use is the judge's: the report's metric is unscored with the reason, never
  a crash and never a zero;
- a system whose provider is down stores nothing (no report, no system_error).

DEEPSCHOLAR_LLM_RETRIES/BACKOFF/TIMEOUT keep the retries fast, as an operator could set them.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa
from support.demo_month import served_demo_month
from support.openai_stub import OpenAIStub, RawBody

from deepscholar.errors import InfrastructureError
from deepscholar.evaluation.pipeline import evaluate_release
from deepscholar.http_guard import BREAKER
from faults.conftest import assert_no_loss, unchanged, warehouse_fingerprint

pytestmark = pytest.mark.slow  # judges a built month per fault

METRIC, SYSTEM, JUDGE = "organization", "extractive", "openai/fault-judge"
JUDGE_CONFIG = f"llm:{JUDGE}"
RETRIES = 2
# What one evaluation may write besides scores: the judge's request log and its run record.
JUDGE_BOOKKEEPING = ["llm_calls", "judge_configs"]  # the call cache, and what the judge_config stands for


@pytest.fixture(scope="module")
def month(demo_template):
    with served_demo_month(demo_template, "deepscholar_llm_faults_") as built:
        yield built["engine"], built["month"]


@pytest.fixture(autouse=True)
def fast_llm_retries(monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_LLM_RETRIES", str(RETRIES))
    monkeypatch.setenv("DEEPSCHOLAR_LLM_BACKOFF_SECONDS", "0.01")
    monkeypatch.setenv("DEEPSCHOLAR_LLM_TIMEOUT_SECONDS", "5")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-llm-faults")  # the stub ignores it; litellm wants one


@pytest.fixture
def fresh_judge(month):
    """Each case starts with no LLM judgment of the month (the local judge's results stay)."""
    engine, release = month
    with engine.begin() as conn:
        for table in ("metric_scores", "judgments"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE judge_config = :j"), {"j": JUDGE_CONFIG})
        conn.execute(sa.text("DELETE FROM llm_calls WHERE model LIKE 'openai/fault-%'"))
    BREAKER.reset()
    return engine, release


def _verdict(body: dict) -> str:
    return json.dumps({"decision": "A", "explanation": "grouped by theme"})


def _evaluate(engine, release, stub, concurrency: int = 4, **kwargs) -> dict:
    return evaluate_release(engine, release, judge=JUDGE, metrics=[METRIC], systems=[SYSTEM], api_base=stub.url,
                            concurrency=concurrency, roll_up=False, **kwargs)


def _scores(engine) -> list[sa.Row]:
    with engine.connect() as conn:
        return conn.execute(sa.text(
            "SELECT report_id, variant, value, unscored_reason FROM metric_scores "
            "WHERE judge_config = :j AND metric = :m"), {"j": JUDGE_CONFIG, "m": METRIC}).all()


def _reports(engine, release) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM reports WHERE release_id = :r AND system_id = :s "
                                    "AND status = 'ok'"), {"r": release, "s": SYSTEM}).scalar_one()


def _all_scored_once(engine, release) -> None:
    scores = _scores(engine)
    keys = [(s.report_id, s.variant) for s in scores]
    assert len(keys) == len(set(keys)), "a score stored twice"
    assert {s.report_id for s in scores if s.unscored_reason is None and s.value is not None} and \
        len({s.report_id for s in scores}) == _reports(engine, release)
    assert all(s.unscored_reason is None for s in scores)


# (id, answers the stub gives first, then every later answer); ints are HTTP statuses
RECOVERING = [
    ("rate_limit_storm_that_ends", [429] * 2 + [None] * 2 + [429] * 2),
    ("server_errors_that_end", [500, 502, None, 503]),
]
OUTAGES = [
    ("rate_limit_storm_past_retries", 429),
    ("server_errors_past_retries", 503),
]
UNUSABLE = [
    ("garbage_text", "I would rather not say."),
    ("json_with_wrong_label", json.dumps({"decision": "C", "explanation": "a tie"})),
    ("json_of_the_wrong_shape", json.dumps(["A"])),
    ("empty_choices", RawBody({"id": "x", "object": "chat.completion", "created": 1, "model": "m", "choices": []})),
]
LLM_CASES = [c[0] for c in RECOVERING + OUTAGES + UNUSABLE] + ["slow_answers_past_timeout",
                                                                "system_provider_down"]


@pytest.mark.parametrize("script", [c[1] for c in RECOVERING], ids=[c[0] for c in RECOVERING])
def test_a_provider_that_recovers_within_the_retries_leaves_every_report_scored(fresh_judge, script):
    engine, release = fresh_judge
    with OpenAIStub() as stub:
        stub.default = _verdict
        stub.script = [s if s is not None else _verdict for s in script]
        with unchanged(engine, allowed_to_change=["metric_scores", "judgments", "judging_estimates", *JUDGE_BOOKKEEPING]):
            # One request at a time: the script's failures then fall on known requests, within each one's
            # retries (four at once could hand one request four 429s in a row and fail it by chance).
            result = _evaluate(engine, release, stub, concurrency=1)
        failures = sum(isinstance(s, int) for s in script)
        assert result["unscored_reports"] == 0 and result["llm_requests"] == stub.requests - failures
        assert result["llm_attempts"] == stub.requests
    _all_scored_once(engine, release)


@pytest.mark.parametrize("status", [c[1] for c in OUTAGES], ids=[c[0] for c in OUTAGES])
def test_a_provider_down_past_the_retries_fails_the_task_and_stores_no_score(fresh_judge, status):
    engine, release = fresh_judge
    with OpenAIStub() as stub:
        stub.default = lambda body: status
        with unchanged(engine, allowed_to_change=JUDGE_BOOKKEEPING):
            with pytest.raises(InfrastructureError) as raised:
                _evaluate(engine, release, stub)
        assert stub.url.split("//")[1].split("/")[0] in str(raised.value) or JUDGE in str(raised.value)
        assert not _scores(engine), "an outage was stored as a judgment"
        BREAKER.reset()  # Airflow's retry is a new process: its breaker starts closed
        stub.default = _verdict
        before = warehouse_fingerprint(engine)
        result = _evaluate(engine, release, stub)
    assert result["unscored_reports"] == 0
    assert_no_loss(before, warehouse_fingerprint(engine), ["metric_scores", "judgments", "judging_estimates",
                                                          *JUDGE_BOOKKEEPING])
    _all_scored_once(engine, release)


def test_slow_answers_past_the_timeout_are_an_outage(fresh_judge, monkeypatch):
    engine, release = fresh_judge
    monkeypatch.setenv("DEEPSCHOLAR_LLM_TIMEOUT_SECONDS", "0.3")
    with OpenAIStub() as stub:
        stub.default = _verdict
        stub.delay = 1.5
        with unchanged(engine, allowed_to_change=JUDGE_BOOKKEEPING):
            with pytest.raises(InfrastructureError):
                _evaluate(engine, release, stub)
        # Each call was tried 1 + RETRIES times before giving up (or the breaker stopped the rest).
        assert stub.requests >= RETRIES + 1
    assert not _scores(engine)


@pytest.mark.parametrize("answer", [c[1] for c in UNUSABLE], ids=[c[0] for c in UNUSABLE])
def test_an_answer_the_judge_cannot_use_is_unscored_with_its_reason(fresh_judge, answer):
    engine, release = fresh_judge
    with OpenAIStub() as stub:
        stub.default = lambda body: answer
        with unchanged(engine, allowed_to_change=["metric_scores", "judgments", "judging_estimates", *JUDGE_BOOKKEEPING]):
            result = _evaluate(engine, release, stub)
        n = _reports(engine, release)
        assert result["unscored_reports"] == n > 0
        # Asked, then re-asked max_reasks (2) times per order, never retried as if the provider had failed.
        assert stub.requests == n * 2 * 3
    scores = _scores(engine)
    assert scores and all(s.value is None and s.unscored_reason for s in scores)
    reasons = {s.unscored_reason for s in scores}
    assert all(("unparseable" in r or "empty" in r or "decision" in r) for r in reasons), reasons


def test_a_systems_provider_down_stores_no_report_and_no_system_error(fresh_judge):
    from deepscholar.systems.generation import generate_pair
    from deepscholar.systems.registry import add_system

    engine, release = fresh_judge
    with engine.connect() as conn:
        query = conn.execute(sa.text("SELECT arxiv_id FROM release_queries WHERE release_id = :r ORDER BY 1 "
                                     "LIMIT 1"), {"r": release}).scalar_one()
    with OpenAIStub() as stub:
        stub.default = lambda body: 503
        add_system(engine, "fault_base", "deepscholar_base",
                   {"model": "openai/fault-system", "api_base": stub.url, "search": "local"})
        with unchanged(engine, allowed_to_change=["systems", "llm_calls"]):
            with pytest.raises(InfrastructureError):
                generate_pair(engine, release, "fault_base", query)
        assert stub.requests >= RETRIES + 1
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT count(*) FROM reports WHERE system_id = 'fault_base'")).scalar()
    assert stored == 0
