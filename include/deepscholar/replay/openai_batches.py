"""A local stand-in for OpenAI's Files and Batches API, over real HTTP, for tests, benches and the demo.

Design notes: docs/MODULE_NOTES.md, `deepscholar.replay.openai_batches`.
"""

from __future__ import annotations

import itertools
import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from werkzeug.wrappers import Request, Response

from deepscholar.replay.server import ThreadedServer

__all__ = ["BAD_LINES", "BatchStub", "echo_answer"]

log = logging.getLogger(__name__)

CREATED = 1_700_000_000  # a fixed `created` in every completion: the same answers give the same bytes
HUGE_LINE_BYTES = 1_200_000  # a "huge" line's answer: over the collector's cap of a line


def _bad_line(kind: str, line: dict) -> dict | bytes:
    """An output line of the wrong shape, as a provider might send one (BAD_LINES)."""
    response = line["response"]
    body = response["body"]
    if kind == "string_response":
        return {**line, "response": json.dumps(response)}
    if kind == "choices_not_list":
        return {**line, "response": {**response, "body": {**body, "choices": body["choices"][0]}}}
    if kind == "usage_list":
        return {**line, "response": {**response, "body": {**body, "usage": list(body["usage"].values())}}}
    if kind == "tokens_as_strings":
        usage = {k: str(v) for k, v in body["usage"].items()}
        return {**line, "response": {**response, "body": {**body, "usage": usage}}}
    if kind == "nul":
        choice = {**body["choices"][0], "message": {"role": "assistant", "content": "an answer\u0000 with a NUL"}}
        return {**line, "response": {**response, "body": {**body, "choices": [choice]}}}
    if kind == "huge":
        choice = {**body["choices"][0], "message": {"role": "assistant", "content": "x" * HUGE_LINE_BYTES}}
        return {**line, "response": {**response, "body": {**body, "choices": [choice]}}}
    if kind == "not_json":
        cut = json.dumps({"id": line["id"], "custom_id": line["custom_id"], "response": response})
        return cut[: cut.index('"choices"')].encode()  # a line cut short: its request named, its answer gone
    raise ValueError(f"no bad line {kind!r}")


BAD_LINES = ("string_response", "choices_not_list", "usage_list", "tokens_as_strings", "nul", "huge", "not_json")


def echo_answer(body: dict) -> str:
    """The default answer: the last message's text."""
    return (body.get("messages") or [{}])[-1].get("content") or ""


class BatchStub(ThreadedServer):
    """The app and its werkzeug server on a background thread (`with BatchStub(answer=fn) as stub:`)."""

    thread_name = "batch-stub"

    def __init__(self, answer: Callable[[dict], Any] = echo_answer, *, delay: float = 0.0,
                 usage: tuple[int, int] = (12, 5), model_suffix: str = "", host: str = "127.0.0.1",
                 port: int = 0) -> None:
        self.answer = answer
        self.delay = delay
        self.chat_delay = 0.0  # seconds each request sent one by one takes (to make concurrency observable)
        self.usage = usage
        self.usage_by_model: dict[str, tuple[int, int]] = {}  # a model's own (prompt, completion) tokens
        self.model_suffix = model_suffix
        self.fail_lines = 0
        self.fail_if: Callable[[dict], bool] | None = None
        self.bad_line_if: Callable[[dict], str | None] | None = None
        self.expire_batches = 0
        self.lose_creates = 0
        self.repeat_list_pages = False
        self.slow_downloads = 0
        self.trickle_seconds = 0.05
        self.list_requests = 0  # GET /v1/batches received
        self.bodies: list[tuple[str, dict]] = []  # ("direct" or "batch", each request body asked)
        self.files: dict[str, dict] = {}
        self.batches: dict[str, dict] = {}
        self.creates = 0  # create requests received (lost ones too)
        self.cancels = 0  # cancel requests received
        self.chat_requests = 0  # requests sent one by one (POST /v1/chat/completions)
        self.lines_answered: list[str] = []  # custom ids, in the order their lines were processed
        self.models_asked: set[str] = set()  # every model named by a request, sent one by one or in a batch
        self.errors: list[BaseException] = []
        self._ids = itertools.count(1)
        self._lock = threading.RLock()  # _completion takes it too, also from _advance (which holds it)
        super().__init__(self._wsgi, host, port)

    # -- lifecycle --

    @property
    def url(self) -> str:
        """The api_base: what a judge's chat completions would be sent to, and its batches."""
        return f"http://{self.host}:{self.port}/v1"


    def raise_errors(self) -> None:
        if self.errors:
            raise self.errors[0]

    # -- serving --

    def _wsgi(self, environ, start_response):
        request = Request(environ)
        try:
            response = self._dispatch(request, request.path)
        except Exception as exc:  # a bug here must reach the test as a failure it sees, not a dead socket
            log.exception("batch stub error for %s", request.path)
            with self._lock:
                self.errors.append(exc)
            response = _error(500, f"stub failure: {type(exc).__name__}: {exc}")
        return response(environ, start_response)

    def _dispatch(self, request: Request, path: str) -> Response:
        parts = path.strip("/").split("/")
        if parts[:1] != ["v1"]:
            return _error(404, f"no route for {path}")
        parts = parts[1:]
        if parts == ["chat", "completions"] and request.method == "POST":  # the direct path, same answers
            body = request.get_json(silent=True) or {}
            with self._lock:
                self.chat_requests += 1
                self.bodies.append(("direct", body))
            if self.chat_delay:
                time.sleep(self.chat_delay)
            return _json(self._completion(body))
        if parts == ["files"] and request.method == "POST":
            return self._upload(request)
        if len(parts) == 3 and parts[0] == "files" and parts[2] == "content" and request.method == "GET":
            found = self.files.get(parts[1])
            if found is None:
                return _error(404, f"no file {parts[1]}")
            with self._lock:
                slow, self.slow_downloads = self.slow_downloads > 0, max(0, self.slow_downloads - 1)
            if slow:
                return Response(self._trickle(found["content"]), content_type="application/octet-stream")
            return Response(found["content"], content_type="application/octet-stream")
        if parts == ["batches"] and request.method == "POST":
            return self._create(request)
        if parts == ["batches"] and request.method == "GET":
            return self._list(request)
        if len(parts) == 3 and parts[0] == "batches" and parts[2] == "cancel" and request.method == "POST":
            return self._cancel(parts[1])
        if len(parts) == 2 and parts[0] == "batches" and request.method == "GET":
            with self._lock:
                batch = self.batches.get(parts[1])
                if batch is None:
                    return _error(404, f"no batch {parts[1]}")
                self._advance(batch)
                return _json(_public(batch))
        return _error(404, f"no route for {request.method} {path}")

    def _upload(self, request: Request) -> Response:
        upload = request.files.get("file")
        if upload is None or request.form.get("purpose") != "batch":
            return _error(400, "a multipart `file` and purpose=batch are required")
        content = upload.read()
        with self._lock:
            file_id = f"file-{next(self._ids)}"
            self.files[file_id] = {"content": content, "purpose": "batch", "filename": upload.filename}
        return _json({"id": file_id, "object": "file", "bytes": len(content), "created_at": CREATED,
                      "filename": upload.filename, "purpose": "batch"})

    def _create(self, request: Request) -> Response:
        spec = request.get_json(silent=True) or {}
        with self._lock:
            self.creates += 1
            source = self.files.get(spec.get("input_file_id") or "")
            if source is None:
                return _error(400, f"no input file {spec.get('input_file_id')!r}")
            if spec.get("endpoint") != "/v1/chat/completions" or spec.get("completion_window") != "24h":
                return _error(400, "endpoint must be /v1/chat/completions and completion_window 24h")
            lines = [json.loads(raw) for raw in source["content"].decode("utf-8").split("\n") if raw.strip()]
            self.bodies += [("batch", line["body"]) for line in lines]
            batch_id = f"batch_{next(self._ids)}"
            batch = {"id": batch_id, "object": "batch", "endpoint": spec["endpoint"], "errors": None,
                     "input_file_id": spec["input_file_id"], "completion_window": "24h", "status": "in_progress",
                     "output_file_id": None, "error_file_id": None, "created_at": int(time.time()),
                     "metadata": spec.get("metadata") or {}, "_lines": lines, "_ready": time.monotonic() + self.delay,
                     "request_counts": {"total": len(lines), "completed": 0, "failed": 0}}
            self.batches[batch_id] = batch
            if self.lose_creates > 0:
                self.lose_creates -= 1
                return _error(502, "bad gateway (injected: the batch was created, its answer lost)")
            return _json(_public(batch))

    def _trickle(self, content: bytes):
        for i in range(len(content)):
            time.sleep(self.trickle_seconds)
            yield content[i:i + 1]

    def _list(self, request: Request) -> Response:
        limit = int(request.args.get("limit", 20))
        after = request.args.get("after")
        with self._lock:
            self.list_requests += 1
            ordered = sorted(self.batches.values(), key=lambda b: int(b["id"].split("_")[1]), reverse=True)
        if self.repeat_list_pages:  # a provider whose `after` is ignored and whose list never ends
            page = ordered[:limit]
            return _json({"object": "list", "data": [_public(b) for b in page], "has_more": True,
                          "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None})
        if after:
            ids = [b["id"] for b in ordered]
            ordered = ordered[ids.index(after) + 1:] if after in ids else []
        page = ordered[:limit]
        return _json({"object": "list", "data": [_public(b) for b in page],
                      "first_id": page[0]["id"] if page else None, "last_id": page[-1]["id"] if page else None,
                      "has_more": len(ordered) > limit})

    def _cancel(self, batch_id: str) -> Response:
        with self._lock:
            self.cancels += 1
            batch = self.batches.get(batch_id)
            if batch is None:
                return _error(404, f"no batch {batch_id}")
            if batch["status"] == "in_progress":
                # The lines its time so far allowed are answered (and billed), the rest never will be.
                share = 1.0 if not self.delay else min(1.0, 1 - (batch["_ready"] - time.monotonic()) / self.delay)
                batch["_answered_before_cancel"] = int(len(batch["_lines"]) * max(0.0, share))
                batch["status"] = "cancelling"
            return _json(_public(batch))

    def _advance(self, batch: dict) -> None:
        """A running batch past its delay ends now, a cancelled one when next retrieved (under the lock)."""
        cancelling = batch["status"] == "cancelling"
        if not cancelling and (batch["status"] != "in_progress" or time.monotonic() < batch["_ready"]):
            return
        out: list[dict | bytes] = []
        err: list[dict | bytes] = []
        if cancelling:
            batch["status"] = "cancelled"
            self._answer_cancelled(batch, out, err)
        elif self.expire_batches > 0:
            self.expire_batches -= 1
            batch["status"] = "expired"
            for line in batch["_lines"]:
                err.append({"id": f"batch_req_{next(self._ids)}", "custom_id": line["custom_id"], "response": None,
                            "error": {"code": "batch_expired",
                                      "message": "This request could not be executed before the completion window "
                                                 "expired."}})
        else:
            batch["status"] = "completed"
            for line in batch["_lines"]:
                self.lines_answered.append(line["custom_id"])
                failing = self.fail_lines > 0 or (self.fail_if is not None and self.fail_if(line["body"]))
                if failing:
                    self.fail_lines = max(0, self.fail_lines - 1)
                    err.append({"id": f"batch_req_{next(self._ids)}", "custom_id": line["custom_id"],
                                "response": {"status_code": 500, "request_id": f"req_{next(self._ids)}",
                                             "body": {"error": {"message": "injected server error",
                                                                "type": "server_error"}}}, "error": None})
                    continue
                answered = {"id": f"batch_req_{next(self._ids)}", "custom_id": line["custom_id"],
                            "response": {"status_code": 200, "request_id": f"req_{next(self._ids)}",
                                         "body": self._completion(line["body"])}, "error": None}
                bad = self.bad_line_if(line["body"]) if self.bad_line_if is not None else None
                out.append(_bad_line(bad, answered) if bad else answered)
        batch["request_counts"] = {"total": len(batch["_lines"]), "completed": len(out), "failed": len(err)}
        for kind, lines in (("output_file_id", out), ("error_file_id", err)):
            if lines:
                file_id = f"file-{next(self._ids)}"
                content = b"".join((x if isinstance(x, bytes) else json.dumps(x, ensure_ascii=False).encode("utf-8"))
                                   + b"\n" for x in lines)
                self.files[file_id] = {"content": content, "purpose": "batch_output", "filename": f"{kind}.jsonl"}
                batch[kind] = file_id

    def _answer_cancelled(self, batch: dict, out: list[dict | bytes], err: list[dict | bytes]) -> None:
        """A cancelled batch's lines: those its time before the cancel allowed answered, the rest cancelled."""
        answered = batch["_answered_before_cancel"]
        for n, line in enumerate(batch["_lines"]):
            if n < answered:
                self.lines_answered.append(line["custom_id"])
                out.append({"id": f"batch_req_{next(self._ids)}", "custom_id": line["custom_id"],
                            "response": {"status_code": 200, "request_id": f"req_{next(self._ids)}",
                                         "body": self._completion(line["body"])}, "error": None})
            else:
                err.append({"id": f"batch_req_{next(self._ids)}", "custom_id": line["custom_id"],
                            "response": None, "error": {"code": "batch_cancelled",
                                                        "message": "The batch was cancelled."}})

    def _completion(self, body: dict) -> dict:
        with self._lock:
            self.models_asked.add(str(body.get("model")))
        try:
            answer = self.answer(body)
        except Exception as exc:  # a bug in the test's answer function
            with self._lock:
                self.errors.append(exc)
            answer = f"stub answer function failed: {exc}"
        message = answer if isinstance(answer, dict) else {"role": "assistant", "content": str(answer)}
        prompt_tokens, completion_tokens = self.usage_by_model.get(str(body.get("model")), self.usage)
        return {"id": f"chatcmpl-{next(self._ids)}", "object": "chat.completion", "created": CREATED,
                "model": f"{body['model']}{self.model_suffix}",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                          "total_tokens": prompt_tokens + completion_tokens}}


def _public(batch: dict) -> dict:
    return {k: v for k, v in batch.items() if not k.startswith("_")}


def _json(payload: dict, status: int = 200) -> Response:
    return Response(json.dumps(payload), status=status, mimetype="application/json")


def _error(status: int, message: str) -> Response:
    return _json({"error": {"message": message, "type": "invalid_request_error" if status < 500 else "server_error"}},
                 status)
