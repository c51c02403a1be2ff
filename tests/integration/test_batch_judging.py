"""Judging the demo month through the batch API (evaluation/judging/batch_rounds.py) against the batch stub
over real HTTP, with the real LLMClient: the same judgments and scores, byte for byte, as the direct path
given the same answers, in a stated number of rounds; every audit row at the batch price."""

from __future__ import annotations

import json
import re
import urllib.request

import pytest
import sqlalchemy as sa
from support.chromium import parse_html, serve
from support.demo_month import served_demo_month
from support.judge_stub import scripted_judge

from deepscholar import cli
from deepscholar.errors import OverBudget
from deepscholar.evaluation.boards.rollup import roll_up
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.judging.batch_rounds import batch_job_step, collect_round, judge_by_batches
from deepscholar.evaluation.judging.evaluate import estimate_for_month
from deepscholar.evaluation.judging.jobs import plan_judging, plan_units
from deepscholar.evaluation.judging.runner import judge_units
from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.money.costs import judging_spend
from deepscholar.llm.batches import OpenAIBatches
from deepscholar.llm.prices import cost_usd
from deepscholar.replay.openai_batches import BatchStub
from deepscholar.web import create_app

pytestmark = pytest.mark.slow  # builds and judges the demo month

MODEL = "openai/gpt-4o-mini"
SYSTEMS = ["extractive", "oracle"]


@pytest.fixture(scope="module")
def demo(demo_template):
    with served_demo_month(demo_template, "deepscholar_batch_") as month:
        yield month


def _stored(engine, judge_config) -> dict[str, list[str]]:
    """Every judgment and score row of the judge config as JSON text, without the time it was written."""
    with engine.connect() as conn:
        return {table: sorted(conn.execute(sa.text(
            f"SELECT (to_jsonb(t) - 'judged_at' - 'created_at' - 'updated_at' - 'scored_at')::text "
            f"FROM {table} t WHERE judge_config = :j"), {"j": judge_config}).scalars())
            for table in ("judgments", "metric_scores")}


def _boards(engine, month, judge_config) -> dict[str, list[str]]:
    """The month's boards rolled up from the stored scores, every row as JSON text, without its time."""
    roll_up(engine, month, judge_config)
    with engine.connect() as conn:
        return {table: sorted(conn.execute(sa.text(
            f"SELECT (to_jsonb(t) - 'computed_at' - 'created_at' - 'updated_at')::text FROM {table} t "
            f"WHERE release_id = :m AND judge_config = :j"), {"m": month, "j": judge_config}).scalars())
            for table in ("leaderboard_systems", "leaderboard_metrics", "track_boards", "track_board_metrics")}


def _forget(engine, judge_config) -> None:
    with engine.begin() as conn:
        for table in ("judgments", "metric_scores"):
            conn.execute(sa.text(f"DELETE FROM {table} WHERE judge_config = :j"), {"j": judge_config})
        for table in ("llm_calls", "llm_batch_requests", "llm_batches"):
            conn.execute(sa.text(f"DELETE FROM {table}"))


def test_a_month_judged_through_batches_equals_the_direct_path_byte_for_byte(demo, monkeypatch, capsys):
    engine, month = demo["engine"], demo["month"]
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    spec = JudgeSpec.parse(MODEL)
    metrics = registry.metric_names(registry.CORE)
    units = plan_units(engine, month, SYSTEMS, metrics, spec)
    with BatchStub(answer=scripted_judge) as stub:
        _forget(engine, spec.config_id)
        direct_runs = judge_units(engine, month, units, spec, api_base=stub.url, concurrency=8)
        direct = _stored(engine, spec.config_id)
        direct_boards = _boards(engine, month, spec.config_id)
        sent_one_by_one = stub.chat_requests
        assert sent_one_by_one > 50 and sum(r.reports for r in direct_runs) > 0
        assert all(direct.values())

        _forget(engine, spec.config_id)
        # What the run predicts before judging is kept beside what the month then costs.
        predicted = estimate_for_month(engine, month, spec, None, systems=SYSTEMS, metrics=metrics, batch=True,
                                       run_id="run-before")
        assert "(through the batch API, at its price)" in predicted["line"] and predicted["predicted_usd"] > 0
        polls: list[float] = []
        result = judge_by_batches(engine, month, units, spec, api_base=stub.url, concurrency=8, poll=0.01,
                                  api=lambda base: OpenAIBatches(stub.url, "test"), sleep=polls.append)
        assert stub.chat_requests == sent_one_by_one  # nothing was sent one by one in batch mode
        # Every question once (the direct path asks each once too: a repeat is a cache hit there as here).
        assert result["answered"] == sent_one_by_one and result["retried"] == result["failed"] == 0
        # The core metrics ask one question per item except nugget coverage, whose labels depend on the
        # nuggets (and whose extraction asks until nothing new comes): more rounds than two.
        assert result["rounds"] >= 3 and result["batches"] == result["rounds"] - 1
        assert _stored(engine, spec.config_id) == direct
        # ... and so are the boards rolled up from them: the core board and every track's, byte for byte.
        assert _boards(engine, month, spec.config_id) == direct_boards
        assert all(r["llm_requests"] == 0 for r in result["runs"])  # the last pass: all from the cache

        with engine.connect() as conn:
            rows = conn.execute(sa.text("SELECT transport, cost_usd, prompt_tokens, completion_tokens "
                                        "FROM llm_calls")).all()
        assert len(rows) == sent_one_by_one and {r[0] for r in rows} == {"openai-batch"}
        assert all(r[1] == pytest.approx(cost_usd(None, MODEL, r[2], r[3]) / 2) for r in rows)
        # `deepscholar cost`: the month's requests went by the batch API, and it says what that saved.
        from deepscholar.evaluation.money.costs import format_cost_summary, judge_cost_summary

        summary = judge_cost_summary(engine, month, JudgeSpec.parse(MODEL))
        batch_cost = sum(r[1] for r in rows)
        (sent,) = summary["transports"]
        assert (sent["transport"], sent["requests"]) == ("openai-batch", summary["actual_requests"])
        assert sent["cost_usd"] == pytest.approx(summary["actual_cost_usd"])
        assert summary["actual_cost_usd"] == pytest.approx(batch_cost)
        assert summary["batch_saving_usd"] == pytest.approx(batch_cost)  # half price: it saved as much as it cost
        assert "batching saved $" in format_cost_summary(summary)
        assert "Predicted before judging (run run-before, batch transport" in format_cost_summary(summary)
        # The page: predicted against actual, by transport, and the saving (stored at the roll-up).
        with engine.connect() as conn:
            spend = judging_spend(conn, month, spec.config_id)
        assert spend["estimate"]["predicted_usd"] == pytest.approx(predicted["predicted_usd"])
        assert [(t["transport"], t["requests"]) for t in spend["transports"]] == [("openai-batch", len(rows))]
        assert float(spend["actual_usd"]) == pytest.approx(batch_cost)
        assert float(spend["batch_saving_usd"]) == pytest.approx(batch_cost)
        with serve(create_app(lambda: engine)) as base:
            page = parse_html(urllib.request.urlopen(
                f"{base}/?release={month}&judge_config={spec.config_id}").read().decode())
        line = page.one("p", {"data-spend": "true"})
        assert "batch transport, run run-before" in line.text() and "openai-batch: " in line.text()
        assert float(line.one("span", {"data-metric": "actual_usd"}).attrs["data-value"]) == pytest.approx(batch_cost)
        assert "batching saved $" in line.text()
        # Judged again: nothing waits, nothing is submitted.
        runs, waiting = collect_round(engine, month, units, spec, run_id="run-after", api_base=stub.url)
        assert waiting == 0 and stub.creates == result["batches"]

        # On the command line, a system not judged yet: through batches, saying how many and what they cost.
        monkeypatch.setenv("DEEPSCHOLAR_DB_URL", demo["db_url"])
        monkeypatch.setenv("DEEPSCHOLAR_BATCH_POLL_SECONDS", "1")
        stub.usage = (20_000, 5_000)  # tokens enough for the run's cost to show in cents
        capsys.readouterr()
        assert cli.main(["evaluate", "--release", month, "--judge", MODEL, "--api-base", stub.url, "--metrics",
                         "relevance_rate", "--system", "human_exemplar", "--transport", "batch",
                         "--max-cost", "5"]) == 0
        out = capsys.readouterr().out
        through = re.search(r"(\d+) requests answered through (\d+) batches \(0 sent again, 0 failed\)", out)
        spent = re.search(r"\$([0-9.]+) spent by this run", out)
        assert through and spent, out
        assert int(through[1]) > 0 and int(through[2]) == stub.creates - result["batches"] >= 1
        per_call = cost_usd(None, MODEL, 20_000, 5_000) / 2  # at the batch price
        assert float(spent[1]) == pytest.approx(int(through[1]) * per_call, abs=0.005)  # written to the cent
        assert stub.chat_requests == sent_one_by_one
    stub.raise_errors()
    print(f"batch judging of {month}: {result['rounds']} rounds, {result['batches']} batches, "
          f"{result['answered']} requests")


def test_the_dag_step_waits_without_sending_past_the_budget_and_a_raised_budget_resumes_asking_nothing_twice(
        demo, monkeypatch):
    """batch_job_step, one poke of the DAG's sensor: over the budget nothing is submitted and the requests
    wait; with the budget raised the same steps finish the month, every question asked once."""
    engine, month = demo["engine"], demo["month"]
    spec = JudgeSpec.parse(MODEL)
    with BatchStub(answer=scripted_judge) as stub:
        _forget(engine, spec.config_id)
        monkeypatch.setenv("OPENAI_API_KEY", "test")
        monkeypatch.setenv("DEEPSCHOLAR_JUDGE_API_BASE", stub.url)
        jobs = plan_judging(engine, month, SYSTEMS, ["relevance_rate", "nugget_coverage"], spec, 24, 2)
        assert jobs
        with pytest.raises(OverBudget) as refused:
            batch_job_step(engine, jobs, spec, run_id="run-1", budget_usd=1e-9)
        assert "stopped at $0.00 of $0.0000; the next batch would cost about $" in str(refused.value)
        assert "it was not submitted and its requests wait; raise the budget" in str(refused.value)
        assert stub.creates == 0 and stub.chat_requests == 0
        with engine.connect() as conn:
            waiting = conn.execute(sa.text("SELECT count(*) FROM llm_batch_requests WHERE state = 'pending'")
                                   ).scalar_one()
        assert waiting > 0

        steps = []
        while (summary := batch_job_step(engine, jobs, spec, run_id="run-2", budget_usd=100.0)) is None:
            steps.append(stub.creates)
            assert len(steps) < 40
        assert summary["reports_judged"] > 0 and summary["rounds"] == 1
        assert stub.creates >= 1 and stub.chat_requests == 0
        assert len(stub.lines_answered) == len(set(stub.lines_answered))  # every question asked once
    stub.raise_errors()


def _bodies_by_purpose(engine, bodies: list[dict]) -> dict[str, list[dict]]:
    """The request bodies a stub received, by the purpose llm_calls names their question with (matched on the
    messages: a body carries no purpose)."""
    with engine.connect() as conn:
        purposes = {json.dumps(messages, sort_keys=True): purpose for messages, purpose in conn.execute(sa.text(
            "SELECT request->'messages', purpose FROM llm_calls"))}
    out: dict[str, list[dict]] = {}
    for body in bodies:
        out.setdefault(purposes[json.dumps(body["messages"], sort_keys=True)], []).append(body)
    return out


def test_every_judge_request_states_its_answer_budget_and_the_judge_configs_output_constraint(demo, monkeypatch):
    """Read off the HTTP bodies of a real judging run, sent one by one and as a batch's JSONL lines: every
    judge question carries max_tokens, and under a judge config asking for constrained output every
    question of a metric with an answer schema carries it as response_format (and no other does)."""
    from deepscholar.evaluation.metrics.base import LLMJudgedMetric

    engine, month = demo["engine"], demo["month"]
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    spec = JudgeSpec.parse(f"{MODEL};output=json_schema")
    metrics = registry.metric_names(registry.CORE)
    units = plan_units(engine, month, SYSTEMS[:1], metrics, spec)
    with BatchStub(answer=scripted_judge) as stub:
        _forget(engine, spec.config_id)
        judge_units(engine, month, units, spec, api_base=stub.url, concurrency=8)
        direct = [body for kind, body in stub.bodies if kind == "direct"]
        _forget(engine, spec.config_id)
        judge_by_batches(engine, month, units, spec, api_base=stub.url, concurrency=8, poll=0.01,
                         api=lambda base: OpenAIBatches(stub.url, "test"), sleep=lambda seconds: None)
        lines = [json.loads(raw) for f in stub.files.values() if f["purpose"] == "batch"
                 for raw in f["content"].split(b"\n") if raw]
    stub.raise_errors()
    batch = [line["body"] for line in lines]
    def canonical(bodies: list[dict]) -> list[str]:
        return sorted(json.dumps(b, sort_keys=True) for b in bodies)

    assert len(direct) > 50 and canonical(batch) == canonical(direct)  # the same questions, either way
    for sent in (direct, batch):
        by_purpose = _bodies_by_purpose(engine, sent)
        assert set(by_purpose) >= {f"metric.{m}" for m in ("relevance_rate", "nugget_coverage", "organization")}
        for purpose, bodies in by_purpose.items():
            metric = registry.get(purpose.removeprefix("metric."))
            constrained = type(metric).answer_schema is not LLMJudgedMetric.answer_schema
            for body in bodies:
                assert isinstance(body.get("max_tokens"), int) and body["max_tokens"] > 0, (purpose, body)
                if constrained:
                    assert body["response_format"]["type"] == "json_schema", (purpose, body)
                    assert body["response_format"]["json_schema"]["schema"], (purpose, body)
                else:
                    assert "response_format" not in body, (purpose, body)
