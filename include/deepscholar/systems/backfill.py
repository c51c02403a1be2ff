"""A newly registered system's backfill: which past months it should be run on, what that costs, and
queueing it in Airflow.

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.backfill`.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import NotFound, UserError
from deepscholar.evaluation.metrics import registry
from deepscholar.migrations.wide_views import current_releases_sql
from deepscholar.release.window import MONTH_RE

__all__ = ["BackfillTarget", "BackfillPlan", "plan_backfill", "format_plan", "queue_backfill"]

# Every published month's current version, its first query's day and the system's missing queries.
_MONTHS_SQL = f"""
    WITH current AS ({current_releases_sql()})
    SELECT c.release_id, c.base_id,
           (SELECT min(q.published)::date FROM release_queries q WHERE q.release_id = c.release_id) AS first_day,
           (SELECT count(*) FROM release_queries q WHERE q.release_id = c.release_id) AS n_queries,
           (SELECT count(*) FROM release_queries q WHERE q.release_id = c.release_id AND NOT EXISTS (
                SELECT 1 FROM reports r WHERE r.release_id = q.release_id AND r.arxiv_id = q.arxiv_id
                  AND r.system_id = :s AND r.status = 'ok')) AS missing
    FROM current c
    ORDER BY c.base_id"""


@dataclass(frozen=True)
class BackfillTarget:
    release_id: str
    month: str | None  # the YYYY-MM a benchmark DAG run takes; None for a dataset release (run by the CLI)
    reason: str
    n_queries: int
    missing: int  # queries without an ok report of the system
    judge_calls: float = 0.0
    judge_cost_usd: float | None = None
    generation_cost_usd: float | None = None


@dataclass
class BackfillPlan:
    system_id: str
    knowledge_cutoff: date | None
    model_knowledge: bool
    judge_config: str
    targets: list[BackfillTarget] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (release, why not)

    @property
    def judge_cost_usd(self) -> float | None:
        costs = [t.judge_cost_usd for t in self.targets if t.missing]
        return None if any(c is None for c in costs) else float(sum(c for c in costs if c is not None))

    @property
    def generation_cost_usd(self) -> float | None:
        costs = [t.generation_cost_usd for t in self.targets if t.missing]
        return None if any(c is None for c in costs) else float(sum(c for c in costs if c is not None))


def _month_of(base_id: str) -> str | None:
    return base_id if MONTH_RE.fullmatch(base_id) else None


def plan_backfill(engine: Engine, system_id: str, *, judge: str | None = None,
                  frozen_slice: str | None = None, tracks: Sequence[str] | None = None) -> BackfillPlan:
    """The months to run `system_id` on, with their missing reports and predicted cost (nothing is run)."""
    from deepscholar.evaluation.judge_spec import JudgeSpec
    from deepscholar.evaluation.money.costs import predicted_judge_cost
    from deepscholar.release.versions import resolve_release
    from deepscholar.settings import current_settings

    settings = current_settings()
    spec = JudgeSpec.parse(judge or settings.judge)
    frozen_slice = frozen_slice if frozen_slice is not None else settings.frozen_slice
    metrics = [*registry.metric_names(registry.CORE),
               *(m for t in (settings.tracks if tracks is None else tracks) for m in registry.metric_names(t))]
    with engine.connect() as conn:
        system = conn.execute(sa.text(
            "SELECT knowledge_cutoff, model_knowledge FROM systems WHERE system_id = :s"), {"s": system_id}).first()
        if system is None:
            raise NotFound(f"no system {system_id!r}; register it with `deepscholar systems add`")
        slice_release = resolve_release(conn, frozen_slice) if frozen_slice else None
        # What one of its reports cost to write so far (None: no priced report yet).
        per_report = conn.execute(sa.text("""
            SELECT CASE WHEN count(*) > 0 AND bool_and(cost_usd IS NOT NULL OR n_llm_calls = 0)
                        THEN avg(coalesce(cost_usd, 0)) END
            FROM reports WHERE system_id = :s AND status = 'ok'"""), {"s": system_id}).scalar()
        months = conn.execute(sa.text(_MONTHS_SQL), {"s": system_id}).all()
        plan = BackfillPlan(system_id, system.knowledge_cutoff, system.model_knowledge, spec.config_id)
        for release_id, base_id, first_day, n_queries, missing in months:
            after_cutoff = (not system.model_knowledge or system.knowledge_cutoff is None
                            or (first_day is not None and first_day > system.knowledge_cutoff))
            in_slice = release_id == slice_release
            if not after_cutoff and not in_slice:
                plan.skipped.append((release_id, f"its queries start {first_day} (knowledge cutoff "
                                                 f"{system.knowledge_cutoff}): the model may have seen them"))
                continue
            reason = ("frozen comparison slice" if in_slice and not after_cutoff else
                      "frozen comparison slice; after its cutoff" if in_slice else
                      "after its knowledge cutoff" if system.model_knowledge and system.knowledge_cutoff else
                      "knowledge cutoff unknown: every month (marked on the board)" if system.model_knowledge else
                      "no model: every month")
            calls, cost = predicted_judge_cost(conn, spec, metrics, missing)
            plan.targets.append(BackfillTarget(
                release_id, _month_of(base_id), reason, int(n_queries), int(missing), calls, cost,
                None if per_report is None else float(per_report) * missing))
    if slice_release is None and frozen_slice:
        raise UserError(f"the frozen comparison slice {frozen_slice!r} (DEEPSCHOLAR_FROZEN_SLICE) is no release")
    return plan


def format_plan(plan: BackfillPlan) -> str:
    from tabulate import tabulate

    from deepscholar.llm.prices import usd_text

    usd = functools.partial(usd_text, decimals=2)

    cutoff = (plan.knowledge_cutoff.isoformat() if plan.knowledge_cutoff else
              "unknown" if plan.model_knowledge else "n/a (no model)")
    lines = [f"Backfill of {plan.system_id} (knowledge cutoff {cutoff}), judged by {plan.judge_config}:"]
    if plan.targets:
        lines.append(tabulate([[t.release_id, t.reason, f"{t.missing}/{t.n_queries}", round(t.judge_calls),
                                usd(t.judge_cost_usd), usd(t.generation_cost_usd)] for t in plan.targets],
                              headers=["release", "why", "missing reports", "judge calls", "judge cost",
                                       "generation cost"]))
    for release_id, why in plan.skipped:
        lines.append(f"  not {release_id}: {why}")
    lines.append(f"Estimate: judging {usd(plan.judge_cost_usd)}, generation {usd(plan.generation_cost_usd)} "
                 "(generation: the system's mean cost per report so far; unknown before its first priced report)")
    return "\n".join(lines)


def queue_backfill(plan: BackfillPlan, api, dag_id: str | None = None) -> list[dict]:
    """Create the plan's runs in Airflow (`api`: airflow_api.AirflowAPI); returns what was created. Months
    with nothing missing are left out; a dataset release (no month) cannot be a DAG run and is refused with
    the commands that do the same."""
    from deepscholar.orchestration import BENCHMARK_DAG_ID

    dag_id = dag_id or BENCHMARK_DAG_ID
    todo = [t for t in plan.targets if t.missing]
    not_months = [t.release_id for t in todo if t.month is None]
    if not_months:
        raise UserError(f"{', '.join(not_months)} is not a month, so no benchmark DAG run can take it: run "
                        f"`deepscholar reports generate --release {not_months[0]} --system {plan.system_id}` and "
                        f"`deepscholar evaluate --release {not_months[0]} --system {plan.system_id} --publish`")
    conf = {"systems": [plan.system_id]}
    in_range = [t for t in todo if not t.reason.startswith("frozen comparison slice") or "after" in t.reason]
    alone = [t for t in todo if t not in in_range]
    created = []
    if in_range:
        months = [t.month for t in in_range if t.month is not None]  # (months only: checked above)
        first, last = min(months), max(months)
        created.append({"kind": "backfill", "months": [first, last], **api.request("POST", "/backfills", json={
            "dag_id": dag_id, "from_date": f"{first}-01T00:00:00Z", "to_date": f"{last}-01T00:00:00Z",
            "dag_run_conf": conf, "reprocess_behavior": "completed"})})
    for t in alone:
        created.append({"kind": "run", "months": [t.month], **api.request(
            "POST", f"/dags/{dag_id}/dagRuns", json={"logical_date": None, "conf": {**conf, "month": t.month}})})
    return created


def describe_queued(created: dict, dag_id: str | None = None) -> str:
    """One line per thing queue_backfill created, as the CLI and the page show it."""
    from deepscholar.orchestration import BENCHMARK_DAG_ID

    what = f"backfill {created.get('id')}" if created["kind"] == "backfill" else f"run {created.get('dag_run_id')}"
    return f"queued {what} of {dag_id or BENCHMARK_DAG_ID} for {'..'.join(dict.fromkeys(created['months']))}"


def missing_months(plan: BackfillPlan) -> list[str]:
    """The months the plan would queue (those with reports missing), oldest first."""
    return sorted({t.month for t in plan.targets if t.missing and t.month})


def not_configured_hint(plan: BackfillPlan) -> str:
    """What to do instead when no Airflow API is configured to queue on."""
    from deepscholar.orchestration import BENCHMARK_DAG_ID

    months = missing_months(plan)
    return (f"not queued: DEEPSCHOLAR_AIRFLOW_API_URL is not set. In Airflow: backfill {BENCHMARK_DAG_ID} from "
            f"{months[0]} to {months[-1]} with conf {{\"systems\": [\"{plan.system_id}\"]}} and reprocess "
            "behaviour 'completed' (or `deepscholar generate` / `evaluate --publish` per month)")
