"""Document importance (METRICS.md, Retrieval quality): are the papers a report cites as notable as the
ones the human authors cited?

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.core.document_importance`.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from deepscholar.evaluation.metrics.base import ItemJudgment, JudgeFreeMetric, ReportContext, Score
from deepscholar.evaluation.metrics.papers import Paper, arxiv_papers

__all__ = ["METRIC", "DocumentImportance", "MAX_DI", "document_importance"]

MAX_DI = 1.0  # METRICS.md: min(..., 1)


def _counts(papers: Sequence[Paper]) -> dict[str, int | None]:
    """arXiv key -> frozen cited-by count of each paper (its first entry's that has one)."""
    return {p.arxiv_key: p.cited_by_count for p in papers if p.arxiv_key}


def document_importance(source_counts: dict[str, int | None],
                        exemplar_counts: dict[str, int | None]) -> tuple[float | None, str | None, dict]:
    """(value, unscored_reason, details) from the frozen counts of S and S*, by the rules above."""
    ref_known = sorted(c for c in exemplar_counts.values() if c is not None)
    details: dict = {
        "n_sources": len(source_counts),
        "n_exemplar_arxiv": len(exemplar_counts),
        "n_exemplar_with_count": len(ref_known),
    }
    if not ref_known:
        return None, (f"no frozen cited-by count for any of the exemplar's {len(exemplar_counts)} arXiv "
                      "references (S*); DI has no scale for this query"), details
    ref_median = statistics.median(ref_known)
    details["median_exemplar"] = ref_median
    if ref_median == 0:
        reason = "median cited-by count of the exemplar's arXiv references (S*) is 0; DI is undefined"
        return None, reason, details
    if not source_counts:
        return 0.0, None, details
    known = sorted(c for c in source_counts.values() if c is not None)
    missing = sorted(k for k, c in source_counts.items() if c is None)
    details |= {"n_sources_with_count": len(known), "n_sources_missing_count": len(missing),
                "sources_missing_count": missing}
    if not known:
        return None, (f"none of the report's {len(source_counts)} cited arXiv papers has a frozen cited-by "
                      "count"), details
    src_median = statistics.median(known)
    ratio = src_median / ref_median
    details |= {"median_sources": src_median, "ratio": ratio, "capped": ratio > MAX_DI}
    return min(ratio, MAX_DI), None, details


class DocumentImportance(JudgeFreeMetric):
    name = "document_importance"
    dimension = "retrieval_quality"
    position = 3  # column within the dimension
    label = "Doc imp"  # the leaderboard's column heading (Table 2)
    definition = "d2"  # d2: S and S* resolved to papers (d1: stored ids compared by hand)

    def prepare(self, engine, release_id: str) -> None:
        """Before judging: the OpenAlex cited-by counts of the papers the release's reports cite, looked up
        once and frozen under the release (METRICS.md), so every report is scored against the same counts."""
        from deepscholar.release.source_counts import freeze_source_counts

        freeze_source_counts(engine, release_id)

    def score(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[Score]:
        if report.is_human_exemplar:
            # METRICS.md, the human-exemplar row: DI is 1 by construction (S = S*).
            return [Score("score", 1.0, details={"by_construction": True})]
        sources = _counts(report.cited_arxiv_papers)
        exemplar = _counts(arxiv_papers(report.query.arxiv_references))
        value, reason, details = document_importance(sources, exemplar)
        return [Score("score", value, reason, details=details)]


METRIC = DocumentImportance()
