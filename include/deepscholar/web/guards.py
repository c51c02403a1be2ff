"""What every request of the page passes: the security headers on every response, 400 for a control character,
and each refused request as one line, a page or JSON under /api/ (404, 400, 503 with Retry-After)."""

from __future__ import annotations

import logging
import re

import sqlalchemy as sa
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from deepscholar import db
from deepscholar.errors import UserError
from deepscholar.web.freshness import Uncovered
from deepscholar.web.queries import NotFound
from deepscholar.web.responses import base_of, refusal, security_headers

__all__ = ["install_guards"]

log = logging.getLogger(__name__)

_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


def _has_control_characters(request: Request) -> bool:
    """No release, system, judge or report name holds one, and PostgreSQL refuses a NUL in a query
    parameter outright (psycopg2 raised before sending it: a 500 for `?release=%00`)."""
    return any(_CONTROL_RE.search(v) for v in (request.scope.get("path", ""), *request.query_params.values()))


def _refusal(request: Request, title: str, message: str, status_code: int) -> Response:
    return refusal(request.url.path, base_of(request), title, message, status_code)


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
    response = _refusal(request, "Unavailable", message, 503)
    response.headers["Retry-After"] = "30"
    return response


async def _uncovered(request: Request, exc: Exception) -> Response:
    """A page whose freshness is not declared is not served (it could be a 304 that never goes stale)."""
    log.error("leaderboard page: %s", exc)
    return _refusal(request, "Server error", "This page cannot tell when it changes; see the server log.", 500)


def install_guards(app: FastAPI) -> None:
    """Security headers on every response; 400 for control characters; 404 and 503 as pages or JSON."""

    @app.middleware("http")
    async def security_headers_everywhere(request: Request, call_next):
        if _has_control_characters(request):
            response = _refusal(request, "Bad request", "Malformed request: a parameter holds a control character.",
                                400)
        else:
            response = await call_next(request)
        security_headers(response.headers)
        return response

    app.add_exception_handler(sa.exc.SQLAlchemyError, _database_error)
    app.add_exception_handler(Uncovered, _uncovered)

    @app.exception_handler(NotFound)
    async def not_found(request: Request, exc: NotFound):
        return _refusal(request, "Not found", str(exc), 404)

    @app.exception_handler(UserError)
    async def bad_input(request: Request, exc: UserError):
        """A parameter the library refuses (a malformed or reversed ?from= / ?to=, ...): 404 for what does
        not exist, else 400; one line."""
        status, title = (404, "Not found") if isinstance(exc, LookupError) else (400, "Bad request")
        return _refusal(request, title, " ".join(str(exc).split()), status)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException):
        message = exc.detail if isinstance(exc.detail, str) else "Malformed request."
        response = _refusal(request, "Request refused", message, exc.status_code)
        for k, v in (exc.headers or {}).items():
            response.headers[k] = v
        return response

    @app.exception_handler(RequestValidationError)
    async def invalid_parameter(request: Request, exc: RequestValidationError):
        first: dict = next(iter(exc.errors()), {})
        where = ".".join(str(x) for x in first.get("loc", ()) if x not in ("query", "path", "body"))
        return _refusal(request, "Bad request", f"Malformed request: {where or 'a parameter'}: "
                                                f"{first.get('msg', 'invalid')}.", 400)
