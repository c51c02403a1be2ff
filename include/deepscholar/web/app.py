"""The leaderboard web app: latest month, history across months, a per-report drill-down and a JSON API.

Pages are Jinja2 templates (deepscholar/web/templates/, autoescaped; no JavaScript, no CDN: the page must
work offline and inside Airflow's iframe). Every string from the database is escaped — report texts,
source titles and judge explanations are untrusted; a report's markdown goes through a sanitising renderer
(report_text.py) — and a strict Content-Security-Policy forbids scripts altogether. Cells carry data-*
attributes (data-system, data-metric, data-value, ...) so tests and scrapers can read the numbers without
parsing the visible text.

The app reads only what the roll-up stored (queries.py); it computes no metric itself, so a number on the
page is always the number in Postgres. Its default board is the one `deepscholar leaderboard` prints
(`deepscholar.evaluation.boards.leaderboard.pick_board`).

Whatever a client sends is bounded before it is read (_BoundedInput): a request body of at most
DEEPSCHOLAR_WEB_MAX_BODY_BYTES arriving within DEEPSCHOLAR_WEB_BODY_SECONDS, else 413 / 408 before any of
it is parsed. Registration posts sign in to Airflow on the page's own few threads
(DEEPSCHOLAR_WEB_SIGNIN_WORKERS; busy: 503), never on the threads that serve the board, so a slow or
flooded Airflow never slows a reader. Bad input is a 4xx with one line (a page, or JSON under /api/), with
the security headers on every response; HEAD is answered wherever GET is.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import sqlalchemy as sa
from fastapi import FastAPI, Form, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response
from sqlalchemy.engine import Engine
from starlette.exceptions import HTTPException as StarletteHTTPException

from deepscholar import db
from deepscholar.errors import UserError
from deepscholar.web import queries as q
from deepscholar.web.page_reads import PageReads, conditional
from deepscholar.web.queries import NotFound, board_json, load_board
from deepscholar.web.render import (
    board_context,
    format_value,
    history_context,
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


def _security_headers(headers: Any) -> None:
    headers.setdefault("Content-Security-Policy", CSP)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "same-origin")


class _BodyTooLarge(Exception):
    pass


class _BoundedInput:
    """Pure ASGI, outside everything else of the app: a request body is read here, whole, only up to
    DEEPSCHOLAR_WEB_MAX_BODY_BYTES and within DEEPSCHOLAR_WEB_BODY_SECONDS (413 / 408 otherwise, before the
    app parses a byte), then handed on; HEAD is served as GET without the body."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def _refuse(self, scope: dict, send: Any, status: int, message: str) -> None:
        path = scope.get("path", "")
        response: Response = (JSONResponse({"error": message}, status_code=status) if "/api/" in path else
                              _error_page("Request refused", message, (scope.get("root_path") or "").rstrip("/"),
                                          status))
        _security_headers(response.headers)
        response.headers["Connection"] = "close"
        await response({"type": "http"}, _nothing, send)

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from deepscholar.settings import current_settings

        settings = current_settings()
        if scope["method"] == "HEAD":
            scope, send = {**scope, "method": "GET"}, _without_body(send)

        limit = settings.web_max_body_bytes
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None:
            if not declared.isdigit() or int(declared) > limit:
                await self._refuse(scope, send, 413, f"Request body too large: at most {limit} bytes "
                                                     "(DEEPSCHOLAR_WEB_MAX_BODY_BYTES).")
                return
        if declared is None and b"chunked" not in headers.get(b"transfer-encoding", b""):
            await self.app(scope, receive, send)  # no body
            return
        chunks: list[bytes] = []

        async def read_all() -> None:
            size = 0
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ConnectionError
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    raise _BodyTooLarge
                chunks.append(chunk)
                if not message.get("more_body"):
                    return

        try:
            await asyncio.wait_for(read_all(), settings.web_body_seconds)
        except _BodyTooLarge:
            await self._refuse(scope, send, 413, f"Request body too large: at most {limit} bytes "
                                                 "(DEEPSCHOLAR_WEB_MAX_BODY_BYTES).")
            return
        except TimeoutError:
            await self._refuse(scope, send, 408, "The request body did not arrive in time "
                                                 "(DEEPSCHOLAR_WEB_BODY_SECONDS).")
            return
        except ConnectionError:
            return
        body = b"".join(chunks)
        given = False

        async def replay() -> dict:
            nonlocal given
            if given:
                return await receive()  # only a disconnect can come now
            given = True
            return {"type": "http.request", "body": body, "more_body": False}

        await self.app(scope, replay, send)


async def _nothing() -> dict:
    return {"type": "http.disconnect"}


def _without_body(send: Any) -> Any:
    """`send` dropping the body of the answer (HEAD: the headers of GET's answer, Content-Length included)."""

    async def headers_only(message: dict) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return headers_only


async def _database_error(request: Request, exc: Exception) -> Response:
    """503 with Retry-After, in the seconds DEEPSCHOLAR_WEB_DB_WAIT_SECONDS allows, never a hang: the
    warehouse unreachable, every pooled connection busy, or the tables not created yet."""
    missing = isinstance(exc, sa.exc.ProgrammingError) and "does not exist" in str(exc)
    if isinstance(exc, db.PoolExhausted):
        log.warning("leaderboard page: no warehouse connection came free (DEEPSCHOLAR_DB_POOL_SIZE, "
                    "DEEPSCHOLAR_WEB_DB_WAIT_SECONDS): %s", exc)
        message = "Every warehouse connection of this server is busy; try again in a few seconds."
    elif isinstance(exc, sa.exc.OperationalError) and not missing:
        log.warning("leaderboard page: the warehouse is unreachable (DEEPSCHOLAR_DB_URL, "
                    "DEEPSCHOLAR_WEB_DB_WAIT_SECONDS): %s", str(exc.orig or exc).strip().splitlines()[0])
        message = "The benchmark database is unreachable right now; try again in a minute."
    else:
        log.exception("leaderboard page: database error", exc_info=exc)
        message = ("The leaderboard tables do not exist yet: run `deepscholar db init`." if missing
                   else "The benchmark database could not be read; see the server log.")
    headers = {"Retry-After": "30"}
    if _is_api(request):
        return JSONResponse({"error": message}, status_code=503, headers=headers)
    response = _error_page("Unavailable", message, _base_of(request), 503)
    response.headers.update(headers)
    return response


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
        _security_headers(response.headers)
        return response

    app.add_exception_handler(sa.exc.SQLAlchemyError, _database_error)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound):
        if _is_api(request):
            return JSONResponse({"error": str(exc)}, status_code=404)
        return _error_page("Not found", str(exc), _base_of(request), 404)

    @app.exception_handler(UserError)
    async def bad_input(request: Request, exc: UserError):
        """A parameter the library refuses (a malformed or reversed ?from= / ?to=, ...): 404 for what does
        not exist, else 400; one line."""
        status, title = (404, "Not found") if isinstance(exc, LookupError) else (400, "Bad request")
        message = " ".join(str(exc).split())
        if _is_api(request):
            return JSONResponse({"error": message}, status_code=status)
        return _error_page(title, message, _base_of(request), status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else "Malformed request."
        response: Response = (JSONResponse({"error": message}, status_code=exc.status_code) if _is_api(request)
                              else _error_page("Request refused", message, _base_of(request), exc.status_code))
        for k, v in (exc.headers or {}).items():
            response.headers[k] = v
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_parameter(request: Request, exc: RequestValidationError):
        first: dict = next(iter(exc.errors()), {})
        where = ".".join(str(x) for x in first.get("loc", ()) if x not in ("query", "path", "body"))
        message = f"Malformed request: {where or 'a parameter'}: {first.get('msg', 'invalid')}."
        if _is_api(request):
            return JSONResponse({"error": message}, status_code=400)
        return _error_page("Bad request", message, _base_of(request), 400)


def _system_page(request: Request, engine: Callable[[], Engine], system_id: str, judge_config: str | None,
                 release: str | None) -> HTMLResponse:
    with engine().connect() as conn:
        data = q.system_page_data(conn, system_id, judge_config, release)
    base = _base_of(request)
    return _page("system.html", f"System {system_id}", base, **system_context(base=base, **data))


def _leaderboard_page(request: Request, engine: Callable[[], Engine], stamp: str, judge_config: str | None,
                      release: str | None, version: int | None, window_from: str | None,
                      window_to: str | None) -> HTMLResponse:
    """The board page: a month's board (a release, a board version) with its tracks, agreement and trust
    rows, or a window's pooled board (from/to) that has none of those; with the category boards and the
    months to choose a window from. Apart from the route so the page's assembly reads on its own."""
    from deepscholar.evaluation.boards.selection import Selection
    from deepscholar.settings import current_settings

    minimum = current_settings().category_min_queries
    if window_from or window_to:
        if release is not None or version is not None:
            raise NotFound("a window (from/to) is a board of its own: no release or version with it")
        board, tracks, selection = q.pooled_page_board(engine(), stamp, judge_config, window_from, window_to)
        agreement: list[dict] = []
        trust: list[dict] = []
    else:
        with engine().connect() as conn:
            board, tracks, agreement = q.board_with_tracks(conn, judge_config, release, version)
        selection = None if board.release_id is None else Selection((board.release_id,), board.release_id)
        trust = q.trust_rows(engine(), board.release_id, board.judge_config)
    categories = [] if selection is None or version is not None or board.judge_config is None else (
        q.category_page_boards(engine(), stamp, selection, board.judge_config, minimum))
    with engine().connect() as conn:
        months = q.board_months(conn, board.judge_config)
    base = _base_of(request)
    return _page("board.html", f"Leaderboard {board.release_id or ''}".strip(), base,
                 **board_context(board, base, tracks, agreement, trust),
                 **window_context(months, window_from, window_to, board.judge_config, base, categories, minimum,
                                  pooled=bool(window_from or window_to)))


def _history_page(request: Request, engine: Callable[[], Engine], judge_config: str | None) -> HTMLResponse:
    with engine().connect() as conn:
        configs = q.history_judge_configs(conn)
        chosen = q.pick(configs, judge_config)
        if judge_config is not None and chosen is None:
            raise NotFound(f"no history for judge config {judge_config!r}")
        rows = q.history_rows(conn, chosen) if chosen else []
    base = _base_of(request)
    return _page("history.html", "History", base, **history_context(rows, chosen, configs, base))


def _versions_page(request: Request, engine: Callable[[], Engine], release: str, judge_config: str) -> HTMLResponse:
    with engine().connect() as conn:
        rows = q.existing_board_versions(conn, release, judge_config)
    base = _base_of(request)
    return _page("versions.html", f"Versions of {release}", base, **versions_context(release, judge_config, rows, base))


def _install_pages(app: FastAPI, engine: Callable[[], Engine], reads: PageReads) -> None:
    @app.get("/", response_class=HTMLResponse)
    def leaderboard(request: Request, judge_config: str | None = None, release: str | None = None,
                    version: int | None = None, window_from: str | None = Query(None, alias="from"),
                    window_to: str | None = Query(None, alias="to")):
        shows = ("board", judge_config, release, version, window_from, window_to)
        return conditional(request, engine, reads, shows, lambda stamp: _leaderboard_page(
            request, engine, stamp, judge_config, release, version, window_from, window_to))

    @app.get("/history", response_class=HTMLResponse)
    def history(request: Request, judge_config: str | None = None):
        return conditional(request, engine, reads, ("history", judge_config),
                           lambda _: _history_page(request, engine, judge_config))

    @app.get("/versions", response_class=HTMLResponse)
    def versions(request: Request, release: str, judge_config: str):
        return conditional(request, engine, reads, ("versions", release, judge_config),
                           lambda _: _versions_page(request, engine, release, judge_config))

    @app.get("/system/{system_id}", response_class=HTMLResponse)
    def system(request: Request, system_id: str, judge_config: str | None = None, release: str | None = None):
        """Kept like a board read: its months and scores change with a roll-up, its registration with its row."""
        return conditional(request, engine, reads, ("system", system_id, judge_config, release),
                           lambda _: _system_page(request, engine, system_id, judge_config, release),
                           also=lambda conn: q.system_stamp(conn, system_id))

    @app.get("/report/{report_id}", response_class=HTMLResponse)
    def report(request: Request, report_id: int, judge_config: str | None = None):
        """Kept like a board read, by what the report's page shows (its rows, scores and judgments)."""
        return conditional(request, engine, reads, ("report", report_id, judge_config),
                           lambda _: _report_page(request, engine, report_id, judge_config),
                           also=lambda conn: q.report_stamp(conn, report_id), kept=reads.reports)


def _report_page(request: Request, engine: Callable[[], Engine], report_id: int, judge_config: str | None) -> Response:
    with engine().connect() as conn:
        data = q.report_detail(conn, report_id)
    if data is None:
        raise NotFound(f"no report {report_id}")
    base = _base_of(request)
    return _page("report.html", f"Report {report_id}", base, **report_context(data, judge_config, base))


def _install_registration(app: FastAPI, engine: Callable[[], Engine]) -> None:
    """Register a system and queue its backfill, signed in to Airflow (web/registration.py says why).

    Each post is checked in the event loop first (Origin, the sign-in throttle), then signs in, checks the
    user's permission and writes on the page's own threads (DEEPSCHOLAR_WEB_SIGNIN_WORKERS, each call to
    Airflow bounded by DEEPSCHOLAR_WEB_SIGNIN_TIMEOUT_SECONDS); with all of them busy and as many posts
    waiting, a post gets 503 at once. The threads that serve the board never wait on Airflow."""
    from deepscholar.settings import current_settings
    from deepscholar.web import registration as reg

    workers = current_settings().web_signin_workers
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deepscholar-signin")
    slots = threading.BoundedSemaphore(2 * workers)  # running + waiting
    throttle = reg.SignInThrottle()
    app.state.signin_throttle = throttle

    async def off_the_readers(request: Request, username: str, work: Callable[[], Any]) -> Any:
        """Origin and throttle here; `work` (sign-in, writes) on the registration threads."""
        settings = current_settings()
        reg.check_origin(request.headers, settings.web_allowed_origins)
        throttle.take(request.client.host if request.client else "unknown", username, settings.web_signin_per_minute)
        if not slots.acquire(blocking=False):
            raise _Busy
        try:
            return await asyncio.wrap_future(pool.submit(work))
        finally:
            slots.release()

    _install_registration_routes(app, engine, off_the_readers)


def _install_registration_routes(app: FastAPI, engine: Callable[[], Engine],
                                 off_the_readers: Callable[[Request, str, Callable[[], Any]], Any]) -> None:
    """The registration form and its two posts (register, queue a backfill). Each post's sign-in and writes
    go through `off_the_readers` (_install_registration: Origin, throttle, the registration threads)."""
    from deepscholar.errors import InfrastructureError
    from deepscholar.web import registration as reg

    @app.get("/systems/new", response_class=HTMLResponse)
    def register_form(request: Request):
        return _register_page(request)

    @app.post("/systems/new", response_class=HTMLResponse)
    async def register_system(request: Request, username: str = Form(""), password: str = Form(""),
                              name: str = Form(""), kind: str = Form(""), config: str = Form(""),
                              version: str = Form("1"), knowledge_cutoff: str = Form("")):
        form = reg.RegistrationForm(name, kind, config, version, knowledge_cutoff)

        def work() -> tuple[str, dict]:
            reg.sign_in(username, password)  # before anything is written
            outcome = reg.register(engine(), form)
            return outcome, reg.plan_of(engine(), form.system_name())

        try:
            outcome, plan = await off_the_readers(request, username, work)
        except _Busy:
            return _registration_busy(request)
        except (UserError, InfrastructureError) as exc:
            return _registration_refused(request, exc, form=form)
        return _register_page(request, outcome=outcome, plan=plan, username=username.strip())

    @app.post("/systems/{system_id}/backfill", response_class=HTMLResponse)
    async def queue_backfill(request: Request, system_id: str, username: str = Form(""), password: str = Form("")):
        def work() -> list[str]:
            api = reg.sign_in(username, password)
            return reg.queue(engine(), system_id, api)

        try:
            queued = await off_the_readers(request, username, work)
        except _Busy:
            return _registration_busy(request)
        except (UserError, InfrastructureError) as exc:
            return _registration_refused(request, exc)
        return _register_page(request, queued=queued, system_id=system_id)


def _register_page(request: Request, status_code: int = 200, **context: Any) -> HTMLResponse:
    """The registration form page, with what the last post gave (`context`: error, outcome, plan, ...)."""
    from deepscholar.systems.base import system_kinds
    from deepscholar.web import registration as reg

    shown = {"error": None, "form": None, "outcome": None, "plan": None, "queued": None, "username": "",
             "system_id": None, **context}
    return _page("register.html", "Register a system", _base_of(request), status_code,
                 kinds=sorted(system_kinds()), disabled=reg.registration_enabled(), **shown)


def _registration_refused(request: Request, exc: Exception, **context: Any) -> HTMLResponse:
    """The form again with why a post was refused, under the status that says whose the fault is (throttled,
    not allowed, already registered, unknown, Airflow failing, a bad form)."""
    from deepscholar.airflow_api import AirflowAPIError
    from deepscholar.errors import InfrastructureError, NotFound
    from deepscholar.systems.registry import SystemExists
    from deepscholar.web import registration as reg

    status = (429 if isinstance(exc, reg.Throttled) else 403 if isinstance(exc, AirflowAPIError | reg.ForeignOrigin)
              else 409 if isinstance(exc, SystemExists) else 404 if isinstance(exc, NotFound)
              else 502 if isinstance(exc, InfrastructureError) else 400)
    response = _register_page(request, status, error=" ".join(str(exc).split()), **context)
    if status == 429:
        response.headers["Retry-After"] = "60"
    return response


def _registration_busy(request: Request) -> HTMLResponse:
    """503 with Retry-After when every registration thread is busy and as many posts wait."""
    response = _register_page(request, 503, error="Registration is busy signing others in to Airflow; try again "
                                                  "in a minute (DEEPSCHOLAR_WEB_SIGNIN_WORKERS).")
    response.headers["Retry-After"] = "30"
    return response


class _Busy(Exception):
    """Every registration thread busy and as many posts waiting."""


def _install_api(app: FastAPI, engine: Callable[[], Engine], reads: PageReads) -> None:
    def board_api(judge_config: str | None, release: str | None, version: int | None) -> JSONResponse:
        with engine().connect() as conn:
            board, tracks, agreement = q.board_with_tracks(conn, judge_config, release, version)
        return JSONResponse(board_json(board) | q.tracks_json(tracks, agreement))

    def versions_api(release: str, judge_config: str) -> JSONResponse:
        with engine().connect() as conn:
            rows = q.existing_board_versions(conn, release, judge_config)
        return JSONResponse({"versions": [{k: q.json_value(v) for k, v in r.items()} for r in rows]})

    def history_api(judge_config: str | None, system_id: str | None) -> JSONResponse:
        with engine().connect() as conn:
            rows = q.history_rows(conn, judge_config, system_id)
        return JSONResponse({"rows": [{k: q.json_value(v) for k, v in r.items()} for r in rows]})

    @app.get("/api/leaderboard")
    def leaderboard_route(request: Request, judge_config: str | None = None, release: str | None = None,
                          version: int | None = None) -> Response:
        return conditional(request, engine, reads, ("api-board", judge_config, release, version),
                           lambda _: board_api(judge_config, release, version))

    @app.get("/api/versions")
    def versions_route(request: Request, release: str, judge_config: str) -> Response:
        return conditional(request, engine, reads, ("api-versions", release, judge_config),
                           lambda _: versions_api(release, judge_config))

    @app.get("/api/history")
    def history_route(request: Request, judge_config: str | None = None, system_id: str | None = None) -> Response:
        return conditional(request, engine, reads, ("api-history", judge_config, system_id),
                           lambda _: history_api(judge_config, system_id))


def create_app(engine_factory: Callable[[], Engine] = db.reader_engine) -> FastAPI:
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
    reads = PageReads()
    app.state.page_reads = reads  # what the app keeps rendered (tests read its bytes)
    _install_pages(app, engine, reads)
    _install_registration(app, engine)
    _install_api(app, engine, reads)
    app.add_middleware(_BoundedInput)  # the outermost: no other layer touches a body before its limits
    return app
