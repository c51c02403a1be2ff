"""What ReportBench's two bibliography metrics share (reference_precision, reference_recall): the report's
cited papers S, the exemplar's whole bibliography G, and a one-to-one matching between them.

- S: the distinct papers the report cites (two [n] for one paper are one paper: the same version-less
  arXiv id, else DOI, else normalised title); a cited source with none of the three is a paper of its own
  that never matches.
- G: every reference of the exemplar section, on arXiv or not, resolved or not (an unresolved reference is
  still one the authors cited; leaving it out would flatter recall), distinct in the same way.
- A source matches a reference by arXiv id, else DOI, else normalised-title similarity >= 0.8 (the rule
  of reference coverage, plus the DOI step), each paper matched at most once on either side.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from deepscholar.evaluation.base import ExemplarReference, ReportContext, SourceDoc
from deepscholar.evaluation.metrics.reference_coverage import (
    BY_ARXIV_ID,
    TITLE_MATCH_THRESHOLD,
    Match,
    match_one_to_one,
    version_less,
)
from deepscholar.text import normalise_title

__all__ = ["Bibliography", "bibliography", "normalise_doi"]


def normalise_doi(doi: str | None) -> str | None:
    """A DOI as a comparable key: case-folded, without a resolver URL or `doi:` prefix; None when empty."""
    if not doi or not doi.strip():
        return None
    key = doi.strip().lower()
    for prefix in ("https://doi.org/", "http://doi.org/", "https://dx.doi.org/", "http://dx.doi.org/", "doi:"):
        if key.startswith(prefix):
            key = key[len(prefix):].strip()
    return key or None


def _paper_key(paper: SourceDoc | ExemplarReference) -> tuple[str, str] | None:
    arxiv = version_less(paper.arxiv_id)
    if arxiv:
        return ("arxiv", arxiv)
    doi = normalise_doi(paper.doi)
    if doi:
        return ("doi", doi)
    title = normalise_title(paper.title or "")
    return ("title", title) if title else None


def _distinct(papers: Sequence) -> list:
    seen: set[tuple[str, str]] = set()
    out = []
    for p in papers:
        key = _paper_key(p)
        if key is None or key not in seen:
            out.append(p)
            if key is not None:
                seen.add(key)
    return out


_KEYS = (BY_ARXIV_ID, ("doi", lambda p: normalise_doi(p.doi)))


@dataclass(frozen=True)
class Bibliography:
    cited: tuple[SourceDoc, ...]  # S
    references: tuple[ExemplarReference, ...]  # G
    matches: tuple[Match, ...]  # S ∩ G, one-to-one

    def details(self) -> dict:
        matched = {id(m.source) for m in self.matches}
        return {"ref_count": len(self.cited), "n_references": len(self.references), "n_matched": len(self.matches),
                "threshold": TITLE_MATCH_THRESHOLD,
                "matched": [{**m.as_detail(), "doi": normalise_doi(m.reference.doi)} for m in self.matches],
                "unmatched_sources": [s.idx for s in self.cited if id(s) not in matched]}


def bibliography(report: ReportContext) -> Bibliography:
    cited = tuple(_distinct(report.cited_sources))
    references = tuple(_distinct(report.query.exemplar_references))
    return Bibliography(cited, references, tuple(match_one_to_one(cited, references, _KEYS)))
