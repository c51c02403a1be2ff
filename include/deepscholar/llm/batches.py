"""OpenAI's Files and Batches API, as far as judging through batches needs it (llm/batch_transport.py).

Design notes: docs/MODULE_NOTES.md, `deepscholar.llm.batches`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import IO, Any

from deepscholar.errors import DeepScholarError, InfrastructureError
from deepscholar.http_guard import AnswerTooLarge, DeadlinePassed, bounded_request

__all__ = ["OPENAI_API_BASE", "BatchAPIError", "OpenAIBatches", "CHAT_COMPLETIONS", "TERMINAL", "FINISHED_OK",
           "MAX_LIST_PAGES", "MIN_DOWNLOAD_BYTES_PER_SECOND"]

OPENAI_API_BASE = "https://api.openai.com/v1"
CHAT_COMPLETIONS = "/v1/chat/completions"  # a batch's endpoint, and each JSONL line's url
# A batch in one of these states will not change any more; only "completed" ran all of its requests (an
# expired or cancelled one may have answered some: its output file holds those, its error file the rest).
TERMINAL = frozenset({"completed", "failed", "expired", "cancelled"})
FINISHED_OK = "completed"
_SMALL = 4 * 1024 * 1024  # the most read of any answer but a file's content
_PAGE = 100  # GET /batches page size (OpenAI's maximum)
# Looking for a batch whose create answer was lost: it is among the newest (newest come first), so a few
# pages reach batches older than it; past this many, the listing is not to be trusted (a provider repeating
# `has_more` forever) and no second batch is created on its word.
MAX_LIST_PAGES = 20
# A file download may take the request timeout plus this rate over the file cap (200 MB: 320 s by default):
# a full-size file at a fair rate is read whole, a trickle is cut.
MIN_DOWNLOAD_BYTES_PER_SECOND = 1_000_000


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

    def _call(self, method: str, path: str, *, max_bytes: int = _SMALL, seconds: float | None = None,
              **kwargs: Any) -> bytes:
        import requests

        try:
            answer = bounded_request(method, f"{self.api_base}/{path.lstrip('/')}", seconds=seconds or self.timeout,
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

    def _with_id(self, what: str, body: dict) -> dict:
        """An answer that names what it made or found: its `id` is a short string (anything else is the
        provider's fault, raised as for an answer that is not JSON)."""
        if not isinstance(body.get("id"), str) or not 0 < len(body["id"]) <= 200:
            raise InfrastructureError(self.service, f"{what} answered without an id: {json.dumps(body)[:200]}")
        return body

    def upload(self, filename: str, content: bytes) -> str:
        """A JSONL file for batches; its file id."""
        body = self._json("POST", "files", data={"purpose": "batch"},
                          files={"file": (filename, content, "application/jsonl")})
        return str(self._with_id("POST files", body)["id"])

    def download(self, file_id: str, into: IO[bytes]) -> None:
        """A file's bytes (an output or error file) written to `into`, at most max_file_bytes within the
        timeout plus max_file_bytes at MIN_DOWNLOAD_BYTES_PER_SECOND. Raises BatchAPIError for a file refused
        or over the cap (what came before it is in `into`), InfrastructureError for a provider that fails or
        is too slow (the same, cut where it stopped)."""
        self._call("GET", f"files/{file_id}/content", max_bytes=self.max_file_bytes, into=into,
                   seconds=self.timeout + self.max_file_bytes / MIN_DOWNLOAD_BYTES_PER_SECOND)

    # -- batches --

    def create(self, input_file_id: str, metadata: Mapping[str, str]) -> dict:
        return self._with_id("POST batches", self._json(
            "POST", "batches", json={"input_file_id": input_file_id, "endpoint": CHAT_COMPLETIONS,
                                     "completion_window": "24h", "metadata": dict(metadata)}))

    def retrieve(self, batch_id: str) -> dict:
        return self._json("GET", f"batches/{batch_id}")

    def cancel(self, batch_id: str) -> dict:
        """Ask the provider to stop a batch (POST /batches/{id}/cancel): it becomes `cancelling`, then
        `cancelled`; the requests it answered before are in its output file, and are billed."""
        return self._json("POST", f"batches/{batch_id}/cancel")

    def find(self, key: str, value: str, *, since: float | None = None) -> dict | None:
        """The batch whose metadata has `key` = `value`, if any (the newest; a batch not ended first),
        looking back to batches created at `since` (epoch seconds) when given, else through the whole list.

        Raises InfrastructureError when the provider's list cannot be read that far (MAX_LIST_PAGES pages,
        or a page it repeats): the caller must not take "not found" for an answer and create a second
        batch."""
        found: list[dict] = []
        seen: set[str] = set()
        after: str | None = None
        for _ in range(MAX_LIST_PAGES):
            page = self._json("GET", "batches", params={"limit": _PAGE, **({"after": after} if after else {})})
            data = page.get("data")
            fresh = [b for b in data if isinstance(b, dict) and isinstance(b.get("id"), str)
                     and b["id"] not in seen] if isinstance(data, list) else []
            seen.update(b["id"] for b in fresh)
            found += [b for b in fresh if isinstance(b.get("metadata"), dict) and b["metadata"].get(key) == value]
            older = since is not None and any(isinstance(b.get("created_at"), int | float)
                                              and b["created_at"] < since for b in fresh)
            if found or older or page.get("has_more") is not True:
                return next((b for b in found if b.get("status") not in TERMINAL), found[0]) if found else None
            if not fresh:
                break  # the provider answered a page it had answered before: the list never ends
            after = fresh[-1]["id"]
        raise InfrastructureError(self.service, f"its batch list did not reach batches older than the one with "
                                                f"{key}={value} within {MAX_LIST_PAGES} pages (or repeated a "
                                                "page); not creating a second batch on its word")


def _message(text: str) -> str:
    try:
        body = json.loads(text)
    except ValueError:
        return text[:300]
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and error.get("message"):
        return str(error["message"])
    return text[:300]
