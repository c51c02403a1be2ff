"""Reference precision (ReportBench track, Bibliography): the share of the papers a report cites that the
human authors also cite.

Definition: docs/METRICS.md, "`reference_precision`".
Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.reportbench.reference_precision`.
"""

from __future__ import annotations

from collections.abc import Sequence

from deepscholar.evaluation.metrics.base import ItemJudgment, JudgeFreeMetric, ReportContext, Score
from deepscholar.evaluation.metrics.papers import TitleRule, same_title
from deepscholar.evaluation.metrics.reportbench.base import bibliography

__all__ = ["METRIC", "ReferencePrecision"]


class ReferencePrecision(JudgeFreeMetric):
    name = "reference_precision"
    dimension = "bibliography"
    position = 2
    label = "Ref prec"
    variants = ("score", "academic")
    definition = "d3"  # d3: the title step is text.same_title (d2: similarity >= 0.8); ids read in any case

    def __init__(self, title_rule: TitleRule = same_title) -> None:
        """`title_rule`: what decides a title match (bench/title_rule.py scores the d2 rule beside it)."""
        self.title_rule = title_rule

    def score(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[Score]:
        if report.is_human_exemplar:
            return [Score(v, 1.0, details={"by_construction": True}) for v in self.variants]
        bib = bibliography(report, self.title_rule)
        details = bib.details()
        if not bib.references:
            reason = "the exemplar has no bibliography (|G| = 0): nothing to match against"
            return [Score(v, None, reason, details=details) for v in self.variants]
        if not bib.cited:
            return [Score("score", 0.0, details=details),
                    Score("academic", None, "the report cites nothing: ReportBench leaves such a report out",
                          details=details)]
        academic = {id(p) for p in bib.academic}
        matched_academic = sum(id(m.source) in academic for m in bib.matches)
        return [Score("score", len(bib.matches) / len(bib.cited), n_items=len(bib.cited), details=details),
                Score("academic", matched_academic / len(academic) if academic else 0.0, n_items=len(academic),
                      details={**details, "n_matched_academic": matched_academic})]


METRIC = ReferencePrecision()
