"""Step 7: the release judge labels each exemplar reference's importance and extracts each exemplar's nuggets."""

from __future__ import annotations

import logging

import sqlalchemy as sa

from deepscholar import db
from deepscholar.release.context import ReleaseContext

__all__ = ["label_importance", "nuggetize_exemplars"]

log = logging.getLogger("deepscholar.release")


def _judge(ctx: ReleaseContext):
    from deepscholar.release.judging import make_release_judge

    # The judge is the spec's (it decides the labels); where its provider is and how many requests it has in
    # flight (DEEPSCHOLAR_RELEASE_JUDGE_CONCURRENCY), this process's settings.
    return make_release_judge(ctx.spec.judge, ctx.engine, api_base=ctx.settings.judge_api_base,
                              concurrency=ctx.settings.release_judge_concurrency)


def _queries(conn: sa.Connection, release_id: str) -> list[dict]:
    return [dict(r) for r in conn.execute(sa.text(
        "SELECT arxiv_id, title, abstract, section_text FROM release_queries WHERE release_id = :r "
        "ORDER BY arxiv_id"), {"r": release_id}).mappings()]


def label_importance(ctx: ReleaseContext) -> dict:
    """Label each exemplar reference important or not (METRICS.md: reference coverage)."""
    from deepscholar.release.judging import QueryContext, ReferenceContext

    judge = _judge(ctx)
    counts = {"important": 0, "not_important": 0, "unscored": 0}
    with ctx.engine.connect() as conn:
        queries = _queries(conn, ctx.release_id)
    for n, q in enumerate(queries, start=1):
        with ctx.engine.connect() as conn:
            refs = [dict(r) for r in conn.execute(sa.text(
                "SELECT * FROM exemplar_references WHERE release_id = :r AND arxiv_id = :a ORDER BY cite_key"),
                {"r": ctx.release_id, "a": q["arxiv_id"]}).mappings()]
        # All of a query's references are judged together (a judge may rank them against each other),
        # and only when one of them lacks a label from this judge.
        if all(r["is_important"] is not None and r["importance_judge"] == judge.config_id for r in refs):
            continue
        verdicts = judge.label_importance(
            QueryContext(q["arxiv_id"], q["title"], q["abstract"], q["section_text"]),
            [ReferenceContext(cite_key=r["cite_key"], title=r["resolved_title"] or r["bib_title"] or "",
                              authors=r["bib_authors"] or "",
                              snippet=r["resolved_abstract"] or _bib_venue(r),
                              arxiv_id=r["resolved_arxiv_id"]) for r in refs])
        rows = []
        for ref, verdict in zip(refs, verdicts, strict=True):
            if verdict.value is None:
                counts["unscored"] += 1
                rows.append({"release_id": ctx.release_id, "arxiv_id": q["arxiv_id"], "cite_key": ref["cite_key"],
                             "is_important": None, "importance_judge": judge.config_id,
                             "importance_reason": f"unscored: {verdict.unscored_reason}"})
                continue
            counts["important" if verdict.value else "not_important"] += 1
            rows.append({"release_id": ctx.release_id, "arxiv_id": q["arxiv_id"], "cite_key": ref["cite_key"],
                         "is_important": bool(verdict.value), "importance_judge": judge.config_id,
                         "importance_reason": getattr(verdict, "reason", None)})
        with ctx.engine.begin() as conn:
            db.upsert(conn, "exemplar_references", rows, key=["release_id", "arxiv_id", "cite_key"])
        log.info("importance %d of %d queries: %s (%d references)", n, len(queries), q["arxiv_id"], len(refs))
    log.info("importance labels: %s", counts)
    return counts


def _bib_venue(ref: dict) -> str:
    """What a bibliography entry says beyond its title, when no abstract was found."""
    fields = ref["bib_fields"] or {}
    parts = [fields.get(k) for k in ("journal", "booktitle", "publisher", "howpublished", "note")]
    return ", ".join(p for p in parts + [ref["bib_year"]] if p)


def nuggetize_exemplars(ctx: ReleaseContext) -> dict:
    """Extract and label the exemplar's nuggets once per query (METRICS.md: nugget coverage)."""
    from deepscholar.release.judging import QueryContext

    judge = _judge(ctx)
    counts = {"queries": 0, "nuggets": 0, "vital": 0, "unscored": 0}
    with ctx.engine.connect() as conn:
        queries = _queries(conn, ctx.release_id)
        done = set(conn.execute(sa.text(
            "SELECT DISTINCT arxiv_id FROM nuggets WHERE release_id = :r AND judge_config = :j"),
            {"r": ctx.release_id, "j": judge.config_id}).scalars())
    for n, q in enumerate(queries, start=1):
        if q["arxiv_id"] in done:
            continue
        verdict = judge.nuggetize(QueryContext(q["arxiv_id"], q["title"], q["abstract"], q["section_text"]))
        if verdict.value is None:
            counts["unscored"] += 1
            log.warning("nuggets %d of %d: %s unscored: %s", n, len(queries), q["arxiv_id"], verdict.unscored_reason)
            continue
        rows = [{"release_id": ctx.release_id, "arxiv_id": q["arxiv_id"], "nugget_idx": i, "text": nug.text,
                 "importance": nug.importance, "judge_config": judge.config_id}
                for i, nug in enumerate(verdict.value)]
        with ctx.engine.begin() as conn:
            conn.execute(sa.text("DELETE FROM nuggets WHERE release_id = :r AND arxiv_id = :a"),
                         {"r": ctx.release_id, "a": q["arxiv_id"]})
            db.upsert(conn, "nuggets", rows, key=["release_id", "arxiv_id", "nugget_idx"])
        counts["queries"] += 1
        counts["nuggets"] += len(rows)
        counts["vital"] += sum(r["importance"] == "vital" for r in rows)
        log.info("nuggets %d of %d: %s -> %d nuggets", n, len(queries), q["arxiv_id"], len(rows))
    log.info("nuggets: %s", counts)
    return counts
