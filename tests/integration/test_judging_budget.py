"""A budget that holds on every path (issue 46, points 1-4), on the demo month in real PostgreSQL, with the
judge's provider a stub over real HTTP that counts every request it is sent: an unpriced judge, the total an
approver approved (read back from the warehouse as the DAG's judge tasks read it), two judge tasks spending
at once, the earlier rounds of a batch, a running batch that would pass the limit, the drift check and the
release-time judge. Each test uses its own judge model, so their months' budgets never mix."""

from __future__ import annotations

import json
import re
import threading
import time

import pytest
import sqlalchemy as sa
from support.demo_month import served_demo_month
from support.judge_stub import scripted_judge
from support.openai_stub import OpenAIStub
from support.settings import replay_settings

from deepscholar import cli
from deepscholar.errors import OverBudget
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.judging.batch_rounds import batch_job_step
from deepscholar.evaluation.judging.evaluate import estimate_for_month
from deepscholar.evaluation.judging.jobs import plan_judging, plan_units
from deepscholar.evaluation.judging.runner import judge_job, judge_units
from deepscholar.evaluation.money.costs import month_judge_spend
from deepscholar.llm import prices
from deepscholar.llm.prices import usd_text
from deepscholar.replay.openai_batches import BatchStub

pytestmark = pytest.mark.slow  # builds and judges the demo month

SYSTEMS = ["extractive", "oracle"]


@pytest.fixture(scope="module")
def demo(demo_template):
    with served_demo_month(demo_template, "deepscholar_budget_") as month:
        yield month


@pytest.fixture
def judge_env(monkeypatch):
    """The judge's settings of a judge task: its key, two requests in flight, the default 10 % margin, no
    operator's budget unless a test sets one."""
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    monkeypatch.setenv("DEEPSCHOLAR_JUDGE_CONCURRENCY", "2")
    monkeypatch.setenv("DEEPSCHOLAR_JUDGE_BUDGET_MARGIN", "0.1")
    for name in ("DEEPSCHOLAR_JUDGE_BUDGET_USD", "DEEPSCHOLAR_RELEASE_JUDGE_BUDGET_USD",
                 "DEEPSCHOLAR_CALIBRATION_MAX_COST_USD"):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


def _per_call(model: str, usage: tuple[int, int], *, batch: bool = False) -> float:
    """What one answer of the stub (its usage) costs: the model's price (at the batch rate with `batch`)."""
    return (prices.batch_cost_usd if batch else prices.cost_usd)(None, model, *usage)


def _billed(engine, stage: str, month: str, model: str | None = None) -> int:
    """The answers paid from a budget (llm_calls.billed_to)."""
    from deepscholar.llm.spend import scope_of

    scope = scope_of(stage, month, model and JudgeSpec.parse(model).config_id)
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT count(*) FROM llm_calls WHERE billed_to = :s"), {"s": scope}).scalar_one()


def _approved_by_an_operator(engine, month: str, model: str, budget: float, run_id: str, **selection) -> float:
    """The DAG's path: the run's estimate kept, its approval recorded, the approved total read back from the
    warehouse (what the judge tasks, the batch sensor and the drift check are given)."""
    from deepscholar.evaluation.money.budget import approve_estimate, approved_total, run_estimate

    asked = estimate_for_month(engine, month, JudgeSpec.parse(model), budget, run_id=run_id, **selection)
    assert asked["needs_approval"], asked["line"]
    approve_estimate(engine, run_estimate(engine, run_id), "operator")
    approved = approved_total(engine, month, JudgeSpec.parse(model).config_id, run_id)
    assert approved == pytest.approx(asked["approved_total_usd"]) and approved > budget
    return approved


def test_an_approved_unpriced_judge_is_counted_at_its_fallback_price_and_stops_where_it_was_approved(demo, judge_env):
    """Point 1: a judge without a price used to be approved with no limit (its total None, its calls $0)."""
    engine, month = demo["engine"], demo["month"]
    model = "openai/stub-unpriced"
    spec = JudgeSpec.parse(model)
    usage = (15_000, 100)  # ten times the prediction's default tokens: the approved total is passed mid-run
    with OpenAIStub(model_suffix="", usage=usage) as stub:
        stub.default = scripted_judge
        judge_env.setenv("DEEPSCHOLAR_JUDGE_API_BASE", stub.url)
        asked = estimate_for_month(engine, month, JudgeSpec.parse(model), 1.0, systems=SYSTEMS, metrics=["relevance_rate"])
        assert "has no price, so the $1.00 budget cannot be checked at its own price" in asked["line"]
        fallback = ("openai's highest chat price in litellm's table ($30.00 / $75.00 per million prompt / completion "
                    "tokens)")
        assert f"counted at {model} at {fallback}" in asked["line"] and "that an approval allows" in asked["line"]
        per_call = usage[0] * 30e-6 + usage[1] * 75e-6
        approved = _approved_by_an_operator(engine, month, model, 1.0, "run-unpriced", systems=SYSTEMS,
                                            metrics=["relevance_rate"])
        units = plan_units(engine, month, SYSTEMS, ["relevance_rate"], spec)
        with pytest.raises(OverBudget, match=r"stopped at \$\d+\.\d+ of \$\d+\.\d+, counting \d+ requests of "
                                             r"unpriced models at their fallback price") as stopped:
            judge_job(engine, {"release_id": month, "units": units}, spec, budget_usd=1.0, approved_usd=approved)
        limit = approved * 1.1
        assert f"of {usd_text(limit)}" in str(stopped.value)
        # Counted at the server: it stopped once past the approved total (plus the margin), within the two
        # requests in flight, long before the month was judged.
        assert (stub.requests - 2) * per_call <= limit < stub.requests * per_call, stub.requests
        assert stub.requests < sum(u["distinct"] for u in units)
        # What it paid is the month's spend, though no judgment was stored (the chunk was cut short).
        assert month_judge_spend(engine, month, spec.config_id) == pytest.approx(stub.requests * per_call)
        assert _billed(engine, "judging", month, model) == stub.requests
    stub.raise_errors()


def test_two_judge_tasks_stop_together_at_the_total_approved_in_the_warehouse(demo, judge_env, capsys):
    """Point 2: the total an approver approved (kept by the DAG's approval, read back by its judge tasks)
    bounds two judge tasks spending at once: each sees the other's answers near the limit, so together they
    stop at it, not at twice it."""
    engine, month = demo["engine"], demo["month"]
    model = "openai/gpt-4o-mini"
    spec = JudgeSpec.parse(model)
    usage = (13_960, 10)  # about seven times the prediction's default tokens
    per_call = _per_call(model, usage)
    with OpenAIStub(model_suffix="", usage=usage) as stub:
        stub.default = scripted_judge
        stub.delay = 0.05
        judge_env.setenv("DEEPSCHOLAR_JUDGE_API_BASE", stub.url)
        budget = 0.001
        approved = _approved_by_an_operator(engine, month, model, budget, "run-two-tasks", systems=SYSTEMS,
                                            metrics=["relevance_rate"])
        # Two judge tasks as the planner cuts them (by query: no question is asked by both).
        jobs = plan_judging(engine, month, SYSTEMS, ["relevance_rate"], spec, job_reports=5, tasks=2)[:2]
        assert len(jobs) == 2
        stops: list[BaseException] = []

        def task(job: dict) -> None:
            try:
                judge_job(engine, job, spec, budget_usd=budget, approved_usd=approved)
            except OverBudget as exc:
                stops.append(exc)

        threads = [threading.Thread(target=task, args=(job,)) for job in jobs]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
    stub.raise_errors()
    limit = approved * 1.1
    assert len(stops) == 2 and all(f"of {usd_text(limit)}" in str(s) for s in stops), stops
    # Both stopped at the approved total, far past the budget: what passed it is the requests in flight then
    # (two per task) and at most one more per task sent on a figure read just before the other's answer was
    # stored, not a second task's share of the limit (each task alone would have sent about limit / per_call).
    assert budget * 1.1 < (stub.requests - 6) * per_call <= limit < stub.requests * per_call, (
        stub.requests, limit / per_call)
    assert month_judge_spend(engine, month, spec.config_id) == pytest.approx(stub.requests * per_call)
    # `deepscholar cost` says what the month's budget paid, and who approved how much.
    judge_env.setenv("DEEPSCHOLAR_DB_URL", demo["db_url"])
    capsys.readouterr()
    assert cli.main(["cost", "--release", month, "--judge", model, "--metrics", "relevance_rate"]) == 0
    out = capsys.readouterr().out
    assert f"approved by operator for run run-two-tasks): judging ${stub.requests * per_call:,.4f}" in out, out


def _forget_batches(engine) -> None:
    with engine.begin() as conn:
        for table in ("llm_batch_requests", "llm_batches"):
            conn.execute(sa.text(f"DELETE FROM {table}"))


def _usable_when_asked_again(body: dict) -> str:
    """A judge whose first answer to every question cannot be used: each question takes a second round (the
    re-ask), as a question asked after an earlier answer does (RACE, claims extraction)."""
    asked_again = any("could not be used" in (m.get("content") or "") for m in body["messages"][1:])
    return scripted_judge(body) if asked_again else "not an answer"


def test_what_earlier_batch_rounds_paid_counts_before_the_next_round_is_submitted(demo, judge_env):
    """Point 3: a question asked over several rounds stores no judgment until its last one, and what its earlier
    rounds paid was invisible to the budget (it counted stored judgments only): the next round was submitted
    past it."""
    engine, month = demo["engine"], demo["month"]
    model = "openai/gpt-4.1-mini"
    spec = JudgeSpec.parse(model)
    usage = (1_000_000, 50)
    _forget_batches(engine)
    with BatchStub(answer=_usable_when_asked_again, usage=usage) as stub:
        judge_env.setenv("DEEPSCHOLAR_JUDGE_API_BASE", stub.url)
        jobs = [{"release_id": month, "units": plan_units(engine, month, SYSTEMS, ["nugget_coverage"], spec)}]
        # The first round's requests, at the prediction's default tokens, fit the $1 budget: submitted.
        assert batch_job_step(engine, jobs, spec, run_id="run-rounds", budget_usd=1.0) is None
        assert stub.creates == 1 and not stub.lines_answered  # submitted; its answers come at the next step
        with engine.connect() as conn:
            first_round = conn.execute(sa.text("SELECT count(*) FROM llm_batch_requests")).scalar_one()
        # Every question is asked again in the second round, predicted (from the first round's audited tokens)
        # at what the first cost: a limit of one and a half rounds fits the second round alone, not both.
        per_call = _per_call(model, usage, batch=True)
        budget = 1.5 * first_round * per_call / 1.1
        with pytest.raises(OverBudget, match=r"stopped at \$[\d.,]+ of \$[\d.,]+; the next batch would cost about"):
            batch_job_step(engine, jobs, spec, run_id="run-rounds", budget_usd=budget)
        with engine.connect() as conn:
            waiting = conn.execute(sa.text("SELECT count(*) FROM llm_batch_requests WHERE state = 'pending'")
                                   ).scalar_one()
    stub.raise_errors()
    answered = len(stub.lines_answered)
    assert stub.creates == 1 and answered == first_round == waiting  # the second round recorded, not submitted
    assert _billed(engine, "judging", month, model) == answered
    assert month_judge_spend(engine, month, spec.config_id) == pytest.approx(answered * per_call)


def test_a_running_batch_that_would_pass_a_lowered_limit_is_cancelled_and_what_it_answered_is_kept(demo, judge_env):
    """Point 3: a batch submitted within the limit, then a run's budget lowered below what it will cost: the
    next step cancels it through the provider's API; the answers it gave before are paid for and kept."""
    engine, month = demo["engine"], demo["month"]
    model = "openai/gpt-4o"
    spec = JudgeSpec.parse(model)
    _forget_batches(engine)
    with BatchStub(answer=scripted_judge, delay=10) as stub:
        judge_env.setenv("DEEPSCHOLAR_JUDGE_API_BASE", stub.url)
        jobs = [{"release_id": month, "units": plan_units(engine, month, ["extractive"], ["relevance_rate"], spec)}]
        assert batch_job_step(engine, jobs, spec, run_id="run-cancel", budget_usd=100.0) is None
        time.sleep(3)  # part of the batch is answered by now
        assert batch_job_step(engine, jobs, spec, run_id="run-cancel", budget_usd=1e-6) is None
        assert stub.cancels == 1
        with pytest.raises(OverBudget, match="it was not submitted and its requests wait"):
            batch_job_step(engine, jobs, spec, run_id="run-cancel", budget_usd=1e-6)
        with engine.connect() as conn:
            states = dict(conn.execute(sa.text(
                "SELECT state, count(*) FROM llm_batch_requests GROUP BY state")).all())
            batch = conn.execute(sa.text("SELECT provider_status, last_error, n_answered FROM llm_batches")).one()
    stub.raise_errors()
    answered = len(stub.lines_answered)
    assert stub.creates == 1 and stub.cancels == 1  # cancelled once; nothing submitted again
    assert batch.provider_status == "cancelled" and "cancelled at $" in batch.last_error
    total = sum(states.values())
    assert 0 < answered == batch.n_answered < total, (answered, states)
    assert states == {"done": answered, "pending": total - answered}
    assert _billed(engine, "judging", month, model) == answered  # paid for anyway, and counted


def test_the_drift_check_is_paid_from_the_months_budget_and_stops_while_it_runs(demo, judge_env):
    """Point 4: the drift check had its own bound, checked on its prediction only."""
    from deepscholar.evaluation.judge_validation.drift import check_drift

    engine, month = demo["engine"], demo["month"]
    model = "openai/gpt-4.1-nano"
    spec = JudgeSpec.parse(model)
    with OpenAIStub(model_suffix="", usage=(1_000, 10)) as stub:
        stub.default = scripted_judge
        judge_units(engine, month, plan_units(engine, month, SYSTEMS, ["relevance_rate"], spec), spec,
                    api_base=stub.url, concurrency=4)  # the judge's first answers: the calibration slice's source
        judged = stub.requests
        spent = month_judge_spend(engine, month, spec.config_id)

        def check(**budget):
            return check_drift(engine, month, spec, metrics=["relevance_rate"], api_base=stub.url, api_key="test",
                               concurrency=1, say=lambda line: None, **budget)

        # The month's budget has no room for it: refused before anything is sent.
        refused = check(budget_usd=spent + 1e-6)
        assert stub.requests == judged and refused.refused and "the month has spent $" in refused.refused
        assert refused.metrics[-1].status == "refused"
        # Its own bound, held while it runs: answers far dearer than predicted stop it after a few.
        stub.usage = (1_000_000, 10)
        per_call = _per_call(model, stub.usage)
        judge_env.setenv("DEEPSCHOLAR_CALIBRATION_MAX_COST_USD", "0.25")
        stopped = check()
        asked = stub.requests - judged
    stub.raise_errors()
    assert stopped.refused and "stopped at $" in stopped.refused
    assert asked == 3 and (asked - 1) * per_call <= 0.25 * 1.1 < asked * per_call, asked
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT status, message FROM judge_drift_checks WHERE judge_config = :j"),
                           {"j": spec.config_id}).one()
    assert row.status == "refused" and "stopped at $" in row.message
    # Paid from the month's judging budget: its answers count there.
    assert _billed(engine, "drift", month, model) == asked
    assert month_judge_spend(engine, month, spec.config_id) == pytest.approx(spent + asked * per_call)


def test_release_time_judging_stops_at_its_budget_and_cost_shows_what_each_budget_paid(demo, judge_env, capsys):
    """Point 4: importance labels, nuggets, RACE's criteria and weights and the claims' ground truth had no
    budget at all. The demo month is built again (its next version) with an LLM release judge."""
    from deepscholar.release.spec import ReleaseSpec
    from deepscholar.release.steps import build_release
    from deepscholar.replay.server import ReplayServer

    engine, month = demo["engine"], demo["month"]
    model = "openai/gpt-4.1"
    usage = (100_000, 10)
    per_call = _per_call(model, usage)
    categories = json.loads((demo["snapshot"] / "manifest.json").read_text())["categories"]
    try:
        with OpenAIStub(model_suffix="", usage=usage) as stub, ReplayServer(demo["snapshot"]) as server:
            stub.default = scripted_judge
            judge_env.setenv("DEEPSCHOLAR_RELEASE_JUDGE_BUDGET_USD", "0.5")
            settings = replay_settings(server, judge_api_base=stub.url, release_judge_concurrency=2)
            with pytest.raises(OverBudget, match=r"release-time judging of 2025-06\.v2 under openai/gpt-4\.1: "
                                                 r"stopped at \$0\.\d+ of \$0\.50"):
                build_release(engine, month, ReleaseSpec(categories=categories, judge=model), settings,
                              reason="a release judge of its own")
        stub.raise_errors()
        assert 3 <= stub.requests <= 4, stub.requests  # past $0.50 at $0.20 a call, two in flight
        assert _billed(engine, "release", f"{month}.v2") == stub.requests
        judge_env.setenv("DEEPSCHOLAR_DB_URL", demo["db_url"])
        capsys.readouterr()
        assert cli.main(["cost", "--release", f"{month}.v2", "--judge", model]) == 0
        out = capsys.readouterr().out
        assert re.search(rf"Release-time judging: \${stub.requests * per_call:,.4f} of \$0\.5000\.", out), out
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM releases WHERE release_id = :r"), {"r": f"{month}.v2"})
