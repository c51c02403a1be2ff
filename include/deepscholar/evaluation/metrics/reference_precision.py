"""Reference precision (ReportBench track, Bibliography): the share of the papers a report cites that the
human authors also cite.

precision = |S ∩ G| / |S|, with S, G and the matching of metrics/_bibliography.py (arXiv id, else DOI, else
normalised title >= 0.8; G the exemplar's whole bibliography). A report citing nothing (|S| = 0) scores
0, as in ReportBench. Our choice where the definition is silent: a query whose exemplar has no
bibliography (|G| = 0) leaves the report unscored, as recall does, since there is nothing to be precise
against. The human exemplar scores 1 by construction (its sources are G). `ref_count` = |S| is in the
details. No judge: 0 calls.
"""

from __future__ import annotations

from collections.abc import Sequence

from deepscholar.evaluation.base import ItemJudgment, JudgeFreeMetric, ReportContext, Score
from deepscholar.evaluation.metrics._bibliography import bibliography

__all__ = ["METRIC", "ReferencePrecision"]


class ReferencePrecision(JudgeFreeMetric):
    name = "reference_precision"
    dimension = "bibliography"
    position = 2
    label = "Ref prec"

    def score(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[Score]:
        if report.is_human_exemplar:
            return [Score("score", 1.0, details={"by_construction": True})]
        bib = bibliography(report)
        if not bib.references:
            return [Score("score", None, "the exemplar has no bibliography (|G| = 0): nothing to match against",
                          details=bib.details())]
        if not bib.cited:
            return [Score("score", 0.0, details=bib.details())]
        return [Score("score", len(bib.matches) / len(bib.cited), n_items=len(bib.cited), details=bib.details())]


METRIC = ReferencePrecision()
