"""The claims track's release-time ground truth: one claim per important exemplar reference.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.claims.ground_truth`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from deepscholar import db
from deepscholar.db import SCHEMA
from deepscholar.gx import Check
from deepscholar.llm import answer_shapes
from deepscholar.llm.client import Judged, ParseError, parse_json_array
from deepscholar.release.track_declaration import TrackArtefacts
from deepscholar.text.markers import cited_keys, strip_citation_markers
from deepscholar.text.sentences import split_exemplar_sentences

__all__ = ["ARTEFACTS", "GroundTruthReference", "build_gt_claims", "citing_sentences", "local_connection",
           "parse_connections", "LOCAL_VERSION", "PROMPT", "LOCAL_WORDS"]

log = logging.getLogger("deepscholar.release")

LOCAL_VERSION = "claims_local_v1"
PROMPT = "gt_claims_v1"
LOCAL_WORDS = 40  # the local judge's connection: the first citing sentence, cut to this many words


@dataclass(frozen=True)
class GroundTruthReference:
    """An important exemplar reference as the build reads it."""

    cite_key: str
    title: str | None
    arxiv_id: str | None
    doi: str | None
    evidence: tuple[str, ...]  # the exemplar sentences citing it, markers removed, in section order


# --------------------------------------------------------------------------------------------- parsing

def citing_sentences(section_text: str) -> dict[str, list[str]]:
    """{cite key: the section's sentences citing it, markers removed}: each distinct sentence once per key,
    in section order; a sentence left empty without its markers is none."""
    out: dict[str, dict[str, None]] = {}
    for sentence in split_exemplar_sentences(section_text or ""):
        keys = cited_keys(sentence)
        if not keys:
            continue
        clean = " ".join(strip_citation_markers(sentence).split())
        if not any(ch.isalnum() for ch in clean):
            continue
        for key in keys:
            out.setdefault(key, {})[clean] = None
    return {k: list(v) for k, v in out.items()}


CONNECTION_ANSWER_TOKENS = 96  # one reference's connection: a sentence


def parse_connections(text: str, count: int) -> list[str]:
    """Exactly `count` non-empty strings, each made one line (runs of white space become one space)."""
    items = parse_json_array(text)
    if len(items) != count:
        raise ParseError(f"expected exactly {count} connections, one per numbered work, got {len(items)}")
    out = []
    for n, item in enumerate(items, 1):
        if not isinstance(item, str) or not item.strip():
            raise ParseError(f"connection {n} must be a non-empty string, got {item!r}")
        out.append(" ".join(item.split()))
    return out


def _title(ref: GroundTruthReference) -> str:
    return " ".join((ref.title or "").split())


def local_connection(ref: GroundTruthReference) -> str:
    """The local judge's connection (module docstring): deterministic, from the exemplar's own words."""
    if ref.evidence:
        words = ref.evidence[0].split()
        return " ".join(words[:LOCAL_WORDS]) + (" …" if len(words) > LOCAL_WORDS else "")
    return _title(ref) or f"the work cited as {ref.cite_key}"


def _listed(refs: Sequence[GroundTruthReference]) -> str:
    lines = []
    for n, ref in enumerate(refs, 1):
        cited = " ".join(" ".join(ref.evidence).split()) or "(no sentence of the section cites it by marker)"
        lines.append(f"{n}. Work: {_title(ref) or '(title unknown)'} | Cited in: {cited}")
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------- judges

def _llm_connections(client, prompt, query: dict, refs: Sequence[GroundTruthReference]) -> Judged[list[str]]:
    """One call for all of a query's important references: their connections, in order."""
    return client.ask([{"role": "user", "content": prompt.render(
        title=query["title"], abstract=query["abstract"], references=_listed(refs), count=len(refs))}],
        lambda text: parse_connections(text, len(refs)), purpose="release.gt_claims",
        max_tokens=answer_shapes.per_item_budget(len(refs), CONNECTION_ANSWER_TOKENS),
        schema=answer_shapes.array_of(answer_shapes.TEXT, len(refs)))


def _is_local(ctx) -> bool:
    return ctx.spec.judge.strip() == "local"


def _judge_config(ctx) -> str:
    if _is_local(ctx):
        from deepscholar.llm.local_judge import MODEL_ID

        return f"local:{MODEL_ID}:{LOCAL_VERSION}"
    return f"llm:{ctx.spec.judge.strip()}:{PROMPT}"


def _prompt_versions(ctx) -> dict:
    return {"local": LOCAL_VERSION} if _is_local(ctx) else {"gt_claims": PROMPT}


# ------------------------------------------------------------------------------------------------ build

def _important_references(ctx) -> dict[str, list[GroundTruthReference]]:
    with ctx.engine.connect() as conn:
        sections = dict(conn.execute(sa.text(
            f"SELECT arxiv_id, section_text FROM {SCHEMA}.release_queries WHERE release_id = :r"),
            {"r": ctx.release_id}).all())
        rows = conn.execute(sa.text(f"""
            SELECT arxiv_id, cite_key, coalesce(resolved_title, bib_title) AS title, resolved_arxiv_id,
                   coalesce(resolved_doi, bib_doi) AS doi
            FROM {SCHEMA}.exemplar_references WHERE release_id = :r AND is_important
            ORDER BY arxiv_id, cite_key"""), {"r": ctx.release_id}).mappings().all()
    evidence = {a: citing_sentences(text) for a, text in sections.items()}
    out: dict[str, list[GroundTruthReference]] = {}
    for r in rows:
        out.setdefault(r["arxiv_id"], []).append(GroundTruthReference(
            r["cite_key"], r["title"], r["resolved_arxiv_id"] or None, r["doi"] or None,
            tuple(evidence.get(r["arxiv_id"], {}).get(r["cite_key"], ()))))
    return out


def _query_states(ctx, judge_config: str) -> list[dict]:
    """Every query of the release with its important references, its claims from `judge_config` on them
    and all its stored claims, counted: what build_gt_claims decides to keep or (re)build from."""
    with ctx.engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(f"""
            SELECT q.arxiv_id, q.title, q.abstract,
                   (SELECT count(*) FROM {SCHEMA}.exemplar_references e WHERE e.release_id = q.release_id
                      AND e.arxiv_id = q.arxiv_id AND e.is_important) AS n_important,
                   (SELECT count(*) FROM {SCHEMA}.gt_claims c JOIN {SCHEMA}.exemplar_references e
                      USING (release_id, arxiv_id, cite_key)
                    WHERE c.release_id = q.release_id AND c.arxiv_id = q.arxiv_id AND e.is_important
                      AND c.judge_config = :j) AS n_done,
                   (SELECT count(*) FROM {SCHEMA}.gt_claims c WHERE c.release_id = q.release_id
                      AND c.arxiv_id = q.arxiv_id) AS n_stored
            FROM {SCHEMA}.release_queries q WHERE q.release_id = :r ORDER BY q.arxiv_id"""),
            {"r": ctx.release_id, "j": judge_config}).mappings()]


def _connections(ctx, todo: list[dict],
                 refs_of: dict[str, list[GroundTruthReference]]) -> tuple[list[Judged[list[str]]], str]:
    """Each query's connections, one per important reference, from the local rule or the LLM judge, and
    the prompt version that made them."""
    if _is_local(ctx):
        local = [Judged([local_connection(r) for r in refs_of[q["arxiv_id"]]], None, 0) for q in todo]
        return local, LOCAL_VERSION
    from deepscholar.llm.client import LLMClient
    from deepscholar.prompts import load_prompt_file

    client = LLMClient(ctx.engine, ctx.spec.judge.strip(), api_base=ctx.settings.judge_api_base,
                       concurrency=ctx.settings.release_judge_concurrency)
    prompt = load_prompt_file(__package__, PROMPT)
    return client.map(lambda q: _llm_connections(client, prompt, q, refs_of[q["arxiv_id"]]), todo), PROMPT


def build_gt_claims(ctx) -> dict:
    """Ground-truth claims for every query of the release not complete from this judge; idempotent."""
    judge_config = _judge_config(ctx)
    counts = {"queries": 0, "no_important": 0, "built": 0, "kept": 0, "unscored": 0, "claims": 0, "calls": 0}
    queries = _query_states(ctx, judge_config)
    counts["queries"] = len(queries)
    counts["no_important"] = sum(q["n_important"] == 0 for q in queries)
    todo = [q for q in queries if not (q["n_done"] == q["n_important"] == q["n_stored"])]
    counts["kept"] = sum(q["n_important"] > 0 for q in queries) - sum(q["n_important"] > 0 for q in todo)
    if not todo:
        return counts
    # A query left without important references keeps no claims (its labels changed since): no call.
    stale = [q["arxiv_id"] for q in todo if q["n_important"] == 0]
    if stale:
        with ctx.engine.begin() as conn:
            conn.execute(sa.text(f"DELETE FROM {SCHEMA}.gt_claims WHERE release_id = :r AND arxiv_id = ANY(:a)"),
                         {"r": ctx.release_id, "a": stale})
    todo = [q for q in todo if q["n_important"] > 0]
    if not todo:
        return counts
    refs_of = _important_references(ctx)
    answers, version = _connections(ctx, todo, refs_of)
    for query, judged in zip(todo, answers, strict=True):
        counts["calls"] += judged.calls
        if judged.value is None:
            counts["unscored"] += 1
            log.warning("ground-truth claims of %s unscored: %s", query["arxiv_id"], judged.unscored_reason)
            continue
        refs = refs_of[query["arxiv_id"]]
        rows = [{"release_id": ctx.release_id, "arxiv_id": query["arxiv_id"], "cite_key": ref.cite_key,
                 "work_title": ref.title, "work_arxiv_id": ref.arxiv_id, "work_doi": ref.doi,
                 "connection": connection, "evidence": " ".join(ref.evidence), "judge_config": judge_config,
                 "prompt_version": version} for ref, connection in zip(refs, judged.value, strict=True)]
        with ctx.engine.begin() as conn:
            conn.execute(sa.text(f"DELETE FROM {SCHEMA}.gt_claims WHERE release_id = :r AND arxiv_id = :a"),
                         {"r": ctx.release_id, "a": query["arxiv_id"]})
            db.upsert(conn, "gt_claims", rows, key=["release_id", "arxiv_id", "cite_key"])
        counts["built"] += 1
        counts["claims"] += len(rows)
    log.info("ground-truth claims of %s: %s", ctx.release_id, counts)
    return counts


# ------------------------------------------------------------------------------------------------- gate

_FRAMES = {
    # One row per query: its important references, how many of them have a claim, and how many are missing.
    "claims_queries": f"""
        SELECT e.arxiv_id, count(*) AS n_important, count(c.cite_key) AS n_claims,
               count(*) - count(c.cite_key) AS n_missing
        FROM {SCHEMA}.exemplar_references e
        LEFT JOIN {SCHEMA}.gt_claims c USING (release_id, arxiv_id, cite_key)
        WHERE e.release_id = :r AND e.is_important
        GROUP BY e.arxiv_id ORDER BY e.arxiv_id""",
    # One row per stored claim: its connection's length and whether its reference is (still) important.
    "claims_rows": f"""
        SELECT c.arxiv_id, c.cite_key, length(btrim(c.connection)) AS connection_chars,
               coalesce(e.is_important, false) AS is_important
        FROM {SCHEMA}.gt_claims c
        LEFT JOIN {SCHEMA}.exemplar_references e USING (release_id, arxiv_id, cite_key)
        WHERE c.release_id = :r ORDER BY c.arxiv_id, c.cite_key""",
}


def _checks(gxe) -> list[Check]:
    between = gxe.ExpectColumnValuesToBeBetween
    return [
        Check("claims_for_every_important_reference", "claims_queries",
              between(column="n_missing", min_value=0, max_value=0), ["arxiv_id"]),
        Check("claims_connection_not_empty", "claims_rows", between(column="connection_chars", min_value=1),
              ["arxiv_id", "cite_key"]),
        Check("claims_of_important_references_only", "claims_rows",
              gxe.ExpectColumnValuesToBeInSet(column="is_important", value_set=[True]), ["arxiv_id", "cite_key"]),
    ]


ARTEFACTS = TrackArtefacts(track="claims", build=build_gt_claims, judge_config=_judge_config,
                           prompt_versions=_prompt_versions, frames=_FRAMES, checks=_checks)
