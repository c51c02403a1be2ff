"""Packing (metric, system) units into judge tasks: sizes respected, order kept, nothing lost."""

from __future__ import annotations

import pytest

from deepscholar.errors import InvalidInput
from deepscholar.evaluation.jobs import pack_jobs


def _units(*sizes: int) -> list[dict]:
    return [{"metric": f"m{i}", "system_id": "s", "pending": n} for i, n in enumerate(sizes)]


def test_small_units_share_a_job_up_to_the_size_and_a_large_one_stands_alone():
    jobs = pack_jobs(_units(100, 150, 100, 900, 50, 60), job_reports=400)
    assert [[u["pending"] for u in job] for job in jobs] == [[100, 150, 100], [900], [50, 60]]


def test_units_with_nothing_pending_make_no_task_and_every_other_unit_is_kept_once():
    units = _units(0, 5, 0, 7, 3)
    jobs = pack_jobs(units, job_reports=8)
    flat = [u["metric"] for job in jobs for u in job]
    assert flat == ["m1", "m3", "m4"] and pack_jobs(_units(0, 0)) == []
    assert all(sum(u["pending"] for u in job) <= 8 or len(job) == 1 for job in jobs)


def test_a_job_size_below_one_is_refused():
    with pytest.raises(InvalidInput, match="at least one report"):
        pack_jobs(_units(1), job_reports=0)
