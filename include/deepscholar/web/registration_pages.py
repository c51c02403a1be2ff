"""The registration pages: the form (`/systems/new`) and its two posts, register a system and queue its
backfill, signed in to Airflow (web/registration.py says why and what is checked).

Design notes: docs/MODULE_NOTES.md, `deepscholar.web.registration_pages`.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from fastapi import FastAPI, Form, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.engine import Engine

from deepscholar.errors import InfrastructureError, UserError
from deepscholar.web import registration as reg
from deepscholar.web.responses import base_of, page

__all__ = ["install_registration"]


class _Busy(Exception):
    """Every registration thread busy and as many posts waiting."""


def install_registration(app: FastAPI, engine: Callable[[], Engine]) -> None:
    """The form and its posts, each post's sign-in and writes on the registration threads."""
    from deepscholar.settings import current_settings

    workers = current_settings().web_signin_workers
    pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="deepscholar-signin")
    slots = threading.BoundedSemaphore(2 * workers)  # running + waiting
    throttle = reg.SignInThrottle()

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

    _install_routes(app, engine, off_the_readers)


def _install_routes(app: FastAPI, engine: Callable[[], Engine],
                    off_the_readers: Callable[[Request, str, Callable[[], Any]], Any]) -> None:
    """The registration form and its two posts (register, queue a backfill). Each post's sign-in and writes
    go through `off_the_readers` (install_registration: Origin, throttle, the registration threads)."""

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

    shown = {"error": None, "form": None, "outcome": None, "plan": None, "queued": None, "username": "",
             "system_id": None, **context}
    return page("register.html", "Register a system", base_of(request), status_code,
                kinds=sorted(system_kinds()), disabled=reg.registration_enabled(), **shown)


def _registration_refused(request: Request, exc: Exception, **context: Any) -> HTMLResponse:
    """The form again with why a post was refused, under the status that says whose the fault is (throttled,
    not allowed, already registered, unknown, Airflow failing, a bad form)."""
    from deepscholar.airflow_api import AirflowAPIError
    from deepscholar.errors import NotFound
    from deepscholar.systems.registry import SystemExists

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
