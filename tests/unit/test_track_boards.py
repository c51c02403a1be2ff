"""A track's board and the agreement between boards, on hand-made scores whose answers are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from deepscholar.evaluation.boards.leaderboard import format_leaderboard
from deepscholar.evaluation.boards.rank_agreement import (
    competition_ranks,
    format_agreement,
    in_registry_order,
    rank_agreement,
)
from deepscholar.evaluation.boards.rollup import bootstrap_intervals, compute_leaderboard, headline_values
from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.metrics.base import JudgeFreeMetric

# ------------------------------------------------------------------------------------------ agreement

def test_reversed_boards_have_tau_minus_one_and_name_the_systems_that_moved():
    (pair,) = rank_agreement({"core": {"a": .9, "b": .5, "c": .1}, "toy": {"a": .2, "b": .6, "c": .8}})
    assert (pair["family_a"], pair["family_b"], pair["n_systems"]) == ("core", "toy", 3)
    assert pair["kendall_tau"] == pytest.approx(-1.0)
    assert [(m["system_id"], m["rank_a"], m["rank_b"], m["shift"]) for m in pair["movers"]] == [
        ("a", 1, 3, 2), ("c", 3, 1, -2)]


def test_one_swapped_pair_of_four_gives_tau_two_thirds():
    # Orders 1 2 3 4 and 1 3 2 4: 5 concordant pairs, 1 discordant, of 6 -> (5 - 1) / 6.
    (pair,) = rank_agreement({"core": {"w": .9, "x": .8, "y": .7, "z": .6},
                              "toy": {"w": .9, "x": .7, "y": .8, "z": .6}})
    assert pair["kendall_tau"] == pytest.approx(2 / 3)
    assert {m["system_id"] for m in pair["movers"]} == {"x", "y"}


def test_the_reference_system_and_unranked_systems_are_left_out():
    boards = {"core": {"human": 1.0, "a": .8, "b": .4, "c": None},
              "toy": {"human": .5, "a": .9, "b": .3, "c": .7, "d": .6}}
    (pair,) = rank_agreement(boards, reference_systems={"human"})
    assert pair["n_systems"] == 2 and pair["kendall_tau"] == pytest.approx(1.0) and pair["movers"] == []


def test_too_few_systems_or_no_spread_gives_no_tau():
    (one,) = rank_agreement({"core": {"a": .5}, "toy": {"a": .7}})
    assert one["n_systems"] == 1 and one["kendall_tau"] is None and one["p_value"] is None
    (flat,) = rank_agreement({"core": {"a": .5, "b": .5}, "toy": {"a": .7, "b": .1}})
    assert flat["kendall_tau"] is None


def test_every_pair_of_three_families_is_compared_once_in_registry_order():
    boards = {"zeta": {"a": 1, "b": 2}, "core": {"a": 2, "b": 1}, "reportbench": {"a": 1, "b": 2}}
    pairs = [(p["family_a"], p["family_b"]) for p in rank_agreement(boards)]
    assert sorted(pairs) == [("core", "reportbench"), ("core", "zeta"), ("reportbench", "zeta")]
    assert len(set(pairs)) == 3


def test_competition_ranks_share_ties_and_put_missing_values_last():
    assert competition_ranks([.3, .5, None, .3, 0.0]) == [2, 1, 5, 2, 4]


def test_the_agreement_table_reads_as_text_and_markdown():
    rows = [{"release_id": "2025-06", "judge_config": "local:x:1", "month": None, **p}
            for p in rank_agreement({"core": {"a": .9, "b": .5}, "reportbench": {"a": .1, "b": .5}})]
    table = format_agreement(rows)
    assert "DeepScholar-Bench" in table and "ReportBench" in table and "-1.00" in table and "a 1→2" in table
    assert format_agreement(rows, "markdown").count("|") > 10
    assert "no agreement rows" in format_agreement([])


# ------------------------------------------------------------------------------------- a track's board

def test_a_count_metric_keeps_its_interval_above_one_and_a_fraction_is_clipped():
    values = np.array([[3.0, 1.0], [5.0, 1.0], [9.0, 1.0]])
    ci, _ = bootstrap_intervals(values, seed=0, n_boot=200, bounded=[False, True])
    assert ci[0, 1] > 1.0 and ci[0, 0] >= 3.0
    assert ci[1, 0] == ci[1, 1] == 1.0
    clipped, _ = bootstrap_intervals(values, seed=0, n_boot=200)
    assert clipped[0, 1] == 1.0  # a metric declared a fraction is held to [0, 1]


class _Toy(JudgeFreeMetric):
    dimension = "toy_dimension"
    headline = "score"

    def __init__(self, name: str, position: int, bounded: bool = True) -> None:
        self.name, self.position, self.label, self.bounded = name, position, name.title(), bounded

    def score(self, report, judgments):  # pragma: no cover - the board reads stored scores only
        raise AssertionError


TOY = registry.Family("toy", "Toy", 99, ranking_metric="toy_fraction")


@pytest.fixture
def toy_track():
    with registry.registered_family(TOY, [registry.Dimension("toy_dimension", "Toy dim", "toy", 1)]), \
            registry.registered(_Toy("toy_count", 1, bounded=False)), registry.registered(_Toy("toy_fraction", 2)):
        yield


def test_the_metric_listing_is_kept_and_follows_a_family_declared_and_removed():
    """The registry sorts its listing once per change (a page asks for it hundreds of times); a family or a
    metric declared or removed shows at the next call."""
    registry.metric_names()  # the first call may discover the metrics, which is a change
    before = registry.metric_names()
    assert registry.metric_names() is before
    with registry.registered_family(TOY, [registry.Dimension("toy_dimension", "Toy dim", "toy", 1)]):
        with registry.registered(_Toy("toy_fraction", 2)), registry.registered(_Toy("toy_count", 1, bounded=False)):
            assert registry.metric_names() == (*before, "toy_count", "toy_fraction")
            assert registry.metric_names("toy") == ("toy_count", "toy_fraction")
        assert registry.metric_names("toy") == ()
    assert registry.metric_names() == before


def _frame(values: dict[str, list[tuple[float | None, float | None]]]) -> pd.DataFrame:
    rows = []
    for system, per_query in values.items():
        for qi, (count, fraction) in enumerate(per_query):
            rows += [{"system_id": system, "arxiv_id": f"q{qi}", "metric": "toy_count", "value": count,
                      "metric_version": "d1"},
                     {"system_id": system, "arxiv_id": f"q{qi}", "metric": "toy_fraction", "value": fraction,
                      "metric_version": "d1"},
                     {"system_id": system, "arxiv_id": f"q{qi}", "metric": "organization", "value": .5,
                      "metric_version": "d1"}]
    return pd.DataFrame(rows)


def test_a_tracks_board_ranks_by_its_ranking_metric_not_by_a_geometric_mean(toy_track):
    frame = _frame({"human": [(2.0, .5)] * 4,
                    "many": [(9.0, .2), (7.0, .3), (8.0, .1), (6.0, .2)],  # most citations, least accurate
                    "exact": [(2.0, .9), (1.0, 1.0), (3.0, .8), (2.0, .9)],
                    "gaps": [(1.0, None), (2.0, .6), (1.0, .7), (0.0, .5)]})
    counts = {s: (4, 0) for s in ("human", "many", "exact", "gaps")}
    rows, details = compute_leaderboard(frame, family="toy", release_id="2025-06", judge_config="local",
                                        n_queries=4, report_counts=counts, n_boot=200, reference_systems={"human"})
    assert [(r["system_id"], r["rank"]) for r in rows] == [("exact", 1), ("gaps", 2), ("human", 3), ("many", 4)]
    assert all("geometric_mean" not in r and r["family"] == "toy" and r["ranking_metric"] == "toy_fraction"
               for r in rows)
    by = {(d["system_id"], d["metric"]): d for d in details}
    assert {d["metric"] for d in details} == {"toy_count", "toy_fraction"}  # the core's rows are not this board's
    assert by[("gaps", "toy_fraction")]["mean"] == pytest.approx(.6) and by[("gaps", "toy_fraction")]["n_unscored"] == 1
    assert by[("many", "toy_count")]["mean"] == pytest.approx(7.5) and by[("many", "toy_count")]["is_best"]
    assert by[("many", "toy_count")]["ci_high"] > 1.0  # a count is not clipped to [0, 1]
    assert by[("exact", "toy_fraction")]["is_best"] and not by[("human", "toy_fraction")]["is_best"]
    assert headline_values("toy", rows) == {r["system_id"]: r["toy_fraction"] for r in rows}

    shown = format_leaderboard([{**r, "system_kind": None, "metrics": {
        d["metric"]: d for d in details if d["system_id"] == r["system_id"]}} for r in rows], "table")
    assert shown.startswith("Toy track 2025-06 · judge local (offline local judge, not an LLM)")
    assert "ranked by Toy_Fraction" in shown and "Toy_Count: a count per report" in shown
    assert "Geo mean" not in shown and "7.500" in shown


def test_a_track_without_a_declared_ranking_metric_ranks_by_its_first_and_a_bad_one_is_refused():
    odd = registry.Family("odd", "Odd", 98, ranking_metric="no_such_metric")
    with registry.registered_family(odd, [registry.Dimension("odd_dimension", "Odd dim", "odd", 1)]):
        metric = _Toy("odd_one", 1)
        metric.dimension = "odd_dimension"
        with registry.registered(metric):
            with pytest.raises(Exception, match="ranks by 'no_such_metric', which is not one of its registered"):
                registry.ranking_metric("odd")
    plain = registry.Family("plain", "Plain", 97)
    with registry.registered_family(plain, [registry.Dimension("plain_dimension", "Plain dim", "plain", 1)]):
        metric = _Toy("plain_one", 1)
        metric.dimension = "plain_dimension"
        with registry.registered(metric):
            assert registry.ranking_metric("plain") == "plain_one"
    assert registry.ranking_metric(registry.CORE) is None


def test_readers_see_the_pair_with_the_earlier_family_first_and_the_moves_turned_round():
    (stored,) = rank_agreement({"core": {"a": .9, "b": .5, "c": .1}, "claims": {"a": .2, "b": .6, "c": .8}})
    assert (stored["family_a"], stored["family_b"]) == ("claims", "core")  # stored by name
    (shown,) = in_registry_order([stored])
    assert (shown["family_a"], shown["family_b"]) == ("core", "claims")
    assert [(m["system_id"], m["rank_a"], m["rank_b"], m["shift"]) for m in shown["movers"]] == [
        ("a", 1, 3, 2), ("c", 3, 1, -2)]
    assert shown["kendall_tau"] == stored["kendall_tau"]
