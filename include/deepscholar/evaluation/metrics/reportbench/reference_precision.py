"""Reference precision (ReportBench track, Bibliography): the share of the papers a report cites that the
human authors also cite.

precision = |S ∩ G| / |S|, with S, G and the matching of metrics/reportbench/base.py (arXiv id, else DOI, else
the same title; G the exemplar's whole bibliography). A report citing nothing (|S| = 0) scores
0 (nothing was retrieved; ReportBench's released scorer leaves such a report out, as the `academic`
variant below does). Our choice where the definition is silent: a query whose exemplar has no
bibliography (|G| = 0) leaves the report unscored, as recall does, since there is nothing to be precise
against. The human exemplar scores 1 by construction (its sources are G). `ref_count` = |S| is in the
details. No judge: 0 calls.

Variant `academic` (ReportBench's own scoring, for setting our numbers beside theirs): precision over the
cited papers with an arXiv id or a DOI only (their scorer drops web pages and other non-papers from the
denominator), and no value for a report that cites nothing (their scorer leaves it out of the averages;
here it is unscored with that reason, so the variant's mean is theirs). A report whose citations are all
non-papers scores 0 there, as in theirs. The headline keeps every cited source and scores an uncited
report 0: a report citing a blog instead of the paper did not find the paper.

d2: S and G resolved to papers first (one paper under two numbers counts once whatever key each carries),
and a title match only where one side lacks the identifier the other has (evaluation/metrics/papers.py).
d3: that title match is `text.same_title` instead of similarity >= 0.8 (reference_recall.py says why);
identifiers are read in any written case.
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
