"""Report generation for a published release: plan the missing (system, query) pairs, run one pair.

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.generation`.
"""

from __future__ import annotations

import functools
import logging
import time
import traceback
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.errors import InvalidInput, MissingCredentials, NotFound, infrastructure_cause
from deepscholar.release.context import require_published
from deepscholar.settings import current_settings
from deepscholar.systems.registry import get_system

log = logging.getLogger("deepscholar.generation")


def _runnable(system: Mapping[Any, Any]) -> bool:
    """File-imported external systems get their reports from `import-reports`, never from generation."""
    return not (system["kind"] == "external" and not (system["config"] or {}).get("endpoint"))


def plan_pairs(engine: Engine, release_id: str, systems: list[str] | None = None) -> list[dict]:
    """(system, query) pairs of the release without an ok report: the only work a run or backfill does.

    Named systems are taken whether active or not (an explicit request); otherwise every active one.
    An ok report written by an older build of its system (systems/build.py) is not missing: rewriting it
    costs money, so that is only done on request (`regenerate_outdated`); the month's reports check
    fails on the mix instead and says so.
    """
    require_published(engine, release_id)
    with engine.connect() as conn:
        if systems:
            rows = conn.execute(sa.text("SELECT * FROM systems WHERE system_id = ANY(:s)"),
                                {"s": list(systems)}).mappings().all()
            missing = sorted(set(systems) - {r["system_id"] for r in rows})
            if missing:
                raise NotFound(f"unknown systems: {', '.join(missing)}; register them with `deepscholar systems add`")
        else:
            rows = conn.execute(sa.text("SELECT * FROM systems WHERE active")).mappings().all()
        names = sorted(r["system_id"] for r in rows if _runnable(r))
        pairs = conn.execute(sa.text("""
            SELECT s.system_id, q.arxiv_id
            FROM unnest(CAST(:names AS text[])) AS s(system_id)
            CROSS JOIN release_queries q
            WHERE q.release_id = :r
              AND NOT EXISTS (SELECT 1 FROM reports p WHERE p.release_id = q.release_id
                              AND p.system_id = s.system_id AND p.arxiv_id = q.arxiv_id AND p.status = 'ok')
            ORDER BY s.system_id, q.arxiv_id"""), {"names": names, "r": release_id}).mappings().all()
    lane_of = {r["system_id"]: system_lane(r["kind"], r["config"] or {}) for r in rows}
    return [{"release_id": release_id, **p, "lane": lane_of[p["system_id"]]} for p in pairs]


def system_lane(kind: str, config: dict) -> str:
    """Which generation lane (and so which Airflow pool) a system's tasks run in: its LLM provider's."""
    from deepscholar.orchestration import provider_lane

    return provider_lane(config.get("model")) if config.get("model") else "offline"


def pairs_by_lane(pairs: list[dict], max_tasks: int = 1000) -> dict[str, list[list[dict]]]:
    """Every lane of the DAG gets its own batches (possibly none), so each can map over its own list."""
    from deepscholar.orchestration import GENERATION_LANES

    unknown = {p["lane"] for p in pairs} - set(GENERATION_LANES)
    if unknown:
        raise ValueError(f"pairs in unknown lanes: {sorted(unknown)}")
    from deepscholar.orchestration import lane_batch_size

    return {lane: batch_pairs([p for p in pairs if p["lane"] == lane], max_tasks, lane_batch_size(lane))
            for lane in GENERATION_LANES}


def batch_pairs(pairs: list[dict], max_tasks: int = 1000, size: int = 1) -> list[list[dict]]:
    """`size` pairs per mapped task (the last may hold fewer), unless that would exceed Airflow's
    max_map_length: then even batches under it."""
    if not pairs:
        return []
    n_batches = min(-(-len(pairs) // max(1, size)), max_tasks)
    size = -(-len(pairs) // n_batches)
    return [pairs[i:i + size] for i in range(0, len(pairs), size)]


def _load_query(engine: Engine, release_id: str, arxiv_id: str):
    from deepscholar.systems.base import Query

    with engine.connect() as conn:
        q = conn.execute(sa.text(
            "SELECT title, abstract, published FROM release_queries WHERE release_id = :r AND arxiv_id = :a"),
            {"r": release_id, "a": arxiv_id}).mappings().first()
    if q is None:
        raise LookupError(f"release {release_id} has no query {arxiv_id}")
    if q["published"] is None:
        raise ValueError(f"query {arxiv_id} of {release_id} has no publication date: no search cutoff possible")
    return Query(release_id, arxiv_id, q["title"], q["abstract"], q["published"])


def llm_factory(engine: Engine):
    def make(model: str, **kw):
        from deepscholar.llm.client import LLMClient

        return LLMClient(engine, model, **kw)

    return make


def _api_bases_of(system_row: Mapping[str, Any]) -> tuple[str, ...] | None:
    """Where a page-registered system's `api_base` may point as it runs: DEEPSCHOLAR_WEB_API_BASES as it stands
    now; None (unbound) for the operator's systems."""
    return current_settings().web_api_bases if system_row.get("registered_from") == "page" else None


def generate_pair(engine: Engine, release_id: str, system_id: str, arxiv_id: str) -> dict:
    """Write and store one report; a system's exception is stored as system_error, not raised.

    Raises, storing nothing (a previous row stays as it was), when the infrastructure failed
    (InfrastructureError, the warehouse unreachable) or the deployment lacks an API key
    (MissingCredentials): neither says anything about the system.
    """
    from deepscholar.llm.client import track_usage
    from deepscholar.search import make_search
    from deepscholar.systems.base import SystemContext, system_kind
    from deepscholar.systems.storage import ReportRecord, check_sources, store_report

    system_row = get_system(engine, system_id)
    query = _load_query(engine, release_id, arxiv_id)
    config = system_row["config"] or {}
    backend = config.get("search", current_settings().search_backend)
    record = ReportRecord(release_id=release_id, system_id=system_id, arxiv_id=arxiv_id, report=None,
                          system_version=system_row["version"], system_config=config,
                          search_backend=backend, search_cutoff=query.cutoff)
    started = time.monotonic()
    with track_usage() as usage:
        try:
            kind = system_kind(system_row["kind"])
            record.system_build = kind.build_of(system_row)
            system = kind(system_id, config, SystemContext(engine=engine, llm=llm_factory(engine),
                                                           api_bases=_api_bases_of(system_row)))
            search = make_search(backend, engine, query) if system.uses_search else None
            # None only for a system with uses_search False, whose generate takes none.
            report = system.generate(query, search)  # type: ignore[arg-type]
            check_sources(report)
            record.report = report
        except Exception as exc:  # any failure of the system itself is its result for this pair
            if isinstance(exc, MissingCredentials):  # the deployment's to fix: every pair would fail alike
                raise
            if (cause := infrastructure_cause(exc)) is not None:
                log.error("%s on %s not stored, infrastructure failed: %s", system_id, arxiv_id, cause)
                raise
            record.error = f"{type(exc).__name__}: {exc}"
            record.report = None
            log.warning("%s on %s failed: %s\n%s", system_id, arxiv_id, record.error, traceback.format_exc(limit=5))
    record.latency_ms = (time.monotonic() - started) * 1000
    # The report's own numbers: every call it made, also those replayed from llm_calls (a re-run after a
    # failure costs the same as the first); the split is kept in the trace.
    record.n_llm_calls, record.prompt_tokens = usage.calls, usage.prompt_tokens
    record.completion_tokens, record.cost_usd = usage.completion_tokens, usage.cost_usd
    if record.report is not None and usage.calls:
        record.report.trace["llm_usage"] = usage.as_dict()
    store_report(engine, record)
    status = "ok" if record.error is None else "system_error"
    return {"system_id": system_id, "arxiv_id": arxiv_id, "status": status, "error": record.error,
            "n_sources": len(record.report.sources) if record.report else 0, "llm_calls": usage.calls}


def generate_batch(engine: Engine, pairs: list[dict]) -> list[dict]:
    """What one mapped Airflow task runs; raises on an infrastructure failure so the task fails and retries."""
    results = []
    for n, p in enumerate(pairs, start=1):
        # A warehouse failure writes the pair again after a pause (its LLM answers come from the cache).
        result = db.with_outage_retries(
            functools.partial(generate_pair, engine, p["release_id"], p["system_id"], p["arxiv_id"]),
            f"{p['system_id']} on {p['arxiv_id']}")
        log.info("report %d of %d: %s / %s -> %s", n, len(pairs), p["system_id"], p["arxiv_id"], result["status"])
        results.append(result)
    return results


def generate_release(engine: Engine, release_id: str, systems: list[str] | None = None) -> dict:
    """The generation half outside Airflow (same functions as the DAG's tasks)."""
    results = generate_batch(engine, plan_pairs(engine, release_id, systems))
    counts: dict[str, int] = {}
    for r in results:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return {"pairs": len(results), **counts}


def current_build(system_row: Mapping[str, Any]) -> str:
    """The build string a system's reports get when generated (file-imported: imported) now."""
    from deepscholar.systems.base import system_kind

    if not _runnable(system_row):
        from deepscholar.systems.external.importer import format_build

        return format_build(system_row["version"], str((system_row["config"] or {}).get("format", "?"))).label()
    return system_kind(system_row["kind"]).build_of(system_row).label()


def regenerate_outdated(engine: Engine, release_id: str, systems: list[str]) -> dict:
    """Delete the named systems' reports of the release not written by their current build (their
    sources, judgments and scores go with them), then generate the release's missing pairs for them.

    Only on explicit request (it pays for the reports again); the scores must then be judged again
    (`deepscholar evaluate`, or a benchmark run with those systems). File-imported systems are
    re-imported instead.
    """
    if not systems:
        raise InvalidInput("name the systems whose outdated reports to regenerate (it costs their reports again)")
    require_published(engine, release_id)
    deleted = 0
    for system_id in systems:
        row = get_system(engine, system_id)
        if not _runnable(row):
            raise InvalidInput(f"system {system_id} is file-imported: re-import its outputs with "
                               f"`deepscholar reports import {system_id} PATH --release {release_id}`")
        build = current_build(row)
        with engine.begin() as conn:
            n = conn.execute(sa.text(
                "DELETE FROM reports WHERE release_id = :r AND system_id = :s AND system_build IS DISTINCT FROM :b"),
                {"r": release_id, "s": system_id, "b": build}).rowcount
        log.info("%s: %d reports of %s not written by build %s deleted", system_id, n, release_id, build)
        deleted += n
    return {"deleted_outdated": deleted, **generate_release(engine, release_id, systems)}


def list_reports(engine: Engine, release_id: str) -> list[dict]:
    """A release's reports; an unknown release is the caller's mistake, not an empty list."""
    with engine.connect() as conn:
        if conn.execute(sa.text("SELECT 1 FROM releases WHERE release_id = :r"), {"r": release_id}).first() is None:
            raise NotFound(f"no release {release_id}; `deepscholar release list` lists the releases there are")
        return [dict(r) for r in conn.execute(sa.text("""
            SELECT r.system_id, r.arxiv_id, r.status, r.error,
                   (SELECT count(*) FROM report_sources s WHERE s.report_id = r.report_id AND s.cited) AS n_sources,
                   (SELECT count(*) FROM report_sources s WHERE s.report_id = r.report_id AND NOT s.cited)
                       AS n_retrieved_uncited,
                   r.n_citations, r.n_unresolved_citations, r.n_leaked_sources AS leaked_sources,
                   r.n_leaked_retrieved AS leaked_retrieved, r.quality_flags, r.n_llm_calls, r.latency_ms,
                   r.system_build
            FROM reports r WHERE r.release_id = :r ORDER BY r.system_id, r.arxiv_id"""),
            {"r": release_id}).mappings()]
