"""A track's numbers as its authors' released scorer aggregates them, to set beside our board.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.boards.published`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import NotFound
from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.metrics.fact.base import pooled_over_tasks
from deepscholar.evaluation.metrics.reportbench.reference_recall import pooled_quartile_recall

__all__ = ["Figure", "FIGURES", "aggregate", "compute_published", "store_published", "has_published",
           "stored_published", "load_published", "format_published"]

Rows = Sequence[tuple[float | None, dict]]  # (value, details) of one system's reports


def _mean_of_scored(rows: Rows) -> float | None:
    values = [v for v, _ in rows if v is not None]
    return sum(values) / len(values) if values else None


def _mean_with_no_truth_as_zero(rows: Rows) -> float | None:
    """LiveDRBench's released grader gives a task without ground truth 0 and its aggregate averages it in; we
    leave such a task unscored (details n_gt 0), so it is counted here as their 0. Other unscored tasks (a
    judge that could not answer) stay out, as in any mean of ours."""
    values = [0.0 if v is None and d.get("n_gt") == 0 else v for v, d in rows]
    return _mean_of_scored([(v, {}) for v in values])


def _fact_accuracy(rows: Rows) -> float | None:
    return pooled_over_tasks([d for _, d in rows])[0]


def _fact_effective(rows: Rows) -> float | None:
    return pooled_over_tasks([d for _, d in rows])[1]


def _pooled_quartile(rows: Rows) -> float | None:
    return pooled_quartile_recall([d for _, d in rows if not d.get("by_construction")])


@dataclass(frozen=True)
class Figure:
    name: str  # the column's key (JSON, CSV)
    label: str  # its heading
    metric: str  # the stored scores it reads
    variant: str
    how: str  # what the authors' code does, in one line
    aggregate: Callable[[Rows], float | None]


FIGURES: dict[str, tuple[Figure, ...]] = {
    "fact": (
        Figure("citation_accuracy_pooled", "Accuracy (stat.py)", "citation_accuracy", "score",
               "supported / judged pairs, pooled over the reports that cite anything", _fact_accuracy),
        Figure("effective_citations_per_citing_report", "Effective (stat.py)", "citation_accuracy", "score",
               "supported pairs / reports that cite anything", _fact_effective),
    ),
    "reportbench": (
        Figure("reference_precision_academic", "Precision (academic)", "reference_precision", "academic",
               "papers with an arXiv id or DOI only; an uncited report left out", _mean_of_scored),
        *(Figure(f"reference_recall_{q}_pooled", f"Recall {q} pooled", "reference_recall", q,
                 "matched / references of the quartile, summed over queries", _pooled_quartile)
          for q in ("q1", "q2", "q3", "q4")),
    ),
    "claims": tuple(
        Figure(f"claims_{q}_titles_only", f"Claims {q[0].upper()} titles", f"claims_{q}", "titles_only",
               "a matched work is a right claim; the connection is not graded; a task without ground truth "
               "is 0", _mean_with_no_truth_as_zero)
        for q in ("precision", "recall", "f1")),
}


def aggregate(family: str, rows_by_metric: dict[tuple[str, str], dict[str, list[tuple[float | None, dict]]]]
              ) -> dict[str, dict[str, float | None]]:
    """{system: {figure name: value}} from {(metric, variant): {system: [(value, details)]}}."""
    figures = FIGURES.get(family, ())
    systems = sorted({s for by_system in rows_by_metric.values() for s in by_system})
    return {s: {f.name: f.aggregate(rows_by_metric.get((f.metric, f.variant), {}).get(s, [])) for f in figures}
            for s in systems}


_ROWS_SQL = """
    SELECT r.system_id, m.value, m.details, m.metric_version
    FROM reports r
    JOIN metric_scores m ON m.report_id = r.report_id
    WHERE r.release_id = :r AND r.status = 'ok' AND m.judge_config = :j AND m.metric = :m AND m.variant = :v"""


def compute_published(conn: sa.Connection, release_id: str, judge_config: str, family: str
                      ) -> dict[str, dict[str, Any]]:
    """{system: {figure name: value, "metric_versions": [...]}} from the stored per-report scores, as the
    roll-up computes them for the board version it writes (in its transaction, so from the same scores)."""
    figures = FIGURES.get(family, ())
    rows_by_metric: dict[tuple[str, str], dict[str, list[tuple[float | None, dict]]]] = {}
    versions: dict[str, set[str]] = {}
    for metric, variant in dict.fromkeys((f.metric, f.variant) for f in figures):
        by_system = rows_by_metric.setdefault((metric, variant), {})
        for system, value, details, version in conn.execute(
                sa.text(_ROWS_SQL), {"r": release_id, "j": judge_config, "m": metric, "v": variant}):
            by_system.setdefault(system, []).append((value, details or {}))
            versions.setdefault(system, set()).add(f"{metric} {version}")
    return {s: {**values, "metric_versions": sorted(versions.get(s, ()))}
            for s, values in aggregate(family, rows_by_metric).items()}


def store_published(conn: sa.Connection, release_id: str, judge_config: str, board_version: int,
                    families: Sequence[str]) -> int:
    """Compute and keep the figures of every family in `families` that has any, with board version
    `board_version` (what that version kept and no longer computes is deleted; a figure whose value is the
    same is not written). The roll-up calls this for a draft, or once for a published version whose rows it
    found unchanged. Returns the number of figures computed."""
    rows = [{"release_id": release_id, "judge_config": judge_config, "board_version": board_version,
             "family": family, "system_id": system, "figure": f.name, "value": values[f.name],
             "metric_versions": values["metric_versions"]}
            for family in families if family in FIGURES
            for system, values in compute_published(conn, release_id, judge_config, family).items()
            for f in FIGURES[family]]
    conn.execute(sa.text("""
        DELETE FROM board_published_figures WHERE release_id = :r AND judge_config = :j AND board_version = :v
          AND NOT ((family || ' ' || system_id || ' ' || figure) = ANY(:kept))"""),
        {"r": release_id, "j": judge_config, "v": board_version,
         "kept": [f"{r['family']} {r['system_id']} {r['figure']}" for r in rows]})
    if rows:  # a row whose value is the same is left alone: a re-run on unchanged scores writes nothing
        conn.execute(sa.text("""
            INSERT INTO board_published_figures
                (release_id, judge_config, board_version, family, system_id, figure, value, metric_versions)
            VALUES (:release_id, :judge_config, :board_version, :family, :system_id, :figure, :value,
                    :metric_versions)
            ON CONFLICT (release_id, judge_config, board_version, family, system_id, figure) DO UPDATE SET
                value = EXCLUDED.value, metric_versions = EXCLUDED.metric_versions, computed_at = now()
            WHERE (board_published_figures.value, board_published_figures.metric_versions)
                  IS DISTINCT FROM (EXCLUDED.value, EXCLUDED.metric_versions)"""), rows)
    return len(rows)


def has_published(conn: sa.Connection, release_id: str, judge_config: str, board_version: int) -> bool:
    """Whether the board version keeps its figures (one rolled up before migration 0036 has none)."""
    return bool(conn.execute(sa.text("""
        SELECT EXISTS (SELECT 1 FROM board_published_figures
                       WHERE release_id = :r AND judge_config = :j AND board_version = :v)"""),
        {"r": release_id, "j": judge_config, "v": board_version}).scalar())


_STORED_SQL = """
    SELECT f.family, f.system_id, s.kind, f.figure, f.value, f.metric_versions
    FROM board_published_figures f
    LEFT JOIN systems s ON s.system_id = f.system_id
    WHERE f.release_id = :r AND f.judge_config = :j AND f.board_version = :v
      AND (CAST(:f AS text) IS NULL OR f.family = :f)
    ORDER BY f.family, f.system_id, f.figure"""


def stored_published(conn: sa.Connection, release_id: str, judge_config: str, board_version: int,
                     family: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """{family: rows} of what board version `board_version` keeps: one row per system with its figures
    (FIGURES[family]), the metric versions they were computed from, and whether it is the human exemplar."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for fam, system, kind, figure, value, versions in conn.execute(
            sa.text(_STORED_SQL), {"r": release_id, "j": judge_config, "v": board_version, "f": family}):
        row = out.setdefault(fam, {}).setdefault(system, {
            "system_id": system, "human_exemplar": kind == "human_exemplar",
            **{f.name: None for f in FIGURES.get(fam, ())}, "metric_versions": set()})
        row[figure] = value
        row["metric_versions"].update(versions or ())
    return {fam: [{**r, "metric_versions": sorted(r["metric_versions"])} for _, r in sorted(rows.items())]
            for fam, rows in out.items()}


def load_published(engine: Engine, release_id: str, judge_config: str, family: str,
                   board_version: int) -> list[dict[str, Any]]:
    """The rows of one family's figures kept with a board version; [] for a family whose authors aggregate
    as we do. NotFound when the version keeps none though the family has figures (rolled up before they
    were kept: `deepscholar evaluate --release R` rolls it up again and keeps them)."""
    registry.ranking_metric(family)  # InvalidInput for an unknown track
    if family not in FIGURES:
        return []
    with engine.connect() as conn:
        if not has_published(conn, release_id, judge_config, board_version):
            raise NotFound(f"board version {board_version} of {release_id} ({judge_config}) keeps no published "
                           f"figures: it was rolled up before they were kept; `deepscholar evaluate --release "
                           f"{release_id}` rolls it up again and keeps them")
        return stored_published(conn, release_id, judge_config, board_version, family).get(family, [])


def format_published(rows: Sequence[dict], family: str, fmt: str = "table") -> str:
    """The figures as a table (default), JSON or CSV."""
    import csv
    import io
    import json

    figures = FIGURES.get(family, ())
    if fmt == "json":
        return json.dumps(list(rows), indent=2)
    if fmt == "csv":
        out = io.StringIO()
        writer = csv.writer(out, lineterminator="\n")
        writer.writerow(["system_id", *(f.name for f in figures)])
        for r in rows:
            writer.writerow([r["system_id"], *("" if r[f.name] is None else f"{r[f.name]:.4f}" for f in figures)])
        return out.getvalue().rstrip("\n")
    from tabulate import tabulate

    head = ["System", *(f.label for f in figures)]
    body = [[r["system_id"] + (" (reference)" if r["human_exemplar"] else ""),
             *("n/a" if r[f.name] is None else f"{r[f.name]:.3f}" for f in figures)] for r in rows]
    notes = [f"- {f.label}: {f.how} ({f.metric}.{f.variant})" for f in figures]
    versions = sorted({v for r in rows for v in r["metric_versions"]})
    return "\n".join([
        f"{family}: as the authors' released scorer aggregates (not our board; docs/METRICS.md, Conformance)",
        tabulate(body, head, disable_numparse=True), *notes, f"from metric versions: {', '.join(versions)}"])
