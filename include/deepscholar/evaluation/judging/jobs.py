"""How a month's judging is cut into Airflow tasks: (metric, system) units spread over jobs of equal work.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.judging.jobs`.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import InvalidInput
from deepscholar.evaluation.judge_spec import LOCAL_JUDGE, JudgeSpec
from deepscholar.evaluation.judging._pending import PENDING_CONDITION, SHARD_OF_QUERY, pending_params
from deepscholar.evaluation.metrics import registry

__all__ = ["DEFAULT_JOB_REPORTS", "SHARDS_PER_JOB", "SHARD_OF_QUERY", "JUDGED_TABLES", "job_count", "plan_units", "unit_cost",
           "pack_jobs", "plan_judging", "refresh_judging_statistics"]

log = logging.getLogger("deepscholar.evaluation")

DEFAULT_JOB_REPORTS = 8000
SHARDS_PER_JOB = 2  # query shards per job when a month is split (module docstring)
REPORT_WEIGHT, REQUEST_WEIGHT = 1.0, 5.0  # a unit's cost per pending report and per expected request


# What judging reads and what is written before it, not during it: their planner statistics are refreshed
# before a month is judged. The tables judging writes (metric_scores, judgments, judge_claims, llm_calls)
# are left to autovacuum: analysed while (nearly) empty at a month's start, the planner would take them
# for empty while they grow by thousands of rows a minute, and pick plans that scan them whole.
JUDGED_TABLES = ("reports", "report_sources", "corpus", "source_cited_by")


def refresh_judging_statistics(engine: Engine) -> None:
    """db.refresh_statistics on JUDGED_TABLES before judging; a role that may not ANALYZE still judges
    (slower), with a warning that says why."""
    from deepscholar import db

    try:
        db.refresh_statistics(engine, JUDGED_TABLES)
    except sa.exc.DBAPIError as exc:
        log.warning("could not refresh the planner statistics of %s before judging (%s); judging goes on, "
                    "slower on tables the server has not analysed yet", ", ".join(JUDGED_TABLES),
                    str(exc).splitlines()[0])


def _checked_metrics(metrics: Sequence[str] | None, tracks: Sequence[str] | None = None) -> list[str]:
    """The metrics named, checked; none named: the core's and the enabled tracks' (`tracks`, default
    DEEPSCHOLAR_TRACKS)."""
    from deepscholar.settings import current_settings

    known = registry.metric_names()
    enabled = current_settings().tracks if tracks is None else tracks
    chosen = list(metrics or registry.judged_metric_names(enabled))
    unknown = sorted(set(chosen) - set(known))
    if unknown:
        raise InvalidInput(f"unknown metrics: {', '.join(unknown)}; known: {', '.join(known)}")
    return chosen


def plan_units(engine: Engine, release_id: str, systems: Sequence[str] | None = None,
               metrics: Sequence[str] | None = None, spec: JudgeSpec = LOCAL_JUDGE,
               shards: int = 1, tracks: Sequence[str] | None = None) -> list[dict]:
    """Every (metric, system) with ok reports in the release, with how many of them lack a current score
    (`pending`) and how many of those are the first of their content among their metric's and shard's
    pending reports, in system order (`distinct`); with `shards` > 1, every (metric, query shard, system)
    in that order, each unit naming its `shard`: [k, shards] (module docstring)."""
    from deepscholar.evaluation.metrics import get_metric

    chosen = _checked_metrics(metrics, tracks)
    shard = SHARD_OF_QUERY if shards > 1 else "0"
    units = []
    with engine.connect() as conn:
        for name in chosen:
            metric = get_metric(name)
            rows = conn.execute(sa.text(f"""
                WITH candidates AS (
                    SELECT {shard} AS shard, r.system_id, r.arxiv_id, md5(coalesce(r.text, '')) AS content,
                           {PENDING_CONDITION} AS pending
                    FROM reports r
                    WHERE r.release_id = :r AND r.status = 'ok'
                      AND (CAST(:s AS text[]) IS NULL OR r.system_id = ANY(:s))),
                ranked AS (
                    SELECT shard, system_id, pending, pending AND row_number() OVER (
                               PARTITION BY arxiv_id, content, pending ORDER BY system_id) = 1 AS first_of_content
                    FROM candidates)
                SELECT shard, system_id, count(*) FILTER (WHERE pending) AS pending,
                       count(*) FILTER (WHERE first_of_content) AS distinct_pending
                FROM ranked GROUP BY 1, 2 ORDER BY 1, 2"""),
                {"r": release_id, "s": list(systems) if systems else None, "shards": shards,
                 **pending_params(metric, spec.config_id)}).all()
            units += [{"metric": name, "system_id": system_id, "pending": int(pending), "distinct": int(distinct),
                       **({"shard": [int(k), shards]} if shards > 1 else {})}
                      for k, system_id, pending, distinct in rows]
    return units


CALLS_SAMPLE = 12  # pending reports of distinct content whose items are counted per metric


def _sampled_calls_per_report(engine: Engine, release_id: str, metric, judge_config: str) -> float:
    """About how many questions a distinct report of this month asks for `metric`: its items (metric.items)
    counted over a sample of CALLS_SAMPLE pending reports of distinct content, spread over the queries by a
    hash. A month's reports differ from the demo's a lot (at 20 oracles x 200 queries, claim coverage asked
    8.8 questions per distinct report and citation precision 3.2, where `calls_per_report` says 12 and 9);
    the metric's `calls_per_report` when nothing is pending, and 0 for a judge-free metric."""
    from deepscholar.evaluation.judging.report_contexts import load_reports

    static = float(getattr(metric, "calls_per_report", 1.0))
    if static == 0:
        return 0.0
    with engine.connect() as conn:
        ids = conn.execute(sa.text(f"""
            SELECT report_id FROM (
                SELECT DISTINCT ON (r.arxiv_id, md5(coalesce(r.text, ''))) r.report_id
                FROM reports r
                WHERE r.release_id = :r AND r.status = 'ok' AND {PENDING_CONDITION}
                ORDER BY r.arxiv_id, md5(coalesce(r.text, '')), r.report_id) first_of_content
            ORDER BY md5(report_id::text) LIMIT :n"""),
            {"r": release_id, "n": CALLS_SAMPLE, **pending_params(metric, judge_config)}).scalars().all()
    contexts = load_reports(engine, ids)
    if not contexts:
        return static
    return sum(len(metric.items(ctx)) for ctx in contexts) / len(contexts)


def unit_cost(unit: dict) -> float:
    """What a unit weighs when jobs are balanced (module docstring); a unit without `distinct` counts
    every pending report as distinct, without `calls` takes the metric's `calls_per_report`."""
    from deepscholar.evaluation.metrics import get_metric

    per_report = unit.get("calls", getattr(get_metric(unit["metric"]), "calls_per_report", 1.0))
    distinct = unit.get("distinct", unit["pending"])
    return REPORT_WEIGHT * unit["pending"] + REQUEST_WEIGHT * per_report * distinct


def pack_jobs(units: Sequence[dict], job_reports: int = DEFAULT_JOB_REPORTS, tasks: int = 1,
              cost=unit_cost) -> list[list[dict]]:
    """Units with pending work cut, in their order, into jobs of about equal cost (module docstring)."""
    work = [u for u in units if u["pending"] > 0]
    wanted = job_count(work, job_reports, tasks)
    if not work:
        return []
    # A query shard's units move as one: split, the second task would ask its queries' shared questions
    # again (at the same time as the first, so paid twice). Unsharded units are their own.
    # Sharded units in (shard, metric, system) order: plan_units gives (metric, shard, system); sorted is stable.
    work.sort(key=lambda u: u["shard"][0] if "shard" in u else 0)
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
    """Units packed together: every metric's units of one query shard; an unsharded unit alone."""
    return tuple(unit["shard"]) if "shard" in unit else id(unit)


def job_count(units: Sequence[dict], job_reports: int, tasks: int) -> int:
    """ceil(pending report-metrics / job_reports), rounded up to a multiple of `tasks` when above one."""
    if job_reports < 1:
        raise InvalidInput(f"a judge job must take at least one report, not {job_reports}")
    if tasks < 1:
        raise InvalidInput(f"judging needs at least one parallel task, not {tasks}")
    n_jobs = -(-sum(u["pending"] for u in units) // job_reports)
    return -(-n_jobs // tasks) * tasks if n_jobs > 1 else n_jobs


def plan_judging(engine: Engine, release_id: str, systems: Sequence[str] | None = None,
                 metrics: Sequence[str] | None = None, spec: JudgeSpec = LOCAL_JUDGE,
                 job_reports: int = DEFAULT_JOB_REPORTS, tasks: int = 1,
                 tracks: Sequence[str] | None = None) -> list[dict]:
    """The judge tasks of a run: one dict per job, each listing the (metric, system[, query shard]) units
    it judges; `tasks` is how many run at once (DEEPSCHOLAR_JUDGE_TASKS); `tracks` the evaluation tracks judged
    besides the core when no metrics are named (default DEEPSCHOLAR_TRACKS). Refreshes the judged tables'
    statistics first (refresh_judging_statistics)."""
    from deepscholar.evaluation.metrics import get_metric

    refresh_judging_statistics(engine)
    units = plan_units(engine, release_id, systems, metrics, spec, tracks=tracks)
    jobs = job_count(units, job_reports, tasks)
    if jobs > 1:  # only then are jobs balanced by cost: the month's questions per report are sampled
        units = plan_units(engine, release_id, systems, metrics, spec, shards=SHARDS_PER_JOB * jobs, tracks=tracks)
        calls = {name: _sampled_calls_per_report(engine, release_id, get_metric(name), spec.config_id)
                 for name in dict.fromkeys(u["metric"] for u in units if u["pending"])}
        units = [{**u, "calls": calls[u["metric"]]} if u["metric"] in calls else u for u in units]
    keys = ("metric", "system_id", "shard")
    return [{"release_id": release_id, "units": [{k: u[k] for k in keys if k in u} for u in job],
             "reports": sum(u["pending"] for u in job)}
            for job in pack_jobs(units, job_reports, tasks)]
