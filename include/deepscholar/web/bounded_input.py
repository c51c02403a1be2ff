"""Whatever a client sends is bounded before it is read: a request body of at most
DEEPSCHOLAR_WEB_MAX_BODY_BYTES arriving within DEEPSCHOLAR_WEB_BODY_SECONDS, else 413 / 408 before any of it
is parsed; HEAD is answered wherever GET is (GET's headers, no body)."""

from __future__ import annotations

import asyncio
from typing import Any

from deepscholar.web.responses import refusal, security_headers

__all__ = ["BoundedInput"]


class _BodyTooLarge(Exception):
    pass


class BoundedInput:
    """Pure ASGI, outside everything else of the app: a request body is read here, whole, only up to
    DEEPSCHOLAR_WEB_MAX_BODY_BYTES and within DEEPSCHOLAR_WEB_BODY_SECONDS (413 / 408 otherwise, before the
    app parses a byte), then handed on; HEAD is served as GET without the body."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def _refuse(self, scope: dict, send: Any, status: int, message: str) -> None:
        response = refusal(scope.get("path", ""), (scope.get("root_path") or "").rstrip("/"), "Request refused",
                           message, status)
        security_headers(response.headers)
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
        too_large = f"Request body too large: at most {limit} bytes (DEEPSCHOLAR_WEB_MAX_BODY_BYTES)."
        headers = dict(scope.get("headers") or [])
        declared = headers.get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > limit):
            await self._refuse(scope, send, 413, too_large)
            return
        if declared is None and b"chunked" not in headers.get(b"transfer-encoding", b""):
            await self.app(scope, receive, send)  # no body
            return
        try:
            body = await asyncio.wait_for(_read_body(receive, limit), settings.web_body_seconds)
        except _BodyTooLarge:
            await self._refuse(scope, send, 413, too_large)
            return
        except TimeoutError:
            await self._refuse(scope, send, 408, "The request body did not arrive in time "
                                                 "(DEEPSCHOLAR_WEB_BODY_SECONDS).")
            return
        except ConnectionError:
            return
        await self.app(scope, _replay(body, receive), send)


async def _read_body(receive: Any, limit: int) -> bytes:
    """The whole body; _BodyTooLarge past `limit` bytes, ConnectionError when the client goes away."""
    chunks: list[bytes] = []
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
            return b"".join(chunks)


def _replay(body: bytes, receive: Any) -> Any:
    """`receive` giving the body read already, once, then what the client sends (only a disconnect can come)."""
    given = False

    async def replay() -> dict:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return replay


async def _nothing() -> dict:
    return {"type": "http.disconnect"}


def _without_body(send: Any) -> Any:
    """`send` dropping the body of the answer (HEAD: the headers of GET's answer, Content-Length included)."""

    async def headers_only(message: dict) -> None:
        if message["type"] == "http.response.body":
            message = {**message, "body": b""}
        await send(message)

    return headers_only
