"""Human labels for tests, written straight into annotation_items / human_labels (migration 0021), as an
`annotate import` would leave them, for the judged units a test picked (annotation_units.judged_units),
with the months' judge-vs-humans agreement stored as the import stores it (human_agreement_stats)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.evaluation.judge_validation.annotation_units import JudgedUnit, annotatable_metric
from deepscholar.evaluation.judge_validation.judge_vs_humans import store_agreement

__all__ = ["store_human_labels"]


def store_human_labels(engine: Engine, units: Iterable[JudgedUnit], labels: Mapping[str, Mapping[str, str]]) -> int:
    """Store the units as annotation items and `labels` ({annotator: {item_id: label}}) as their human labels;
    returns the number of labels written. Units nobody labelled are stored as items all the same."""
    units = list(units)
    with engine.begin() as conn:
        for u in units:
            metric = annotatable_metric(u.metric)
            conn.execute(sa.text("""
                INSERT INTO annotation_items (item_id, release_id, report_id, metric, item_key, sub_key, question,
                                              allowed_labels, content)
                VALUES (:i, :r, :rep, :m, :k, :s, :q, :allowed, CAST(:content AS jsonb))
                ON CONFLICT (item_id) DO NOTHING"""),
                {"i": u.item_id, "r": u.release_id, "rep": u.report_id, "m": u.metric, "k": u.item_key,
                 "s": u.unit.sub_key, "q": metric.annotation_question, "allowed": list(metric.annotation_labels),
                 "content": json.dumps(u.unit.content)})
        rows = [{"i": item, "a": annotator, "l": label}
                for annotator, given in labels.items() for item, label in given.items()]
        if rows:
            conn.execute(sa.text("""
                INSERT INTO human_labels (item_id, annotator, label) VALUES (:i, :a, :l)
                ON CONFLICT (item_id, annotator) DO UPDATE SET label = excluded.label"""), rows)
    for month in sorted({u.release_id for u in units}):  # after the labels commit, as an import does
        store_agreement(engine, month)
    return len(rows)
