"""The LLM call cache and audit log (table llm_calls).

The key covers model, provider base URL, messages and every generation parameter, so one model's
answer is never served for another model, prompt or setting (STYLE.md: lm-evaluation-harness footgun).
Rows are write-once: the first stored answer for a key is the answer, which makes re-runs reproducible.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.db import table, upsert

__all__ = ["CachedCall", "canonical_request", "hash_request", "request_hash", "lookup", "store"]


def _jsonable(value: Any) -> Any:
    """json.dumps fallback: pydantic schemas (response_format=SomeModel) hash by their JSON schema."""
    schema = getattr(value, "model_json_schema", None)
    if isinstance(value, type) and callable(schema):
        return {"pydantic_schema": schema()}
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump()
    return repr(value)


def canonical_request(
    model: str, api_base: str | None, messages: Sequence[Mapping], params: Mapping[str, Any]
) -> dict:
    """The request as stored and hashed; None-valued params are dropped because litellm treats them as unset."""
    body = {
        "model": model,
        "api_base": api_base.rstrip("/") if api_base else None,
        "messages": list(messages),
        "params": {k: v for k, v in params.items() if v is not None},
    }
    # Round-trip so the stored request equals exactly what was hashed.
    return json.loads(json.dumps(body, default=_jsonable))


def hash_request(body: Mapping[str, Any]) -> str:
    """The cache key of a request built by canonical_request (key order and spacing do not matter)."""
    text = json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def request_hash(
    model: str, api_base: str | None, messages: Sequence[Mapping], params: Mapping[str, Any]
) -> str:
    return hash_request(canonical_request(model, api_base, messages, params))


@dataclass(frozen=True)
class CachedCall:
    request_hash: str
    model: str
    api_base: str | None
    purpose: str | None
    request: dict
    response: dict | None
    response_text: str | None
    provider_model: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cost_usd: float | None
    latency_ms: float | None
    created_at: datetime | None = None


def lookup(engine: Engine, hash_: str) -> CachedCall | None:
    tbl = table(engine, "llm_calls")
    with engine.connect() as conn:
        row = conn.execute(sa.select(tbl).where(tbl.c.request_hash == hash_)).mappings().first()
    return CachedCall(**dict(row)) if row else None


def store(engine: Engine, call: CachedCall) -> bool:
    """Insert the call unless its key exists (first write wins); returns whether a row was written."""
    row = {k: v for k, v in asdict(call).items() if k != "created_at" or v is not None}
    with engine.begin() as conn:
        return upsert(conn, "llm_calls", [row], key=["request_hash"], update=[]) > 0
