"""Reference coverage (METRICS.md, Retrieval quality): the share of the exemplar's important arXiv
references that the report also cites.

RC = |S ∩ E| / |E|. A source s matches an important reference e by version-less arXiv id, else by
normalised-title similarity >= TITLE_MATCH_THRESHOLD. The intersection is a one-to-one matching: each e
is covered at most once and each s covers at most one e (a paper is one paper), id matches first, then
title matches from the most similar pair down. The title key and similarity are the project's shared ones
(deepscholar.text): `normalise_title` casefolds, drops LaTeX accents, commands and braces, Unicode
accents and punctuation, and collapses spaces; `title_similarity` is difflib's SequenceMatcher ratio of
the two keys (1.0 when the keys are equal, 0.0 when either is empty).

No judge: the importance labels were made once per query when the release was built.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from deepscholar.evaluation.base import (
    ExemplarReference,
    ItemJudgment,
    JudgeFreeMetric,
    ReportContext,
    Score,
    SourceDoc,
)
from deepscholar.text import normalise_title, strip_arxiv_version, title_similarity

if TYPE_CHECKING:
    pass

__all__ = ["METRIC", "ReferenceCoverage", "TITLE_MATCH_THRESHOLD", "BY_ARXIV_ID", "Match", "match_important",
           "match_one_to_one",
           "normalise_title", "title_similarity", "version_less"]

# METRICS.md: "else by normalised-title similarity >= 0.8".
TITLE_MATCH_THRESHOLD = 0.8


def version_less(arxiv_id: str | None) -> str | None:
    """The id without its vN suffix, so 2401.00001v2 and 2401.00001 are the same paper."""
    if not arxiv_id or not arxiv_id.strip():
        return None
    return strip_arxiv_version(arxiv_id)[0]


@dataclass(frozen=True)
class Match:
    reference: ExemplarReference
    source: SourceDoc
    by: str  # "id" or "title"
    similarity: float | None = None  # the title similarity, for title matches

    def as_detail(self) -> dict:
        out: dict[str, Any] = {
            "cite_key": self.reference.cite_key, "arxiv_id": version_less(self.reference.arxiv_id),
            "by": self.by, "source_idx": self.source.idx, "source_arxiv_id": version_less(self.source.arxiv_id)}
        if self.similarity is not None:
            out["similarity"] = round(self.similarity, 4)
        return out


def _distinct_by_id(items: Sequence, id_of) -> list:
    """First item per version-less id (two cite keys or two [n] for one paper are one paper)."""
    seen: dict[str, object] = {}
    for it in items:
        key = version_less(id_of(it))
        if key and key not in seen:
            seen[key] = it
    return list(seen.values())


def match_important(sources: Sequence[SourceDoc], important: Sequence[ExemplarReference],
                    threshold: float = TITLE_MATCH_THRESHOLD) -> list[Match]:
    """A one-to-one matching of S to E: by id first, then by title, most similar pairs first."""
    sources = _distinct_by_id(sources, lambda s: s.arxiv_id)
    important = _distinct_by_id(important, lambda e: e.arxiv_id)
    return match_one_to_one(sources, important, (BY_ARXIV_ID,), threshold)


# An exact key of match_one_to_one: (how the match is recorded, the key of a source or a reference).
BY_ARXIV_ID: tuple[str, Callable[[Any], str | None]] = ("id", lambda paper: version_less(paper.arxiv_id))


def match_one_to_one(sources: Sequence[SourceDoc], references: Sequence[ExemplarReference],
                     keys: Sequence[tuple[str, Callable[[Any], str | None]]],
                     threshold: float = TITLE_MATCH_THRESHOLD) -> list[Match]:
    """Each reference matched to at most one source and each source to at most one reference: by each exact
    key of `keys` in turn ((name, key function); a None key never matches), then by title similarity >=
    `threshold` among what is left, most similar pairs first (ties: reference order, then source order).
    Matches come out in reference order."""
    matches: list[Match] = []
    open_refs, open_sources = list(references), list(sources)
    for by, key_of in keys:
        source_by_key: dict[str, SourceDoc] = {}
        for s in open_sources:
            key = key_of(s)
            if key and key not in source_by_key:
                source_by_key[key] = s
        used: set[int] = set()
        still_open: list[ExemplarReference] = []
        for e in open_refs:
            key = key_of(e)
            found = source_by_key.get(key) if key else None
            if found is not None and id(found) not in used:
                matches.append(Match(e, found, by))
                used.add(id(found))
            else:
                still_open.append(e)
        open_refs, open_sources = still_open, [s for s in open_sources if id(s) not in used]
    candidates = []
    for i, e in enumerate(open_refs):
        for j, s in enumerate(open_sources):
            sim = title_similarity(e.title, s.title)
            if sim >= threshold:
                candidates.append((-sim, i, j))
    taken_refs: set[int] = set()
    taken_sources: set[int] = set()
    for neg_sim, i, j in sorted(candidates):
        if i in taken_refs or j in taken_sources:
            continue
        taken_refs.add(i)
        taken_sources.add(j)
        matches.append(Match(open_refs[i], open_sources[j], "title", -neg_sim))
    order = {id(e): k for k, e in enumerate(references)}
    return sorted(matches, key=lambda m: order[id(m.reference)])


class ReferenceCoverage(JudgeFreeMetric):
    name = "reference_coverage"
    dimension = "retrieval_quality"
    position = 2  # column within the dimension
    label = "Ref cov"  # the leaderboard's column heading (Table 2)

    def score(self, report: ReportContext, judgments: Sequence[ItemJudgment]) -> list[Score]:
        if report.is_human_exemplar:
            # METRICS.md, the human-exemplar row: RC is 1 by construction.
            return [Score("score", 1.0, details={"by_construction": True})]
        important = _distinct_by_id(report.query.important_arxiv, lambda e: e.arxiv_id)
        if not important:
            reason = "no important exemplar reference on arXiv (|E| = 0); RC is undefined for this query"
            return [Score("score", None, reason, details={"n_important": 0})]
        sources = report.cited_arxiv_sources()
        matches = match_important(sources, important)
        matched_keys = {m.reference.cite_key for m in matches}
        details = {
            "n_important": len(important),
            "n_sources": len(_distinct_by_id(sources, lambda s: s.arxiv_id)),
            "n_matched": len(matches),
            "threshold": TITLE_MATCH_THRESHOLD,
            "matched": [m.as_detail() for m in matches],
            "unmatched": [e.cite_key for e in important if e.cite_key not in matched_keys],
        }
        return [Score("score", len(matches) / len(important), details=details)]


METRIC = ReferenceCoverage()
