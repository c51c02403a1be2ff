"""The site's pages, rendered by the live page's own templates and context functions (web/render.py).

Design notes: docs/MODULE_NOTES.md, `deepscholar.site.pages`.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import NotFound
from deepscholar.site import routes
from deepscholar.site.json_mirror import api_bytes
from deepscholar.site.routes import SiteMap
from deepscholar.web import queries as q
from deepscholar.web.board_pages import board_page_context
from deepscholar.web.render import (
    history_context,
    render,
    report_context,
    system_context,
    versions_context,
)

_LOG = logging.getLogger(__name__)

__all__ = ["SITE_CSP", "NAV", "REPORT_BATCH", "load_site_map", "page", "index_page", "board_pages", "window_pages",
           "history_pages", "system_pages", "report_pages"]

# As the app's CSP (web/app.py) minus what a <meta> cannot carry (frame-ancestors: a console error there).
SITE_CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'none'; base-uri 'none'"
# The site's navigation, as live paths (rewritten like every other link); a page the build has not made drops.
NAV = (("Leaderboard", "/"), ("History", "/history"), ("Methodology", "/methodology"),
       ("Downloads", "/downloads"), ("How to submit", "/submit"), ("JSON", "/api/leaderboard"))
REPORT_BATCH = 500  # reports read together: a few statements each instead of four per report


def page(sm: SiteMap, path: str, template: str, title: str, **context: Any) -> str:
    """One page: the template rendered as the app renders it, its links pointed at the site's files."""
    nav = [(label, live) for label, live in NAV if sm.target(live, {}) is not None]
    return sm.rewrite(render(template, title=title, base="", nav=nav, csp=SITE_CSP, **context), path)


def load_site_map(conn: sa.Connection, with_reports: bool) -> SiteMap:
    """What the warehouse holds that the site shows: its boards, systems' months and (optionally) reports."""
    from deepscholar.evaluation.boards.leaderboard import pick_board

    sm = SiteMap(default=pick_board(conn))
    boards = conn.execute(sa.text("SELECT DISTINCT release_id, judge_config FROM deepscholar.leaderboard_board_versions"
                                  " ORDER BY 1, 2")).all()
    for release, judge in boards:
        current = [v["board_version"] for v in q.board_versions_of(conn, release, judge) if v["is_current"]]
        if current:
            sm.current_version[(release, judge)] = current[0]
    for release in sorted({r for r, _ in sm.current_version}):
        picked = pick_board(conn, release)
        if picked is not None:
            sm.default_judge_of[release] = picked[1]
    for judge in sorted({j for _, j in sm.current_version}):
        picked = pick_board(conn, None, judge)
        if picked is not None:
            sm.latest_by_judge[judge] = picked[0]
    for row in q.history_rows(conn):
        months = sm.system_months.setdefault(row["system_id"], {}).setdefault(row["judge_config"], [])
        if row["release_id"] not in months:
            months.append(row["release_id"])
    from deepscholar.evaluation.boards.selection import standard_windows

    for judge in sorted(sm.latest_by_judge):
        for label, start, end in standard_windows(q.board_months(conn, judge)):
            sm.windows[(judge, start, end)] = label
    sm.system_default = {s: q.pick(sorted(by_judge), None) for s, by_judge in sm.system_months.items()}
    sm.history_default = q.pick(q.history_judge_configs(conn), None)
    if with_reports:
        sm.reports = set(conn.execute(sa.text("""
            SELECT rp.report_id FROM deepscholar.reports rp WHERE EXISTS (
              SELECT 1 FROM deepscholar.leaderboard_history h
               WHERE h.system_id = rp.system_id AND h.release_id = rp.release_id)""")).scalars())
    return sm


def _board_page(engine: Engine, sm: SiteMap, path: str, judge: str | None, release: str | None,
                version: int | None) -> str:
    """A month's board as `/` shows it for (release, judge, version); the latest board with all None."""
    title, context = board_page_context(engine, judge, release, version, None, None, "", static=True)
    return page(sm, path, "board.html", title, **context)


def index_page(engine: Engine, sm: SiteMap) -> dict[str, str]:
    """index.html: the latest board."""
    return {"index.html": _board_page(engine, sm, "index.html", None, None, None)}


def board_pages(engine: Engine, sm: SiteMap, release: str) -> dict[str, str]:
    """One month's boards under every judge: each current version, each earlier version and the versions list
    (status, what changed, manifest hash)."""
    out = {}
    for (month, judge), current in sorted(sm.current_version.items()):
        if month != release:
            continue
        path = routes.board_path(release, judge)
        out[path] = _board_page(engine, sm, path, judge, release, None)
        with engine.connect() as conn:
            versions = q.existing_board_versions(conn, release, judge)
        for v in versions:
            if v["board_version"] != current:
                vpath = routes.version_path(release, judge, v["board_version"])
                out[vpath] = _board_page(engine, sm, vpath, judge, release, v["board_version"])
        lpath = routes.versions_path(release, judge)
        out[lpath] = page(sm, lpath, "versions.html", f"Versions of {release}",
                          **versions_context(release, judge, versions, ""))
    return out


def window_pages(engine: Engine, sm: SiteMap) -> dict[str, str | bytes]:
    """Each judge's standard windows: the pooled board page as `/?from=F&to=T&judge_config=J` shows it, and
    its JSON as `/api/leaderboard` with the same parameters answers (one computation for both)."""
    out: dict[str, str | bytes] = {}
    for (judge, start, end), label in sorted(sm.windows.items()):
        path, api = routes.window_path(judge, start, end), routes.api_window_path(judge, start, end)
        computed: dict[tuple, Any] = {}

        def kept(key: tuple, compute, computed=computed) -> Any:
            if key not in computed:
                computed[key] = compute()
            return computed[key]

        try:
            title, context = board_page_context(engine, judge, None, None, start, end, "", kept=kept, static=True)
        except NotFound as exc:  # what the live page answers (404) for a window with nothing scored
            _LOG.warning("site: the %s window %s..%s under %s has no board: %s", label, start, end, judge, exc)
            out[path] = page(sm, path, "error.html", "Not found", message=str(exc))
            out[api] = api_bytes({"error": str(exc)})
            continue
        out[path] = page(sm, path, "board.html", title, **context)
        out[api] = api_bytes(q.pooled_board_json(*computed[("window", judge, start, end)]))
    return out


def history_pages(engine: Engine, sm: SiteMap) -> dict[str, str]:
    """history.html (the default judge's) and history/<judge>.html for each other judge with history."""
    out = {}
    with engine.connect() as conn:
        configs = q.history_judge_configs(conn)
        judges: list[str | None] = list(configs) or [None]
        for judge in judges:
            rows = q.history_rows(conn, judge) if judge else []
            path = routes.history_path(None if judge == sm.history_default else judge)
            out[path] = page(sm, path, "history.html", "History", **history_context(rows, judge, configs, ""))
    return out


def _system_views(sm: SiteMap, system_id: str) -> Iterable[tuple[str, str | None, str | None]]:
    """(path, judge, release) of every page of one system: its default one, each other judge's, and each
    (judge, month)'s reports."""
    yield routes.system_path(system_id), None, None
    for judge, months in sorted(sm.system_months.get(system_id, {}).items()):
        if judge != sm.system_default.get(system_id):
            yield routes.system_path(system_id, judge), judge, None
        for month in months:
            yield routes.system_path(system_id, judge, month), judge, month


def system_pages(engine: Engine, sm: SiteMap, system_id: str) -> dict[str, str]:
    """One system's pages of every month (scores and charts), one per judge, and its page per (judge, month)
    listing that month's reports."""
    out = {}
    with engine.connect() as conn:
        for path, judge, month in _system_views(sm, system_id):
            data = q.system_page_data(conn, system_id, judge, month)
            out[path] = page(sm, path, "system.html", f"System {system_id}", **system_context(base="", **data))
    return out


def report_pages(engine: Engine, sm: SiteMap, report_ids: Iterable[int]) -> Iterator[tuple[str, str]]:
    """(path, HTML) of each report: its text (sanitised markdown), its citations and how each resolved, its
    scores and the judge's labels, every judge's. Read REPORT_BATCH reports a statement, written one by one."""
    ids = sorted(report_ids)
    for start in range(0, len(ids), REPORT_BATCH):
        with engine.connect() as conn:
            details = q.report_details(conn, ids[start:start + REPORT_BATCH])
        for report_id in ids[start:start + REPORT_BATCH]:
            data = details.get(report_id)
            if data is None:  # deleted since the site map was read
                continue
            path = routes.report_path(report_id)
            # Every judge's scores on one page: the app's ?judge_config= filter has no file, so no judge links.
            context = report_context(data, None, "") | {"judge_links": []}
            yield path, page(sm, path, "report.html", f"Report {report_id}", **context)
