"""The human row: the query paper's own related-work section, as a report like any other.

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.exemplar`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import sqlalchemy as sa

from deepscholar.errors import SystemFailure
from deepscholar.search.base import SearchTool
from deepscholar.systems.base import Query, Report, Source, System, register_system
from deepscholar.text.markers import cited_keys, markers_to_numbers

__all__ = ["HumanExemplarSystem"]


def _bib_snippet(row: dict) -> str:
    """What an unresolved reference offers a reader: its bibliography entry."""
    parts = [row.get("bib_authors"), row.get("bib_title"), row.get("bib_year")]
    return ". ".join(p.strip() for p in parts if p and p.strip())


@register_system("human_exemplar")
class HumanExemplarSystem(System):
    uses_search = False
    uses_model_knowledge = False  # no model writes its text: no knowledge cutoff applies
    version = "1"  # bump rule: systems/base.py System.version
    config_schema: ClassVar[Mapping[str, Any]] = {}  # the paper's own section: nothing to configure

    @classmethod
    def models(cls, config: Mapping[str, Any]) -> tuple[str, ...]:
        return ()  # the paper's own section

    def generate(self, query: Query, search: SearchTool | None = None) -> Report:
        with self.context.engine.connect() as conn:
            section = conn.execute(sa.text(
                "SELECT section_text FROM release_queries WHERE release_id = :r AND arxiv_id = :a"),
                {"r": query.release_id, "a": query.arxiv_id}).scalar()
            refs = {r["cite_key"]: dict(r) for r in conn.execute(sa.text("""
                SELECT cite_key, resolved_arxiv_id, resolved_title, resolved_abstract, bib_title, bib_authors,
                       bib_year, bib_url, bib_doi, resolved_doi
                FROM exemplar_references WHERE release_id = :r AND arxiv_id = :a"""),
                {"r": query.release_id, "a": query.arxiv_id}).mappings()}
        if section is None:
            raise SystemFailure(f"release {query.release_id} has no query {query.arxiv_id}")

        # Numbers in order of first citation; two keys resolving to one arXiv paper share a number.
        number_of: dict[str, int | None] = {}
        by_paper: dict[str, int] = {}
        sources: list[Source] = []
        for key in cited_keys(section):
            row = refs.get(key)
            if row is None:
                number_of[key] = None
                continue
            arxiv_id = row["resolved_arxiv_id"] or None
            if arxiv_id and arxiv_id in by_paper:
                number_of[key] = by_paper[arxiv_id]
                continue
            idx = len(sources) + 1
            number_of[key] = idx
            # Resolved (arXiv, or OpenAlex without an arXiv id): the resolved record; else the bib entry.
            title = row["resolved_title"] or row["bib_title"] or key
            snippet = row["resolved_abstract"] or _bib_snippet(row) or title
            if arxiv_id:
                by_paper[arxiv_id] = idx
                url: str | None = f"https://arxiv.org/abs/{arxiv_id}"
            else:
                doi = row["resolved_doi"] or row["bib_doi"]
                url = row["bib_url"] or (f"https://doi.org/{doi}" if doi else None)
            sources.append(Source(idx=idx, title=title, snippet=snippet, arxiv_id=arxiv_id, url=url))
        text, dropped = markers_to_numbers(section, number_of)
        if not text.strip():
            raise SystemFailure("the exemplar section is empty")
        trace = {"cite_keys": len(number_of), "sources": len(sources),
                 "resolved_to_arxiv": sum(1 for s in sources if s.arxiv_id),
                 "dropped_keys": len(dropped), "dropped_key_names": dropped[:50]}
        return Report(text=text.rstrip() + "\n", sources=sources, trace=trace)
