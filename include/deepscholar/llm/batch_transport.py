"""Judging through a provider's batch API (OpenAI's Files + Batches first): requests recorded, submitted in
batches, their answers stored in the llm_calls cache as the direct path stores them.

Design notes: docs/MODULE_NOTES.md, `deepscholar.llm.batch_transport`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.llm import cache
from deepscholar.llm.batches import TERMINAL, OpenAIBatches
from deepscholar.llm.openai_compatible import PREFIX, request_body

__all__ = ["PROVIDER", "TRANSPORT", "METADATA_KEY", "BatchQueue", "PendingRequest", "record_request", "jsonl_line",
           "plan_batches", "submit_pending", "poll_batches", "batch_status", "supports", "default_api",
           "cancel_batches"]

log = logging.getLogger(__name__)

PROVIDER = "openai"
TRANSPORT = "openai-batch"  # llm_calls.transport of an answer from OpenAI's Batch API
METADATA_KEY = "deepscholar_batch_key"  # the batch's metadata entry holding our batch_key
_BATCH_URL = "/v1/chat/completions"
# How far back from a batch row's creation a lost create's batch is looked for in the provider's list
# (clocks differ); older batches end the listing.
_FIND_SLACK_SECONDS = 3600

Api = Callable[[str | None], OpenAIBatches]


@dataclass(frozen=True)
class BatchQueue:
    """Whose requests: a month judged under one judge config (the queue's key), and the run recording them
    now (an Airflow run id, one `evaluate` call). Every step takes one queue and touches only its rows."""

    release_id: str
    judge_config: str
    run_id: str | None = None

    @property
    def key(self) -> dict[str, str]:
        return {"release_id": self.release_id, "judge_config": self.judge_config}


# Batches sent before the queue had a key (migration 0038) are in the queue of no month: every queue's steps
# poll and collect them too (their answers were paid for), and none submits to it.
POLLED = "((release_id = :release_id AND judge_config = :judge_config) OR (release_id = '' AND judge_config = ''))"
_MINE = "release_id = :release_id AND judge_config = :judge_config"


def supports(model: str) -> bool:
    """Whether a model can be judged through a batch API here: OpenAI's format (`openai/<model>`)."""
    return model.startswith(PREFIX) and len(model) > len(PREFIX)


@dataclass(frozen=True)
class PendingRequest:
    request_hash: str
    model: str
    api_base: str | None
    purpose: str | None
    request: dict  # cache.canonical_request: what the hash was computed from
    billed_to: str | None = None  # the budget its answer is paid from (llm/spend.py), copied to its llm_calls row


# --- recording requests (the judge's side) ------------------------------------------------------------

# New requests are inserted as pending in the queue; a request marked done whose answer is no longer in
# llm_calls (the cache was cleared), or one failed for good in another run, is pending again (a later run
# asks it again; the run that saw it fail stores its items unscored). The state of every given request is
# read back.
_RECORD = sa.text("""
    WITH given AS (
        SELECT * FROM jsonb_to_recordset(CAST(:rows AS jsonb))
            AS x(request_hash text, model text, api_base text, purpose text, request jsonb, billed_to text)),
    written AS (
        INSERT INTO llm_batch_requests AS q (release_id, judge_config, request_hash, model, api_base, purpose,
                                             request, run_id, billed_to)
        SELECT :release_id, :judge_config, request_hash, model, api_base, purpose, request, :run_id, billed_to
        FROM given
        ON CONFLICT (release_id, judge_config, request_hash) DO UPDATE SET state = 'pending', attempts = 0,
            last_error = NULL, run_id = excluded.run_id, billed_to = excluded.billed_to, updated_at = now()
        WHERE q.state = 'done' OR (q.state = 'failed' AND q.run_id IS DISTINCT FROM excluded.run_id)
        RETURNING q.request_hash, q.state, q.attempts, q.last_error)
    SELECT request_hash, state, attempts, last_error FROM written
    UNION ALL
    SELECT q.request_hash, q.state, q.attempts, q.last_error FROM llm_batch_requests q
    WHERE q.release_id = :release_id AND q.judge_config = :judge_config
      AND q.request_hash IN (SELECT request_hash FROM given)
      AND q.request_hash NOT IN (SELECT request_hash FROM written)""")

_recorders: dict[tuple[int, BatchQueue], tuple[Engine, cache.Coalescer]] = {}


def _record_many(engine: Engine, queue: BatchQueue, requests: list[PendingRequest]
                 ) -> list[tuple[str, int, str | None]]:
    rows = {r.request_hash: {"request_hash": r.request_hash, "model": r.model, "api_base": r.api_base,
                             "purpose": r.purpose, "request": r.request, "billed_to": r.billed_to}
            for r in requests}
    with engine.begin() as conn:
        found = {h: (s, a, e) for h, s, a, e in conn.execute(
            _RECORD, {"rows": json.dumps(list(rows.values())), "run_id": queue.run_id, **queue.key})}
    return [found[r.request_hash] for r in requests]


def record_request(engine: Engine, queue: BatchQueue, request: PendingRequest) -> tuple[str, int, str | None]:
    """Record a request in the queue for its next batch (idempotent); its (state, attempts, last error).
    Concurrent callers (a judge's threads) share one statement (cache.Coalescer)."""
    found = _recorders.get((id(engine), queue))
    if found is None or found[0] is not engine:
        found = _recorders[(id(engine), queue)] = (
            engine, cache.Coalescer(lambda items: _record_many(engine, queue, items)))
    return found[1](request)


# --- submitting ---------------------------------------------------------------------------------------

def jsonl_line(request_hash: str, request: dict) -> bytes:
    """One line of a batch's input file: the request's body exactly as the direct path posts it."""
    body = request_body(request["model"], request["messages"], request.get("params") or {})
    return (json.dumps({"custom_id": request_hash, "method": "POST", "url": _BATCH_URL, "body": body},
                       ensure_ascii=False, separators=(",", ":")) + "\n").encode("utf-8")


def plan_batches(lines: Sequence[tuple[str, bytes]], max_requests: int, max_bytes: int
                 ) -> tuple[list[list[tuple[str, bytes]]], list[str]]:
    """(batches, too large): lines in order, cut into runs of at most max_requests lines and max_bytes bytes;
    a line longer than max_bytes alone fits in no batch."""
    batches: list[list[tuple[str, bytes]]] = []
    too_large: list[str] = []
    current: list[tuple[str, bytes]] = []
    size = 0
    for key, line in lines:
        if len(line) > max_bytes:
            too_large.append(key)
            continue
        if current and (len(current) >= max_requests or size + len(line) > max_bytes):
            batches.append(current)
            current, size = [], 0
        current.append((key, line))
        size += len(line)
    if current:
        batches.append(current)
    return batches, too_large


def _batch_key(queue: BatchQueue, model: str, api_base: str | None, members: Sequence[tuple[str, int]]) -> str:
    """Ours, fixed before anything is sent. The time it is made is in it: the same requests at the same
    attempt numbers can be batched again (a later run asks a request failed for good from attempt 1; a
    request whose answer left the cache), and must not land in the old, collected batch's row."""
    digest = hashlib.sha256(f"{queue.release_id}\n{queue.judge_config}\n{model}\n{api_base or ''}\n"
                            f"{time.time_ns()}\n".encode())
    for request_hash, attempt in members:
        digest.update(f"{request_hash}:{attempt}\n".encode())
    return f"ds-{digest.hexdigest()[:40]}"


def _assign(engine: Engine, queue: BatchQueue, max_requests: int, max_bytes: int) -> list[str]:
    """Move the queue's pending requests into new batch rows (one transaction); the new batches' keys."""
    made: list[str] = []
    with engine.begin() as conn:
        rows = conn.execute(sa.text(f"""
            SELECT request_hash, model, api_base, request, attempts FROM llm_batch_requests
            WHERE {_MINE} AND state = 'pending' ORDER BY model, api_base NULLS FIRST, request_hash
            FOR UPDATE SKIP LOCKED"""), queue.key).all()
        groups: dict[tuple[str, str | None], list] = {}
        for row in rows:
            groups.setdefault((row.model, row.api_base), []).append(row)
        for (model, api_base), members in groups.items():
            attempts = {r.request_hash: r.attempts for r in members}
            lines = [(r.request_hash, jsonl_line(r.request_hash, r.request)) for r in members]
            batches, too_large = plan_batches(lines, max_requests, max_bytes)
            if too_large:
                conn.execute(sa.text(f"""
                    UPDATE llm_batch_requests SET state = 'failed', updated_at = now(),
                        last_error = 'the request is larger than a batch file may be (OpenAI: 200 MB)'
                    WHERE {_MINE} AND request_hash = ANY(:h)"""), {"h": too_large, **queue.key})
            for batch in batches:
                hashes = [h for h, _ in batch]
                key = _batch_key(queue, model, api_base, [(h, attempts[h] + 1) for h in hashes])
                conn.execute(sa.text("""
                    INSERT INTO llm_batches (batch_key, release_id, judge_config, provider, model, api_base,
                                             n_requests, n_bytes)
                    VALUES (:k, :release_id, :judge_config, :p, :m, :b, :n, :size)
                    ON CONFLICT (batch_key) DO NOTHING"""),
                    {"k": key, "p": PROVIDER, "m": model, "b": api_base, "n": len(batch),
                     "size": sum(len(line) for _, line in batch), **queue.key})
                conn.execute(sa.text(f"""
                    UPDATE llm_batch_requests SET state = 'submitted', batch_key = :k, attempts = attempts + 1,
                        updated_at = now()
                    WHERE {_MINE} AND request_hash = ANY(:h) AND state = 'pending'"""),
                    {"k": key, "h": hashes, **queue.key})
                made.append(key)
    return made


# OpenAI's batch API limits: requests in one batch, and bytes of its JSONL input file (also the most read of
# one output or error file). Provider facts, not choices; a test lowers them on this module.
MAX_REQUESTS = 50_000
MAX_BYTES = 200_000_000


def default_api(api_base: str | None) -> OpenAIBatches:
    """The batch API client of an endpoint: OpenAI's (or `api_base`'s) with OPENAI_API_KEY."""
    return OpenAIBatches(api_base, max_file_bytes=MAX_BYTES)


def submit_pending(engine: Engine, queue: BatchQueue, *, api: Api = default_api, assign: bool = True) -> list[str]:
    """Batch the queue's pending requests (unless not `assign`) and send its batches not sent yet (also those
    a killed or failed earlier call left half sent); the keys of the batches sent by this call.
    `api(api_base)` makes the client of an endpoint (tests give their stub's; the default reads
    OPENAI_API_KEY)."""
    if assign:
        _assign(engine, queue, MAX_REQUESTS, MAX_BYTES)
    with engine.connect() as conn:
        unsent = conn.execute(sa.text(f"""
            SELECT batch_key FROM llm_batches WHERE {_MINE} AND state IN ('preparing', 'creating')
            ORDER BY created_at, batch_key"""), queue.key).scalars().all()
    return [key for key in unsent if _send(engine, key, api)]


SEND_LEASE_SECONDS = 900  # how long a process that died while sending a batch keeps others from sending it


def _send(engine: Engine, key: str, api: Api) -> bool:
    """Upload and create one batch, unless another process is sending it right now (False). The right to
    send is a lease on the batch's row (taken and given back in statements of their own: no connection is
    held while the provider answers); a process that dies while sending lets it run out."""
    with engine.begin() as conn:
        row = conn.execute(sa.text(f"""
            UPDATE llm_batches SET send_lease_until = now() + interval '{SEND_LEASE_SECONDS} seconds'
            WHERE batch_key = :k AND state IN ('preparing', 'creating')
              AND (send_lease_until IS NULL OR send_lease_until < now())
            RETURNING *"""), {"k": key}).mappings().one_or_none()
        if row is None:
            return False  # sent meanwhile, or being sent by another process
        requests = conn.execute(sa.text("""
            SELECT request_hash, request FROM llm_batch_requests WHERE batch_key = :k AND state = 'submitted'
            ORDER BY request_hash"""), {"k": key}).all()
    try:
        client = api(row["api_base"])
        file_id = row["input_file_id"]
        if file_id is None:
            content = b"".join(jsonl_line(h, r) for h, r in requests)
            file_id = client.upload(f"{key}.jsonl", content)
            _update(engine, key, input_file_id=file_id)
        if row["state"] == "creating":  # a create was sent before: its batch may exist
            found = client.find(METADATA_KEY, key, since=row["created_at"].timestamp() - _FIND_SLACK_SECONDS)
            if found is not None:
                log.info("batch %s was created before (its answer was lost): %s adopted", key, found["id"])
                _record_created(engine, key, found)
                return True
        _update(engine, key, state="creating")
        created = client.create(file_id, {METADATA_KEY: key})
        _record_created(engine, key, created)
        log.info("batch %s submitted as %s (%d requests, %d bytes)", key, created["id"], row["n_requests"],
                 row["n_bytes"])
        return True
    finally:
        with engine.begin() as conn:
            conn.execute(sa.text("UPDATE llm_batches SET send_lease_until = NULL WHERE batch_key = :k"), {"k": key})


_UPDATABLE = {"state", "input_file_id", "provider_status", "output_file_id", "error_file_id", "last_error"}


def _update(engine: Engine, key: str, **values) -> None:
    assert set(values) <= _UPDATABLE
    sets = ", ".join(f"{k} = :{k}" for k in values)
    with engine.begin() as conn:
        conn.execute(sa.text(f"UPDATE llm_batches SET {sets} WHERE batch_key = :key"), {**values, "key": key})


def _record_created(engine: Engine, key: str, batch: dict) -> None:
    with engine.begin() as conn:
        conn.execute(sa.text("""
            UPDATE llm_batches SET provider_batch_id = :id, state = 'submitted', provider_status = :status,
                submitted_at = coalesce(submitted_at, now())
            WHERE batch_key = :k"""), {"id": batch["id"], "status": batch.get("status"), "k": key})


# --- waiting ------------------------------------------------------------------------------------------

def poll_batches(engine: Engine, queue: BatchQueue, *, api: Api = default_api) -> dict:
    """Ask the provider once about every submitted batch of the queue; its batch_status. An answer that is
    not a batch's (no status, a file id that is not a string) is that batch's error: it stays submitted and
    is asked about again next time, the other batches go on."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text(f"""
            SELECT batch_key, api_base, provider_batch_id FROM llm_batches WHERE {POLLED} AND state = 'submitted'
            ORDER BY batch_key"""), queue.key).all()
    for key, api_base, batch_id in rows:
        batch = api(api_base).retrieve(batch_id)
        if problem := _malformed_batch(batch):
            log.warning("batch %s (%s): the provider's answer is not a batch's: %s", key, batch_id, problem)
            _update(engine, key, last_error=f"the provider's answer is not a batch's: {problem}")
            continue
        status = batch.get("status")
        ended = status in TERMINAL
        with engine.begin() as conn:
            conn.execute(sa.text("""
                UPDATE llm_batches SET provider_status = :status, output_file_id = :out, error_file_id = :err,
                    state = CASE WHEN :ended THEN 'ended' ELSE state END,
                    finished_at = CASE WHEN :ended THEN coalesce(finished_at, now()) END,
                    last_error = coalesce(:error, last_error)
                WHERE batch_key = :k AND state = 'submitted'"""),
                {"status": status, "out": batch.get("output_file_id"), "err": batch.get("error_file_id"),
                 "ended": ended, "k": key, "error": _batch_error(batch)})
    return batch_status(engine, queue)


def cancel_batches(engine: Engine, keys: Sequence[str], reason: str, *, api: Api = default_api) -> list[str]:
    """Ask the provider to cancel these submitted batches (a budget they would pass); the provider's ids of
    those asked now (one already cancelling is not asked again). The next polls see them end (`cancelled`);
    batch_results.collect_results then stores what they answered before the cancel (paid for) and puts the
    rest back to pending, as for an expired batch. `reason` is kept as the batch's last error."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text("""
            SELECT batch_key, api_base, provider_batch_id FROM llm_batches
            WHERE batch_key = ANY(:k) AND state = 'submitted'
              AND coalesce(provider_status, '') NOT IN ('cancelling', 'cancelled')
            ORDER BY batch_key"""), {"k": list(keys)}).all()
    cancelled = []
    for key, api_base, batch_id in rows:
        batch = api(api_base).cancel(batch_id)
        _update(engine, key, provider_status=batch.get("status"), last_error=reason)
        log.warning("batch %s (%s) cancelled: %s", key, batch_id, reason)
        cancelled.append(batch_id)
    return cancelled


def _malformed_batch(batch: dict) -> str | None:
    if not isinstance(batch.get("status"), str):
        return "no status"
    for field in ("output_file_id", "error_file_id"):
        if batch.get(field) is not None and not (isinstance(batch[field], str) and 0 < len(batch[field]) <= 200):
            return f"{field} is not a file id"
    return None


def batch_status(engine: Engine, queue: BatchQueue) -> dict:
    """How many of the queue's batches are running ("open"), ended and not collected ("ended"), not yet
    created ("unsent"), and how many of its requests wait ("pending", "submitted") or failed ("failed")."""
    with engine.connect() as conn:
        batches: dict[str, int] = dict(conn.execute(sa.text(
            f"SELECT state, count(*) FROM llm_batches WHERE {_MINE} AND state <> 'collected' GROUP BY state"),
            queue.key).all())
        requests: dict[str, int] = dict(conn.execute(sa.text(
            f"SELECT state, count(*) FROM llm_batch_requests WHERE {_MINE} AND state <> 'done' GROUP BY state"),
            queue.key).all())
    return {"open": batches.get("submitted", 0), "ended": batches.get("ended", 0),
            "unsent": batches.get("preparing", 0) + batches.get("creating", 0),
            "pending": requests.get("pending", 0), "submitted": requests.get("submitted", 0),
            "failed": requests.get("failed", 0)}


def _batch_error(batch: dict) -> str | None:
    errors = (batch.get("errors") or {}).get("data") if isinstance(batch.get("errors"), dict) else None
    if isinstance(errors, list) and errors:
        return "; ".join(str(e.get("message") or e.get("code") if isinstance(e, dict) else e)[:300]
                         for e in errors[:3])
    return None
