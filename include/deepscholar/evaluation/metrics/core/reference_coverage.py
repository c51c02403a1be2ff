"""Reference coverage (METRICS.md, Retrieval quality): the share of the exemplar's important arXiv
references that the report also cites.

Definition: docs/METRICS.md, "`reference_coverage`".
Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.core.reference_coverage`.
"""

from __future__ import annotations

from collections.abc import Sequence

from deepscholar.evaluation.metrics.base import ItemJudgment, JudgeFreeMetric, ReportContext, Score
from deepscholar.evaluation.metrics.papers import TITLE_RULE, PaperMatch, arxiv_papers, match_papers

__all__ = ["METRIC", "ReferenceCoverage", "match_important"]


def match_important(sources: Sequence, important: Sequence) -> list[PaperMatch]:
    """A one-to-one matching of S to E (entries resolved to papers first; evaluation/metrics/papers.py)."""
    return match_papers(arxiv_papers(sources, important), arxiv_papers(important, sources))


class ReferenceCoverage(JudgeFreeMetric):
    name = "reference_coverage"
    dimension = "retrieval_quality"
    position = 2  # column within the dimension
    label = "Ref cov"  # the leaderboard's column heading (Table 2)
    # d2: entries resolved to papers first; a title match only where one side lacks an arXiv id (never, in
    # RC: S and E are on arXiv), so a different id is a different paper. d1 matched titles >= 0.8 across ids.
    # d3: ids read in any written case (`arxiv.org/abs/HEP-TH/9901001v1` is hep-th/9901001) and LaTeX accents
    # in titles read as their letters, both of which decide which entries are one paper.
    definition = "d3"

    def score(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[Score]:
        if report.is_human_exemplar:
            # METRICS.md, the human-exemplar row: RC is 1 by construction.
            return [Score("score", 1.0, details={"by_construction": True})]
        important = arxiv_papers(report.query.important_arxiv, report.cited_sources)
        if not important:
            reason = "no important exemplar reference on arXiv (|E| = 0); RC is undefined for this query"
            return [Score("score", None, reason, details={"n_important": 0})]
        sources = arxiv_papers(report.cited_sources, report.query.important_arxiv)
        matches = match_papers(sources, important)
        matched = {id(m.reference) for m in matches}
        details = {
            "n_important": len(important),
            "n_sources": len(sources),
            "n_matched": len(matches),
            "title_rule": TITLE_RULE,
            "matched": [m.as_detail() for m in matches],
            "unmatched": [e.first.cite_key for e in important if id(e) not in matched],
        }
        return [Score("score", len(matches) / len(important), details=details)]


METRIC = ReferenceCoverage()
