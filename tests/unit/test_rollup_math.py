"""The roll-up's math without a database: means, geometric mean, bootstrap, significance, ranks."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from deepscholar.evaluation.boards.rollup import (
    _resample_counts,
    bootstrap_intervals,
    compute_leaderboard,
    geometric_mean,
    geometric_means,
    paired_test,
    rank_by_geometric_mean,
    summarize_metric,
)
from deepscholar.evaluation.metrics import registry

METRIC_ORDER = registry.metric_names(registry.CORE)  # the core seven, in leaderboard order

# METRICS.md, the paper's Table 2: seven means in METRIC_ORDER and the published geometric mean.
TABLE_2 = {
    "OpenAI DeepResearch": ((.857, .392, .629, .187, .124, .399, .138), .309),
    "DeepScholar-ref (GPT-4.1)": ((.809, .348, .590, .166, .008, .788, .899), .285),
    "Search Agent (o3)": ((.849, .348, .610, .165, .026, .425, .495), .287),
}


@pytest.mark.parametrize("system", list(TABLE_2))
def test_table_2_geometric_means_recompute(system):
    means, published = TABLE_2[system]
    gm = geometric_mean(means)
    # The table prints its inputs rounded to 3 decimals, and the geometric mean is monotone in each, so
    # the true value lies between the geometric means of the inputs at their lower and upper rounding
    # bounds. The published figure must sit in that box; DeepScholar-ref's .008 makes it ±.003 wide.
    low, high = geometric_mean([m - 5e-4 for m in means]), geometric_mean([m + 5e-4 for m in means])
    assert low <= published <= high
    assert abs(gm - published) < 1.5e-3
    if system == "OpenAI DeepResearch":
        assert round(gm, 3) == published  # no input below .1: the rounding noise stays in the 4th decimal


def test_table_2_geometric_means_print_as_the_paper_prints_them():
    """The paper's table truncates: .30913 → .309, .28593 → .285, .28758 → .287 (rounding would give .286, .288)."""
    from deepscholar.evaluation.boards.leaderboard import format_score

    printed = [format_score(geometric_mean(TABLE_2[s][0]), leading_zero=False) for s in TABLE_2]
    assert printed == [".309", ".285", ".287"]
    assert [round(geometric_mean(TABLE_2[s][0]), 3) for s in TABLE_2] == [.309, .286, .288]
    assert format_score(0.3) == "0.300" and format_score(0.29949) == "0.299" and format_score(None) == "n/a"


def test_zero_mean_gives_zero_and_missing_gives_none():
    assert geometric_mean([.5, .4, 0.0, .9, .2, .3, .7]) == 0.0
    assert geometric_mean([.5, .4, None, .9, .2, .3, .7]) is None
    assert geometric_mean([.5, .4, 0.0, .9, None, .3, .7]) is None  # unknown beats zero: we cannot say
    rows = geometric_means(np.array([[.5, .5], [0.0, .8], [np.nan, .3], [.25, 1.0]]))
    assert rows[0] == pytest.approx(.5) and rows[1] == 0.0 and np.isnan(rows[2]) and rows[3] == pytest.approx(.5)


def test_unscored_queries_are_out_of_the_mean_and_counted():
    s = summarize_metric([1.0, None, 0.5, np.nan, 0.0])
    assert s.mean == pytest.approx(0.5) and s.n == 3 and s.n_unscored == 2
    nothing = summarize_metric([None, None])
    assert nothing.mean is None and nothing.n == 0 and nothing.n_unscored == 2


def test_bootstrap_is_seeded_and_brackets_the_mean():
    rng = np.random.default_rng(7)
    values = rng.uniform(0.2, 0.9, size=(40, 3))
    values[3, 1] = np.nan  # an unscored query
    a_ci, a_gm = bootstrap_intervals(values, seed=1, n_boot=500)
    b_ci, b_gm = bootstrap_intervals(values, seed=1, n_boot=500)
    c_ci, c_gm = bootstrap_intervals(values, seed=2, n_boot=500)
    np.testing.assert_array_equal(a_ci, b_ci)
    np.testing.assert_array_equal(a_gm, b_gm)
    assert not np.array_equal(a_ci, c_ci) and not np.array_equal(a_gm, c_gm)
    means = np.nanmean(values, axis=0)
    assert (a_ci[:, 0] < means).all() and (means < a_ci[:, 1]).all()
    gm = geometric_mean(means)
    assert a_gm[0] < gm < a_gm[1]
    assert (a_ci[:, 1] - a_ci[:, 0] < 0.2).all()  # 40 queries: a real interval, not [0, 1]


def test_a_systems_interval_does_not_depend_on_the_systems_bootstrapped_before_it():
    """Systems with the same number of queries share one resample-count matrix: the interval must be the
    same whichever systems came first, and no caller can change the shared counts."""
    rng = np.random.default_rng(3)
    first, second, other = (rng.uniform(0.1, 0.9, size=(n, 4)) for n in (60, 60, 35))
    _resample_counts.cache_clear()
    alone = bootstrap_intervals(second, seed=5, n_boot=300)
    _resample_counts.cache_clear()
    for values in (first, other, first):
        bootstrap_intervals(values, seed=5, n_boot=300)
    after_others = bootstrap_intervals(second, seed=5, n_boot=300)
    np.testing.assert_array_equal(alone[0], after_others[0])
    np.testing.assert_array_equal(alone[1], after_others[1])
    with pytest.raises(ValueError, match="read-only"):
        _resample_counts(5, 60, 300)[0, 0] = 99.0


def test_bootstrap_of_a_metric_never_scored_is_nan():
    values = np.array([[.5, np.nan], [.7, np.nan]])
    ci, gm_ci = bootstrap_intervals(values, seed=0, n_boot=50)
    assert np.isnan(ci[1]).all() and np.isnan(gm_ci).all()
    assert not np.isnan(ci[0]).any()


def _pairs(a, b):
    keys = [f"q{i}" for i in range(len(a))]
    return dict(zip(keys, a, strict=True)), dict(zip(keys, b, strict=True))


def test_t_test_marks_significance_only_below_005():
    rng = np.random.default_rng(3)
    base = rng.uniform(.3, .6, 30)
    clear_a, clear_b = _pairs(base + .1 + rng.normal(0, .02, 30), base)
    clear = paired_test(clear_a, clear_b)
    assert clear.p_value < .05 and clear.significant and clear.n_pairs == 30

    noisy_a, noisy_b = _pairs(base + .005 + rng.normal(0, .1, 30), base)
    noisy = paired_test(noisy_a, noisy_b)
    assert noisy.p_value >= .05 and not noisy.significant


def test_t_test_degenerate_cases_are_not_significant():
    assert paired_test({"q1": .9}, {"q1": .1}).significant is False  # one pair
    # Only the queries both scored count: q2 and q3 are missing on one side.
    few = paired_test({"q1": .9, "q2": .8, "q3": None}, {"q1": .1, "q3": .2})
    assert few.n_pairs == 1 and few.p_value is None and not few.significant
    const = paired_test({"q1": .9, "q2": .8, "q3": .7}, {"q1": .8, "q2": .7, "q3": .6})  # diff always .1
    assert const.p_value is None and not const.significant
    # Worse on the shared queries though better on its own mean: never "significantly better".
    behind = paired_test({f"q{i}": .1 + .01 * (i % 2) for i in range(10)},
                         {f"q{i}": .5 + .02 * (i % 3) for i in range(10)})
    assert behind.p_value < .05 and not behind.significant


def test_ranks_share_ties_and_put_missing_last():
    assert rank_by_geometric_mean([.3, .5, None, .3, 0.0]) == [2, 1, 5, 2, 4]


def _scores(spec: dict[str, list[list[float | None]]]) -> pd.DataFrame:
    rows = []
    for system, queries in spec.items():
        for qi, values in enumerate(queries):
            for m, v in zip(METRIC_ORDER, values, strict=True):
                rows.append({"system_id": system, "arxiv_id": f"2501.{qi:05d}", "metric": m, "value": v,
                             "metric_version": "d1"})
    return pd.DataFrame(rows)


def test_compute_leaderboard_end_to_end_without_a_database():
    rng = np.random.default_rng(11)
    good = np.clip(rng.uniform(.5, .9, (20, 7)), 0, 1)
    weak = np.clip(good - .3 + rng.normal(0, .02, (20, 7)), 0, 1)
    zero = good.copy()
    zero[:, 4] = 0.0  # never retrieves an important document
    good_rows = good.tolist()
    good_rows[0][2] = None  # one unscored relevance judgment
    frame = _scores({"good": good_rows, "weak": weak.tolist(), "zero": zero.tolist()})
    rows, details = compute_leaderboard(frame, release_id="2025-01", judge_config="local", n_queries=25,
                                        report_counts={"good": (20, 1), "weak": (20, 0), "zero": (20, 0)},
                                        seed=0, n_boot=200)
    assert [r["system_id"] for r in rows] == ["good", "weak", "zero"]
    assert [r["rank"] for r in rows] == [1, 2, 3]
    assert rows[2]["geometric_mean"] == 0.0 and rows[2]["document_importance"] == 0.0
    assert rows[0]["n_failed"] == 1 and rows[0]["n_queries"] == 25
    rr = next(d for d in details if d["system_id"] == "good" and d["metric"] == "relevance_rate")
    assert rr["n"] == 19 and rr["n_unscored"] == 1
    assert rr["mean"] == pytest.approx(np.mean(good[1:, 2]))
    # good vs zero tie on most metrics only where zero copied good; on organization good and zero are
    # identical, so the best is shared and nobody is significant there.
    org = {d["system_id"]: d for d in details if d["metric"] == "organization"}
    assert org["good"]["is_best"] and org["zero"]["is_best"] and not org["good"]["significant"]
    di = {d["system_id"]: d for d in details if d["metric"] == "document_importance"}
    assert di["good"]["is_best"] and di["good"]["significant"] and di["good"]["runner_up"] == "weak"
    assert di["good"]["p_value"] < .05 and di["weak"]["p_value"] is None
    # Same inputs, same seed: identical output (what makes a re-run a no-op).
    again = compute_leaderboard(frame, release_id="2025-01", judge_config="local", n_queries=25,
                                report_counts={"good": (20, 1), "weak": (20, 0), "zero": (20, 0)},
                                seed=0, n_boot=200)
    assert again == (rows, details)


def test_the_human_reference_row_is_ranked_but_never_marked_best():
    rng = np.random.default_rng(5)
    system = np.clip(rng.uniform(.4, .8, (12, 7)), 0, 1)
    runner = np.clip(system - .2, 0, 1)
    human = np.ones((12, 7))  # by construction on several metrics: it would win every column
    frame = _scores({"human": human.tolist(), "system": system.tolist(), "runner": runner.tolist()})
    counts = {s: (12, 0) for s in ("human", "system", "runner")}
    rows, details = compute_leaderboard(frame, release_id="2025-01", judge_config="local", n_queries=12,
                                        report_counts=counts, n_boot=100, reference_systems={"human"})
    assert [r["system_id"] for r in rows][0] == "human" and rows[0]["rank"] == 1
    best = {(d["system_id"], d["metric"]) for d in details if d["is_best"]}
    assert best == {("system", m) for m in METRIC_ORDER}
    assert all(d["runner_up"] == "runner" for d in details if d["is_best"])


def test_the_paired_t_test_and_geometric_mean_are_scipy_stats_to_the_bit():
    """paired_t_pvalue and geometric_mean redo scipy.stats.ttest_rel's and gmean's arithmetic so that a cold
    board process does not import scipy.stats; a stored board compares its numbers exactly (a differing last
    bit would open a new board version), so they must be equal, not close."""
    from scipy import stats

    from deepscholar.evaluation.boards.rollup import paired_t_pvalue

    rng = np.random.default_rng(7)
    for trial in range(400):
        n = int(rng.integers(2, 2500))
        a = rng.random(n).round(int(rng.integers(1, 6)))  # scores as stored: a few decimals, many ties
        b = np.clip(a - rng.normal(0.02 * (trial % 5), 0.2, n), 0, 1) if trial % 3 else rng.random(n)
        diff = a - b
        if np.ptp(diff) == 0:
            continue
        assert paired_t_pvalue(diff) == float(stats.ttest_rel(a, b).pvalue), (trial, n)
        means = rng.random(7) + 0.01
        assert geometric_mean(list(means)) == float(stats.gmean(means)), trial
