"""A direct path to OpenAI-compatible endpoints (`openai/<model>` with an api_base): vLLM, proxies, our stub.

Why not litellm for these: litellm rebuilds its provider config, parameter mapping, logging objects and
cost lookups on every call (~10 ms of CPU per call here), which is what bounds a judge at high
concurrency on a small machine. For an endpoint that already speaks the OpenAI wire format none of that
is needed: the request body is the OpenAI body. We keep the OpenAI SDK's transport (one pooled HTTP client
per endpoint, its timeouts and its mapping of HTTP statuses to `openai.*Error`, which litellm's own
errors subclass), so retries, the circuit breaker and unscored outcomes behave exactly as on the litellm
path. Set DEEPSCHOLAR_LLM_TRANSPORT=litellm to send everything through litellm instead.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import httpx
import openai

__all__ = ["chat_completion", "InvalidResponse"]

PREFIX = "openai/"  # which models come here: see client._is_direct

# Parameters litellm accepts that are not part of the OpenAI request body.
_NOT_SENT = frozenset({"drop_params", "num_retries", "max_retries", "api_base", "api_key", "timeout",
                       "_skip_mcp_handler"})

_clients: dict[tuple[str, str, float], Any] = {}
_clients_lock = threading.Lock()


class InvalidResponse(openai.InternalServerError):
    """A 200 without a JSON object: a bad gateway (502) for the retry and circuit-breaker rules."""

    def __init__(self, response: httpx.Response) -> None:
        super().__init__(f"the endpoint answered 200 with a body that is not a JSON object: "
                         f"{response.text[:200]!r}; check the reverse proxy or model server",
                         response=response, body=None)
        self.status_code = 502


def _client(api_base: str, api_key: str, timeout: float):
    """One SDK client (and connection pool) per endpoint, key and timeout, shared by all threads."""
    key = (api_base, api_key, timeout)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            client = openai.OpenAI(base_url=api_base, api_key=api_key, timeout=timeout, max_retries=0)
            _clients[key] = client
        return client


def chat_completion(model: str, messages: Sequence[Mapping[str, Any]], *, api_base: str,
                    api_key: str | None, timeout: float, params: Mapping[str, Any]) -> dict:
    """POST /chat/completions; the provider's JSON body as a dict, or an `openai.*Error` as the SDK maps it.

    A 200 whose body is not a JSON object (a reverse proxy's login page, a model server that crashed
    mid-answer) is not the judge's answer: it is raised as a 502-like server error, retried and then
    an outage, as litellm does with it.
    """
    key = api_key or os.environ.get("OPENAI_API_KEY") or ""
    payload = {"model": model[len(PREFIX):], "messages": list(messages),
               **{k: v for k, v in params.items() if k not in _NOT_SENT}}
    response = _client(api_base, key, timeout).post("/chat/completions", body=payload, cast_to=httpx.Response)
    try:
        body = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        body = None
    if not isinstance(body, dict):
        raise InvalidResponse(response)
    return body
