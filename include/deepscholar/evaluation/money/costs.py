"""What a month costs: generation and judging, predicted before a run and read from the audit trail after.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.money.costs`.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.metrics import registry
from deepscholar.llm.prices import (
    DEFAULT_COMPLETION_TOKENS,
    DEFAULT_PROMPT_TOKENS,
    batch_price_of,
    budget_price_of,
    price_of,
    usd_text,
)
from deepscholar.llm.spend import PAID_COLUMNS, Paid, count_paid, paid_usd, scope_of
from deepscholar.settings import current_settings

__all__ = ["judge_cost_summary", "format_cost_summary", "predicted_judge_cost", "predicted_call_cost",
           "predicted_unit_costs", "month_judge_spend", "month_requests", "predicted_pending_batch_cost",
           "store_month_spend", "judging_spend", "month_cost_rows", "requests_stamp", "kept_month_requests",
           "month_judge_paid", "judging_scopes", "predicted_batch_costs", "predicted_call_prices",
           "unbilled_judge_spend", "budget_spend", "format_budgets"]


TOKEN_SAMPLE_CALLS = 5000  # a metric's tokens per call are measured over at most this many audited calls


def _tokens_per_call(conn: sa.Connection, purpose: str, model: str) -> tuple[float, float, int]:
    """(prompt, completion) tokens of one call of this purpose and model in the audit trail, and how many
    calls that mean is over (0: the configured defaults). At most TOKEN_SAMPLE_CALLS calls are read, so the
    prediction costs the same after a year of months as after one."""
    row = conn.execute(sa.text("""
        SELECT avg(prompt_tokens), avg(completion_tokens), count(*) FROM (
            SELECT prompt_tokens, completion_tokens FROM llm_calls
            WHERE purpose = :p AND model = :m AND prompt_tokens IS NOT NULL LIMIT :n) s"""),
        {"p": purpose, "m": model, "n": TOKEN_SAMPLE_CALLS}).one()
    if not row[2]:
        return float(DEFAULT_PROMPT_TOKENS), float(DEFAULT_COMPLETION_TOKENS), 0
    return float(row[0]), float(row[1] or 0.0), int(row[2])


def _per_call_prediction(conn: sa.Connection, spec: JudgeSpec, name: str, *, batch: bool = False
                         ) -> tuple[float, float, float, int, float | None, float, str | None]:
    """(calls per report, prompt tokens, completion tokens, how many audited calls those are over, USD per
    call or None when the model has no price, USD per call as a budget counts it (an unpriced model at its
    fallback price, prices.budget_price_of), how the fallback was chosen or None) of one metric under one
    judge; `batch`: at the batch price."""
    from deepscholar.evaluation.metrics.registry import get

    metric = get(name)
    purpose = getattr(metric, "purpose", None)
    if spec.is_local or purpose is None or float(getattr(metric, "calls_per_report", 1.0)) == 0.0:
        return 0.0, 0.0, 0.0, 0, 0.0, 0.0, None
    model = spec.model_for(name)
    prompt, completion, basis = _tokens_per_call(conn, purpose, model)
    budget = getattr(metric, "fixed_answer_budget", None)  # no answer is longer than its budget (LLMClient.ask)
    completion = min(completion, budget) if budget else completion
    price = batch_price_of(model) if batch else price_of(model)
    counted = budget_price_of(model, batch=batch)
    return (float(getattr(metric, "calls_per_report", 1.0)), prompt, completion, basis,
            None if price is None else prompt * price[0] + completion * price[1],
            prompt * counted[0] + completion * counted[1], None if counted[2] is None else f"{model} at {counted[2]}")


def predicted_batch_costs(conn: sa.Connection, release_id: str, judge_config: str, state: str = "pending"
                          ) -> tuple[dict[str | None, float], int]:
    """({batch key (None while pending): USD}, requests of unpriced models) that the month's requests under
    this judge config (its batch queue; another month's are not counted) in `state` should cost at the batch
    price, unpriced models counted at their fallback: per (model, purpose), their number × the tokens one
    such call took in the audit trail (else the configured defaults). What the batch transport's budget check
    adds to the month's spend before it submits (pending) and while its batches run (submitted)."""
    costs: dict[str | None, float] = {}
    unpriced = 0
    for key, model, purpose, n in conn.execute(sa.text("""
            SELECT CASE WHEN :state = 'pending' THEN NULL ELSE batch_key END, model, coalesce(purpose, ''),
                   count(*) FROM llm_batch_requests
            WHERE release_id = :r AND judge_config = :j AND state = :state
            GROUP BY 1, 2, 3"""), {"state": state, "r": release_id, "j": judge_config}).all():
        per_prompt, per_completion, fallback = budget_price_of(model, batch=True)
        unpriced += n if fallback else 0
        prompt, completion, _ = _tokens_per_call(conn, purpose, model)
        costs[key] = costs.get(key, 0.0) + n * (prompt * per_prompt + completion * per_completion)
    return costs, unpriced


def predicted_pending_batch_cost(conn: sa.Connection, release_id: str, judge_config: str) -> tuple[float, int]:
    """(USD, requests of unpriced models) that the month's requests under this judge config waiting for their
    next batch (its batch queue) should cost (predicted_batch_costs of the pending ones)."""
    costs, unpriced = predicted_batch_costs(conn, release_id, judge_config)
    return sum(costs.values()), unpriced


def predicted_call_cost(conn: sa.Connection, spec: JudgeSpec, name: str) -> float | None:
    """USD that one judge call of this metric should take (0 for the local judge; None when the model has no
    price): what a fixed number of questions costs, e.g. the drift check's calibration slice."""
    return _per_call_prediction(conn, spec, name)[4]


def predicted_call_prices(conn: sa.Connection, spec: JudgeSpec, name: str) -> tuple[float | None, float, str | None]:
    """(predicted_call_cost, the same as a budget counts it: an unpriced model at its fallback price, how
    that fallback was chosen or None)."""
    prediction = _per_call_prediction(conn, spec, name)
    return prediction[4], prediction[5], prediction[6]


def predicted_judge_cost(conn: sa.Connection, spec: JudgeSpec, metrics: Sequence[str],
                         n_reports: int) -> tuple[float, float | None]:
    """(calls, USD) that judging `n_reports` more reports on these metrics should take; USD None when a
    needed price is unknown."""
    calls = 0.0
    cost: float | None = 0.0
    for name in metrics:
        per_report, _, _, _, per_call, _, _ = _per_call_prediction(conn, spec, name)
        calls += per_report * n_reports
        if per_report and n_reports:
            cost = None if cost is None or per_call is None else cost + per_report * n_reports * per_call
    return calls, cost


def predicted_unit_costs(conn: sa.Connection, spec: JudgeSpec, units: Sequence[dict], *,
                         batch: bool = False) -> list[dict]:
    """Per planned unit (jobs.plan_units: a metric and a system, with its `distinct` pending reports): the
    calls and USD judging it should take (USD None when the model has no price; `batch`: at the batch
    price), what a budget counts for them (`counted_usd`: an unpriced model at its fallback price, said in
    `pricing`). Reports already judged are not pending, and reports of equal content are judged once, so what
    the cache will answer is left out."""
    per_metric: dict[str, tuple] = {}
    out = []
    for unit in units:
        name = unit["metric"]
        if name not in per_metric:
            per_report, _, _, _, per_call, counted, pricing = _per_call_prediction(conn, spec, name, batch=batch)
            per_metric[name] = (per_report, per_call, counted, pricing)
        per_report, per_call, counted, pricing = per_metric[name]
        reports = int(unit.get("distinct", unit.get("pending", 0)))
        calls = per_report * reports
        out.append({"system_id": unit["system_id"], "metric": name, "model": spec.model_for(name),
                    "reports": reports, "calls": calls,
                    "cost_usd": 0.0 if calls == 0 else (None if per_call is None else calls * per_call),
                    "counted_usd": calls * counted, "pricing": pricing if calls else None})
    return out


# The month's judge requests as (system, metric, request hash), distinct: its reports' judgments read per report
# through their primary key, never by scanning every month's (migration 0028 says why); their llm_calls rows
# are read per hash likewise (0031).
_ASKED_SQL = """
    SELECT DISTINCT r.system_id, j.metric, h.request_hash
    FROM reports r
    CROSS JOIN LATERAL (SELECT j.metric, j.request_hashes FROM judgments j
                        WHERE j.report_id = r.report_id AND j.judge_config = :j OFFSET 0) j
    CROSS JOIN LATERAL unnest(j.request_hashes) AS h (request_hash)
    WHERE r.release_id = :r AND (CAST(:s AS text[]) IS NULL OR r.system_id = ANY(:s))"""


def judging_scopes(release_id: str, judge_config: str) -> list[str]:
    """The budgets a month's judging under one judge is paid from: its judge requests and its drift check."""
    return [scope_of("judging", release_id, judge_config), scope_of("drift", release_id, judge_config)]


def unbilled_judge_spend(conn: sa.Connection, release_id: str, judge_config: str) -> Paid:
    """What the month's stored judgments' requests cost that no budget was billed for (llm_calls.billed_to
    NULL: answers written before migration 0039, or outside any budget): counted as the month's too."""
    return count_paid(conn.execute(sa.text(f"""
        {PAID_COLUMNS}
        FROM (SELECT DISTINCT a.request_hash FROM ({_ASKED_SQL}) a) d
        CROSS JOIN LATERAL (SELECT c.model, c.provider_model, c.transport, c.cost_usd, c.prompt_tokens,
                                   c.completion_tokens, c.billed_to
                            FROM llm_calls c WHERE c.request_hash = d.request_hash OFFSET 0) c
        WHERE c.billed_to IS NULL GROUP BY 1, 2, 3"""), {"r": release_id, "j": judge_config, "s": None}))


def month_judge_paid(engine: Engine, release_id: str, judge_config: str) -> Paid:
    """What a month's judging under one judge has paid so far: every answer billed to its judging or its drift
    check (whether or not a judgment names it: an earlier round, a chunk cut short), and the stored judgments'
    unbilled requests. (A running limit reads the same two parts: money/budget.py `_month_spend`.)"""
    with engine.connect() as conn:
        return paid_usd(conn, judging_scopes(release_id, judge_config)) + unbilled_judge_spend(
            conn, release_id, judge_config)


def month_judge_spend(engine: Engine, release_id: str, judge_config: str) -> float:
    """What a month's judging under one judge has cost so far, as its budget counts it (month_judge_paid:
    unpriced calls at their fallback price)."""
    return month_judge_paid(engine, release_id, judge_config).counted_usd


# One pass over the month's requests, counted three ways: per metric, per transport (a request counts once
# for the month) and per system (as month_costs_of counts a system's judge requests).
_MONTH_REQUESTS_SQL = f"""
    WITH asked AS MATERIALIZED ({_ASKED_SQL}
    ), calls AS MATERIALIZED (
        SELECT a.system_id, a.metric, a.request_hash, coalesce(c.transport, 'direct') AS transport,
               c.provider_model, c.model, c.prompt_tokens, c.completion_tokens, c.cost_usd
        FROM asked a
        LEFT JOIN LATERAL (SELECT c.transport, c.provider_model, c.model, c.prompt_tokens, c.completion_tokens,
                                  c.cost_usd FROM llm_calls c WHERE c.request_hash = a.request_hash OFFSET 0) c ON true
    )
    SELECT 'metric' AS kind, metric AS name, NULL AS provider_model, NULL AS model, count(*) AS requests,
           sum(prompt_tokens)::bigint AS prompt_tokens, sum(completion_tokens)::bigint AS completion_tokens,
           CASE WHEN bool_and(cost_usd IS NOT NULL) THEN sum(cost_usd) END AS cost_usd
    FROM (SELECT DISTINCT ON (metric, request_hash) * FROM calls ORDER BY metric, request_hash) d GROUP BY metric
    UNION ALL
    SELECT 'transport', transport, provider_model, model, count(*), sum(prompt_tokens)::bigint,
           sum(completion_tokens)::bigint, CASE WHEN bool_and(cost_usd IS NOT NULL) THEN sum(cost_usd) END
    FROM (SELECT DISTINCT ON (request_hash) * FROM calls ORDER BY request_hash) d
    GROUP BY transport, provider_model, model
    UNION ALL
    SELECT 'system', system_id, NULL, NULL, count(*), sum(prompt_tokens)::bigint, sum(completion_tokens)::bigint,
           CASE WHEN bool_and(cost_usd IS NOT NULL) THEN sum(cost_usd) END
    FROM (SELECT DISTINCT ON (system_id, request_hash) * FROM calls ORDER BY system_id, request_hash) d
    GROUP BY system_id"""


def month_requests(conn: sa.Connection, release_id: str, judge_config: str, *,
                   systems: Sequence[str] | None = None) -> dict:
    """The judge's requests behind a month's judgments, read in one pass of the month (its reports' judgments
    through their primary key, then llm_calls): per metric (distinct requests, tokens, cost or None when a
    price is unknown); per system (its distinct requests, as month_costs counts them); for the month (a
    request two metrics or systems share counts once); per transport (`direct`, or the batch API that
    answered, llm_calls.transport); and what batching saved against the direct price of the same tokens
    (None when a batched model has no direct price)."""
    from deepscholar.llm.prices import cost_usd

    metrics: dict[str, dict] = {}
    per_system: dict[str, dict] = {}
    transports: dict[str, dict[str, Any]] = {}
    month: dict[str, Any] = {"requests": 0, "prompt_tokens": 0, "completion_tokens": 0, "cost_usd": 0.0}
    saved: float | None = 0.0
    # As month_costs_of runs (migration 0028): JIT off, since its compilation never pays back on a bounded read,
    # and memory to sort the month's ~55,000 requests three ways without spilling (for this transaction only).
    conn.execute(sa.text("SELECT set_config('jit', 'off', true), set_config('work_mem', '32MB', true)"))
    for row in conn.execute(sa.text(_MONTH_REQUESTS_SQL), {"r": release_id, "j": judge_config,
                                                           "s": list(systems) if systems else None}):
        entry = {"requests": int(row.requests), "prompt_tokens": row.prompt_tokens,
                 "completion_tokens": row.completion_tokens, "cost_usd": row.cost_usd}
        if row.kind != "transport":
            (metrics if row.kind == "metric" else per_system)[row.name] = entry
            continue
        sent = transports.setdefault(row.name, {"transport": row.name, "requests": 0, "prompt_tokens": 0,
                                                "completion_tokens": 0, "cost_usd": 0.0, "direct_price_usd": 0.0})
        for total in (month, sent):
            total["requests"] += entry["requests"]
            total["prompt_tokens"] += entry["prompt_tokens"] or 0
            total["completion_tokens"] += entry["completion_tokens"] or 0
            total["cost_usd"] = None if total["cost_usd"] is None or row.cost_usd is None else (
                total["cost_usd"] + row.cost_usd)
        direct = row.cost_usd if row.name == "direct" else cost_usd(row.provider_model, row.model, row.prompt_tokens,
                                                                    row.completion_tokens)
        sent["direct_price_usd"] = None if sent["direct_price_usd"] is None or direct is None else (
            sent["direct_price_usd"] + direct)
        if row.name != "direct":
            saved = None if saved is None or direct is None or row.cost_usd is None else saved + direct - row.cost_usd
    batched = any(name != "direct" for name in transports)
    return {"metrics": metrics, "systems": per_system, "month": month,
            "transports": sorted(transports.values(), key=lambda t: t["transport"]),
            "batch_saving_usd": saved if batched else 0.0}


# What a month's request count was counted from: its reports and its judgments under the judge (row count and
# newest xmin, read per report through the judgments' key as month_requests reads them; llm_calls rows are
# never updated, so the judgments name everything the count reads).
_REQUESTS_STAMP_SQL = """
    SELECT concat_ws(':', count(DISTINCT r.report_id), max(r.xmin::text::bigint), count(j.xmin),
                     max(j.xmin::text::bigint))
    FROM reports r
    LEFT JOIN LATERAL (SELECT j.xmin FROM judgments j WHERE j.report_id = r.report_id AND j.judge_config = :j
                       OFFSET 0) j ON true
    WHERE r.release_id = :r"""


def requests_stamp(conn: sa.Connection, release_id: str, judge_config: str) -> str:
    """A stamp that changes when anything month_requests counts for this month and judge changes."""
    return conn.execute(sa.text(_REQUESTS_STAMP_SQL), {"r": release_id, "j": judge_config}).scalar_one()


def kept_month_requests(conn: sa.Connection, release_id: str, judge_config: str) -> dict:
    """month_requests' count of the whole month: the roll-up's kept one (month_judge_requests) while nothing
    was judged since, else counted now. A cold `deepscholar cost` skips reading the month's audit trail."""
    kept = conn.execute(sa.text(
        "SELECT stamp, requests FROM month_judge_requests WHERE release_id = :r AND judge_config = :j"),
        {"r": release_id, "j": judge_config}).first()
    if kept is not None and kept.stamp == requests_stamp(conn, release_id, judge_config):
        return json.loads(kept.requests)
    return month_requests(conn, release_id, judge_config)


def month_cost_rows(conn: sa.Connection, release_id: str, judge_config: str, asked: dict) -> list[dict]:
    """A month's costs per system under one judge, shaped as month_costs (and month_costs_of) has them: its
    generation (month_generation_costs) and its judge requests from `asked` (month_requests' pass), for every
    system on the month's boards under this judge or judged in it. What the roll-up stores and `deepscholar
    cost` shows, without reading the month's requests a second time."""
    generation = {r["system_id"]: r for r in conn.execute(sa.text(
        "SELECT * FROM month_generation_costs(:r)"), {"r": release_id}).mappings()}
    on_boards = set(conn.execute(sa.text(
        "SELECT DISTINCT system_id FROM leaderboard_systems WHERE release_id = :r AND judge_config = :j"),
        {"r": release_id, "j": judge_config}).scalars())
    rows = []
    for system in sorted(on_boards | set(asked["systems"])):
        made: dict = dict(generation.get(system, {}))
        judged: dict = asked["systems"].get(system, {})
        rows.append({"release_id": release_id, "system_id": system, "judge_config": judge_config,
                     **{k: made.get(k) for k in ("n_reports", "gen_calls", "gen_prompt_tokens",
                                                  "gen_completion_tokens", "gen_cost_usd", "mean_latency_ms")},
                     "judge_requests": judged.get("requests", 0), "judge_prompt_tokens": judged.get("prompt_tokens"),
                     "judge_completion_tokens": judged.get("completion_tokens"),
                     "judge_cost_usd": judged.get("cost_usd")})
    return rows


def store_month_spend(conn: sa.Connection, release_id: str, judge_config: str) -> None:
    """The month's costs per system (month_costs, which leaderboard pages read beside the board) and its judge
    requests by transport (month_judging_spend, for the page and `deepscholar cost`) as of now, from one pass
    over the month's requests (month_requests), which it also keeps whole with its stamp (month_judge_requests,
    for `deepscholar cost`): readers must not re-read the month's audit trail."""
    stamp = requests_stamp(conn, release_id, judge_config)  # first: the count is then at least as new
    asked = month_requests(conn, release_id, judge_config)
    conn.execute(sa.text("""
        INSERT INTO month_judge_requests (release_id, judge_config, stamp, requests, computed_at)
        VALUES (:r, :j, :stamp, :requests, now())
        ON CONFLICT (release_id, judge_config) DO UPDATE
        SET stamp = EXCLUDED.stamp, requests = EXCLUDED.requests, computed_at = EXCLUDED.computed_at"""),
        {"r": release_id, "j": judge_config, "stamp": stamp, "requests": json.dumps(asked)})
    conn.execute(sa.text("DELETE FROM month_costs WHERE release_id = :r AND judge_config = :j"),
                 {"r": release_id, "j": judge_config})
    costs = month_cost_rows(conn, release_id, judge_config, asked)
    if costs:
        db.upsert(conn, "month_costs", costs, key=["release_id", "judge_config", "system_id"])
    conn.execute(sa.text("DELETE FROM month_judging_spend WHERE release_id = :r AND judge_config = :j"),
                 {"r": release_id, "j": judge_config})
    if asked["transports"]:
        conn.execute(sa.text("""
            INSERT INTO month_judging_spend (release_id, judge_config, transport, requests, prompt_tokens,
                                             completion_tokens, cost_usd, direct_price_usd)
            VALUES (:r, :j, :transport, :requests, :prompt_tokens, :completion_tokens, :cost_usd,
                    :direct_price_usd)"""), [{"r": release_id, "j": judge_config, **t} for t in asked["transports"]])


def judging_spend(conn: sa.Connection, release_id: str, judge_config: str) -> dict | None:
    """Predicted against actual for one month and judge: the latest estimate made before judging
    (judging_estimates) and the stored requests by transport (month_judging_spend, as of the roll-up), with
    what batching saved. None when neither is stored."""
    estimate = conn.execute(sa.text("""
        SELECT run_id, transport, predicted_calls, predicted_usd::float8 AS predicted_usd,
               spent_before_usd::float8 AS spent_before_usd, budget_usd::float8 AS budget_usd, estimated_at
        FROM deepscholar.judging_estimates WHERE release_id = :r AND judge_config = :j
        ORDER BY estimated_at DESC LIMIT 1"""), {"r": release_id, "j": judge_config}).mappings().first()
    sent = [dict(r) for r in conn.execute(sa.text("""
        SELECT transport, requests, prompt_tokens, completion_tokens, cost_usd::float8 AS cost_usd,
               direct_price_usd::float8 AS direct_price_usd, computed_at
        FROM deepscholar.month_judging_spend WHERE release_id = :r AND judge_config = :j ORDER BY transport"""),
        {"r": release_id, "j": judge_config}).mappings()]
    if estimate is None and not sent:
        return None

    def total(key: str) -> float | None:
        values = [t[key] for t in sent]
        return None if any(v is None for v in values) else float(sum(values))

    actual, at_direct = total("cost_usd"), total("direct_price_usd")
    batched = any(t["transport"] != "direct" for t in sent)
    before = None
    if estimate is not None:  # the month it predicted: the spend before plus the pending work's prediction
        before = dict(estimate) | {"predicted_month_usd": None if estimate["predicted_usd"] is None
                                   else estimate["spent_before_usd"] + estimate["predicted_usd"]}
    return {"estimate": before, "transports": sent,
            "actual_requests": sum(t["requests"] for t in sent), "actual_usd": actual,
            "batch_saving_usd": (None if actual is None or at_direct is None else at_direct - actual) if batched
            else 0.0}


def judge_cost_summary(engine: Engine, release_id: str, spec: JudgeSpec, *, metrics: Sequence[str] | None = None,
                       systems: Sequence[str] | None = None) -> dict:
    """Per metric: predicted and actual judge requests, tokens and cost for one release and judge; and per
    system, generation's and the judge's tokens and cost (leaderboard_costs). Costs are None when a price
    is unknown (a local or unpriced model), never a silent 0."""
    names = list(metrics or [*registry.metric_names(registry.CORE),
                             *(m for t in current_settings().tracks for m in registry.metric_names(t))])
    with engine.connect() as conn:
        n_queries = conn.execute(sa.text("SELECT count(*) FROM release_queries WHERE release_id = :r"),
                                 {"r": release_id}).scalar_one()
        judged_systems = list(conn.execute(sa.text("""
            SELECT DISTINCT system_id FROM reports WHERE release_id = :r AND status = 'ok'
              AND (CAST(:s AS text[]) IS NULL OR system_id = ANY(:s)) ORDER BY 1"""),
            {"r": release_id, "s": list(systems) if systems else None}).scalars())
        if not judged_systems:
            judged_systems = list(conn.execute(sa.text(
                "SELECT system_id FROM systems WHERE active AND (CAST(:s AS text[]) IS NULL OR system_id = ANY(:s)) "
                "ORDER BY 1"), {"s": list(systems) if systems else None}).scalars())
        rows = []
        asked = (month_requests(conn, release_id, spec.config_id, systems=systems) if systems
                 else kept_month_requests(conn, release_id, spec.config_id))
        for name in names:
            model = spec.model_for(name)
            per_report, prompt, completion, basis, per_call, _, _ = _per_call_prediction(conn, spec, name)
            predicted_calls = per_report * n_queries * len(judged_systems)
            actual = asked["metrics"].get(name, {"requests": 0, "prompt_tokens": None, "completion_tokens": None,
                                                 "cost_usd": None})
            rows.append({
                "metric": name, "family": registry.family_of(name), "model": model,
                "predicted_calls": round(predicted_calls, 1), "tokens_per_call": [round(prompt), round(completion)],
                "tokens_basis_calls": basis, "answer_budget": getattr(registry.get(name), "fixed_answer_budget", None),
                "predicted_cost_usd": 0.0 if predicted_calls == 0 else (
                    None if per_call is None else predicted_calls * per_call),
                "actual_requests": actual["requests"], "actual_prompt_tokens": actual["prompt_tokens"],
                "actual_completion_tokens": actual["completion_tokens"],
                "actual_cost_usd": 0.0 if actual["requests"] == 0 else actual["cost_usd"],
            })
        systems_rows = [r for r in month_cost_rows(conn, release_id, spec.config_id, asked)
                        if not systems or r["system_id"] in systems]
        month = asked["month"]
        stored = judging_spend(conn, release_id, spec.config_id)
        budgets = budget_spend(conn, release_id, spec.config_id)

    def total(key: str) -> float | None:
        values = [r[key] for r in rows]
        return None if any(v is None for v in values) else float(sum(values))

    return {"release_id": release_id, "judge_config": spec.config_id, "n_queries": n_queries,
            "systems": judged_systems, "metrics": rows,
            "predicted_calls": round(sum(r["predicted_calls"] for r in rows), 1),
            "predicted_cost_usd": total("predicted_cost_usd"),
            # The month's distinct requests: a question two metrics or systems share counts once here.
            "actual_requests": month["requests"],
            "actual_cost_usd": 0.0 if month["requests"] == 0 else month["cost_usd"],
            "transports": asked["transports"], "batch_saving_usd": asked["batch_saving_usd"],
            "estimate_before_judging": stored["estimate"] if stored else None,
            "per_system": systems_rows, "budgets": budgets}


def budget_spend(conn: sa.Connection, release_id: str, judge_config: str) -> dict:
    """What was paid from each budget of the month (llm_calls.billed_to, unpriced calls at their fallback
    price: llm/spend.py), beside the budget: its judging under this judge (DEEPSCHOLAR_JUDGE_BUDGET_USD, and
    the total an approver approved), its drift check (paid from the same budget, bounded by
    DEEPSCHOLAR_CALIBRATION_MAX_COST_USD besides) and its release-time judging
    (DEEPSCHOLAR_RELEASE_JUDGE_BUDGET_USD). Answers stored before migration 0039 were billed to none."""
    settings = current_settings()
    approval = conn.execute(sa.text("""
        SELECT run_id, approved_usd::float8 AS approved_usd, approved_by, approved_at FROM judging_estimates
        WHERE release_id = :r AND judge_config = :j AND approved_usd IS NOT NULL ORDER BY approved_at DESC LIMIT 1"""),
        {"r": release_id, "j": judge_config}).mappings().first()
    paid = {stage: paid_usd(conn, [scope_of(stage, release_id, None if stage == "release" else judge_config)])
            for stage in ("judging", "drift", "release")}
    return {"judging": {"counted_usd": paid["judging"].counted_usd, "budget_usd": settings.judge_budget_usd,
                        "approved": dict(approval) if approval else None},
            "drift": {"counted_usd": paid["drift"].counted_usd, "bound_usd": settings.calibration_max_cost_usd},
            "release": {"counted_usd": paid["release"].counted_usd, "budget_usd": settings.release_judge_budget_usd},
            "unpriced_calls": sum(p.unpriced_calls for p in paid.values()),
            "pricing": sorted({n for p in paid.values() for n in p.pricing})}


def format_budgets(budgets: dict) -> str:
    """`deepscholar cost`'s lines on the month's budgets: what each paid, beside its bound."""
    usd = functools.partial(usd_text, decimals=4, unknown="no bound")
    judging, drift, release = budgets["judging"], budgets["drift"], budgets["release"]
    approved = judging["approved"]
    lines = [f"Paid from the month's judging budget ({usd(judging['budget_usd'])}"
             + (f"; {usd(approved['approved_usd'])} approved by {approved['approved_by']} for run "
                f"{approved['run_id']}" if approved else "")
             + f"): judging {usd(judging['counted_usd'])}, its drift check {usd(drift['counted_usd'])} "
             f"(a bound of its own: {usd(drift['bound_usd'])}). Release-time judging: {usd(release['counted_usd'])} "
             f"of {usd(release['budget_usd'])}."]
    if budgets["unpriced_calls"]:
        lines.append(f"{budgets['unpriced_calls']} calls without a price were counted at "
                     + "; ".join(budgets["pricing"]) + ".")
    return "\n".join(lines)


def format_cost_summary(summary: dict) -> str:
    from tabulate import tabulate

    usd = functools.partial(usd_text, decimals=4, unknown="unknown price")

    lines = [f"Judge cost of {summary['release_id']} under {summary['judge_config']}: {summary['n_queries']} queries "
             f"x {len(summary['systems'])} systems"]
    lines.append(tabulate([[r["metric"], r["model"], r["predicted_calls"],
                            f"{r['tokens_per_call'][0]}/{r['tokens_per_call'][1]}"
                            + ("" if r["tokens_basis_calls"] else " (default)"),
                            r.get("answer_budget") or "per item", usd(r["predicted_cost_usd"]), r["actual_requests"],
                            usd(r["actual_cost_usd"])]
                           for r in summary["metrics"]],
                          headers=["metric", "model", "predicted calls", "tokens/call in/out", "answer budget",
                                   "predicted", "actual requests", "actual"]))
    lines.append(f"\nPredicted: {summary['predicted_calls']:g} calls, {usd(summary['predicted_cost_usd'])}. "
                 f"Actual (distinct requests of the month): {summary['actual_requests']}, "
                 f"{usd(summary['actual_cost_usd'])}.")
    if summary["transports"]:
        sent = "; ".join(f"{t['transport']}: {t['requests']} requests, {usd(t['cost_usd'])}" for t in summary["transports"])
        batched = any(t["transport"] != "direct" for t in summary["transports"])
        lines.append(f"Sent {sent}" + (f"; batching saved {usd(summary['batch_saving_usd'])} against the direct "
                                       "price" if batched else "") + ".")
    before = summary.get("estimate_before_judging")
    if before is not None:
        spent, predicted = before["spent_before_usd"], before["predicted_month_usd"]
        actual = summary["actual_cost_usd"]
        ratio = (f" ({actual / predicted:.2f}x the prediction)" if predicted and actual is not None else "")
        lines.append(f"Predicted before judging (run {before['run_id']}, {before['transport']} transport, "
                     f"{before['estimated_at']:%Y-%m-%d %H:%M} UTC): {before['predicted_calls']:,.0f} more calls, "
                     f"a month of {usd(predicted)}" + (f" with the {usd(spent)} spent before" if spent else "")
                     + f"; the month then cost {usd(actual)}{ratio}.")
    if summary.get("budgets"):
        lines.append(format_budgets(summary["budgets"]))
    if summary["per_system"]:
        lines.append("")
        lines.append(tabulate([[s["system_id"], s["gen_prompt_tokens"], s["gen_completion_tokens"],
                                usd(s["gen_cost_usd"]) if s["gen_calls"] else "-",
                                None if s["mean_latency_ms"] is None else round(s["mean_latency_ms"] / 1000, 2),
                                s["judge_requests"], s["judge_prompt_tokens"], s["judge_completion_tokens"],
                                usd(s["judge_cost_usd"]) if s["judge_requests"] else "-"]
                               for s in summary["per_system"]],
                              headers=["system", "gen tokens in", "gen tokens out", "gen cost", "s/report",
                                       "judge requests", "judge tokens in", "judge tokens out", "judge cost"]))
    return "\n".join(lines)
