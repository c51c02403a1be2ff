"""The leaderboard web app: latest month, history across months, a per-report drill-down and a JSON API.

Pages are Jinja2 templates (deepscholar/web/templates/, autoescaped; no JavaScript, no CDN: the page must
work offline and inside Airflow's iframe). Every string from the database is escaped — report texts,
source titles and judge explanations are untrusted; a report's markdown goes through a sanitising renderer
(report_text.py) — and a strict Content-Security-Policy forbids scripts altogether. Cells carry data-*
attributes (data-system, data-metric, data-value, ...) so tests and scrapers can read the numbers without
parsing the visible text.

The app reads only what the roll-up stored (queries.py); it computes no metric itself, so a number on the
page is always the number in Postgres. Its default board is the one `deepscholar leaderboard` prints
(`deepscholar.evaluation.leaderboard.pick_board`).
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable
from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI, Form, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.web import queries as q
from deepscholar.web.queries import NotFound, board_json, load_board
from deepscholar.web.render import (
    board_context,
    format_value,
    history_context,
    months_of,
    render,
    report_context,
    svg_line_chart,
    system_context,
    versions_context,
    window_context,
)

__all__ = ["create_app", "svg_line_chart", "format_value", "load_board", "board_json", "NotFound", "CSP"]

log = logging.getLogger(__name__)

# No scripts at all; inline styles only (the stylesheet lives in the page); framing by the same origin only
# (Airflow embeds the page in an iframe served from the same host).
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
       "base-uri 'none'; frame-ancestors 'self'")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def _page(template: str, title: str, base: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(render(template, title=title, base=base, **context), status_code=status_code)


def _error_page(title: str, message: str, base: str, status_code: int) -> HTMLResponse:
    return _page("error.html", title, base, status_code, message=message)


def _base_of(request: Request) -> str:
    # Mounted under a prefix (Airflow: /deepscholar) Starlette sets root_path; links must carry it.
    return (request.scope.get("root_path") or "").rstrip("/")


def _is_api(request: Request) -> bool:
    return "/api/" in request.url.path


def _has_control_characters(request: Request) -> bool:
    """No release, system, judge or report name holds one, and PostgreSQL refuses a NUL in a query
    parameter outright (psycopg2 raised before sending it: a 500 for `?release=%00`)."""
    return any(_CONTROL_RE.search(v) for v in (request.scope.get("path", ""), *request.query_params.values()))


def _install_guards(app: FastAPI) -> None:
    """Security headers on every response; 400 for control characters; 404 and 503 as pages or JSON."""

    @app.middleware("http")
    async def security_headers(request: Request, call_next):
        if _has_control_characters(request):
            message = "Malformed request: a parameter holds a control character."
            response: Response = (JSONResponse({"error": message}, status_code=400) if _is_api(request)
                                  else _error_page("Bad request", message, _base_of(request), 400))
        else:
            response = await call_next(request)
        response.headers.setdefault("Content-Security-Policy", CSP)
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    @app.exception_handler(sa.exc.SQLAlchemyError)
    async def database_error(request: Request, exc: sa.exc.SQLAlchemyError):
        log.exception("leaderboard page: database error", exc_info=exc)
        missing = isinstance(exc, sa.exc.ProgrammingError) and "does not exist" in str(exc)
        message = ("The leaderboard tables do not exist yet: run `deepscholar db init`." if missing
                   else "The benchmark database could not be read; see the server log.")
        if _is_api(request):
            return JSONResponse({"error": message}, status_code=503)
        return _error_page("Unavailable", message, _base_of(request), 503)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound):
        if _is_api(request):
            return JSONResponse({"error": str(exc)}, status_code=404)
        return _error_page("Not found", str(exc), _base_of(request), 404)


def _system_page_data(conn: sa.Connection, system_id: str, judge_config: str | None, release: str | None) -> dict:
    info = q.system_info(conn, system_id)
    configs = q.history_judge_configs(conn, system_id)
    if info is None and not configs:
        raise NotFound(f"no system {system_id!r}")
    chosen = q.pick(configs, judge_config)
    if judge_config is not None and chosen is None:
        raise NotFound(f"no leaderboard rows for {system_id!r} with judge config {judge_config!r}")
    rows = q.history_rows(conn, chosen, system_id) if chosen else []
    months = months_of(rows)
    if release is not None and release not in months:
        raise NotFound(f"no leaderboard row for {system_id!r} in {release!r}")
    release_id = release or (months[-1] if months else None)
    reports = q.system_reports(conn, system_id, release_id, chosen) if release_id and chosen else []
    return {"system": info, "system_id": system_id, "rows": rows, "judge_config": chosen, "configs": configs,
            "release_id": release_id, "reports": reports}


def _install_pages(app: FastAPI, engine: Callable[[], Engine]) -> None:
    @app.get("/", response_class=HTMLResponse)
    def leaderboard(request: Request, judge_config: str | None = None, release: str | None = None,
                    version: int | None = None, window_from: str | None = Query(None, alias="from"),
                    window_to: str | None = Query(None, alias="to")):
        from deepscholar.evaluation.pooled import Selection
        from deepscholar.settings import current_settings

        minimum = current_settings().category_min_queries
        if window_from or window_to:
            if release is not None or version is not None:
                raise NotFound("a window (from/to) is a board of its own: no release or version with it")
            board, tracks, selection = q.pooled_page_board(engine(), judge_config, window_from, window_to)
            agreement, trust = [], []
        else:
            with engine().connect() as conn:
                board = load_board(conn, judge_config, release, version)
                tracks = q.load_track_boards(conn, board.release_id, board.judge_config, board.board_version)
                agreement = q.load_agreement_rows(conn, board.release_id, board.judge_config, board.board_version)
            selection = None if board.release_id is None else Selection((board.release_id,), board.release_id)
            trust = q.trust_rows(engine(), board.release_id, board.judge_config)
        categories = [] if selection is None or version is not None or board.judge_config is None else (
            q.category_page_boards(engine(), selection, board.judge_config, minimum))
        with engine().connect() as conn:
            months = q.board_months(conn, board.judge_config)
        base = _base_of(request)
        return _page("board.html", f"Leaderboard {board.release_id or ''}".strip(), base,
                     **board_context(board, base, tracks, agreement, trust),
                     **window_context(months, window_from, window_to, board.judge_config, base, categories, minimum,
                                      pooled=bool(window_from or window_to)))

    @app.get("/history", response_class=HTMLResponse)
    def history(request: Request, judge_config: str | None = None):
        with engine().connect() as conn:
            configs = q.history_judge_configs(conn)
            chosen = q.pick(configs, judge_config)
            if judge_config is not None and chosen is None:
                raise NotFound(f"no history for judge config {judge_config!r}")
            rows = q.history_rows(conn, chosen) if chosen else []
        base = _base_of(request)
        return _page("history.html", "History", base, **history_context(rows, chosen, configs, base))

    @app.get("/versions", response_class=HTMLResponse)
    def versions(request: Request, release: str, judge_config: str):
        with engine().connect() as conn:
            rows = q.board_versions_of(conn, release, judge_config)
        if not rows:
            raise NotFound(f"no board for release {release!r} under judge config {judge_config!r}")
        base = _base_of(request)
        return _page("versions.html", f"Versions of {release}", base,
                     **versions_context(release, judge_config, rows, base))

    @app.get("/system/{system_id}", response_class=HTMLResponse)
    def system(request: Request, system_id: str, judge_config: str | None = None, release: str | None = None):
        with engine().connect() as conn:
            data = _system_page_data(conn, system_id, judge_config, release)
        base = _base_of(request)
        return _page("system.html", f"System {system_id}", base, **system_context(base=base, **data))

    @app.get("/report/{report_id}", response_class=HTMLResponse)
    def report(request: Request, report_id: int, judge_config: str | None = None):
        with engine().connect() as conn:
            data = q.report_detail(conn, report_id)
        if data is None:
            raise NotFound(f"no report {report_id}")
        base = _base_of(request)
        return _page("report.html", f"Report {report_id}", base, **report_context(data, judge_config, base))


def _install_registration(app: FastAPI, engine: Callable[[], Engine]) -> None:
    """Register a system and queue its backfill, signed in to Airflow (web/registration.py says why)."""
    from deepscholar.airflow_api import AirflowAPIError
    from deepscholar.errors import InfrastructureError, UserError
    from deepscholar.systems.base import system_kinds
    from deepscholar.web import registration as reg

    def form_page(request: Request, status_code: int = 200, **context: Any) -> HTMLResponse:
        shown = {"error": None, "form": None, "outcome": None, "plan": None, "queued": None, "username": "",
                 "system_id": None, **context}
        return _page("register.html", "Register a system", _base_of(request), status_code,
                     kinds=sorted(system_kinds()), disabled=reg.registration_enabled(), **shown)

    def refused(request: Request, exc: Exception, **context: Any) -> HTMLResponse:
        status = 403 if isinstance(exc, AirflowAPIError) else 502 if isinstance(exc, InfrastructureError) else 400
        return form_page(request, status, error=str(exc), **context)

    @app.get("/systems/new", response_class=HTMLResponse)
    def register_form(request: Request):
        return form_page(request)

    @app.post("/systems/new", response_class=HTMLResponse)
    def register_system(request: Request, username: str = Form(""), password: str = Form(""),
                        name: str = Form(""), kind: str = Form(""), config: str = Form(""),
                        version: str = Form("1"), knowledge_cutoff: str = Form("")):
        form = reg.RegistrationForm(name, kind, config, version, knowledge_cutoff)
        try:
            reg.sign_in(username, password)  # before anything is written
            outcome = reg.register(engine(), form)
            plan = reg.plan_of(engine(), form.name.strip())
        except (UserError, InfrastructureError) as exc:
            return refused(request, exc, form=form)
        return form_page(request, outcome=outcome, plan=plan, username=username.strip())

    @app.post("/systems/{system_id}/backfill", response_class=HTMLResponse)
    def queue_backfill(request: Request, system_id: str, username: str = Form(""), password: str = Form("")):
        try:
            api = reg.sign_in(username, password)
            queued = reg.queue(engine(), system_id, api)
        except (UserError, InfrastructureError) as exc:
            return refused(request, exc, plan={"system_id": system_id})
        return form_page(request, queued=queued, system_id=system_id)


def _install_api(app: FastAPI, engine: Callable[[], Engine]) -> None:
    @app.get("/api/leaderboard")
    def leaderboard_api(judge_config: str | None = None, release: str | None = None,
                        version: int | None = None) -> JSONResponse:
        with engine().connect() as conn:
            board = load_board(conn, judge_config, release, version)
            tracks = q.load_track_boards(conn, board.release_id, board.judge_config, board.board_version)
            agreement = q.load_agreement_rows(conn, board.release_id, board.judge_config, board.board_version)
        return JSONResponse(board_json(board) | q.tracks_json(tracks, agreement))

    @app.get("/api/versions")
    def versions_api(release: str, judge_config: str) -> JSONResponse:
        with engine().connect() as conn:
            rows = q.board_versions_of(conn, release, judge_config)
        if not rows:
            raise NotFound(f"no board for release {release!r} under judge config {judge_config!r}")
        return JSONResponse({"versions": [{k: q.json_value(v) for k, v in r.items()} for r in rows]})

    @app.get("/api/history")
    def history_api(judge_config: str | None = None, system_id: str | None = None) -> JSONResponse:
        with engine().connect() as conn:
            rows = q.history_rows(conn, judge_config, system_id)
        return JSONResponse({"rows": [{k: q.json_value(v) for k, v in r.items()} for r in rows]})


def create_app(engine_factory: Callable[[], Engine] = db.get_engine) -> FastAPI:
    """The leaderboard app. The engine is made on the first request, so importing the Airflow plugin
    (done by every Airflow process) never opens a database connection."""
    app = FastAPI(title="DeepScholar leaderboard", docs_url=None, redoc_url=None)
    lock = threading.Lock()
    holder: dict[str, Engine] = {}

    def engine() -> Engine:
        with lock:
            if "engine" not in holder:
                holder["engine"] = engine_factory()
            return holder["engine"]

    _install_guards(app)
    _install_pages(app, engine)
    _install_registration(app, engine)
    _install_api(app, engine)
    return app
