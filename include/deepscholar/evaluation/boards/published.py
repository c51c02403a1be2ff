"""A track's numbers as its authors' released scorer aggregates them, to set beside our board.

Our boards follow the papers' definitions (docs/METRICS.md, "Conformance"); where a published leaderboard
was made with the authors' released code and that code aggregates differently, a user comparing our
numbers with the published ones needs theirs too. These figures are computed from the same stored
per-report scores (`metric_scores`, the variants and details the metrics store for exactly this), never
judged again, and only on request (`deepscholar leaderboard --track NAME --as-published`): they are not
part of any board, its ranking or its gate.

- fact: DeepResearch Bench's `utils/stat.py` pools supported and judged pairs over the reports that cite
  anything (an uncited report is left out, not 0); effective citations = supported / those reports
  (metrics/fact/base.py: pooled_over_tasks). A report we leave unscored because a source went unanswered
  is left out whole; their scorer skips only that source.
- reportbench: ReportBench's precision over academic sources with an uncited report left out (the
  `academic` variant's mean), and recall per popularity quartile pooled over queries, as its paper
  reports it.
- claims: LiveDRBench's released prior-art scorer grades titles only (the `titles_only` variant's means).
  A query without ground-truth claims is unscored here and left out; their scorer averages it in at 0.
- race: the authors' aggregation is ours (a mean over the tasks scored), so nothing is added.
- the core: nothing is added. DeepScholar-bench's `eval/evaluator/evaluator.py: Evaluator.aggregate`
  averages every report with a missing value counted 0, and its reference coverage gives a query without
  important references 0 where we leave it unscored (docs/METRICS.md, Core conformance).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.metrics.fact.base import pooled_over_tasks
from deepscholar.evaluation.metrics.reportbench.reference_recall import pooled_quartile_recall

__all__ = ["Figure", "FIGURES", "aggregate", "load_published", "format_published"]

Rows = Sequence[tuple[float | None, dict]]  # (value, details) of one system's reports


def _mean_of_scored(rows: Rows) -> float | None:
    values = [v for v, _ in rows if v is not None]
    return sum(values) / len(values) if values else None


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
               "a matched work is a right claim; the connection is not graded", _mean_of_scored)
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
    SELECT r.system_id, s.kind, m.value, m.details, m.metric_version
    FROM reports r
    JOIN systems s ON s.system_id = r.system_id
    JOIN metric_scores m ON m.report_id = r.report_id
    WHERE r.release_id = :r AND r.status = 'ok' AND m.judge_config = :j AND m.metric = :m AND m.variant = :v"""


def load_published(engine: Engine, release_id: str, judge_config: str, family: str) -> list[dict[str, Any]]:
    """One row per system of the release under the judge: its figures (FIGURES[family]), the metric versions
    they were computed from, and whether it is the human exemplar (its values are fixed by construction).
    [] for a family whose authors aggregate as we do."""
    registry.ranking_metric(family)  # InvalidInput for an unknown track
    figures = FIGURES.get(family, ())
    rows_by_metric: dict[tuple[str, str], dict[str, list[tuple[float | None, dict]]]] = {}
    versions: dict[str, set[str]] = {}
    kinds: dict[str, str] = {}
    with engine.connect() as conn:
        for metric, variant in dict.fromkeys((f.metric, f.variant) for f in figures):
            by_system = rows_by_metric.setdefault((metric, variant), {})
            for system, kind, value, details, version in conn.execute(
                    sa.text(_ROWS_SQL), {"r": release_id, "j": judge_config, "m": metric, "v": variant}):
                by_system.setdefault(system, []).append((value, details or {}))
                versions.setdefault(system, set()).add(f"{metric} {version}")
                kinds[system] = kind
    values = aggregate(family, rows_by_metric)
    return [{"system_id": s, "human_exemplar": kinds.get(s) == "human_exemplar", **values[s],
             "metric_versions": sorted(versions.get(s, ()))} for s in sorted(values)]


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
