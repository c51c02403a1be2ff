"""A direct path to OpenAI-compatible endpoints (`openai/<model>` with an api_base): vLLM, proxies, our stub.

Design notes: docs/MODULE_NOTES.md, `deepscholar.llm.openai_compatible`.
"""

from __future__ import annotations

import json
import os
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import httpx

__all__ = ["chat_completion", "request_body", "status_error", "invalid_response", "probe", "Probe",
           "PROBE_SECONDS"]

PREFIX = "openai/"  # which models come here: see client._is_direct

# Parameters litellm accepts that are not part of the OpenAI request body.
_NOT_SENT = frozenset({"drop_params", "num_retries", "max_retries", "api_base", "api_key", "timeout",
                       "_skip_mcp_handler"})
# Enough idle connections for a judge task's requests in flight (DEEPSCHOLAR_JUDGE_CONCURRENCY and more).
_LIMITS = httpx.Limits(max_connections=None, max_keepalive_connections=256)

_clients: dict[tuple[str, str, float], httpx.Client] = {}
_clients_lock = threading.Lock()


def _client(api_base: str, api_key: str, timeout: float) -> httpx.Client:
    """One HTTP client (and connection pool) per endpoint, key and timeout, shared by all threads."""
    key = (api_base, api_key, timeout)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
            client = httpx.Client(base_url=api_base.rstrip("/") + "/", timeout=timeout, limits=_LIMITS,
                                  headers={**headers, "User-Agent": "deepscholar-judge"})
            _clients[key] = client
        return client


def status_error(response: httpx.Response):
    """The OpenAI SDK's exception for an HTTP error answer: the class by status code (400 BadRequestError,
    401 AuthenticationError, ..., 429 RateLimitError, 5xx InternalServerError), the JSON error body attached."""
    import openai

    text = response.text.strip()
    try:
        body: Any = json.loads(text)
        message = f"Error code: {response.status_code} - {body}"
    except ValueError:
        body, message = text, text or f"Error code: {response.status_code}"
    data = body.get("error", body) if isinstance(body, Mapping) else body
    by_status = {400: openai.BadRequestError, 401: openai.AuthenticationError, 403: openai.PermissionDeniedError,
                 404: openai.NotFoundError, 409: openai.ConflictError, 422: openai.UnprocessableEntityError,
                 429: openai.RateLimitError}
    kind = by_status.get(response.status_code) or (
        openai.InternalServerError if response.status_code >= 500 else openai.APIStatusError)
    return kind(message, response=response, body=data)


def invalid_response(response: httpx.Response):
    """A 200 without a JSON object (a reverse proxy's login page, a model server that crashed mid-answer):
    not the judge's answer, raised as a bad gateway (502) for the retry and circuit-breaker rules."""
    import openai

    error = openai.InternalServerError(
        f"the endpoint answered 200 with a body that is not a JSON object: {response.text[:200]!r}; check the "
        "reverse proxy or model server", response=response, body=None)
    error.status_code = 502
    return error


def _transport_error(exc: httpx.TransportError):
    """A request that got no answer, as the SDK says it: a timeout or a connection error."""
    import openai

    if isinstance(exc, httpx.TimeoutException):
        return openai.APITimeoutError(request=exc.request)
    return openai.APIConnectionError(message=f"Connection error: {exc}", request=exc.request)


def request_body(model: str, messages: Sequence[Mapping[str, Any]], params: Mapping[str, Any]) -> dict:
    """The JSON body of POST /chat/completions for `openai/<model>`: what the direct path sends, and what a
    batch's JSONL line carries (llm/batch_transport.py), so both ask the provider the same question."""
    name = model[len(PREFIX):] if model.startswith(PREFIX) else model
    return {"model": name, "messages": list(messages), **{k: v for k, v in params.items() if k not in _NOT_SENT}}


def chat_completion(model: str, messages: Sequence[Mapping[str, Any]], *, api_base: str,
                    api_key: str | None, timeout: float, params: Mapping[str, Any]) -> dict:
    """POST /chat/completions; the provider's JSON body as a dict, or an `openai.*Error` as the SDK would
    raise it (status_error, invalid_response, timeouts and connection errors)."""
    key = api_key or os.environ.get("OPENAI_API_KEY") or ""
    payload = request_body(model, messages, params)
    try:
        response = _client(api_base, key, timeout).post("chat/completions", json=payload)
    except httpx.TransportError as exc:
        raise _transport_error(exc) from exc
    if response.status_code >= 400:
        raise status_error(response)
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        raise invalid_response(response)
    return body


PROBE_SECONDS = 5.0


@dataclass(frozen=True)
class Probe:
    """What a server whose request timed out did with a probe: `answered` its models endpoint (any status
    under 500, a 401 too) or took the connection and stayed `silent` past the probe's timeout."""

    seconds: float
    answered: bool


def probe(api_base: str, api_key: str | None, timeout: float | None = None) -> Probe | None:
    """GET {api_base}/models after a timeout: whether the server is busy or down. A model server that lists
    its models at once while generating (vLLM) answers; one that serves the list only between generations
    (llama-cpp-python) takes the connection and stays silent: both are up and busy. None, down: the
    connection refused or not made in time, reset, or a 5xx. Timeout: PROBE_SECONDS unless given."""
    key = api_key or os.environ.get("OPENAI_API_KEY") or ""
    wait = PROBE_SECONDS if timeout is None else timeout
    started = time.perf_counter()
    try:
        response = _client(api_base, key, wait).get("models")
    except httpx.ReadTimeout:
        return Probe(time.perf_counter() - started, answered=False)
    except httpx.HTTPError:
        return None
    return None if response.status_code >= 500 else Probe(time.perf_counter() - started, answered=True)
