"""Spreading (metric, system) units over judge tasks: equal work, full waves, nothing lost or doubled."""

from __future__ import annotations

import pytest

from deepscholar.errors import InvalidInput
from deepscholar.evaluation.judging.jobs import pack_jobs, unit_cost


def _units(*sizes: int) -> list[dict]:
    return [{"metric": f"m{i}", "system_id": "s", "pending": n} for i, n in enumerate(sizes)]


def _pending(job: list[dict]) -> int:
    return sum(u["pending"] for u in job)


def _by_pending(unit: dict) -> float:
    return float(unit["pending"])


def test_a_month_that_fits_one_job_is_one_task():
    jobs = pack_jobs(_units(100, 150, 100, 50), job_reports=400, tasks=4, cost=_by_pending)
    assert [sorted(u["pending"] for u in job) for job in jobs] == [[50, 100, 100, 150]]


def test_more_work_makes_full_waves_of_equal_jobs_keeping_the_order():
    sizes = (200,) * 20 + (30, 70, 120, 5)
    units = _units(*sizes)
    jobs = pack_jobs(units, job_reports=1000, tasks=4, cost=_by_pending)
    # 4,225 report-metrics at 1,000 a job: 5 jobs, rounded up to a full second wave of 4.
    assert len(jobs) == 8
    loads = [_pending(job) for job in jobs]
    # Consecutive cuts of equal share: no job is further from the mean than the largest unit.
    assert max(abs(load - 4225 / 8) for load in loads) <= 200
    # Every unit once, in the order given (one metric's systems stay together).
    assert [u["metric"] for job in jobs for u in job] == [u["metric"] for u in units]


def test_units_with_nothing_pending_make_no_task_and_every_other_unit_is_kept_once():
    units = _units(0, 5, 0, 7, 3)
    jobs = pack_jobs(units, job_reports=8, tasks=2, cost=_by_pending)
    flat = sorted(u["metric"] for job in jobs for u in job)
    assert flat == ["m1", "m3", "m4"] and pack_jobs(_units(0, 0)) == []
    assert len(jobs) == 2  # 15 pending at 8 a job: 2 jobs, already a full wave of 2


def test_never_more_jobs_than_units():
    assert len(pack_jobs(_units(5000), job_reports=100, tasks=4, cost=_by_pending)) == 1


def test_cost_weighs_a_metric_by_its_calls_per_report():
    # Claim coverage asks about a dozen questions per report, organization two; judge-free metrics none.
    claims = unit_cost({"metric": "claim_coverage", "system_id": "s", "pending": 100})
    organization = unit_cost({"metric": "organization", "system_id": "s", "pending": 100})
    free = unit_cost({"metric": "reference_coverage", "system_id": "s", "pending": 100})
    assert claims > 4 * organization > 4 * free > 0


def test_a_job_size_or_task_count_below_one_is_refused():
    with pytest.raises(InvalidInput, match="at least one report"):
        pack_jobs(_units(1), job_reports=0)
    with pytest.raises(InvalidInput, match="at least one parallel task"):
        pack_jobs(_units(1), tasks=0)


def test_a_query_shard_goes_whole_to_one_job_with_every_metric_and_system():
    """Units in plan_units' sharded order (metric, shard, system): each job gets whole query shards, every
    metric's and every system's units of them, so questions shared by a query's reports are asked by one
    task, and every job gets the same mix of metrics (a job of one metric's shards is bounded by its
    own concurrency when that metric asks many questions)."""
    units = [{"metric": m, "system_id": f"s{i}", "pending": 25, "shard": [k, 4]}
             for m in ("m1", "m2") for k in range(4) for i in range(5)]
    jobs = pack_jobs(units, job_reports=250, tasks=4, cost=_by_pending)
    assert len(jobs) == 4
    shards = [{u["shard"][0] for u in job} for job in jobs]
    assert all(len(s) == 1 for s in shards) and len(set().union(*shards)) == 4
    for job in jobs:
        assert sorted((u["metric"], u["system_id"]) for u in job) == [
            (m, f"s{i}") for m in ("m1", "m2") for i in range(5)]
        # (metric, system) order within the shard, as plan_units listed them
        assert [u["metric"] for u in job] == ["m1"] * 5 + ["m2"] * 5


def test_a_query_shard_is_never_split_between_jobs():
    """Whatever the sizes, a shard's units (all metrics) land in one job: split, two tasks at once would
    both pay for the questions its queries share."""
    import random

    rng = random.Random(7)
    units = [{"metric": m, "system_id": f"s{i}", "pending": rng.randint(1, 60), "shard": [k, 12]}
             for m in ("m1", "m2", "m3") for k in range(12) for i in range(rng.randint(1, 9))]
    jobs = pack_jobs(units, job_reports=300, tasks=4, cost=_by_pending)
    assert len(jobs) > 4
    where = {}
    for index, job in enumerate(jobs):
        for u in job:
            where.setdefault(u["shard"][0], set()).add(index)
    assert all(len(found) == 1 for found in where.values()), where
    assert sorted(map(id, (u for job in jobs for u in job))) == sorted(map(id, units))


def test_reports_equal_to_an_earlier_one_cost_their_storing_not_their_questions():
    # 20 systems writing one report per query: the task asks the questions once (runner.content_key).
    copies = unit_cost({"metric": "claim_coverage", "system_id": "s", "pending": 100, "distinct": 5, "calls": 4.0})
    distinct = unit_cost({"metric": "claim_coverage", "system_id": "s", "pending": 100, "distinct": 100, "calls": 4.0})
    assert 100 <= copies < distinct / 4
    # The month's own questions per report, sampled at planning, outweigh the metric's static guess.
    fewer = unit_cost({"metric": "claim_coverage", "system_id": "s", "pending": 100, "distinct": 100, "calls": 1.0})
    assert fewer < distinct
