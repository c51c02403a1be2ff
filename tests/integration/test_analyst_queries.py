"""Every example query of sql/queries/analyst_examples.sql runs on a small three-month board and answers right.

A query added to the file without an expectation here fails test_every_query_has_an_expectation.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from test_leaderboard import JUDGE, Board

from deepscholar.evaluation.boards.leaderboard import analyst_queries
from deepscholar.evaluation.boards.rollup import roll_up
from deepscholar.evaluation.metrics import registry

pytestmark = pytest.mark.slow  # seeds a month of boards per test

METRIC_ORDER = registry.metric_names(registry.CORE)  # the core seven, in leaderboard order
HEADLINE_VARIANT = {m.name: m.headline for m in registry.metrics(registry.CORE)}

MONTHS = ["2025-01", "2025-02", "2025-03"]
# Per month, each system's base score; every metric and query is the base plus a small varying offset.
BASES = {
    "2025-01": {"lead": 0.8, "mid": 0.5, "tail": 0.3},
    "2025-02": {"lead": 0.6, "mid": 0.7, "tail": 0.3},  # mid overtakes lead
    "2025-03": {"lead": 0.8, "mid": 0.5, "tail": 0.55},  # tail climbs past mid; lead is back
}
N_QUERIES = 6
CATEGORIES = ("cs.CL", "cs.IR")


def _score(base: float, qi: int, mi: int, system: str) -> float:
    salt = {"lead": 0, "mid": 1, "tail": 2}[system]
    return round(base + 0.03 * ((qi * 5 + mi * 3 + salt) % 4 - 1.5), 4)


@pytest.fixture
def history(engine):
    return seed_history(engine)


def seed_history(engine):
    """Three months of boards of three systems (BASES), their queries split over two categories."""
    with engine.begin() as conn:
        b = Board(conn)
        for s in ("lead", "mid", "tail"):
            b.system(s)
        for month in MONTHS:
            ids = b.release(month, N_QUERIES)
            # Their papers: even queries cs.CL, odd ones cs.IR (the category views read papers.primary_category).
            conn.execute(sa.text("""
                INSERT INTO papers (arxiv_id, version, title, primary_category) VALUES (:a, 1, :a, :c)"""),
                [{"a": a, "c": CATEGORIES[i % 2]} for i, a in enumerate(ids)])
            for s, base in BASES[month].items():
                for qi, a in enumerate(ids):
                    if month == "2025-03" and s == "tail" and qi == 0:
                        b.report(month, s, a, status="system_error")
                        continue
                    values = {m: _score(base, qi, mi, s) for mi, m in enumerate(METRIC_ORDER)}
                    if month == "2025-03" and s == "tail" and qi == 1:
                        values["citation_precision"] = None  # the judge failed on this one
                    if month == "2025-03" and s == "tail" and qi == 2:
                        values.pop("claim_coverage")  # not judged yet
                    b.scores(b.report(month, s, a), values)
    for month in MONTHS:
        roll_up(engine, month, JUDGE, n_boot=100)
    return engine


PARAMS = {"judge_config": JUDGE, "release_id": "2025-03", "system_id": "tail", "metric": "citation_precision",
          "window_from": "2025-01-01", "window_to": "2025-02-28"}


def _run(engine, name: str) -> list[dict]:
    query = analyst_queries()[name]
    assert set(query.params) <= set(PARAMS), query.params
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(query.sql), {p: PARAMS[p] for p in query.params}).mappings()]


def check_month_leaderboard(rows):
    assert [(r["rank"], r["system_id"]) for r in rows] == [(1, "lead"), (2, "tail"), (3, "mid")]
    assert rows[1]["n_reports"] == 5 and rows[1]["n_failed"] == 1 and rows[1]["n_queries"] == N_QUERIES
    assert rows[0]["gm_ci_low"] <= rows[0]["geometric_mean"] <= rows[0]["gm_ci_high"]


def check_best_system_per_metric_over_time(rows):
    assert len(rows) == len(MONTHS) * len(METRIC_ORDER)  # one clear winner per month and metric
    by_month = {m: {r["best_system"] for r in rows if r["release_id"] == m} for m in MONTHS}
    assert by_month == {"2025-01": {"lead"}, "2025-02": {"mid"}, "2025-03": {"lead"}}
    assert [r["metric"] for r in rows[:7]] == list(METRIC_ORDER)
    assert all(r["significant"] and r["p_value"] < 0.05 for r in rows)
    assert {r["runner_up"] for r in rows if r["release_id"] == "2025-02"} == {"lead"}


def check_system_trend(rows):
    assert [r["release_id"] for r in rows] == MONTHS
    assert [r["rank"] for r in rows] == [3, 3, 2]
    assert [r["rank_change"] for r in rows] == [None, 0, -1]
    assert rows[2]["n_reports"] == 5
    assert float(rows[1]["geometric_mean_change"]) == pytest.approx(0.0, abs=0.002)
    assert float(rows[2]["geometric_mean_change"]) == pytest.approx(0.25, abs=0.01)


def check_per_query_breakdown(rows):
    assert len(rows) == N_QUERIES
    outcome = {r["arxiv_id"]: r["outcome"] for r in rows}
    assert outcome["2503.00001"] == "system error"
    assert outcome["2503.00002"] == "unscored"
    assert sum(o == "scored" for o in outcome.values()) == 4
    unscored = next(r for r in rows if r["outcome"] == "unscored")
    assert unscored["value"] is None and "unparseable" in unscored["unscored_reason"]
    scored = [r["value"] for r in rows if r["outcome"] == "scored"]
    assert scored == sorted(scored) and all(0 <= v <= 1 for v in scored)
    assert {r["metric_version"] for r in rows if r["outcome"] == "scored"} == {"d1+citation_precision_v1"}


def check_rank_movers(rows):
    moves = {(r["system_id"], r["release_id"]): r["places_gained"] for r in rows}
    assert moves == {("lead", "2025-02"): -1, ("mid", "2025-02"): 1, ("tail", "2025-02"): 0,
                     ("lead", "2025-03"): 1, ("mid", "2025-03"): -2, ("tail", "2025-03"): 1}
    assert abs(rows[0]["places_gained"]) == 2


def check_unscored_share(rows):
    assert [(r["system_id"], r["metric"], r["n"], r["n_unscored"]) for r in rows] == [
        ("tail", "citation_precision", 4, 1)]
    assert float(rows[0]["unscored_share"]) == 0.2


def _expected_mean(months, system: str, metric: str, queries=range(N_QUERIES)) -> float:
    mi = METRIC_ORDER.index(metric)
    values = [_score(BASES[m][system], qi, mi, system) for m in months for qi in queries]
    return sum(values) / len(values)


def check_pooled_window(rows):
    # January and February pooled: every query of both months once, 12 per system and metric.
    assert len(rows) == 3 * len(METRIC_ORDER)
    assert {(r["n"], r["n_unscored"], r["n_months"]) for r in rows} == {(2 * N_QUERIES, 0, 2)}
    for r in rows:
        expected = _expected_mean(MONTHS[:2], r["system_id"], r["metric"])
        assert float(r["mean"]) == pytest.approx(expected, abs=5e-5), r


def check_category_means(rows):
    assert {r["primary_category"] for r in rows} == set(CATEGORIES)
    lead = {(r["primary_category"], r["metric"]): r for r in rows if r["system_id"] == "lead"}
    for i, category in enumerate(CATEGORIES):
        got = lead[(category, "organization")]
        assert got["n"] == N_QUERIES // 2
        expected = _expected_mean(["2025-03"], "lead", "organization", range(i, N_QUERIES, 2))
        assert float(got["mean"]) == pytest.approx(expected, abs=5e-5)
    # tail's citation precision in March: one query unscored (cs.IR, its second query), one system error.
    tail = {(r["primary_category"]): r["n"] for r in rows
            if r["system_id"] == "tail" and r["metric"] == "citation_precision"}
    assert tail == {"cs.CL": 2, "cs.IR": 2}


EXPECTATIONS = {
    "month-leaderboard": check_month_leaderboard,
    "best-system-per-metric-over-time": check_best_system_per_metric_over_time,
    "system-trend": check_system_trend,
    "per-query-breakdown": check_per_query_breakdown,
    "rank-movers": check_rank_movers,
    "unscored-share": check_unscored_share,
    "pooled-window": check_pooled_window,
    "category-means": check_category_means,
}


def test_every_query_has_a_description_and_an_expectation():
    queries = analyst_queries()
    assert set(queries) == set(EXPECTATIONS)
    for q in queries.values():
        assert q.description and not q.description.startswith("--")
        assert q.sql.lstrip().upper().startswith(("SELECT", "WITH"))


@pytest.mark.parametrize("name", list(EXPECTATIONS))
def test_analyst_query(history, name):
    EXPECTATIONS[name](_run(history, name))


def test_the_fixture_is_what_the_queries_assume(history):
    """Guards the expectations above: the unjudged claim coverage and the headline variants."""
    with history.connect() as conn:
        n = conn.execute(sa.text("""SELECT n, n_unscored FROM leaderboard_metrics WHERE release_id = '2025-03'
                                    AND system_id = 'tail' AND metric = 'claim_coverage'""")).one()
        variants = dict(conn.execute(sa.text("SELECT DISTINCT metric, variant FROM leaderboard_metrics")).all())
    assert tuple(n) == (4, 0)  # 5 ok reports, one never judged: neither scored nor unscored
    assert variants == HEADLINE_VARIANT
