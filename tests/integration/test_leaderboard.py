"""The roll-up against real Postgres: rows written, re-runs that change nothing, the GX check, views, formats."""

from __future__ import annotations

import csv
import io
import json
import math

import numpy as np
import pytest
import sqlalchemy as sa

from deepscholar.evaluation.boards.leaderboard import format_leaderboard, load_leaderboard
from deepscholar.evaluation.boards.leaderboard_quality import check_leaderboard
from deepscholar.evaluation.boards.rollup import geometric_mean, roll_up
from deepscholar.evaluation.metrics import registry

METRIC_ORDER = registry.metric_names(registry.CORE)  # the core seven, in leaderboard order
HEADLINE_VARIANT = {m.name: m.headline for m in registry.metrics()}

JUDGE = "local:all-MiniLM-L6-v2:v1"
OTHER_JUDGE = "llm:openai/gpt-4o"
VERSION = {m: f"d1+{m}_v1" for m in METRIC_ORDER}


class Board:
    """Minimal rows for a board: releases, queries, systems, reports and their metric_scores."""

    def __init__(self, conn: sa.Connection):
        self.conn = conn

    def release(self, release_id: str, n_queries: int) -> list[str]:
        self.conn.execute(sa.text("INSERT INTO releases (release_id, status) VALUES (:r, 'published')"),
                          {"r": release_id})
        year, month = release_id[2:4], release_id[5:7]
        ids = [f"{year}{month}.{i:05d}" for i in range(1, n_queries + 1)]
        self.conn.execute(sa.text("""
            INSERT INTO release_queries (release_id, arxiv_id, title, abstract, section_raw_latex, section_text,
                                         word_count)
            VALUES (:r, :a, :t, 'abstract', 'x', 'x', 1)"""),
            [{"r": release_id, "a": a, "t": f"Paper {a}"} for a in ids])
        return ids

    def system(self, system_id: str, kind: str = "extractive", active: bool = True) -> None:
        # As `deepscholar systems add` records it: an extractive system writes from no model's training.
        self.conn.execute(sa.text("""
            INSERT INTO systems (system_id, kind, active, model_knowledge) VALUES (:s, :k, :a, :m)
            ON CONFLICT DO NOTHING"""), {"s": system_id, "k": kind, "a": active, "m": kind != "extractive"})

    def report(self, release_id: str, system_id: str, arxiv_id: str, status: str = "ok") -> int:
        return self.conn.execute(sa.text("""
            INSERT INTO reports (release_id, system_id, arxiv_id, status, text, error)
            VALUES (:r, :s, :a, :st, 'text [1]', CASE WHEN :st = 'system_error' THEN 'boom' END)
            RETURNING report_id"""), {"r": release_id, "s": system_id, "a": arxiv_id, "st": status}).scalar_one()

    def scores(self, report_id: int, values: dict[str, float | None], judge: str = JUDGE,
               decoy: float | None = 0.999) -> None:
        """Headline rows, plus a non-headline variant with a decoy value the roll-up must not read."""
        rows = []
        for m, v in values.items():
            rows.append({"id": report_id, "m": m, "j": judge, "v": HEADLINE_VARIANT[m], "ver": VERSION[m],
                         "val": v, "why": None if v is not None else "judge answer unparseable"})
            if m == "nugget_coverage" and decoy is not None:
                rows.append({"id": report_id, "m": m, "j": judge, "v": "all", "ver": VERSION[m],
                             "val": decoy, "why": None})
        self.conn.execute(sa.text("""
            INSERT INTO metric_scores (report_id, metric, judge_config, variant, metric_version, value,
                                       unscored_reason)
            VALUES (:id, :m, :j, :v, :ver, :val, :why)"""), rows)




def shown(x: float) -> str:
    """Three decimals cut, not rounded, as the paper's Table 2 prints them."""
    return f"{math.floor(x * 1000 + 1e-9) / 1000:.3f}"

def _values(base: float, qi: int, salt: int = 0, spread: float = 0.04) -> dict[str, float]:
    """Seven scores around `base`, varying by metric, query and system (`salt`), so paired tests have variance."""
    return {m: round(min(1.0, max(0.0, base + spread * ((qi * 7 + i * 3 + salt * 2) % 5 - 2) + 0.02 * i)), 4)
            for i, m in enumerate(METRIC_ORDER)}


def seed_month(engine, release_id: str = "2025-01", n_queries: int = 8) -> dict:
    """alpha clearly best; beta weaker with one failed report; gamma never finds an important document
    (DI = 0); delta only failed; epsilon scored only by another judge; one unscored relevance for alpha."""
    expected: dict[str, dict[str, list[float | None]]] = {s: {m: [] for m in METRIC_ORDER}
                                                          for s in ("alpha", "beta", "gamma")}
    with engine.begin() as conn:
        b = Board(conn)
        ids = b.release(release_id, n_queries)
        for s in ("alpha", "beta", "gamma", "delta", "epsilon"):
            b.system(s)
        for qi, a in enumerate(ids):
            alpha = _values(0.7, qi)
            if qi == 2:
                alpha["relevance_rate"] = None
            b.scores(b.report(release_id, "alpha", a), alpha)
            if qi == 0:
                b.report(release_id, "beta", a, status="system_error")
            else:
                b.scores(b.report(release_id, "beta", a), _values(0.4, qi, 2))
            gamma = _values(0.55, qi, 1) | {"document_importance": 0.0}
            b.scores(b.report(release_id, "gamma", a), gamma)
            b.report(release_id, "delta", a, status="system_error")
            b.scores(b.report(release_id, "epsilon", a), _values(0.5, qi, 3), judge=OTHER_JUDGE)
            for s, v in (("alpha", alpha), ("gamma", gamma)) + ((("beta", _values(0.4, qi, 2)),) if qi else ()):
                for m in METRIC_ORDER:
                    expected[s][m].append(v[m])
    return {"release_id": release_id, "queries": ids, "expected": expected}


def _snapshot(engine, release_id: str | None = None) -> dict[str, list[tuple]]:
    with engine.connect() as conn:
        where = "" if release_id is None else "WHERE release_id = :r"
        return {t: [tuple(r) for r in conn.execute(sa.text(
            f"SELECT * FROM {t} {where} ORDER BY release_id, system_id, judge_config"
            + (", metric" if t == "leaderboard_metrics" else "")), {"r": release_id})]
            for t in ("leaderboard", "leaderboard_metrics")}


def test_roll_up_writes_the_expected_rows(engine):
    month = seed_month(engine)
    rows = roll_up(engine, month["release_id"], JUDGE, seed=0, n_boot=300)
    assert [r["system_id"] for r in rows] == ["alpha", "beta", "gamma"]  # delta: no ok report; epsilon: other judge
    board = {r["system_id"]: r for r in load_leaderboard(engine, month["release_id"], JUDGE)}
    assert set(board) == {"alpha", "beta", "gamma"}
    assert [board[s]["rank"] for s in ("alpha", "beta", "gamma")] == [1, 2, 3]
    assert (board["alpha"]["n_queries"], board["alpha"]["n_reports"], board["alpha"]["n_failed"]) == (8, 8, 0)
    assert (board["beta"]["n_reports"], board["beta"]["n_failed"]) == (7, 1)
    for s, per_metric in month["expected"].items():
        means = []
        for m in METRIC_ORDER:
            scored = [v for v in per_metric[m] if v is not None]
            assert board[s][m] == pytest.approx(np.mean(scored)), (s, m)
            d = board[s]["metrics"][m]
            assert d["mean"] == pytest.approx(board[s][m]) and d["variant"] == HEADLINE_VARIANT[m]
            assert (d["n"], d["n_unscored"]) == (len(scored), len(per_metric[m]) - len(scored))
            assert d["ci_low"] <= d["mean"] <= d["ci_high"]
            means.append(np.mean(scored))
        assert board[s]["geometric_mean"] == pytest.approx(geometric_mean(means))
        assert board[s]["metric_versions"] == VERSION
    assert board["alpha"]["metrics"]["relevance_rate"]["n_unscored"] == 1
    assert board["alpha"]["nugget_coverage"] < 0.9  # the decoy 'all' variant (.999) was not read
    assert board["gamma"]["geometric_mean"] == 0.0 and board["gamma"]["document_importance"] == 0.0
    alpha = board["alpha"]
    assert alpha["geometric_mean_ci_low"] <= alpha["geometric_mean"] <= alpha["geometric_mean_ci_high"]
    # alpha beats gamma (the runner-up, ~0.1 behind) on every query: best and significant everywhere but DI,
    # where the runner-up is beta.
    for m in METRIC_ORDER:
        d = alpha["metrics"][m]
        assert d["is_best"] and d["significant"] and d["p_value"] < 0.05, m
        assert d["runner_up"] == ("beta" if m == "document_importance" else "gamma")
        assert not board["beta"]["metrics"][m]["is_best"] and board["beta"]["metrics"][m]["p_value"] is None


def test_a_rerun_changes_nothing_and_a_changed_score_changes_only_its_rows(engine):
    month = seed_month(engine)
    r = month["release_id"]
    roll_up(engine, r, JUDGE, n_boot=200)
    before = _snapshot(engine)
    roll_up(engine, r, JUDGE, n_boot=200)
    assert _snapshot(engine) == before  # computed_at included

    with engine.begin() as conn:
        conn.execute(sa.text("""
            UPDATE metric_scores SET value = 0.0 WHERE metric = 'organization' AND variant = 'score'
              AND report_id IN (SELECT report_id FROM reports WHERE system_id = 'beta')"""))
    roll_up(engine, r, JUDGE, n_boot=200)
    after = _snapshot(engine)
    lb_before = {row[1]: row for row in before["leaderboard"]}
    lb_after = {row[1]: row for row in after["leaderboard"]}
    assert lb_after["alpha"] == lb_before["alpha"]  # untouched, computed_at too
    assert lb_after["beta"] != lb_before["beta"]
    board = {x["system_id"]: x for x in load_leaderboard(engine, r, JUDGE)}
    assert board["beta"]["organization"] == 0.0 and board["beta"]["geometric_mean"] == 0.0
    assert board["beta"]["rank"] == 2  # tied with gamma at 0: competition ranks share the place
    assert board["gamma"]["rank"] == 2


def test_systems_that_lose_their_scores_leave_the_board(engine):
    month = seed_month(engine)
    r = month["release_id"]
    roll_up(engine, r, JUDGE, n_boot=100)
    with engine.begin() as conn:
        conn.execute(sa.text("""DELETE FROM metric_scores WHERE report_id IN
                                (SELECT report_id FROM reports WHERE system_id = 'gamma')"""))
    rows = roll_up(engine, r, JUDGE, n_boot=100)
    assert [x["system_id"] for x in rows] == ["alpha", "beta"]
    with engine.connect() as conn:
        left = conn.execute(sa.text("SELECT count(*) FROM leaderboard_metrics WHERE system_id = 'gamma'")).scalar()
    assert left == 0
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM metric_scores"))
    assert roll_up(engine, r, JUDGE) == [] and load_leaderboard(engine, r, JUDGE) == []
    with pytest.raises(LookupError):
        roll_up(engine, "2031-01", JUDGE)


@pytest.mark.slow  # imports Great Expectations
def test_gx_check_passes_on_a_rolled_up_board_and_fails_on_crafted_bad_rows(engine):
    month = seed_month(engine)
    r = month["release_id"]
    roll_up(engine, r, JUDGE, n_boot=100)
    with engine.begin() as conn:  # epsilon has no ok report under JUDGE: make it inactive, as it is not required
        conn.execute(sa.text("UPDATE systems SET active = false WHERE system_id = 'epsilon'"))
    result = check_leaderboard(engine, r, JUDGE)
    assert result.success, result.summary
    assert not result.failed_checks

    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE leaderboard_systems SET n_reports = 99 WHERE system_id = 'beta'"))
        conn.execute(sa.text("UPDATE leaderboard_metrics SET mean = 1.2 WHERE system_id = 'beta' "
                             "AND metric = 'organization'"))
        conn.execute(sa.text("UPDATE leaderboard_metrics SET n_unscored = 50 WHERE system_id = 'gamma' "
                             "AND metric = 'claim_coverage'"))
        conn.execute(sa.text("UPDATE systems SET active = true WHERE system_id = 'epsilon'"))  # not on the board
    bad = check_leaderboard(engine, r, JUDGE)
    assert not bad.success
    assert set(bad.failed_checks) == {"metric_mean_in_unit_range", "n_reports_equals_ok_reports",
                                      "scored_plus_unscored_within_reports", "one_row_per_active_system"}
    by_name = {c["name"]: c for c in bad.checks}
    assert by_name["one_row_per_active_system"]["details"]["unexpected_rows"][0]["system_id"] == "epsilon"
    out_of_range = by_name["metric_mean_in_unit_range"]["details"]["unexpected_rows"]
    assert [(r["system_id"], r["metric"]) for r in out_of_range] == [("beta", "organization")]
    assert not check_leaderboard(engine, "2031-01", JUDGE).success  # no board at all


def test_views_return_what_the_tables_hold(engine):
    seed_month(engine, "2025-01")
    seed_month(engine, "2025-02", n_queries=5)
    for r in ("2025-01", "2025-02"):
        roll_up(engine, r, JUDGE, n_boot=100)
    roll_up(engine, "2025-01", OTHER_JUDGE, n_boot=100)  # this judge's latest board is January's
    with engine.connect() as conn:
        latest = conn.execute(sa.text("SELECT * FROM leaderboard_latest ORDER BY judge_config, rank, system_id")
                              ).mappings().all()
        table = {(x["release_id"], x["system_id"], x["judge_config"]): dict(x) for x in conn.execute(
            sa.text("SELECT * FROM leaderboard")).mappings()}
        history = conn.execute(sa.text("SELECT * FROM leaderboard_history ORDER BY month, judge_config, rank"
                                       )).mappings().all()
    assert {(x["judge_config"], x["release_id"]) for x in latest} == {(JUDGE, "2025-02"), (OTHER_JUDGE, "2025-01")}
    assert [x["system_id"] for x in latest if x["judge_config"] == OTHER_JUDGE] == ["epsilon"]
    for x in latest:
        stored = table[(x["release_id"], x["system_id"], x["judge_config"])]
        assert {k: x[k] for k in stored} == stored
    assert len(history) == len(table) == 3 + 3 + 1
    for x in history:
        stored = table[(x["release_id"], x["system_id"], x["judge_config"])]
        assert str(x["month"]) == f"{x['release_id']}-01"
        for k in (*METRIC_ORDER, "geometric_mean", "rank", "n_reports"):
            assert x[k] == stored[k]
    # load_leaderboard's "latest" is the view's.
    assert {x["release_id"] for x in load_leaderboard(engine, judge_config=JUDGE)} == {"2025-02"}
    assert {x["judge_config"] for x in load_leaderboard(engine, "2025-01", OTHER_JUDGE)} == {OTHER_JUDGE}
    # No judge named: the month's most complete board (3 systems), not the newest (OTHER_JUDGE's, 1 system).
    assert {x["judge_config"] for x in load_leaderboard(engine, "2025-01")} == {JUDGE}
    assert load_leaderboard(engine, "2031-01") == []


def test_formats_render_with_the_best_in_bold(engine):
    month = seed_month(engine)
    roll_up(engine, month["release_id"], JUDGE, n_boot=100)
    rows = load_leaderboard(engine, month["release_id"], JUDGE)
    alpha = rows[0]
    assert alpha["system_id"] == "alpha"

    md = format_leaderboard(rows, "markdown")
    alpha_line = next(line for line in md.splitlines() if line.startswith("| 1 | alpha |"))
    org = shown(alpha["organization"]).lstrip("0")
    assert f"**{org}**†" in alpha_line
    assert "\\*" in alpha_line  # its unscored relevance query is flagged
    beta_line = next(line for line in md.splitlines() if "| beta |" in line)
    assert "**" not in beta_line
    assert "Knowledge synthesis: Org, Nugget cov" in md and "† = best and significantly better" in md

    table = format_leaderboard(rows, "table")
    lines = table.splitlines()
    assert "Knowledge synthesis" in lines[1] and "Retrieval quality" in lines[1] and "Verifiability" in lines[1]
    assert any(line.startswith("1     alpha") for line in lines)
    assert shown(alpha["geometric_mean"]).lstrip("0") in table

    parsed = list(csv.DictReader(io.StringIO(format_leaderboard(rows, "csv"))))
    assert [p["system_id"] for p in parsed] == ["alpha", "beta", "gamma"]
    assert float(parsed[0]["organization"]) == round(alpha["organization"], 3)
    assert parsed[0]["relevance_rate_n_unscored"] == "1"
    assert list(parsed[0])[7:14] == list(METRIC_ORDER)

    data = json.loads(format_leaderboard(rows, "json"))
    assert [d["system_id"] for d in data] == ["alpha", "beta", "gamma"]
    first = data[0]
    assert first["rank"] == 1 and first["geometric_mean"] == pytest.approx(alpha["geometric_mean"])
    assert first["geometric_mean_ci"] == [alpha["geometric_mean_ci_low"], alpha["geometric_mean_ci_high"]]
    rr = first["metrics"]["relevance_rate"]
    assert (rr["n"], rr["n_unscored"]) == (7, 1) and len(rr["ci"]) == 2 and rr["dimension"] == "retrieval_quality"
    assert format_leaderboard([], "table") == "(no leaderboard rows)" and json.loads(format_leaderboard([], "json")) == []
    with pytest.raises(ValueError):
        format_leaderboard(rows, "xml")
