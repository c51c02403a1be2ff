"""OpenAI's Files and Batches API, as far as judging through batches needs it (llm/batch_transport.py).

upload a JSONL file (POST /files, purpose=batch, multipart), create a batch of it (POST /batches), find a
batch by our metadata (GET /batches, paged), retrieve one (GET /batches/{id}), cancel one (POST
/batches/{id}/cancel) and download its output and error files (GET /files/{id}/content). Every answer is
read through http_guard.bounded_request: bounded in time and size before it is read whole (an output file
up to DEEPSCHOLAR_BATCH_MAX_BYTES, anything else a few megabytes).

Failures: no answer, a 429 or a 5xx is the provider's (InfrastructureError: the step fails and is retried
later); another 4xx is a request the provider refuses (BatchAPIError, with its message), which a retry
would not change.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping
from typing import Any

from deepscholar.errors import DeepScholarError, InfrastructureError
from deepscholar.http_guard import AnswerTooLarge, DeadlinePassed, bounded_request

__all__ = ["OPENAI_API_BASE", "BatchAPIError", "OpenAIBatches", "CHAT_COMPLETIONS", "TERMINAL", "FINISHED_OK"]

OPENAI_API_BASE = "https://api.openai.com/v1"
CHAT_COMPLETIONS = "/v1/chat/completions"  # a batch's endpoint, and each JSONL line's url
# A batch in one of these states will not change any more; only "completed" ran all of its requests (an
# expired or cancelled one may have answered some: its output file holds those, its error file the rest).
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
FINISHED_OK = "completed"
_SMALL = 4 * 1024 * 1024  # the most read of any answer but a file's content
_PAGE = 100  # GET /batches page size (OpenAI's maximum)


class BatchAPIError(DeepScholarError):
    """The batch API refused a request (a 4xx other than 429): `status` and the provider's message."""

    def __init__(self, status: int, message: str) -> None:
        self.status = status
        super().__init__(f"batch API answered {status}: {message}")


class OpenAIBatches:
    """One endpoint's Files and Batches API (`api_base` as for chat completions: ends in /v1)."""

    def __init__(self, api_base: str | None, api_key: str | None = None, *, timeout: float = 120.0,
                 max_file_bytes: int = 200_000_000) -> None:
        self.api_base = (api_base or OPENAI_API_BASE).rstrip("/")
        self._api_key = api_key
        self.timeout = timeout
        self.max_file_bytes = max_file_bytes

    @property
    def service(self) -> str:
        return f"batch API at {self.api_base}"

    def _headers(self) -> dict[str, str]:
        key = self._api_key or os.environ.get("OPENAI_API_KEY") or ""
        return {"Authorization": f"Bearer {key}", "User-Agent": "deepscholar-judge"} if key else \
            {"User-Agent": "deepscholar-judge"}

    def _call(self, method: str, path: str, *, max_bytes: int = _SMALL, **kwargs: Any) -> bytes:
        import requests

        try:
            answer = bounded_request(method, f"{self.api_base}/{path.lstrip('/')}", seconds=self.timeout,
                                     max_bytes=max_bytes, headers=self._headers(), **kwargs)
        except (requests.RequestException, DeadlinePassed, OSError) as exc:
            raise InfrastructureError(self.service, exc) from exc
        except AnswerTooLarge as exc:
            raise BatchAPIError(200, f"{method} {path}: {exc}") from exc
        if answer.status_code == 429 or answer.status_code >= 500:
            raise InfrastructureError(self.service, f"{method} {path} answered {answer.status_code}: "
                                                    f"{answer.text[:300]}")
        if answer.status_code >= 400:
            raise BatchAPIError(answer.status_code, f"{method} {path}: {_message(answer.text)}")
        return answer.content

    def _json(self, method: str, path: str, **kwargs: Any) -> dict:
        content = self._call(method, path, **kwargs)
        try:
            body = json.loads(content)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            raise InfrastructureError(self.service, f"{method} {path} answered 200 without a JSON object: "
                                                    f"{content[:200]!r}")
        return body

    # -- files --

    def upload(self, filename: str, content: bytes) -> str:
        """A JSONL file for batches; its file id."""
        body = self._json("POST", "files", data={"purpose": "batch"},
                          files={"file": (filename, content, "application/jsonl")})
        return str(body["id"])

    def content(self, file_id: str) -> bytes:
        """A file's bytes (an output or error file), at most max_file_bytes."""
        return self._call("GET", f"files/{file_id}/content", max_bytes=self.max_file_bytes)

    # -- batches --

    def create(self, input_file_id: str, metadata: Mapping[str, str]) -> dict:
        return self._json("POST", "batches", json={"input_file_id": input_file_id, "endpoint": CHAT_COMPLETIONS,
                                                   "completion_window": "24h", "metadata": dict(metadata)})

    def retrieve(self, batch_id: str) -> dict:
        return self._json("GET", f"batches/{batch_id}")

    def cancel(self, batch_id: str) -> dict:
        """Ask the provider to stop a batch (POST /batches/{id}/cancel): it becomes `cancelling`, then
        `cancelled`; the requests it answered before are in its output file, and are billed."""
        return self._json("POST", f"batches/{batch_id}/cancel")

    def batches(self) -> Iterator[dict]:
        """Every batch of the account, newest first, a page at a time."""
        after: str | None = None
        while True:
            page = self._json("GET", "batches", params={"limit": _PAGE, **({"after": after} if after else {})})
            data = page.get("data") or []
            yield from data
            if not page.get("has_more") or not data:
                return
            after = str(data[-1]["id"])

    def find(self, key: str, value: str) -> dict | None:
        """The batch whose metadata has `key` = `value`, if any (the newest; a batch not ended first)."""
        found = [b for b in self.batches() if (b.get("metadata") or {}).get(key) == value]
        if not found:
            return None
        return next((b for b in found if b.get("status") not in TERMINAL), found[0])


def _message(text: str) -> str:
    try:
        body = json.loads(text)
    except ValueError:
        return text[:300]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return text[:300]
