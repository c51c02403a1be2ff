"""What ReportBench's two bibliography metrics share (reference_precision, reference_recall): the report's
cited papers S, the exemplar's whole bibliography G, and a one-to-one matching between them.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.reportbench.base`.
"""

from __future__ import annotations

from dataclasses import dataclass

from deepscholar.evaluation.metrics.base import ReportContext
from deepscholar.evaluation.metrics.papers import (
    TITLE_RULE,
    Paper,
    PaperMatch,
    TitleRule,
    match_papers,
    resolve_papers,
    same_title,
)

__all__ = ["Bibliography", "bibliography", "is_academic"]


def is_academic(paper: Paper) -> bool:
    """A paper a user can look up: one of its own stored entries carries an arXiv id or a DOI (keys linked
    from the other side's entries do not count: a web page titled like a paper is still a web page)."""
    return any((e.arxiv_id or "").strip() or (e.doi or "").strip() for e in paper.entries)


@dataclass(frozen=True)
class Bibliography:
    cited: tuple[Paper, ...]  # S
    references: tuple[Paper, ...]  # G
    matches: tuple[PaperMatch, ...]  # S ∩ G, one-to-one

    @property
    def academic(self) -> tuple[Paper, ...]:
        """The papers of S with an arXiv id or a DOI."""
        return tuple(p for p in self.cited if is_academic(p))

    def details(self) -> dict:
        matched = {id(m.source) for m in self.matches}
        return {"ref_count": len(self.cited), "n_academic": len(self.academic), "n_references": len(self.references),
                "n_matched": len(self.matches), "title_rule": TITLE_RULE,
                "matched": [{**m.as_detail(), "doi": min(m.reference.dois) if m.reference.dois else None}
                            for m in self.matches],
                "unmatched_sources": [p.first.idx for p in self.cited if id(p) not in matched]}


def bibliography(report: ReportContext, title_rule: TitleRule = same_title) -> Bibliography:
    """S, G and their matching for one report (`title_rule`: the metric's, module docstring)."""
    sources, refs = report.cited_sources, report.query.exemplar_references
    cited = tuple(resolve_papers(sources, known=refs))
    references = tuple(resolve_papers(refs, known=sources))
    return Bibliography(cited, references, tuple(match_papers(cited, references, title_rule)))
