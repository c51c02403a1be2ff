"""The licence of each kept query paper, and whether it lets us publish the paper's text again.

Design notes: docs/MODULE_NOTES.md, `deepscholar.release.licences`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import sqlalchemy as sa

from deepscholar import db
from deepscholar.clock import utc_now
from deepscholar.http_guard import host_of
from deepscholar.progress import Progress
from deepscholar.rate_limit import service_key
from deepscholar.release.context import ReleaseContext
from deepscholar.settings import Settings, current_settings
from deepscholar.sources.oai import fetch_licence

__all__ = ["PaperLicence", "allows_redistribution", "fetch_licences", "licence_rate_key", "query_licences"]

log = logging.getLogger("deepscholar.release")


def _bare(url: str) -> str:
    """A licence URL without scheme, "www." and case: http and https name the same licence."""
    text = url.strip().lower()
    for scheme in ("https://", "http://"):
        text = text.removeprefix(scheme)
    return text.removeprefix("www.")


def allows_redistribution(licence: str | None, prefixes: Sequence[str]) -> bool:
    """Does this licence URL start with one of the allowed prefixes? Unknown (None) never does."""
    if not licence:
        return False
    bare = _bare(licence)
    return any(bare.startswith(_bare(p)) for p in prefixes if p.strip())


def licence_rate_key(settings: Settings) -> str:
    """The limiter slot an OAI-PMH request takes: the arXiv API's when both are on one host (arXiv asks
    for one request every 3 s per host), else the OAI endpoint's own."""
    if host_of(settings.arxiv_oai_url) == host_of(settings.arxiv_api_url):
        return service_key(settings.arxiv_api_url)
    return service_key(settings.arxiv_oai_url)


def fetch_licences(ctx: ReleaseContext) -> dict:
    """Look up the licence of every kept query paper that has none stored yet (or whose lookup found no
    record); one upsert per paper, so a retry carries on where an outage stopped this one. A paper without
    a <license> element is stored as NULL (unknown). A lookup host that stays down raises
    InfrastructureError: the step fails and is retried."""
    settings = ctx.settings
    with ctx.engine.connect() as conn:
        todo = conn.execute(sa.text("""
            SELECT q.arxiv_id FROM release_queries q LEFT JOIN paper_licences l USING (arxiv_id)
             WHERE q.release_id = :r AND (l.arxiv_id IS NULL OR l.error IS NOT NULL)
             ORDER BY q.arxiv_id"""), {"r": ctx.release_id}).scalars().all()
    key = licence_rate_key(settings)
    tracker = Progress(f"licences of {ctx.release_id}", len(todo))
    try:
        for arxiv_id in todo:
            record = fetch_licence(arxiv_id, settings.arxiv_oai_url, rate_key=key,
                                   delay_seconds=settings.arxiv_delay_seconds)
            with ctx.engine.begin() as conn:
                db.upsert(conn, "paper_licences", [{"arxiv_id": arxiv_id, "license": record.license,
                                                    "fetched_at": utc_now(), "error": record.error}],
                          key=["arxiv_id"])
            tracker.advance()
    finally:
        tracker.close()
    counts = licence_counts(ctx.engine, ctx.release_id, settings.redistributable_licences)
    log.info("licences of %s: %d looked up now; %s", ctx.release_id, len(todo), counts)
    return {"looked_up": len(todo), **counts}


@dataclass(frozen=True)
class PaperLicence:
    """One query paper's licence as the export sees it."""

    arxiv_id: str
    license: str | None
    fetched: bool
    error: str | None
    redistributable: bool

    @property
    def withheld_reason(self) -> str | None:
        """Why the paper's texts are left out of the published data (None: they are published)."""
        if self.redistributable:
            return None
        if not self.fetched:
            return "licence never fetched (run `deepscholar release licences <month>`)"
        if self.error:
            return f"licence unknown: {self.error}"
        if self.license is None:
            return "licence unknown: arXiv's record names none"
        return f"licence {self.license} does not allow redistribution"


def query_licences(conn: sa.Connection, release_id: str, prefixes: Sequence[str] | None = None
                   ) -> dict[str, PaperLicence]:
    """{arxiv_id: PaperLicence} for every query paper of the release (`prefixes` default: the setting)."""
    allowed = current_settings().redistributable_licences if prefixes is None else prefixes
    rows = conn.execute(sa.text("""
        SELECT q.arxiv_id, l.license, l.arxiv_id IS NOT NULL AS fetched, l.error
          FROM release_queries q LEFT JOIN paper_licences l USING (arxiv_id)
         WHERE q.release_id = :r ORDER BY q.arxiv_id"""), {"r": release_id}).all()
    return {r.arxiv_id: PaperLicence(r.arxiv_id, r.license, bool(r.fetched), r.error,
                                     allows_redistribution(r.license, allowed) and not r.error)
            for r in rows}


def licence_counts(engine, release_id: str, prefixes: Sequence[str] | None = None) -> dict:  # noqa: ANN001
    """How many query papers allow redistribution, do not, have an unknown licence, were never looked up."""
    with engine.connect() as conn:
        found = query_licences(conn, release_id, prefixes)
    values = list(found.values())
    return {"papers": len(values),
            "redistributable": sum(p.redistributable for p in values),
            "not_redistributable": sum(p.fetched and p.license is not None and not p.redistributable
                                       for p in values),
            "unknown": sum(p.fetched and p.license is None for p in values),
            "never_fetched": sum(not p.fetched for p in values)}
