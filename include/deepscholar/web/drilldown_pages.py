"""The drill-down pages: a system's (`/system/{id}`: its months, and one month's reports with their headline
scores) and a report's (`/report/{id}`: its text, sources, every score and judgment). Each is a conditional
read whose stamp adds the page's own rows (web/freshness.py: SYSTEM_ROW, REPORT_ROWS)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy.engine import Engine

from deepscholar.web import queries as q
from deepscholar.web.page_reads import PageReads, conditional
from deepscholar.web.queries import NotFound
from deepscholar.web.render import report_context, system_context
from deepscholar.web.responses import base_of, page

__all__ = ["install_drilldown_pages"]


def _system_page(request: Request, engine: Callable[[], Engine], system_id: str, judge_config: str | None,
                 release: str | None) -> HTMLResponse:
    with engine().connect() as conn:
        data = q.system_page_data(conn, system_id, judge_config, release)
    base = base_of(request)
    return page("system.html", f"System {system_id}", base, **system_context(base=base, **data))


def _report_page(request: Request, engine: Callable[[], Engine], report_id: int, judge_config: str | None) -> Response:
    with engine().connect() as conn:
        data = q.report_detail(conn, report_id)
    if data is None:
        raise NotFound(f"no report {report_id}")
    base = base_of(request)
    return page("report.html", f"Report {report_id}", base, **report_context(data, judge_config, base))


def install_drilldown_pages(app: FastAPI, engine: Callable[[], Engine], reads: PageReads) -> None:
    @app.get("/system/{system_id}", response_class=HTMLResponse)
    def system(request: Request, system_id: str, judge_config: str | None = None, release: str | None = None):
        """Kept like a board read: its months and scores change with a roll-up, its registration with its row."""
        return conditional(request, engine, reads, ("system", system_id, judge_config, release),
                           lambda _: _system_page(request, engine, system_id, judge_config, release), key=system_id)

    @app.get("/report/{report_id}", response_class=HTMLResponse)
    def report(request: Request, report_id: int, judge_config: str | None = None):
        """Kept by what the report's page shows (its rows, scores and judgments), with the other reports."""
        return conditional(request, engine, reads, ("report", report_id, judge_config),
                           lambda _: _report_page(request, engine, report_id, judge_config), key=report_id,
                           kept=reads.reports)
