"""The upper-bound row: cite exactly the exemplar's important references that are on arXiv.

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.oracle`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa

from deepscholar.errors import SystemFailure
from deepscholar.search.base import SearchTool
from deepscholar.systems import config_schema as cs
from deepscholar.systems.base import Query, Report, Source, System, register_system

__all__ = ["OracleSystem", "important_arxiv_references"]


def important_arxiv_references(conn: sa.Connection, release_id: str, arxiv_id: str) -> list[dict]:
    """E for one query, one row per arXiv paper, in order of first citation in the exemplar."""
    from deepscholar.text.markers import cited_keys

    section = conn.execute(sa.text(
        "SELECT section_text FROM release_queries WHERE release_id = :r AND arxiv_id = :a"),
        {"r": release_id, "a": arxiv_id}).scalar()
    if section is None:
        raise SystemFailure(f"release {release_id} has no query {arxiv_id}")
    rows = conn.execute(sa.text("""
        SELECT e.cite_key, e.resolved_arxiv_id AS arxiv_id,
               coalesce(nullif(e.resolved_title, ''), c.title, e.bib_title, e.cite_key) AS title,
               coalesce(nullif(e.resolved_abstract, ''), nullif(c.abstract, ''), '') AS abstract
        FROM exemplar_references e LEFT JOIN corpus c ON c.arxiv_id = e.resolved_arxiv_id
        WHERE e.release_id = :r AND e.arxiv_id = :a AND e.is_important AND e.resolved_arxiv_id IS NOT NULL
        """), {"r": release_id, "a": arxiv_id}).mappings().all()
    position = {k: i for i, k in enumerate(cited_keys(section))}
    ordered = sorted(rows, key=lambda r: (position.get(r["cite_key"], len(position)), r["cite_key"]))
    by_paper: dict[str, dict] = {}
    for r in ordered:  # two bib entries for one paper are one source
        by_paper.setdefault(r["arxiv_id"], dict(r))
    return list(by_paper.values())


def first_sentence(abstract: str) -> str:
    from deepscholar.text.sentences import split_exemplar_sentences

    sentences = split_exemplar_sentences(" ".join(abstract.split()))
    return sentences[0] if sentences else ""


@register_system("oracle")
class OracleSystem(System):
    uses_search = False
    uses_model_knowledge = False  # no model writes its text: no knowledge cutoff applies
    version = "1"  # bump rule: systems/base.py System.version
    defaults = {"respect_cutoff": True}
    config_schema = {"respect_cutoff": cs.flag}

    @classmethod
    def models(cls, config: Mapping[str, Any]) -> tuple[str, ...]:
        return ()  # no model: the answer key's own sentences

    def generate(self, query: Query, search: SearchTool | None = None) -> Report:
        from deepscholar.systems.storage import source_dates

        respect_cutoff = bool(self.config.get("respect_cutoff", True))
        with self.context.engine.connect() as conn:
            refs = important_arxiv_references(conn, query.release_id, query.arxiv_id)
            candidates = [Source(idx=0, title=r["title"], snippet=r["abstract"] or r["title"],
                                 arxiv_id=r["arxiv_id"], url=f"https://arxiv.org/abs/{r['arxiv_id']}")
                          for r in refs]
            # The same dating rule as the leakage check in storage: corpus date, else the id's month.
            dates = source_dates(conn, candidates)
        sources: list[Source] = []
        after_cutoff: list[str | None] = []  # candidates all have an arXiv id; Source's field is optional
        for src, (date, basis) in zip(candidates, dates, strict=True):
            if respect_cutoff and date is not None and date >= query.cutoff:
                after_cutoff.append(src.arxiv_id)
                continue
            src.idx = len(sources) + 1
            src.published = date if basis == "corpus" else None
            sources.append(src)
        if not sources:
            raise SystemFailure("no important exemplar reference resolved to an arXiv paper before the cutoff"
                                if after_cutoff else "no important exemplar reference resolved to arXiv")
        lines = []
        for src in sources:
            body = (first_sentence(src.snippet) or src.title).strip().rstrip(".!?;: ")
            lines.append(f"{body} [{src.idx}].")
        trace = {"n_important_arxiv": len(refs), "cited": len(sources), "dropped_after_cutoff": after_cutoff,
                 "respect_cutoff": respect_cutoff}
        return Report(text=" ".join(lines) + "\n", sources=sources, trace=trace)
