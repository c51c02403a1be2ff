"""Freezing the OpenAlex cited-by counts of the papers reports cite, once per release (METRICS.md, DI).

Counts of exemplar references were frozen when the release was built; report sources get theirs here,
under the same release, so a month's document-importance scores never drift. A paper that is also an
exemplar reference of the release takes the count frozen there (no request, and the same number on both
sides of the ratio); any other is looked up the way the release pipeline resolves references
(release.steps.resolve_references): OpenAlex by DOI — the paper's own DOI from the corpus, else its
arXiv DOI — then by title at the release's title-match threshold, through the same OpenAlexSource (base
URL and e-mail from the runtime endpoints, 429/5xx backoff in its session).

Frozen means a row, once written, is never looked up again: re-running makes 0 requests. A lookup that
failed (HTTP error, timeout) is stored with `lookup_error` starting "error:" and stays frozen too, unless
the caller asks for `retry_errors=True`; "not found" is an answer and is never retried.

OpenAlex down is not a paper's failure: after a few lookups in a row fail on the host (connection,
timeout, 5xx after the session's retries) its circuit breaker opens (http_guard) and the step stops with
HostUnavailable, to be retried later. The failed lookups of that streak are then not stored, so the retry
looks them up again; rows written before stay. An isolated failure followed by answers is stored as an
"error:" row as before.
"""

from __future__ import annotations

import logging

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.config import ReleaseConfig
from deepscholar.errors import InfrastructureError
from deepscholar.http_guard import is_host_failure
from deepscholar.progress import Progress

__all__ = ["freeze_source_counts", "arxiv_doi", "NOT_FOUND_PREFIX", "ERROR_PREFIX"]

log = logging.getLogger("deepscholar.evaluation")

NOT_FOUND_PREFIX = "not_found:"
ERROR_PREFIX = "error:"

# Written rows are frozen: only a row whose lookup failed may be replaced, and only when retrying errors.
_UPSERT = sa.text(f"""
    INSERT INTO source_cited_by
        (release_id, arxiv_id, openalex_id, cited_by_count, lookup_error, looked_up_at)
    VALUES (:release_id, :arxiv_id, :openalex_id, :cited_by_count, :lookup_error, now())
    ON CONFLICT (release_id, arxiv_id) DO UPDATE SET
        openalex_id = EXCLUDED.openalex_id, cited_by_count = EXCLUDED.cited_by_count,
        lookup_error = EXCLUDED.lookup_error, looked_up_at = now()
    WHERE source_cited_by.lookup_error LIKE '{ERROR_PREFIX}%'""")


def arxiv_doi(arxiv_id: str) -> str:
    """The DOI arXiv registers (DataCite) for every paper."""
    return f"10.48550/arXiv.{arxiv_id}"


def _todo(conn: sa.Connection, release_id: str, retry_errors: bool) -> tuple[list[dict], int]:
    """Cited arXiv ids of ok reports still to freeze (with the DOI and title to look them up by)."""
    rows = conn.execute(sa.text("""
        SELECT rs.arxiv_id, min(c.doi) AS doi, coalesce(min(c.title), min(rs.title)) AS title,
               bool_or(f.arxiv_id IS NOT NULL) AS frozen, min(f.lookup_error) AS lookup_error
        FROM report_sources rs
        JOIN reports r ON r.report_id = rs.report_id AND r.status = 'ok' AND r.release_id = :r
        LEFT JOIN corpus c ON c.arxiv_id = rs.arxiv_id
        LEFT JOIN source_cited_by f ON f.release_id = :r AND f.arxiv_id = rs.arxiv_id
        WHERE rs.arxiv_id IS NOT NULL AND rs.arxiv_id <> '' AND rs.cited
        GROUP BY rs.arxiv_id ORDER BY rs.arxiv_id"""), {"r": release_id}).mappings().all()
    todo, frozen = [], 0
    for row in rows:
        retry = retry_errors and (row["lookup_error"] or "").startswith(ERROR_PREFIX)
        if row["frozen"] and not retry:
            frozen += 1
        else:
            todo.append(dict(row))
    return todo, frozen


def _exemplar_counts(conn: sa.Connection, release_id: str, arxiv_ids: list[str]) -> dict[str, dict]:
    """Counts frozen at release time for the same papers; the highest when two references disagree."""
    rows = conn.execute(sa.text("""
        SELECT DISTINCT ON (resolved_arxiv_id) resolved_arxiv_id, openalex_id, cited_by_count
        FROM exemplar_references
        WHERE release_id = :r AND resolved_arxiv_id = ANY(:ids) AND cited_by_count IS NOT NULL
        ORDER BY resolved_arxiv_id, cited_by_count DESC, openalex_id"""),
        {"r": release_id, "ids": arxiv_ids}).mappings().all()
    return {r["resolved_arxiv_id"]: dict(r) for r in rows}


def _look_up(openalex, arxiv_id: str, doi: str | None, title: str | None,
             threshold: float) -> tuple[dict, bool]:
    """One paper's row: openalex_id and count, or the reason there is none, and whether the host failed.

    Raises only InfrastructureError (the host's breaker is open): that stops the step, not one paper.
    """
    try:
        work = openalex.work_by_doi(doi or arxiv_doi(arxiv_id))
        if work is None and title:
            work = openalex.best_title_match(title, threshold=threshold)
            # A title hit that OpenAlex ties to another arXiv paper is a different paper.
            if work is not None and work.arxiv_id and work.arxiv_id != arxiv_id:
                work = None
    except InfrastructureError:
        raise
    except Exception as exc:  # one bad lookup never blocks the others
        return {"openalex_id": None, "cited_by_count": None,
                "lookup_error": f"{ERROR_PREFIX} {type(exc).__name__}: {exc}"[:1000]}, is_host_failure(exc)
    if work is None:
        how = f"doi {doi or arxiv_doi(arxiv_id)}" + (" or title" if title else "")
        return {"openalex_id": None, "cited_by_count": None,
                "lookup_error": f"{NOT_FOUND_PREFIX} no OpenAlex work by {how}"}, False
    return {"openalex_id": work.openalex_id, "cited_by_count": work.cited_by_count, "lookup_error": None}, False


def _store(engine: Engine, rows: list[dict]) -> int:
    """Upsert rows, one transaction each (a killed task keeps its progress); the number of error rows."""
    for row in rows:
        with engine.begin() as conn:
            conn.execute(_UPSERT, row)
    return sum(1 for r in rows if (r["lookup_error"] or "").startswith(ERROR_PREFIX))


def freeze_source_counts(engine: Engine, release_id: str, runtime: ReleaseConfig | None = None, *,
                         retry_errors: bool = False, openalex=None) -> dict:
    """Freeze a cited-by count for every arXiv paper cited by an ok report of the release.

    Returns {from_exemplar, looked_up, not_found, errors, already_frozen}: rows copied from the exemplar
    references, rows found in OpenAlex, rows OpenAlex does not know, failed lookups, and papers skipped
    because they already had a row. `runtime` supplies the endpoints (default: this process's environment);
    `openalex` an OpenAlexSource with other timeouts or retries (default: one built from those endpoints).
    """
    from deepscholar.release.steps import ReleaseContext
    from deepscholar.sources.openalex import OpenAlexSource

    counts = {"from_exemplar": 0, "looked_up": 0, "not_found": 0, "errors": 0, "already_frozen": 0}
    lock_key = f"deepscholar_source_cited_by:{release_id}"
    # Document-importance tasks of several systems may start together: one freezes, the others then
    # find everything frozen instead of looking the same papers up again.
    with engine.connect() as lock_conn:
        lock_conn.execute(sa.text("SELECT pg_advisory_lock(hashtext(:k))"), {"k": lock_key})
        lock_conn.commit()
        try:
            with engine.connect() as conn:
                todo, counts["already_frozen"] = _todo(conn, release_id, retry_errors)
                from_exemplar = _exemplar_counts(conn, release_id, [t["arxiv_id"] for t in todo])
            if not todo:
                return counts
            base = {"release_id": release_id}
            copied = [{**base, "arxiv_id": a, "openalex_id": r["openalex_id"],
                       "cited_by_count": r["cited_by_count"], "lookup_error": None}
                      for a, r in from_exemplar.items()]
            if copied:
                with engine.begin() as conn:
                    conn.execute(_UPSERT, copied)
            counts["from_exemplar"] = len(copied)
            remaining = [t for t in todo if t["arxiv_id"] not in from_exemplar]
            if remaining:
                cfg = ReleaseContext.load(engine, release_id, runtime=runtime).config
                openalex = openalex or OpenAlexSource(base_url=cfg.openalex_url, email=cfg.openalex_email)
                tracker = Progress(f"OpenAlex cited-by counts for {release_id}", len(remaining))
            # Failed lookups while the host keeps failing wait here: stored once OpenAlex answers again,
            # dropped (looked up again on retry) when its breaker opens and stops the step.
            host_failed: list[dict] = []
            for t in remaining:
                found, host_down = _look_up(openalex, t["arxiv_id"], t["doi"], t["title"],
                                            cfg.title_match_threshold)
                row = {**base, "arxiv_id": t["arxiv_id"], **found}
                if row["cited_by_count"] is not None:
                    counts["looked_up"] += 1
                elif row["lookup_error"].startswith(NOT_FOUND_PREFIX):
                    counts["not_found"] += 1
                else:
                    log.warning("OpenAlex lookup of %s failed: %s", t["arxiv_id"], row["lookup_error"])
                if host_down:
                    host_failed.append(row)
                else:
                    counts["errors"] += _store(engine, [*host_failed, row])
                    host_failed = []
                tracker.advance(note=f"{counts['looked_up']} found, {counts['not_found']} not found, "
                                     f"{counts['errors'] + len(host_failed)} failed")
            counts["errors"] += _store(engine, host_failed)
        finally:
            lock_conn.execute(sa.text("SELECT pg_advisory_unlock(hashtext(:k))"), {"k": lock_key})
            lock_conn.commit()
    return counts
