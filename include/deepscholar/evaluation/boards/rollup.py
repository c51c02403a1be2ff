"""Rolling a month's scores up into the leaderboard (METRICS.md "Roll-up").

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.boards.rollup`.
"""

from __future__ import annotations

import functools
import logging
import math
import time
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import sqlalchemy as sa
from scipy import special
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.errors import NotFound
from deepscholar.evaluation.boards import board_versions
from deepscholar.evaluation.boards.contamination import MAY_HAVE_SEEN
from deepscholar.evaluation.boards.contamination import contamination as contamination_of
from deepscholar.evaluation.boards.published import has_published, store_published
from deepscholar.evaluation.boards.query_scores import has_query_scores, metric_versions, store_query_scores
from deepscholar.evaluation.boards.rank_agreement import competition_ranks, rank_agreement
from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.money.costs import store_month_spend
from deepscholar.migrations.wide_views import sync_query_views, sync_track_views, sync_wide_views

__all__ = [
    "ALPHA",
    "CI_LEVEL",
    "DEFAULT_N_BOOT",
    "MetricSummary",
    "PairedTest",
    "summarize_metric",
    "geometric_mean",
    "geometric_means",
    "bootstrap_intervals",
    "paired_test",
    "paired_t_pvalue",
    "rank_by_geometric_mean",
    "compute_leaderboard",
    "headline_values",
    "load_scores",
    "roll_up",
]

log = logging.getLogger("deepscholar.evaluation")

ALPHA = 0.05  # METRICS.md: the best system is marked when p < 0.05
CI_LEVEL = 0.95
DEFAULT_N_BOOT = 1000
ZERO_SPREAD = 1e-12  # scores live in [0, 1]: differences closer than this are float noise, not signal

LEADERBOARD_KEY = ("release_id", "judge_config", "board_version", "system_id")
METRICS_KEY = (*LEADERBOARD_KEY, "metric")


# --------------------------------------------------------------------------------------------- the math

@dataclass(frozen=True)
class MetricSummary:
    mean: float | None  # None when nothing was scored
    n: int  # scored queries
    n_unscored: int  # queries whose score row says unscored


def _as_float_array(values: Sequence[float | None] | np.ndarray) -> np.ndarray:
    return np.array([np.nan if v is None else v for v in values], dtype=float)


def summarize_metric(values: Sequence[float | None] | np.ndarray) -> MetricSummary:
    """One system's metric over its queries; None (or NaN) is an unscored query: out of the mean, counted."""
    arr = _as_float_array(values)
    scored = arr[~np.isnan(arr)]
    mean = float(scored.mean()) if scored.size else None
    return MetricSummary(mean, int(scored.size), int(arr.size - scored.size))


def geometric_mean(means: Sequence[float | None]) -> float | None:
    """Geometric mean of the seven means. A zero gives 0 (shown, not hidden); a missing mean gives None."""
    arr = _as_float_array(means)
    if arr.size == 0 or np.isnan(arr).any():
        return None
    if (arr == 0).any():
        return 0.0  # the logarithm would say so too, with a log(0) warning on the way
    return float(np.exp(np.mean(np.log(arr))))  # scipy.stats.gmean's arithmetic (paired_t_pvalue says why not it)


def geometric_means(matrix: np.ndarray) -> np.ndarray:
    """Row-wise geometric_mean of a (k, metrics) array: NaN where a row has a NaN, 0 where it has a 0."""
    matrix = np.asarray(matrix, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        out = np.exp(np.log(matrix).mean(axis=1))
    out[(matrix == 0).any(axis=1)] = 0.0
    out[np.isnan(matrix).any(axis=1)] = np.nan
    return out


def _percentile_interval(samples: np.ndarray) -> np.ndarray:
    """Percentile interval per column; NaN replicates (a metric left with no scored query) are dropped."""
    tail = (1 - CI_LEVEL) / 2 * 100
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an all-NaN column: nothing scored, interval NaN
        return np.nanpercentile(samples, [tail, 100 - tail], axis=0).T


@functools.lru_cache(maxsize=2)
def _resample_counts(seed: int, n_q: int, n_boot: int) -> np.ndarray:
    """(n_boot, n_q) read-only array: how often replicate b drew query q. It depends on the seed and the
    sizes only, so the systems of one board that answered the same number of queries (most of them) share
    one: drawing and counting are 70 % of a system's bootstrap. Two kept: a 12-month window's is 19 MB."""
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, n_q, size=(n_boot, n_q))  # replicate b picks queries draws[b]
    flat = (draws + np.arange(n_boot)[:, None] * n_q).ravel()
    counts = np.bincount(flat, minlength=n_boot * n_q).reshape(n_boot, n_q).astype(float)
    counts.setflags(write=False)
    return counts


def bootstrap_intervals(values: np.ndarray, *, seed: int = 0, n_boot: int = DEFAULT_N_BOOT,
                        bounded: Sequence[bool] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Seeded percentile bootstrap over one system's queries.

    `values` is (queries, metrics) with NaN for a query not scored on a metric. Each replicate resamples
    whole queries with replacement, so the metric means and the geometric mean of a replicate come from the
    same queries. The draws are turned into per-query counts, so every replicate's sums are one matrix
    product. A fresh generator per call: a system's interval depends on its scores and the seed only,
    not on which other systems are on the board.
    `bounded[i]` says metric i lives in [0, 1] (default: all do); a count's interval is not clipped.
    Returns ((metrics, 2) metric intervals, (2,) geometric-mean interval); NaN where nothing was scored.
    """
    values = np.asarray(values, dtype=float)
    n_q, n_m = values.shape
    if n_q == 0:
        return np.full((n_m, 2), np.nan), np.full(2, np.nan)
    counts = _resample_counts(seed, n_q, n_boot)
    scored = ~np.isnan(values)
    sums = counts @ np.where(scored, values, 0.0)
    n_scored = counts @ scored.astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        means = sums / n_scored  # NaN when a replicate drew none of the metric's scored queries
    # The replicate's mean of a [0, 1] metric can exceed 1 by a rounding ulp; the interval must not.
    unit = np.ones(n_m, dtype=bool) if bounded is None else np.asarray(bounded, dtype=bool)
    means[:, unit] = np.clip(means[:, unit], 0.0, 1.0)
    return _percentile_interval(means), _percentile_interval(geometric_means(means)[:, None])[0]


@dataclass(frozen=True)
class PairedTest:
    p_value: float | None  # None when the test could not be run
    n_pairs: int
    significant: bool
    note: str


def paired_test(best: Mapping[str, float | None] | pd.Series, other: Mapping[str, float | None] | pd.Series,
                alpha: float = ALPHA) -> PairedTest:
    """Is `best` better than `other`? Paired two-tailed t-test over the queries both have scored."""
    a = pd.Series(best, dtype=float)
    b = pd.Series(other, dtype=float)
    pairs = pd.concat([a.rename("a"), b.rename("b")], axis=1, join="inner").dropna()
    n = len(pairs)
    if n < 2:
        # One pair has no variance to estimate: the t statistic does not exist.
        return PairedTest(None, n, False, f"{n} shared scored queries: too few for a paired t-test")
    diff = (pairs["a"] - pairs["b"]).to_numpy()
    if np.ptp(diff) <= ZERO_SPREAD:
        # Zero variance of the differences: t is ±inf or 0/0. A division by zero is not evidence, and the
        # test's normal-errors model does not hold, so we claim nothing (typically identical scores).
        # "Zero" up to float noise: .9 - .8 and .8 - .7 differ in the 17th digit and would give p ~ 1e-31.
        return PairedTest(None, n, False, "the paired differences have zero variance: t-test undefined")
    p = paired_t_pvalue(diff)
    if diff.mean() <= 0:
        # Best by its mean over all its scored queries, yet not ahead on the shared ones: a small p would
        # then point the other way, so it cannot mark the best as significantly better.
        return PairedTest(p, n, False, "not ahead of the runner-up on the shared queries")
    return PairedTest(p, n, p < alpha, f"paired t-test over {n} queries: p = {p:.3g}")


def paired_t_pvalue(diff: np.ndarray) -> float:
    """The two-sided p-value of the paired t-test over these differences: scipy.stats.ttest_rel's arithmetic,
    step for step (a unit test holds the two equal to the bit), with the Student t of scipy.special that it
    calls. Not ttest_rel itself: importing scipy.stats takes 1-2 s (SciPy 1.17 rewrites its docstrings at
    import), which every cold `deepscholar leaderboard --from/--category` process paid for one formula."""
    n = diff.shape[0]
    variance = np.mean((diff - np.mean(diff, keepdims=True)) ** 2)
    variance *= np.float64(n) / np.float64(n - 1)
    t = np.mean(diff) / np.sqrt(variance / n)
    return float(2 * special.stdtr(np.float64(n - 1), -np.abs(t)))


def rank_by_geometric_mean(gms: Sequence[float | None]) -> list[int]:
    """Competition ranks (ties share the better rank), best first; a missing value ranks last. The core
    board ranks geometric means with it, a track's board its ranking metric's means."""
    return competition_ranks(gms)


def _clean(x) -> float | None:
    return None if x is None or (isinstance(x, float) and math.isnan(x)) else float(x)


def compute_leaderboard(
    scores: pd.DataFrame,
    *,
    release_id: str,
    judge_config: str,
    n_queries: int,
    report_counts: Mapping[str, tuple[int, int]],
    seed: int = 0,
    n_boot: int = DEFAULT_N_BOOT,
    reference_systems: frozenset[str] | set[str] = frozenset(),
    family: str = registry.CORE,
    contamination: Mapping[str, str | None] | None = None,
    cutoffs: Mapping[str, object] | None = None,
) -> tuple[list[dict], list[dict]]:
    """One family's board rows and their per-metric rows, from headline scores. `reference_systems` (the
    human exemplar) are ranked alongside for comparison but never marked best: several of their metrics
    are 1 (or 0.5) by construction, so they would "win" those columns without competing.

    The core family's rows (leaderboard_systems) carry the geometric mean of its means, its interval and
    the rank by it; a track's rows (track_boards) the rank by the track's ranking metric
    (registry.Family.ranking_metric). `scores`: one row per (system_id, arxiv_id, metric) with `value`
    (NaN = unscored) and `metric_version`; other families' rows are ignored.
    `report_counts[system] = (ok reports, system_error reports)`. `contamination[system]` (evaluation/
    contamination.py) marks a row; a `may_have_seen` one is shown but not ranked (rank None) and never marked
    best. `cutoffs[system]` is recorded on its row. Rows come out ordered by rank (unranked last), system.
    """
    contamination = contamination or {}
    cutoffs = cutoffs or {}
    unranked = {s for s, c in contamination.items() if c == MAY_HAVE_SEEN}
    names = registry.metric_names(family)
    ranking = registry.ranking_metric(family)
    scores = scores[scores["metric"].isin(names)]
    if scores.empty:
        return [], []
    scores = scores.assign(value=pd.to_numeric(scores["value"], errors="coerce").astype(float))
    rows, details, wide = _system_entries(scores, names, family, {"release_id": release_id, "judge_config": judge_config},
                                          seed=seed, n_boot=n_boot, n_queries=n_queries, report_counts=report_counts,
                                          contamination=contamination, cutoffs=cutoffs)
    systems = sorted(rows)

    contenders = [s for s in systems if s not in reference_systems and s not in unranked]
    for m in names:
        _mark_best(m, contenders, details, wide)
    order = _rank_rows(rows, systems, unranked, ranking)
    return [rows[s] for s in order], [details[(s, m)] for s in order for m in names]


def _system_entries(scores: pd.DataFrame, names: Sequence[str], family: str, key: dict, *, seed: int, n_boot: int,
                    n_queries: int, report_counts: Mapping[str, tuple[int, int]],
                    contamination: Mapping[str, str | None], cutoffs: Mapping[str, object],
                    ) -> tuple[dict[str, dict], dict[tuple[str, str], dict], pd.DataFrame]:
    """Per system of one family's (non-empty, numeric) scores: its board row (counts, means, versions, what it
    is ranked by) and its per-metric rows with bootstrap intervals, before best marks and ranks; and the
    (system, query) x metric matrix that the best marks' paired tests read. Kept apart from the marking and
    ranking, which compare systems, because everything here looks at one system at a time."""
    systems = sorted(scores["system_id"].unique())
    bounded = [registry.is_bounded(m) for m in names]

    mean, n, n_unscored = _per_system_metric(scores)
    versions = metric_versions(scores)
    _warn_mixed_versions(versions, key["judge_config"])
    wide = _query_matrix(scores, names)

    rows: dict[str, dict] = {}
    details: dict[tuple[str, str], dict] = {}
    detail_key = key if family == registry.CORE else {**key, "family": family}
    ranking = registry.ranking_metric(family)
    for system in systems:
        metric_ci, gm_ci = bootstrap_intervals(wide.loc[system].to_numpy(), seed=seed, n_boot=n_boot,
                                               bounded=bounded)
        means = {m: _clean(mean.get((system, m))) for m in names}
        ok, failed = report_counts.get(system, (0, 0))
        rows[system] = {
            **key, "system_id": system, "n_queries": int(n_queries), "n_reports": int(ok),
            "n_failed": int(failed), **means,
            "metric_versions": {m: versions[(system, m)] for m in names if (system, m) in versions},
            "contamination": contamination.get(system), "knowledge_cutoff": cutoffs.get(system),
        } | _ranking_fields(family, ranking, [means[m] for m in names], gm_ci)
        for i, m in enumerate(names):
            details[(system, m)] = _metric_detail(detail_key, system, m, i, means[m], metric_ci[i],
                                                  versions.get((system, m)), int(n.get((system, m), 0)),
                                                  int(n_unscored.get((system, m), 0)))
    return rows, details, wide


def _warn_mixed_versions(versions: Mapping[tuple[str, str], str], judge_config: str) -> None:
    """Log each (system, metric) whose scores mix metric versions: a prompt changed mid-month and not every
    report was re-judged, so its mean blends two questions."""
    for (system, metric), found in versions.items():
        if "," in found:
            log.warning("%s %s under %s mixes metric versions %s", system, metric, judge_config, found)


def _ranking_fields(family: str, ranking: str | None, means: Sequence[float | None], gm_ci) -> dict:
    """What a row is ranked by: on the core board (no ranking metric) the geometric mean of its means and
    its bootstrap interval; on a track's board, the family and the name of its ranking metric."""
    if ranking is not None:
        return {"family": family, "ranking_metric": ranking}
    gm = geometric_mean(means)
    return {"geometric_mean": gm,
            "geometric_mean_ci_low": _clean(gm_ci[0]) if gm is not None else None,
            "geometric_mean_ci_high": _clean(gm_ci[1]) if gm is not None else None}


def _rank_rows(rows: dict[str, dict], systems: Sequence[str], unranked: set[str], ranking: str | None) -> list[str]:
    """Set each row's rank (None for the unranked: shown, not competing) and return the systems in board
    order: by rank, the unranked last, ties by name."""
    ranked = [s for s in systems if s not in unranked]
    ranks = rank_by_geometric_mean([rows[s]["geometric_mean"] if ranking is None else rows[s][ranking]
                                    for s in ranked])
    for s in systems:
        rows[s]["rank"] = None
    for s, r in zip(ranked, ranks, strict=True):
        rows[s]["rank"] = r
    return sorted(systems, key=lambda s: (rows[s]["rank"] is None, rows[s]["rank"] or 0, s))


def headline_values(family: str, rows: Sequence[dict]) -> dict[str, float | None]:
    """{system: the value its board ranks it by}: the core's geometric mean, a track's ranking metric."""
    ranking = registry.ranking_metric(family)
    return {r["system_id"]: r["geometric_mean"] if ranking is None else r[ranking] for r in rows}


def _per_system_metric(scores: pd.DataFrame) -> tuple[pd.Series, pd.Series, pd.Series]:
    """Per (system, metric): mean of the scored values, how many were scored, how many were unscored."""
    grouped = scores.groupby(["system_id", "metric"], sort=True)["value"]
    n = grouped.count()
    return grouped.mean(), n, grouped.size() - n


def _query_matrix(scores: pd.DataFrame, names: Sequence[str]) -> pd.DataFrame:
    """(system, query) x metric, NaN where unscored or never judged: the bootstrap's and t-test's input."""
    return (scores.set_index(["system_id", "arxiv_id", "metric"])["value"]
            .unstack("metric").reindex(columns=list(names)).sort_index())


def _metric_detail(key: dict, system: str, metric: str, index: int, mean: float | None, ci, version: str | None,
                   n: int, n_unscored: int) -> dict:
    """One leaderboard_metrics row, before the best-system marks."""
    return {**key, "system_id": system, "metric": metric, "dimension": registry.dimension_of(metric),
            "metric_position": index + 1, "variant": registry.headline_variant(metric), "metric_version": version,
            "mean": mean, "n": n, "n_unscored": n_unscored,
            "ci_low": _clean(ci[0]) if mean is not None else None,
            "ci_high": _clean(ci[1]) if mean is not None else None,
            "is_best": False, "significant": False, "p_value": None, "runner_up": None, "n_pairs": None}


def _mark_best(metric: str, systems: Sequence[str], details: dict, wide: pd.DataFrame) -> None:
    """The best system on one metric, and whether it beats the runner-up significantly."""
    ranked = sorted((details[(s, metric)]["mean"], s) for s in systems if details[(s, metric)]["mean"] is not None)
    if not ranked:
        return
    top = ranked[-1][0]
    best = [s for v, s in ranked if v == top]
    for s in best:
        details[(s, metric)]["is_best"] = True
    if len(best) > 1:
        return  # a tie for first: nobody is better than the runner-up
    others = [(v, s) for v, s in ranked if v < top]
    if not others:
        return  # a single system: no runner-up to test against
    second = others[-1][0]
    runners = sorted(s for v, s in others if v == second)
    row = details[(best[0], metric)]
    best_scores = wide.loc[best[0], metric]
    # Runner-ups tied on the mean: test against each and keep the least significant (largest p) result.
    tests = [(paired_test(best_scores, wide.loc[r, metric]), r) for r in runners]
    test, runner = max(tests, key=lambda t: (t[0].p_value is None, t[0].p_value or 0.0, not t[0].significant))
    row.update(p_value=test.p_value, significant=test.significant, runner_up=runner, n_pairs=test.n_pairs)


# ------------------------------------------------------------------------------------------ the database

_SCORES_SQL = """
    SELECT r.system_id, r.arxiv_id, m.metric, m.value, m.metric_version
    FROM reports r
    CROSS JOIN LATERAL (SELECT s.metric, s.variant, s.value, s.metric_version FROM metric_scores s
                        WHERE s.report_id = r.report_id AND s.judge_config = :j OFFSET 0) m
    JOIN unnest(CAST(:metrics AS text[]), CAST(:variants AS text[])) AS h (metric, variant)
      ON h.metric = m.metric AND h.variant = m.variant
    WHERE r.release_id = :r AND r.status = 'ok'
    ORDER BY r.system_id, r.arxiv_id, m.metric"""  # one month, read per report: see query_views_sql


def load_scores(conn: sa.Connection, release_id: str, judge_config: str,
                metrics: Sequence[str] | None = None) -> pd.DataFrame:
    """Headline scores of the release's ok reports under one judge: one row per (system, query, metric),
    of the given metrics (default: every registered metric, the tracks' included)."""
    names = list(registry.metric_names() if metrics is None else metrics)
    result = conn.execute(sa.text(_SCORES_SQL), {
        "r": release_id, "j": judge_config, "metrics": names,
        "variants": [registry.headline_variant(m) for m in names]})
    # Plain tuples: pandas probes Row objects attribute by attribute, which costs more than the query.
    frame = pd.DataFrame([tuple(r) for r in result],
                         columns=["system_id", "arxiv_id", "metric", "value", "metric_version"])
    frame["value"] = pd.to_numeric(frame["value"], errors="coerce").astype(float)
    return frame


def _write_changed(conn: sa.Connection, table_name: str, rows: Sequence[dict], key: Sequence[str],
                   touch: str | None = None) -> set[tuple]:
    """Upsert that leaves a row alone when no value differs, so a re-run writes nothing.

    Only the table's own columns of each row are written; returns the keys of the rows written."""
    if not rows:
        return set()
    tbl = db.table(conn, table_name)
    rows = [{c: r[c] for c in r if c in tbl.c} for r in rows]
    stmt = pg_insert(tbl)
    cols = [c for c in rows[0] if c not in key]
    changed = sa.tuple_(*[tbl.c[c] for c in cols]).is_distinct_from(sa.tuple_(*[stmt.excluded[c] for c in cols]))
    set_ = {c: stmt.excluded[c] for c in cols} | ({touch: sa.func.now()} if touch else {})
    upsert = stmt.on_conflict_do_update(index_elements=list(key), set_=set_, where=changed).returning(
        *[tbl.c[k] for k in key])
    written: set[tuple] = set()
    for start in range(0, len(rows), 1000):
        written |= {tuple(r) for r in conn.execute(upsert, list(rows[start:start + 1000]))}
    return written


TRACK_KEY = ("release_id", "judge_config", "board_version", "family", "system_id")
TRACK_METRICS_KEY = (*TRACK_KEY, "metric")
AGREEMENT_KEY = ("release_id", "judge_config", "board_version", "family_a", "family_b")


def roll_up(engine: Engine, release_id: str, judge_config: str, *, seed: int = 0,
            n_boot: int = DEFAULT_N_BOOT) -> list[dict]:
    """Compute and store the boards of one release under one judge; returns the core board's rows, best first.

    The core board (leaderboard_systems, leaderboard_metrics), one board per evaluation track that has
    scores (track_boards, track_board_metrics) and the agreement between their rankings (board_agreement),
    in one transaction, as one board version (evaluation/boards/board_versions.py): the latest one while it is a
    draft; once it is published, a different result opens the next version and the published one stays as
    it is. Every system with an ok report scored under `judge_config` on a family gets a row on that
    family's board; in a draft, rows of systems (and tracks) that no longer have one are deleted. Concurrent
    roll-ups of the same release and judge wait for each other (advisory lock).
    """
    started = time.perf_counter()
    with engine.begin() as conn:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"),
                     {"k": f"deepscholar_rollup:{release_id}:{judge_config}"})
        common = _board_inputs(conn, release_id)
        scores = load_scores(conn, release_id, judge_config)
        references, marks = common["reference_systems"], common["contamination"]
        common |= {"release_id": release_id, "judge_config": judge_config, "seed": seed, "n_boot": n_boot}
        boards = {registry.CORE: compute_leaderboard(scores, **common)}
        for family in registry.tracks():
            boards[family] = compute_leaderboard(scores, family=family, **common)
        rows = boards[registry.CORE][0]
        headlines = {family: headline_values(family, family_rows)
                     for family, (family_rows, _) in boards.items() if family_rows}
        agreement = [{"release_id": release_id, "judge_config": judge_config, **a}
                     for a in rank_agreement(headlines, references | {s for s, m in marks.items()
                                                                     if m == MAY_HAVE_SEEN})]
        computed = {
            "leaderboard_systems": rows, "leaderboard_metrics": boards[registry.CORE][1],
            "track_boards": [r for f in registry.tracks() for r in boards[f][0]],
            "track_board_metrics": [r for f in registry.tracks() for r in boards[f][1]],
            "board_agreement": agreement}
        provenance = board_versions.provenance_of(
            conn, release_id, judge_config, [*computed["leaderboard_metrics"], *computed["track_board_metrics"]])
        target = board_versions.board_target(conn, release_id, judge_config, computed, provenance)
        if not target.unchanged:
            board_versions.record_version(conn, release_id, judge_config, target, provenance, len(rows))
            _write_boards(conn, release_id, judge_config, target.version, boards, agreement)
        if not target.unchanged or not has_query_scores(conn, release_id, judge_config, target.version):
            store_query_scores(conn, release_id, judge_config, target.version, scores)  # what pooled boards read
        if not target.unchanged or not has_published(conn, release_id, judge_config, target.version):
            # The tracks' figures as their authors aggregate them, from the scores this version counts.
            store_published(conn, release_id, judge_config, target.version,
                            [family for family, (family_rows, _) in boards.items() if family_rows])
        _sync_views(conn)
        # The month's costs per system and its requests by transport, from one pass over its requests.
        store_month_spend(conn, release_id, judge_config)
    state = ("unchanged (published)" if target.unchanged else "new draft" if target.new else "draft")
    log.info("leaderboard %s (%s) version %d %s: %d systems, %d scores, tracks %s, %.2f s", release_id,
             judge_config, target.version, state, len(rows), len(scores),
             ", ".join(f for f in headlines if f != registry.CORE) or "none", time.perf_counter() - started)
    return [r | {"board_version": target.version} for r in rows]


def _board_inputs(conn: sa.Connection, release_id: str) -> dict:
    """What every family's board of the release needs besides the scores, as compute_leaderboard's keyword
    arguments: the number of queries, each system's report counts, the reference systems (human exemplars),
    each system's contamination mark (its knowledge cutoff against the month's first paper) and cutoff.
    NotFound when the release does not exist."""
    n_queries = conn.execute(sa.text("""
        SELECT (SELECT count(*) FROM release_queries q WHERE q.release_id = r.release_id)
        FROM releases r WHERE r.release_id = :r"""), {"r": release_id}).scalar()
    if n_queries is None:
        raise NotFound(f"release {release_id!r} does not exist")
    counts = {s: (int(ok), int(failed)) for s, ok, failed in conn.execute(sa.text("""
        SELECT system_id, count(*) FILTER (WHERE status = 'ok'), count(*) FILTER (WHERE status = 'system_error')
        FROM reports WHERE release_id = :r GROUP BY system_id"""), {"r": release_id})}
    references = set(conn.execute(sa.text(
        "SELECT system_id FROM systems WHERE kind = 'human_exemplar'")).scalars())
    first_published = conn.execute(sa.text("""
        SELECT coalesce(min(q.published), r.window_start)::date FROM releases r
        LEFT JOIN release_queries q ON q.release_id = r.release_id
        WHERE r.release_id = :r GROUP BY r.window_start"""), {"r": release_id}).scalar()
    systems = conn.execute(sa.text(
        "SELECT system_id, knowledge_cutoff, model_knowledge FROM systems WHERE system_id = ANY(:s)"),
        {"s": sorted(counts)}).all()
    marks = {s: contamination_of(cutoff, knows, first_published) for s, cutoff, knows in systems}
    return {"n_queries": n_queries, "report_counts": counts, "reference_systems": references,
            "contamination": marks, "cutoffs": {s: cutoff for s, cutoff, _ in systems}}


def _write_boards(conn: sa.Connection, release_id: str, judge_config: str, version: int,
                  boards: Mapping[str, tuple[list[dict], list[dict]]], agreement: Sequence[dict]) -> None:
    """Store board version `version`: every family's board, then the agreement between their rankings;
    what left the registry since (a track, a pair of families) leaves the version too."""
    for family, (family_rows, family_metric_rows) in boards.items():
        _write_board(conn, family, release_id, judge_config, version, family_rows, family_metric_rows)
    # A track that left the registry leaves the boards too.
    conn.execute(sa.text("""
        DELETE FROM track_boards WHERE release_id = :r AND judge_config = :j AND board_version = :v
          AND NOT (family = ANY(:f))"""),
        {"r": release_id, "j": judge_config, "v": version, "f": list(registry.tracks())})
    conn.execute(sa.text("""
        DELETE FROM board_agreement WHERE release_id = :r AND judge_config = :j AND board_version = :v
          AND NOT ((family_a || ' ' || family_b) = ANY(:pairs))"""),
        {"r": release_id, "j": judge_config, "v": version,
         "pairs": [f"{a['family_a']} {a['family_b']}" for a in agreement]})
    _write_changed(conn, "board_agreement", [a | {"board_version": version} for a in agreement],
                   AGREEMENT_KEY, touch="computed_at")


def _sync_views(conn: sa.Connection) -> None:
    """The wide views over the boards and the per-query scores follow the registry's metrics (a metric
    added or removed since the last roll-up adds or drops a column)."""
    sync_wide_views(conn, registry.metric_names(registry.CORE))
    sync_track_views(conn, {f: registry.metric_names(f) for f in registry.tracks() if registry.metric_names(f)})
    sync_query_views(conn, [(m, registry.family_of(m), registry.headline_variant(m))
                            for m in registry.metric_names()])


def _write_board(conn: sa.Connection, family: str, release_id: str, judge_config: str, version: int,
                 rows: Sequence[dict], metric_rows: Sequence[dict]) -> None:
    """Store one family's board (the core's: leaderboard_systems / leaderboard_metrics; a track's:
    track_boards / track_board_metrics), deleting what no longer belongs on it, writing only changed rows."""
    core = family == registry.CORE
    systems_table, metrics_table = ("leaderboard_systems", "leaderboard_metrics") if core else (
        "track_boards", "track_board_metrics")
    key, metrics_key = (LEADERBOARD_KEY, METRICS_KEY) if core else (TRACK_KEY, TRACK_METRICS_KEY)
    scope = {"release_id": release_id, "judge_config": judge_config, "board_version": version} | (
        {} if core else {"family": family})
    where = " AND ".join(f"{column} = :{column}" for column in scope)
    # Rows of systems gone from this board (their reports or scores deleted); their details cascade.
    conn.execute(sa.text(f"DELETE FROM {systems_table} WHERE {where} AND NOT (system_id = ANY(:s))"),
                 {**scope, "s": [r["system_id"] for r in rows]})
    # A metric that left the registry (or the family) leaves the board too.
    conn.execute(sa.text(f"DELETE FROM {metrics_table} WHERE {where} AND NOT (metric = ANY(:m))"),
                 {**scope, "m": list(registry.metric_names(family))})
    board = _write_changed(conn, systems_table, [r | {"board_version": version} for r in rows], key,
                           touch="computed_at")
    details = {k[:len(key)] for k in _write_changed(conn, metrics_table,
                                                    [r | {"board_version": version} for r in metric_rows],
                                                    metrics_key)}
    if details - board:  # a mean changed but not the row: computed_at still says when values changed
        system = key.index("system_id")
        conn.execute(sa.text(f"UPDATE {systems_table} SET computed_at = now() WHERE {where} AND system_id = ANY(:s)"),
                     {**scope, "s": sorted(k[system] for k in details - board)})
