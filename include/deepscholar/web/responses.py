"""What every answer of the page shares: its security headers, a page or an error page from a template, and
the mount it is served under (links carry it)."""

from __future__ import annotations

from typing import Any

from fastapi import Request
from fastapi.responses import HTMLResponse, JSONResponse, Response

from deepscholar.web.render import render

__all__ = ["CSP", "security_headers", "page", "error_page", "refusal", "base_of", "is_api"]

# No scripts at all; inline styles only (the stylesheet lives in the page); framing by the same origin only
# (Airflow embeds the page in an iframe served from the same host).
CSP = ("default-src 'none'; style-src 'unsafe-inline'; img-src 'self' data:; form-action 'self'; "
       "base-uri 'none'; frame-ancestors 'self'")


def security_headers(headers: Any) -> None:
    headers.setdefault("Content-Security-Policy", CSP)
    headers.setdefault("X-Content-Type-Options", "nosniff")
    headers.setdefault("Referrer-Policy", "same-origin")


def page(template: str, title: str, base: str, status_code: int = 200, **context: Any) -> HTMLResponse:
    return HTMLResponse(render(template, title=title, base=base, **context), status_code=status_code)


def error_page(title: str, message: str, base: str, status_code: int) -> HTMLResponse:
    return page("error.html", title, base, status_code, message=message)


def refusal(path: str, base: str, title: str, message: str, status_code: int) -> Response:
    """One line saying why: JSON under /api/, else an error page."""
    if "/api/" in path:
        return JSONResponse({"error": message}, status_code=status_code)
    return error_page(title, message, base, status_code)


def base_of(request: Request) -> str:
    # Mounted under a prefix (Airflow: /deepscholar) Starlette sets root_path; links must carry it.
    return (request.scope.get("root_path") or "").rstrip("/")


def is_api(request: Request) -> bool:
    return "/api/" in request.url.path
