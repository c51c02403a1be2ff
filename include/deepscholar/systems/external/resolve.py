"""What an imported report's citations resolve to, and whether the import is fit to score as it is.

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.external.resolve`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import InfrastructureError
from deepscholar.release.spec import ReleaseSpec
from deepscholar.settings import Settings, current_settings
from deepscholar.systems.base import Report
from deepscholar.systems.external.formats.base import body_citations, unresolved_entry
from deepscholar.text import title_similarity
from deepscholar.text.citations import CitationStats, citation_stats

__all__ = ["DEFAULT_UNRESOLVED_SHARE", "TITLE_SEARCH", "TitleResolver", "finish_report", "quality_flags"]

log = logging.getLogger(__name__)

TITLE_SEARCH = ("arxiv", "corpus")  # corpus then arXiv title search | the corpus only
DEFAULT_UNRESOLVED_SHARE = 0.2
_CANDIDATES = 20

# Title words must all occur (title or abstract); similarity is then decided on the titles themselves.
_CORPUS_SQL = sa.text("""
    SELECT c.arxiv_id, c.title
    FROM corpus c, plainto_tsquery('english', :t) AS q(query)
    WHERE numnode(q.query) > 0 AND c.search_vector @@ q.query
    ORDER BY ts_rank_cd(c.search_vector, q.query) DESC, c.arxiv_id
    LIMIT :k""")


@dataclass(frozen=True)
class TitleMatch:
    arxiv_id: str
    title: str
    via: str  # corpus | arxiv_title_search
    similarity: float


class TitleResolver:
    """Title -> arXiv paper, from the corpus first, then arXiv title search; one lookup per title per import."""

    def __init__(self, engine: Engine, title_search: str = "arxiv", threshold: float | None = None,
                 arxiv_source: Any = None, settings: Settings | None = None) -> None:
        """`threshold`: the release spec's title match threshold unless given; `settings` (default: this
        process's) say where arXiv is."""
        if title_search not in TITLE_SEARCH:
            raise ValueError(f"title_search must be one of {', '.join(TITLE_SEARCH)}, not {title_search!r}")
        self.engine = engine
        self.title_search = title_search
        self.settings = settings or current_settings()
        self.threshold = threshold if threshold is not None else ReleaseSpec().title_match_threshold
        self._arxiv = arxiv_source
        self._cache: dict[str, TitleMatch | None] = {}
        self.n_arxiv_lookups = 0

    def _corpus(self, title: str) -> TitleMatch | None:
        with self.engine.connect() as conn:
            rows = conn.execute(_CORPUS_SQL, {"t": title, "k": _CANDIDATES}).all()
        best = max(((title_similarity(title, r.title), r.arxiv_id, r.title) for r in rows), default=None)
        if best and best[0] >= self.threshold:
            return TitleMatch(best[1], best[2], "corpus", round(best[0], 3))
        return None

    def _arxiv_search(self, title: str) -> TitleMatch | None:
        from deepscholar.sources.arxiv import ArxivSource

        if self._arxiv is None:
            self._arxiv = ArxivSource(api_url=self.settings.arxiv_api_url,
                                      delay_seconds=self.settings.arxiv_delay_seconds)
        self.n_arxiv_lookups += 1
        try:
            hits = self._arxiv.search_title(title, max_results=5)
        except InfrastructureError:
            raise
        except Exception as exc:  # after ArxivSource's retries: the service, not the report, failed
            raise InfrastructureError(
                f"arXiv title search at {self._arxiv.api_url} (or resolve titles from the corpus only: "
                "--title-search corpus)", exc) from exc
        best = max(((title_similarity(title, p.title), p.arxiv_id, p.title) for p in hits), default=None)
        if best and best[0] >= self.threshold:
            return TitleMatch(best[1], best[2], "arxiv_title_search", round(best[0], 3))
        return None

    def resolve(self, title: str) -> TitleMatch | None:
        key = " ".join(title.split()).casefold()
        if key not in self._cache:
            match = self._corpus(title)
            if match is None and self.title_search == "arxiv":
                match = self._arxiv_search(title)
            self._cache[key] = match
        return self._cache[key]

    @property
    def searched(self) -> str:
        return "the corpus or arXiv title search" if self.title_search == "arxiv" else "the corpus"


def _resolve_titles(report: Report, resolver: TitleResolver, unresolved: list[dict]) -> list[dict]:
    """Title-only cited sources become the arXiv paper their title names, or unresolved entries."""
    matches, kept = [], []
    cited_numbers = set(body_citations(report.text))
    for s in report.sources:
        if not s.cited or s.arxiv_id or s.url or s.snippet.strip() or not s.title.strip():
            kept.append(s)
            continue
        match = resolver.resolve(s.title)
        if match is None:
            unresolved.append(unresolved_entry(s.idx, s.title, f"a title alone that matches nothing in {resolver.searched}",
                                               in_text=s.idx in cited_numbers))
            continue
        s.arxiv_id, s.url = match.arxiv_id, f"https://arxiv.org/abs/{match.arxiv_id}"
        matches.append({"n": s.idx, "entry": s.title, "arxiv_id": match.arxiv_id, "title": match.title,
                        "via": match.via, "similarity": match.similarity})
        s.title = match.title
        kept.append(s)
    report.sources[:] = kept
    return matches


def finish_report(report: Report, resolver: TitleResolver | None) -> CitationStats:
    """Resolve title-only entries, then list every unresolved cited number with its reason (trace)."""
    info = report.trace.setdefault("import", {})
    unresolved: list[dict] = list(info.get("unresolved") or [])
    if resolver is not None:
        matches = _resolve_titles(report, resolver, unresolved)
        if matches:
            info["title_matches"] = matches
    stats = citation_stats(report.text, report.sources)
    listed = {u["n"] for u in unresolved}
    for n in stats.unresolved:
        if n not in listed:
            unresolved.append(unresolved_entry(n, "", "no source with this number"))
    info["unresolved"] = sorted(unresolved, key=lambda u: u["n"])
    return stats


def quality_flags(report: Report, stats: CitationStats, max_unresolved_share: float) -> tuple[list[str], dict]:
    """(flags, the numbers behind them) for one imported report."""
    n_cited_sources = sum(1 for s in report.sources if s.cited)
    share = stats.n_unresolved / stats.n_distinct if stats.n_distinct else 0.0
    flags = []
    if n_cited_sources == 0:
        flags.append("no_sources")
    if stats.n_distinct == 0:
        flags.append("no_citations")
    if share > max_unresolved_share:
        flags.append("unresolved_citations")
    return flags, {"n_cited_numbers": stats.n_distinct, "n_unresolved": stats.n_unresolved,
                   "unresolved_share": round(share, 4), "max_unresolved_share": max_unresolved_share,
                   "n_sources": n_cited_sources, "n_retrieved_uncited": len(report.sources) - n_cited_sources}
