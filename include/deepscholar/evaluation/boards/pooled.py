"""Boards over any set of queries: a window of months, one arXiv primary category, or only the queries
published after a date. Computed on request from the per-query scores each month's current board counted
(evaluation/boards/query_scores.py; a month rolled up before those were kept: its scores). Which queries: a
Selection (evaluation/boards/selection.py). The command line keeps what it computed (pooled_store.py).

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.boards.pooled`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.evaluation.boards.contamination import MAY_HAVE_SEEN
from deepscholar.evaluation.boards.contamination import contamination as contamination_of
from deepscholar.evaluation.boards.query_scores import stored_query_scores
from deepscholar.evaluation.boards.rollup import DEFAULT_N_BOOT, compute_leaderboard
from deepscholar.evaluation.boards.selection import Selection
from deepscholar.evaluation.metrics import registry

__all__ = ["CategoryBoard", "pooled_board", "category_boards", "unranked"]

_QUERIES_SQL = """
    SELECT q.release_id, q.arxiv_id, q.published, p.primary_category
    FROM release_queries q
    LEFT JOIN papers p ON p.arxiv_id = q.arxiv_id AND p.version = q.version
    WHERE q.release_id = ANY(:releases)"""

# Each system's ok and failed reports per primary category over the selected queries, counted where they are.
_REPORT_COUNTS_SQL = """
    SELECT r.system_id, p.primary_category, count(*) FILTER (WHERE r.status = 'ok') AS ok,
           count(*) FILTER (WHERE r.status = 'system_error') AS failed
    FROM reports r
    JOIN release_queries q ON q.release_id = r.release_id AND q.arxiv_id = r.arxiv_id
    LEFT JOIN papers p ON p.arxiv_id = q.arxiv_id AND p.version = q.version
    WHERE r.release_id = ANY(:releases)
      AND (CAST(:after AS date) IS NULL OR (q.published AT TIME ZONE 'UTC')::date > CAST(:after AS date))
    GROUP BY r.system_id, p.primary_category"""

_SCORES_SQL = """
    SELECT r.release_id, r.system_id, r.arxiv_id, m.metric, m.value, m.metric_version
    FROM reports r
    JOIN metric_scores m ON m.report_id = r.report_id
    JOIN unnest(CAST(:metrics AS text[]), CAST(:variants AS text[])) AS h (metric, variant)
      ON h.metric = m.metric AND h.variant = m.variant
    WHERE r.release_id = ANY(:releases) AND r.status = 'ok' AND m.judge_config = :j"""


@dataclass
class CategoryBoard:
    category: str
    n_queries: int
    rows: list[dict] = field(default_factory=list)


def _frames(engine: Engine, selection: Selection, judge_config: str,
            metrics: Sequence[str]) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame, dict]:
    params = {"releases": list(selection.releases)}
    with engine.connect() as conn:
        queries = pd.DataFrame([tuple(r) for r in conn.execute(sa.text(_QUERIES_SQL), params)],
                               columns=["release_id", "arxiv_id", "published", "primary_category"])
        reports = pd.DataFrame([tuple(r) for r in conn.execute(sa.text(_REPORT_COUNTS_SQL), params | {
            "after": selection.published_after})], columns=["system_id", "primary_category", "ok", "failed"])
        kept, missing = stored_query_scores(conn, selection.releases, judge_config, metrics)
        scores = kept
        if missing:  # months whose current board was rolled up before the scores were kept with it
            live = pd.DataFrame([tuple(r) for r in conn.execute(sa.text(_SCORES_SQL), {
                "releases": missing, "j": judge_config, "metrics": list(metrics),
                "variants": [registry.headline_variant(m) for m in metrics]})],
                columns=["release_id", "system_id", "arxiv_id", "metric", "value", "metric_version"])
            scores = live if kept.empty else pd.concat([kept, live], ignore_index=True)
        systems = {r.system_id: r for r in conn.execute(sa.text(
            "SELECT system_id, kind, knowledge_cutoff, model_knowledge FROM systems"))}
    if selection.category:
        queries = queries[queries["primary_category"] == selection.category]
    if selection.published_after:
        published = pd.to_datetime(queries["published"], utc=True)
        queries = queries[published.dt.date > selection.published_after]
    return queries, reports, scores, systems


def _pooled_key(frame: pd.DataFrame) -> pd.Series:
    return frame["release_id"] + "/" + frame["arxiv_id"]


def pooled_board(engine: Engine, selection: Selection, judge_config: str, *, family: str = registry.CORE,
                 seed: int = 0, n_boot: int = DEFAULT_N_BOOT) -> list[dict]:
    """The board of one family over the selected queries, shaped like `load_leaderboard`'s rows (with the
    selection's label as `release_id`); [] when no selected query has a score."""
    names = registry.metric_names(family)
    queries, reports, scores, systems = _frames(engine, selection, judge_config, names)
    return _board(queries, reports, scores, systems, selection, judge_config, family, seed, n_boot)


def _board(queries: pd.DataFrame, reports: pd.DataFrame, scores: pd.DataFrame, systems: dict,
           selection: Selection, judge_config: str, family: str, seed: int, n_boot: int) -> list[dict]:
    keys = set(_pooled_key(queries))
    if not keys:
        return []
    scores = scores[_pooled_key(scores).isin(keys)].assign(arxiv_id=lambda f: _pooled_key(f))
    if selection.category:
        reports = reports[reports["primary_category"] == selection.category]
    counts = {s: (int(g["ok"].sum()), int(g["failed"].sum())) for s, g in reports.groupby("system_id")}
    published = pd.to_datetime(queries["published"], utc=True).dropna()
    first = published.min().date() if len(published) == len(queries) else None
    marks = {s: contamination_of(row.knowledge_cutoff, row.model_knowledge, first) for s, row in systems.items()}
    rows, details = compute_leaderboard(
        scores, release_id=selection.describe(), judge_config=judge_config, n_queries=len(keys),
        report_counts=counts, seed=seed, n_boot=n_boot, family=family,
        reference_systems={s for s, row in systems.items() if row.kind == "human_exemplar"},
        contamination={s: marks.get(s) for s in counts}, cutoffs={s: systems[s].knowledge_cutoff for s in counts
                                                                  if s in systems})
    by_system: dict[str, dict[str, dict]] = {}
    for d in details:
        by_system.setdefault(d["system_id"], {})[d["metric"]] = d
    for row in rows:
        row["family"] = family
        row["system_kind"] = systems[row["system_id"]].kind if row["system_id"] in systems else None
        row["metrics"] = by_system.get(row["system_id"], {})
        row["selection"] = {"releases": list(selection.releases), "category": selection.category,
                            "published_after": selection.published_after}
    return rows


def category_boards(engine: Engine, selection: Selection, judge_config: str, *, min_queries: int,
                    family: str = registry.CORE, seed: int = 0, n_boot: int = DEFAULT_N_BOOT
                    ) -> tuple[list[dict], list[CategoryBoard]]:
    """The overall board of the selection and one board per arXiv primary category with at least
    `min_queries` queries (fewer make a mean nobody should rank by), largest first. Each category row
    carries `overall_rank` and `rank_change` (positive: better placed in the category than overall)."""
    names = registry.metric_names(family)
    queries, reports, scores, systems = _frames(engine, selection, judge_config, names)
    overall = _board(queries, reports, scores, systems, selection, judge_config, family, seed, n_boot)
    overall_rank = {r["system_id"]: r["rank"] for r in overall}
    sizes = queries.groupby(queries["primary_category"].fillna("unknown")).size().sort_values(ascending=False)
    boards = []
    for category, n in sizes.items():
        if n < min_queries or category == "unknown":
            continue
        chosen = Selection(selection.releases, selection.label, category, selection.published_after)
        rows = _board(queries[queries["primary_category"] == category], reports, scores, systems, chosen,
                      judge_config, family, seed, n_boot)
        for row in rows:
            before = overall_rank.get(row["system_id"])
            row["overall_rank"] = before
            row["rank_change"] = None if before is None or row["rank"] is None else before - row["rank"]
        boards.append(CategoryBoard(str(category), int(n), rows))
    return overall, boards


def unranked(rows: Sequence[dict]) -> list[str]:
    return [r["system_id"] for r in rows if r.get("contamination") == MAY_HAVE_SEEN]
