"""How a month's judging is cut into Airflow tasks: (metric, system) units packed into jobs by size.

A unit is one metric over one system's reports in the release. One task per unit was simple, but a
month has units of very different sizes (a system with 3 reports, another with 200; organization asks
one question per report, claim coverage a dozen), and every Airflow task pays a fixed cost: a new
process, the library's imports and, with the local judge, loading the embedding model. So units that
still have work are packed, in a stable order, into jobs of about `job_reports` report-metric judgments
(DEEPSCHOLAR_JUDGE_JOB_REPORTS); a unit larger than that is a job of its own. Units with nothing left to
judge are left out, so a re-run or a backfill maps only the tasks that have work.
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import InvalidInput
from deepscholar.evaluation import registry
from deepscholar.evaluation.judges import JudgeSpec

__all__ = ["DEFAULT_JOB_REPORTS", "plan_units", "pack_jobs", "plan_judging"]

DEFAULT_JOB_REPORTS = 400


def _checked_metrics(metrics: Sequence[str] | None) -> list[str]:
    known = registry.metric_names()
    chosen = list(metrics or known)
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise InvalidInput(f"unknown metrics: {', '.join(unknown)}; known: {', '.join(known)}")
    return chosen


def plan_units(engine: Engine, release_id: str, systems: Sequence[str] | None = None,
               metrics: Sequence[str] | None = None, judge: str | JudgeSpec = "local") -> list[dict]:
    """Every (metric, system) with ok reports in the release, with how many of them lack a current score."""
    from deepscholar.evaluation.metrics import get_metric
    from deepscholar.evaluation.runner import PENDING_CONDITION, pending_params

    chosen = _checked_metrics(metrics)
    spec = judge if isinstance(judge, JudgeSpec) else JudgeSpec.parse(judge)
    units = []
    with engine.connect() as conn:
        for name in chosen:
            metric = get_metric(name)
            rows = conn.execute(sa.text(f"""
                SELECT r.system_id, count(*) FILTER (WHERE {PENDING_CONDITION}) AS pending
                FROM reports r
                WHERE r.release_id = :r AND r.status = 'ok'
                  AND (CAST(:s AS text[]) IS NULL OR r.system_id = ANY(:s))
                GROUP BY r.system_id ORDER BY r.system_id"""),
                {"r": release_id, "s": list(systems) if systems else None,
                 **pending_params(metric, spec.config_id)}).all()
            units += [{"metric": name, "system_id": system_id, "pending": int(pending)}
                      for system_id, pending in rows]
    return units


def pack_jobs(units: Sequence[dict], job_reports: int = DEFAULT_JOB_REPORTS) -> list[list[dict]]:
    """Consecutive units with pending work, grouped while their pending reports fit in `job_reports`."""
    if job_reports < 1:
        raise InvalidInput(f"a judge job must take at least one report, not {job_reports}")
    jobs: list[list[dict]] = []
    size = 0
    for unit in units:
        if unit["pending"] <= 0:
            continue
        if jobs and size + unit["pending"] <= job_reports:
            jobs[-1].append(unit)
            size += unit["pending"]
        else:
            jobs.append([unit])
            size = unit["pending"]
    return jobs


def plan_judging(engine: Engine, release_id: str, systems: Sequence[str] | None = None,
                 metrics: Sequence[str] | None = None, judge: str | JudgeSpec = "local",
                 job_reports: int = DEFAULT_JOB_REPORTS) -> list[dict]:
    """The judge tasks of a run: one dict per job, each listing the (metric, system) units it judges."""
    units = plan_units(engine, release_id, systems, metrics, judge)
    return [{"release_id": release_id, "units": [{"metric": u["metric"], "system_id": u["system_id"]} for u in job],
             "reports": sum(u["pending"] for u in job)}
            for job in pack_jobs(units, job_reports)]
