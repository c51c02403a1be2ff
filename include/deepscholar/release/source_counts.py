"""Freezing the OpenAlex cited-by counts of the papers reports cite, once per release (METRICS.md, DI).

Design notes: docs/MODULE_NOTES.md, `deepscholar.release.source_counts`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import InfrastructureError
from deepscholar.http_guard import BREAKER, HostUnavailable, is_host_failure
from deepscholar.progress import Progress
from deepscholar.settings import Settings

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


def _doi_of(t: dict) -> str:
    """The DOI a paper is looked up by: its own from the corpus, else the one arXiv registers."""
    return t["doi"] or arxiv_doi(t["arxiv_id"])


def _found(work) -> dict:
    return {"openalex_id": work.openalex_id, "cited_by_count": work.cited_by_count, "lookup_error": None}


def _not_found(t: dict) -> dict:
    how = f"doi {_doi_of(t)}" + (" or title" if t["title"] else "")
    return {"openalex_id": None, "cited_by_count": None,
            "lookup_error": f"{NOT_FOUND_PREFIX} no OpenAlex work by {how}"}


def _failed(exc: Exception) -> dict:
    detail = " ".join(str(exc).split())
    detail = detail if len(detail) <= 300 else detail[:297] + "..."  # a batch's URL lists 50 DOIs
    return {"openalex_id": None, "cited_by_count": None,
            "lookup_error": f"{ERROR_PREFIX} {type(exc).__name__}: {detail}"[:1000]}


def _look_up(openalex, batch: list[dict], threshold: float) -> Iterator[tuple[dict, dict, bool]]:
    """(paper, its row, whether the host failed) for up to BATCH papers, each as soon as it is decided.

    One request for the DOIs of the whole batch; then, one request each, the title search for the papers
    no DOI found. A request that fails (HTTP error, timeout) is the failed lookup of every paper it was
    for. Raises only InfrastructureError (the host's breaker is open): that stops the step, not a batch.
    """
    from deepscholar.sources.openalex import bare_doi

    keys = {t["arxiv_id"]: bare_doi(_doi_of(t)) for t in batch}
    try:
        works = openalex.works_by_dois([k for k in keys.values() if k])
    except InfrastructureError:
        raise
    except Exception as exc:  # one bad request never blocks the other batches
        row, host_down = _failed(exc), is_host_failure(exc)
        for t in batch:
            yield t, dict(row), host_down
        return
    by_title = []
    for t in batch:
        work = works.get(keys[t["arxiv_id"]]) if keys[t["arxiv_id"]] else None
        if work is not None:
            yield t, _found(work), False
        elif t["title"]:
            by_title.append(t)
        else:
            yield t, _not_found(t), False
    for t in by_title:
        try:
            work = openalex.best_title_match(t["title"], threshold=threshold)
        except InfrastructureError:
            raise
        except Exception as exc:  # one bad lookup never blocks the others
            yield t, _failed(exc), is_host_failure(exc)
            continue
        # A title hit that OpenAlex ties to another arXiv paper is a different paper.
        if work is not None and work.arxiv_id and work.arxiv_id != t["arxiv_id"]:
            work = None
        yield t, _found(work) if work is not None else _not_found(t), False


def _store(engine: Engine, rows: list[dict]) -> int:
    """Upsert rows, one transaction each (a killed task keeps its progress); the number of error rows."""
    for row in rows:
        with engine.begin() as conn:
            conn.execute(_UPSERT, row)
    return sum(1 for r in rows if (r["lookup_error"] or "").startswith(ERROR_PREFIX))


def freeze_source_counts(engine: Engine, release_id: str, settings: Settings | None = None, *,
                         retry_errors: bool = False, openalex=None) -> dict:
    """Freeze a cited-by count for every arXiv paper cited by an ok report of the release.

    Returns {from_exemplar, looked_up, not_found, errors, already_frozen}: rows copied from the exemplar
    references, rows found in OpenAlex, rows OpenAlex does not know, failed lookups, and papers skipped
    because they already had a row. `settings` supply the endpoints (default: this process's environment's);
    `openalex` an OpenAlexSource with other timeouts or retries (default: one built from those endpoints).
    """
    from deepscholar import rate_limit

    rate_limit.use_warehouse(engine)  # judge tasks of several systems pace OpenAlex together
    counts = {"from_exemplar": 0, "looked_up": 0, "not_found": 0, "errors": 0, "already_frozen": 0}
    # Document-importance tasks of several systems may start together: one freezes, the others then
    # find everything frozen instead of looking the same papers up again.
    with _session_lock(engine, f"deepscholar_source_cited_by:{release_id}"):
        with engine.connect() as conn:
            todo, counts["already_frozen"] = _todo(conn, release_id, retry_errors)
            from_exemplar = _exemplar_counts(conn, release_id, [t["arxiv_id"] for t in todo])
        counts["from_exemplar"] = _copy_exemplar_counts(engine, release_id, from_exemplar)
        remaining = [t for t in todo if t["arxiv_id"] not in from_exemplar]
        if remaining:
            _look_up_remaining(engine, release_id, remaining, counts, settings, openalex)
    return counts


@contextmanager
def _session_lock(engine: Engine, key: str) -> Iterator[None]:
    """A PostgreSQL advisory lock held across the transactions made inside, on a dedicated connection
    outside the pool (db.dedicated_connection): held on a pooled one, the work inside took a second
    connection of the same pool while holding the first, and waited for OpenAlex with it."""
    from deepscholar.db import dedicated_connection

    with dedicated_connection(engine) as lock_conn:
        lock_conn.execute(sa.text("SELECT pg_advisory_lock(hashtext(:k))"), {"k": key})
        lock_conn.commit()
        try:
            yield
        finally:
            lock_conn.execute(sa.text("SELECT pg_advisory_unlock(hashtext(:k))"), {"k": key})
            lock_conn.commit()


def _copy_exemplar_counts(engine: Engine, release_id: str, from_exemplar: dict[str, dict]) -> int:
    """Papers also among the exemplars' references take the count frozen for them at release time."""
    copied = [{"release_id": release_id, "arxiv_id": a, "openalex_id": r["openalex_id"],
               "cited_by_count": r["cited_by_count"], "lookup_error": None} for a, r in from_exemplar.items()]
    if copied:
        with engine.begin() as conn:
            conn.execute(_UPSERT, copied)
    return len(copied)


def _look_up_remaining(engine: Engine, release_id: str, remaining: list[dict], counts: dict,
                       settings: Settings | None, openalex) -> None:
    """OpenAlex lookups BATCH at a time, stored as they come; HostUnavailable when the host keeps failing."""
    from deepscholar.release.context import ReleaseContext
    from deepscholar.sources.openalex import BATCH, OpenAlexSource

    ctx = ReleaseContext.load(engine, release_id, settings=settings)
    openalex = openalex or OpenAlexSource(base_url=ctx.settings.openalex_url, email=ctx.settings.openalex_email)
    tracker = Progress(f"OpenAlex cited-by counts for {release_id}", len(remaining))
    # Failed lookups while the host keeps failing wait here: stored once OpenAlex answers again,
    # dropped (looked up again on retry) when the step stops for the host (see the module's doc).
    host_failed: list[dict] = []
    streak_since = 0.0
    for start in range(0, len(remaining), BATCH):
        for t, found, host_down in _look_up(openalex, remaining[start:start + BATCH], ctx.spec.title_match_threshold):
            row = {"release_id": release_id, "arxiv_id": t["arxiv_id"], **found}
            _count_lookup(counts, row)
            if host_down:
                streak_since = streak_since if host_failed else time.monotonic()
                host_failed.append(row)
            else:
                counts["errors"] += _store(engine, [*host_failed, row])
                host_failed = []
            tracker.advance(note=f"{counts['looked_up']} found, {counts['not_found']} not found, "
                                 f"{counts['errors'] + len(host_failed)} failed")
        if len(host_failed) >= BREAKER.limits()[0]:
            # As many lookups in a row failed on the host as open its breaker (here in fewer
            # requests, a batched one failing up to BATCH lookups): the host is down, not the papers.
            last = host_failed[-1]["lookup_error"][len(ERROR_PREFIX):].strip()
            raise HostUnavailable(getattr(openalex, "host", "OpenAlex"), len(host_failed),
                                  time.monotonic() - streak_since,
                                  f"the cited-by lookups of {len(host_failed)} papers in a row failed "
                                  f"on the host, the last with {last}")
    counts["errors"] += _store(engine, host_failed)


def _count_lookup(counts: dict, row: dict) -> None:
    if row["cited_by_count"] is not None:
        counts["looked_up"] += 1
    elif row["lookup_error"].startswith(NOT_FOUND_PREFIX):
        counts["not_found"] += 1
    else:
        log.warning("OpenAlex lookup of %s failed: %s", row["arxiv_id"], row["lookup_error"])
