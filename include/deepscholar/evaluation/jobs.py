"""How a month's judging is cut into Airflow tasks: (metric, system) units spread over jobs of equal work.

A unit is one metric over one system's reports in the release. Units differ a lot (a system with 3 reports,
another with 200; organization asks two questions per report, claim coverage a dozen), and every Airflow
task pays a fixed cost: a new process, the DAG file, the warehouse, an XCom (2-4 s on two cores), and with
the local judge loading the embedding model. Measured at 4,000 reports, 70 tasks of at most 400 reports
each spent more time starting than judging. So:

- a unit's cost is its pending reports x (0.5 + the metric's `calls_per_report`): loading, scoring and
  storing a report counts about half a judge call (reports equal to another of the task cost less, as
  runner.content_key has them take its judgments, but counting them as distinct balanced the jobs
  worse at 20 identical oracles: 69 s against 50 s of judging, one run each);
- the month gets ceil(pending report-metrics / DEEPSCHOLAR_JUDGE_JOB_REPORTS) jobs, rounded up to a
  multiple of DEEPSCHOLAR_JUDGE_TASKS so every wave of parallel judge tasks is full (a month that fits
  one job stays one task);
- units are cut, in their (metric, system) order, into consecutive jobs of equal cost, so the jobs end
  together instead of leaving one long tail, and one metric's systems share a task: the questions they
  have in common (a cited paper's relevance to the query, identical reports) are asked once per task and
  then answered from the client's memory, not from the warehouse;
- when the month needs more than one job, each unit is split further by query shard (a stable hash of
  the query's arXiv id, as many shards as jobs) and ordered (metric, shard, system): a job then holds
  every system's reports of its queries (a metric's shard is never cut between two jobs), because
  questions are shared by query, not by system. Cut by
  system instead, two tasks running at once both paid for the same questions (the `llm_calls` cache only
  serves what is already answered): 6,942 requests instead of about 5,200 at 20 systems x 200 queries.

Units with nothing left to judge are left out, so a re-run or a backfill maps only the tasks that have work.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import InvalidInput
from deepscholar.evaluation import registry
from deepscholar.evaluation.judges import JudgeSpec

__all__ = ["DEFAULT_JOB_REPORTS", "SHARD_OF_QUERY", "job_count", "plan_units", "unit_cost", "pack_jobs",
           "plan_judging"]

DEFAULT_JOB_REPORTS = 4000
# The shard of report `r`'s query among :shards: from md5, so it never changes between servers or versions.
SHARD_OF_QUERY = "mod(('x' || substr(md5(r.arxiv_id), 1, 7))::bit(28)::int, :shards)"


def _checked_metrics(metrics: Sequence[str] | None) -> list[str]:
    known = registry.metric_names()
    chosen = list(metrics or known)
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise InvalidInput(f"unknown metrics: {', '.join(unknown)}; known: {', '.join(known)}")
    return chosen


def plan_units(engine: Engine, release_id: str, systems: Sequence[str] | None = None,
               metrics: Sequence[str] | None = None, judge: str | JudgeSpec = "local",
               shards: int = 1) -> list[dict]:
    """Every (metric, system) with ok reports in the release, with how many of them lack a current score;
    with `shards` > 1, every (metric, query shard, system) in that order, each unit naming its
    `shard`: [k, shards] (module docstring)."""
    from deepscholar.evaluation.metrics import get_metric
    from deepscholar.evaluation.runner import PENDING_CONDITION, pending_params

    chosen = _checked_metrics(metrics)
    spec = judge if isinstance(judge, JudgeSpec) else JudgeSpec.parse(judge)
    shard = SHARD_OF_QUERY if shards > 1 else "0"
    units = []
    with engine.connect() as conn:
        for name in chosen:
            metric = get_metric(name)
            rows = conn.execute(sa.text(f"""
                SELECT {shard} AS shard, r.system_id, count(*) FILTER (WHERE {PENDING_CONDITION}) AS pending
                FROM reports r
                WHERE r.release_id = :r AND r.status = 'ok'
                  AND (CAST(:s AS text[]) IS NULL OR r.system_id = ANY(:s))
                GROUP BY 1, 2 ORDER BY 1, 2"""),
                {"r": release_id, "s": list(systems) if systems else None, "shards": shards,
                 **pending_params(metric, spec.config_id)}).all()
            units += [{"metric": name, "system_id": system_id, "pending": int(pending),
                       **({"shard": [int(k), shards]} if shards > 1 else {})}
                      for k, system_id, pending in rows]
    return units


def unit_cost(unit: dict) -> float:
    """What a unit weighs when jobs are balanced (see the module's docstring)."""
    from deepscholar.evaluation.metrics import get_metric

    per_report = getattr(get_metric(unit["metric"]), "calls_per_report", 1.0)
    return unit["pending"] * (0.5 + per_report)


def pack_jobs(units: Sequence[dict], job_reports: int = DEFAULT_JOB_REPORTS, tasks: int = 1,
              cost=unit_cost) -> list[list[dict]]:
    """Units with pending work cut, in their order, into jobs of about equal cost (module docstring)."""
    work = [u for u in units if u["pending"] > 0]
    wanted = job_count(work, job_reports, tasks)
    if not work:
        return []
    # A query shard's units of one metric move as one: split, the second task would ask its queries'
    # shared questions again (at the same time as the first, so paid twice). Unsharded units are their own.
    groups = [list(g) for _, g in itertools.groupby(work, key=_group_key)]
    n_jobs = min(wanted, len(groups))
    weights = [sum(cost(u) for u in group) for group in groups]
    total = sum(weights) or 1.0
    jobs: list[list[dict]] = [[] for _ in range(n_jobs)]
    done = 0.0
    for group, weight in zip(groups, weights, strict=True):
        # A group goes to the job its cost's midpoint falls in: consecutive cuts of equal share, so one
        # metric's systems stay together (their identical questions are asked once per task).
        index = min(n_jobs - 1, int((done + weight / 2) / total * n_jobs))
        jobs[index].extend(group)
        done += weight
    return [job for job in jobs if job]


def _group_key(unit: dict) -> object:
    """Units packed together: a metric's units of one query shard; an unsharded unit alone."""
    return (unit["metric"], *unit["shard"]) if "shard" in unit else id(unit)


def job_count(units: Sequence[dict], job_reports: int, tasks: int) -> int:
    """ceil(pending report-metrics / job_reports), rounded up to a multiple of `tasks` when above one."""
    if job_reports < 1:
        raise InvalidInput(f"a judge job must take at least one report, not {job_reports}")
    if tasks < 1:
        raise InvalidInput(f"judging needs at least one parallel task, not {tasks}")
    n_jobs = -(-sum(u["pending"] for u in units) // job_reports)
    return -(-n_jobs // tasks) * tasks if n_jobs > 1 else n_jobs


def plan_judging(engine: Engine, release_id: str, systems: Sequence[str] | None = None,
                 metrics: Sequence[str] | None = None, judge: str | JudgeSpec = "local",
                 job_reports: int = DEFAULT_JOB_REPORTS, tasks: int = 1) -> list[dict]:
    """The judge tasks of a run: one dict per job, each listing the (metric, system[, query shard]) units
    it judges; `tasks` is how many run at once (DEEPSCHOLAR_JUDGE_TASKS)."""
    units = plan_units(engine, release_id, systems, metrics, judge)
    shards = job_count(units, job_reports, tasks)
    if shards > 1:
        units = plan_units(engine, release_id, systems, metrics, judge, shards=shards)
    keys = ("metric", "system_id", "shard")
    return [{"release_id": release_id, "units": [{k: u[k] for k in keys if k in u} for u in job],
             "reports": sum(u["pending"] for u in job)}
            for job in pack_jobs(units, job_reports, tasks)]
