"""One fake OpenAI-compatible chat-completions server for every test that drives LLMClient.

It is a real threaded HTTP server (pytest_httpserver), not a mocked `litellm.completion`, because the
behaviour under test lives in the layers a mock would skip: litellm's request building and error
mapping, the OpenAI SDK's transport, our retries, cache and concurrency bound.

Answers come from `script` (served first, one item per request, in arrival order) and then from
`default(body)`, a function of the request body. An answer is
- a str: the assistant's text;
- an int: that HTTP status with an OpenAI-style error body (429 and 5xx are retried by the client);
- a dict: the whole assistant message, e.g. `tool_calls_message(tool_call("search", {"query": "x"}))`;
- a callable: called with the body, returning one of the above (lets a script item look at the request);
- a `RawBody`: the whole 200 response body as given (e.g. `RawBody({"choices": []})`, what a broken
  provider or proxy may send);
- a `RawText`: a 200 whose body is that text, not JSON (e.g. a proxy's HTML page).
A text longer than the request's `max_tokens` (counted in words) is cut there with finish reason "length".

Usage:
    with OpenAIStub() as stub:
        stub.script = [429, "hello"]
        LLMClient(engine, "openai/m", api_base=stub.url, api_key="test").complete(...)
        assert stub.requests == 2
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from pytest_httpserver import HTTPServer
from werkzeug import Request, Response

__all__ = ["OpenAIStub", "RawBody", "RawText", "tool_call", "tool_calls_message", "echo_last_message", "first_user_text"]


class RawBody(dict):
    """An answer sent as the complete response body, not wrapped into a chat completion."""


class RawText(str):
    """An answer sent as a 200 with this text as its whole body (text/html), not JSON at all."""


Answer = str | int | dict | RawBody | Callable[[dict], Any]


def echo_last_message(body: dict) -> str:
    """Default answer: the last message's text, so distinct prompts get distinct, checkable answers."""
    return body["messages"][-1].get("content") or ""


def first_user_text(body: dict) -> str:
    """The first user message: what a request is about, also in re-asks (which append to the conversation)."""
    return next((m.get("content") or "" for m in body["messages"] if m.get("role") == "user"), "")


_call_ids = itertools.count(1)


def tool_call(name: str, arguments: Mapping[str, Any] | str, call_id: str | None = None) -> dict:
    """One OpenAI tool call; a str `arguments` is sent as is (to script malformed JSON)."""
    args = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
    return {"id": call_id or f"call_{next(_call_ids)}", "type": "function",
            "function": {"name": name, "arguments": args}}


def tool_calls_message(*calls: dict, content: str | None = None) -> dict:
    return {"role": "assistant", "content": content, "tool_calls": list(calls)}


class _QuickStopServer(HTTPServer):
    """pytest_httpserver's server polling for shutdown every 50 ms, not every 500: stop() waits for a poll,
    and every test using the stub stops one."""

    def thread_target(self) -> None:
        assert self.server is not None
        self.server.serve_forever(poll_interval=0.05)


class OpenAIStub:
    """`/v1/chat/completions` answering from a script, recording every request body and the peak load."""

    def __init__(self, *, model_suffix: str = "-2025-01-01", usage: tuple[int, int] = (12, 5)) -> None:
        self.server = _QuickStopServer(threaded=True)  # threaded, or concurrent calls would be serialised here
        self.script: list[Answer] = []
        self.default: Callable[[dict], Any] = echo_last_message
        self.delay = 0.0  # seconds each request takes, to make concurrency observable
        self.model_suffix = model_suffix  # the served model is reported as the requested one + suffix
        self.usage = usage
        self.bodies: list[dict] = []
        self.errors: list[BaseException] = []  # failures of answer functions (a test bug, surfaced later)
        self.in_flight = self.max_in_flight = 0
        # A model server with this many generation slots (None: as many as come): a request beyond them waits
        # for one, as on llama.cpp's server, and an abandoned request keeps its slot until its answer is done.
        self.slots: int | None = None
        self._slot_gate: threading.Semaphore | None = None
        self.models_probes = 0  # GET /v1/models requests seen (the client's probe of a busy server)
        # llama-cpp-python's server lists its models only between generations: a probe waits for them.
        self.models_between_generations = False
        self._lock = threading.Lock()

    # -- lifecycle --

    def start(self) -> OpenAIStub:
        self.server.start()
        self.server.expect_request("/v1/chat/completions", method="POST").respond_with_handler(self._handle)
        self.server.expect_request("/v1/models", method="GET").respond_with_handler(self._models)
        return self

    def _models(self, request: Request) -> Response:
        with self._lock:
            self.models_probes += 1
        deadline = time.monotonic() + 30
        while self.models_between_generations and self.in_flight and time.monotonic() < deadline:
            time.sleep(0.01)
        return Response(json.dumps({"object": "list", "data": [{"id": "stub", "object": "model"}]}),
                        content_type="application/json")

    def stop(self) -> None:
        self.server.clear()
        if self.server.is_running():
            self.server.stop()

    def __enter__(self) -> OpenAIStub:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def raise_errors(self) -> None:
        """Re-raise the first exception an answer function raised (call at the end of a test or fixture)."""
        if self.errors:
            raise self.errors[0]

    # -- what tests read --

    @property
    def url(self) -> str:
        """The api_base to give litellm."""
        return self.server.url_for("/v1")

    @property
    def requests(self) -> int:
        return len(self.bodies)

    @property
    def log(self) -> list:
        """(request, response) pairs as pytest_httpserver saw them: every HTTP exchange, errors included."""
        return self.server.log

    def bodies_where(self, predicate: Callable[[dict], bool]) -> list[dict]:
        with self._lock:
            return [b for b in self.bodies if predicate(b)]

    # -- serving --

    def _handle(self, request: Request) -> Response:
        body = request.get_json()
        with self._lock:
            self.bodies.append(body)
            number = len(self.bodies)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            item = self.script.pop(0) if self.script else self.default
        gate = self._gate()
        if gate is not None:
            gate.acquire()
        try:
            if self.delay:
                time.sleep(self.delay)
            try:
                answer = item(body) if callable(item) else item
            except Exception as exc:  # a bug in the test's answer function: a 400 is not retried
                with self._lock:
                    self.errors.append(exc)
                return _error(400, f"stub answer function failed: {type(exc).__name__}: {exc}")
            return self._respond(body, answer, number)
        finally:
            if gate is not None:
                gate.release()
            with self._lock:
                self.in_flight -= 1

    def _gate(self) -> threading.Semaphore | None:
        with self._lock:
            if self.slots is not None and self._slot_gate is None:
                self._slot_gate = threading.Semaphore(self.slots)
            return self._slot_gate

    def _respond(self, body: dict, answer: Any, number: int) -> Response:
        if isinstance(answer, bool) or not isinstance(answer, (str, int, dict)):
            raise TypeError(f"stub answers must be str, int or dict, got {type(answer).__name__}")
        if isinstance(answer, int):
            return _error(answer, f"scripted failure {answer}")
        if isinstance(answer, RawText):
            return Response(str(answer), content_type="text/html")
        if isinstance(answer, RawBody):
            return Response(json.dumps(dict(answer)), content_type="application/json")
        message = answer if isinstance(answer, dict) else {"role": "assistant", "content": answer}
        prompt_tokens, completion_tokens = self.usage
        finish = "tool_calls" if message.get("tool_calls") else "stop"
        budget, words = body.get("max_tokens"), str(message.get("content") or "").split(" ")
        if isinstance(budget, int) and len(words) > budget:  # a word a token: cut at the budget, as servers do
            message = {**message, "content": " ".join(words[:budget])}
            finish, completion_tokens = "length", budget
        completion = {
            "id": f"chatcmpl-{number}", "object": "chat.completion", "created": 1700000000,
            "model": f"{body['model']}{self.model_suffix}",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens},
        }
        return Response(json.dumps(completion), content_type="application/json")


def _error(status: int, message: str) -> Response:
    # One neutral error type for every status: litellm maps errors partly by matching strings in the body
    # (e.g. "invalid_request_error"), and the status alone should decide what the client sees.
    return Response(json.dumps({"error": {"message": message, "type": "server_error"}}), status=status,
                    content_type="application/json")
