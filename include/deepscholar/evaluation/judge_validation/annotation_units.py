"""The annotation units of a month's judgments: what a human (or a second judge) answers, item by item.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.judge_validation.annotation_units`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import InvalidInput
from deepscholar.evaluation.judging.report_contexts import load_reports
from deepscholar.evaluation.metrics import registry
from deepscholar.evaluation.metrics.base import AnnotationUnit, ReportContext, annotatable

__all__ = ["JudgedUnit", "item_id", "annotatable_metric", "metrics_judged_on",
           "judged_units"]

CHUNK_REPORTS = 200  # report contexts loaded per round trip pair (context.load_reports)


@dataclass(frozen=True)
class JudgedUnit:
    """One unit of one stored judgment: where it comes from, what it asks and the judge's answer."""

    item_id: str
    release_id: str
    report_id: int
    system_id: str
    arxiv_id: str  # the query paper
    metric: str
    item_key: str
    judge_config: str
    unit: AnnotationUnit
    report: ReportContext

    @property
    def judge_label(self) -> str | None:
        return self.unit.judge_label


def item_id(report_id: int, metric: str, item_key: str, sub_key: str) -> str:
    """Stable, opaque name of one question: the same for every judge and every export."""
    digest = hashlib.sha256(f"{report_id}\x1f{metric}\x1f{item_key}\x1f{sub_key}".encode()).hexdigest()
    return f"{metric[:3]}-{digest[:20]}"


def annotatable_metric(name: str) -> Any:
    """The registered metric `name`, refusing one a human cannot validate (no judge, or no hook); typed Any:
    the annotation hooks are optional members of the Metric protocol."""
    metric = registry.get(name)
    if not annotatable(metric):
        raise InvalidInput(f"metric {name!r} asks no judge a question a human could answer (it is computed "
                           f"without a judge); annotatable metrics: {', '.join(registry.annotatable_metric_names())}")
    return metric


def metrics_judged_on(conn: sa.Connection, release_id: str, judge_config: str, *,
                      scored_only: bool = False) -> set[str]:
    """The metrics that HAVE judgments on the release under the judge config (scored ones only, when asked),
    read from the warehouse; not registry.judged_metric_names, the metrics a configuration would judge."""
    return set(conn.execute(sa.text(f"""
        SELECT DISTINCT j.metric FROM judgments j JOIN reports r USING (report_id)
        WHERE r.release_id = :r AND j.judge_config = :j{" AND j.label IS NOT NULL" if scored_only else ""}"""),
        {"r": release_id, "j": judge_config}).scalars())


def _judgment_rows(engine: Engine, release_id: str, metric: str, judge_config: str,
                   report_ids: Sequence[int] | None) -> list:
    where = " AND j.report_id = ANY(:ids)" if report_ids is not None else ""
    with engine.connect() as conn:
        return list(conn.execute(sa.text(f"""
            SELECT j.report_id, j.item_key, j.label
            FROM judgments j JOIN reports r USING (report_id)
            WHERE r.release_id = :r AND j.metric = :m AND j.judge_config = :j AND r.status = 'ok'{where}
            ORDER BY j.report_id, j.item_key"""),
            {"r": release_id, "m": metric, "j": judge_config, "ids": list(report_ids or [])}))


def judged_units(engine: Engine, release_id: str, metric: str, judge_config: str,
                 report_ids: Iterable[int] | None = None) -> Iterator[JudgedUnit]:
    """Every unit of `metric`'s stored judgments under `judge_config` on the release (or on the given
    reports), in (report, item key, sub key) order; unscored judgments give units with judge_label None.

    A stored item the metric no longer asks about (its report changed since) is skipped: there is no
    question left to show a human."""
    m = annotatable_metric(metric)
    rows = _judgment_rows(engine, release_id, metric, judge_config,
                          None if report_ids is None else sorted(set(report_ids)))
    by_report: dict[int, list] = {}
    for row in rows:
        by_report.setdefault(row.report_id, []).append(row)
    ids = list(by_report)
    for start in range(0, len(ids), CHUNK_REPORTS):
        for ctx in load_reports(engine, ids[start:start + CHUNK_REPORTS]):
            items = {it.key: it for it in m.items(ctx)}
            for row in by_report[ctx.report_id]:
                item = items.get(row.item_key)
                if item is None:
                    continue
                for unit in m.annotation_units(ctx, item, row.label):
                    yield JudgedUnit(item_id(ctx.report_id, metric, row.item_key, unit.sub_key), ctx.release_id,
                                     ctx.report_id, ctx.system_id, ctx.arxiv_id, metric, row.item_key,
                                     judge_config, unit, ctx)
