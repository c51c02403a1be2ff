"""Reference recall (ReportBench track, Bibliography): the share of the human authors' bibliography that
a report also cites, overall and per popularity quartile.

Definition: docs/METRICS.md, "`reference_recall`".
Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.reportbench.reference_recall`.
"""

from __future__ import annotations

from collections.abc import Sequence

from deepscholar.evaluation.metrics.base import ItemJudgment, JudgeFreeMetric, ReportContext, Score
from deepscholar.evaluation.metrics.papers import TitleRule, same_title
from deepscholar.evaluation.metrics.reportbench.base import bibliography

__all__ = ["METRIC", "ReferenceRecall", "quartile_of", "pooled_quartile_recall"]

QUARTILES = ("q1", "q2", "q3", "q4")


def quartile_of(counts: Sequence[int]) -> list[int]:
    """The quartile (0-3) of each count among `counts` (module docstring's cut points)."""
    if not counts:
        return []
    import numpy as np  # here, not at the top: the registry imports every metric, and a board reader needs none

    cuts = np.percentile(np.asarray(counts, dtype=float), [25, 50, 75])
    return [int(np.searchsorted(cuts, c, side="left")) for c in counts]


def pooled_quartile_recall(details: Sequence[dict]) -> float | None:
    """One quartile's recall pooled over queries, as ReportBench's paper reports its popularity analysis:
    Σ matched references of the quartile / Σ references of the quartile, from the stored details of that
    quartile's scores (`n_matched`, `n_references`); None when no query has a reference in it. Our board's
    quartile variant is the mean of per-query recalls instead."""
    total = sum(d.get("n_references", 0) for d in details)
    return sum(d.get("n_matched", 0) for d in details) / total if total else None


class ReferenceRecall(JudgeFreeMetric):
    name = "reference_recall"
    dimension = "bibliography"
    position = 1
    label = "Ref recall"
    variants = ("score", *QUARTILES)
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
            reason = "the exemplar has no bibliography (|G| = 0): recall is undefined for this query"
            return [Score(v, None, reason, details=details) for v in self.variants]
        scores = [Score("score", len(bib.matches) / len(bib.references), n_items=len(bib.references),
                        details=details)]
        counted = [(r, count) for r in bib.references if (count := r.cited_by_count) is not None]
        matched = {id(m.reference) for m in bib.matches}
        members: list[list] = [[] for _ in QUARTILES]
        for (ref, _), q in zip(counted, quartile_of([c for _, c in counted]), strict=True):
            members[q].append(ref)
        for name, refs in zip(QUARTILES, members, strict=True):
            hits = sum(id(r) in matched for r in refs)
            extra = {"n_references": len(refs), "n_matched": hits, "n_without_count": len(bib.references) - len(counted)}
            if refs:
                scores.append(Score(name, hits / len(refs), n_items=len(refs), details=extra))
            else:
                scores.append(Score(name, None, f"no reference of G in popularity quartile {name}", details=extra))
        return scores


METRIC = ReferenceRecall()
