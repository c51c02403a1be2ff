"""Judging through a provider's batch API (OpenAI's Files + Batches first): requests recorded, submitted in
batches, their answers stored in the llm_calls cache as the direct path stores them.

The judge never waits on a batch. A client in batch mode (LLMClient(batch=True)) answers what llm_calls
holds and, for any other request, calls `record_request` (the request's hash, its canonical body, purpose)
and raises AwaitingBatch; the judge runner leaves that report-metric unstored. Then, in steps that a
deferrable task can run apart, each holding no worker while the provider works:

- `submit_pending`: the pending requests, per (model, endpoint), written as the provider's JSONL (one line
  per request: custom_id = request hash, the same body the direct path posts), cut into batches within
  DEEPSCHOLAR_BATCH_MAX_REQUESTS and _MAX_BYTES, each uploaded and created;
- `poll_batches`: each submitted batch's state, asked once (a sensor or trigger calls it again later);
- `collect_results`: the output and error files of the batches that ended; every answered line becomes an
  llm_calls row (same hash, same parsed usage, cost at the batch price, transport 'openai-batch'), every
  errored or unanswered request goes back to pending, or is marked failed after
  DEEPSCHOLAR_BATCH_MAX_ATTEMPTS submissions (the judgment needing it is then stored unscored with the error).

Then the judge runs again and finds the answers in the cache (evaluation/judging/batch_rounds.py).

No double submission, no lost batch: every step is idempotent on natural keys and survives a retry at any
point. A batch's row (its key: a hash of its requests and their attempt numbers) and its requests' move to
it are one transaction, committed before anything is uploaded; the row says `creating` (committed) before
the create request is sent, and a send that finds its batch `creating` (a create whose answer was lost)
first looks for the provider's batch by our key in its metadata, and adopts it if found. One process at a
time sends a given batch (a lease on its row, which runs out if the process dies).
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.llm import cache, prices
from deepscholar.llm.batches import TERMINAL, OpenAIBatches
from deepscholar.llm.openai_compatible import PREFIX, request_body
from deepscholar.settings import current_settings

__all__ = ["PROVIDER", "TRANSPORT", "METADATA_KEY", "PendingRequest", "record_request", "jsonl_line",
           "plan_batches", "submit_pending", "poll_batches", "collect_results", "batch_status", "supports",
           "cancel_batches"]

log = logging.getLogger(__name__)

PROVIDER = "openai"
TRANSPORT = "openai-batch"  # llm_calls.transport of an answer from OpenAI's Batch API
METADATA_KEY = "deepscholar_batch_key"  # the batch's metadata entry holding our batch_key
_BATCH_URL = "/v1/chat/completions"
# Line errors a new submission would not change: the request itself is refused (as on the direct path, where
# such a request makes its item unscored at once). Anything else (5xx, 429, timeouts, expiry) is retried.
_FINAL_STATUSES = frozenset({400, 401, 403, 404, 413, 422})

Api = Callable[[str | None], OpenAIBatches]


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

# New requests are inserted as pending; a request marked done whose answer is no longer in llm_calls (the
# cache was cleared) is pending again. The state of every given request is read back.
_RECORD = sa.text("""
    WITH given AS (
        SELECT * FROM jsonb_to_recordset(CAST(:rows AS jsonb))
            AS x(request_hash text, model text, api_base text, purpose text, request jsonb, billed_to text)),
    written AS (
        INSERT INTO llm_batch_requests AS q (request_hash, model, api_base, purpose, request, billed_to)
        SELECT request_hash, model, api_base, purpose, request, billed_to FROM given
        ON CONFLICT (request_hash) DO UPDATE SET state = 'pending', attempts = 0, last_error = NULL,
            billed_to = EXCLUDED.billed_to, updated_at = now()
        WHERE q.state = 'done'
        RETURNING q.request_hash, q.state, q.attempts, q.last_error)
    SELECT request_hash, state, attempts, last_error FROM written
    UNION ALL
    SELECT q.request_hash, q.state, q.attempts, q.last_error FROM llm_batch_requests q
    WHERE q.request_hash IN (SELECT request_hash FROM given)
      AND q.request_hash NOT IN (SELECT request_hash FROM written)""")

_recorders: dict[int, tuple[Engine, cache.Coalescer]] = {}


def _record_many(engine: Engine, requests: list[PendingRequest]) -> list[tuple[str, int, str | None]]:
    rows = {r.request_hash: {"request_hash": r.request_hash, "model": r.model, "api_base": r.api_base,
                             "purpose": r.purpose, "request": r.request, "billed_to": r.billed_to}
            for r in requests}
    with engine.begin() as conn:
        found = {h: (s, a, e) for h, s, a, e in conn.execute(_RECORD, {"rows": json.dumps(list(rows.values()))})}
    return [found[r.request_hash] for r in requests]


def record_request(engine: Engine, request: PendingRequest) -> tuple[str, int, str | None]:
    """Record a request for the next batch (idempotent); its (state, attempts, last error). Concurrent
    callers (a judge's threads) share one statement (cache.Coalescer)."""
    found = _recorders.get(id(engine))
    if found is None or found[0] is not engine:
        found = _recorders[id(engine)] = (engine, cache.Coalescer(lambda items: _record_many(engine, items)))
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


def _batch_key(model: str, api_base: str | None, members: Sequence[tuple[str, int]]) -> str:
    digest = hashlib.sha256(f"{model}\n{api_base or ''}\n".encode())
    for request_hash, attempt in members:
        digest.update(f"{request_hash}:{attempt}\n".encode())
    return f"ds-{digest.hexdigest()[:40]}"


def _assign(engine: Engine, max_requests: int, max_bytes: int, max_attempts: int) -> list[str]:
    """Move the pending requests into new batch rows (one transaction); the new batches' keys."""
    made: list[str] = []
    with engine.begin() as conn:
        rows = conn.execute(sa.text("""
            SELECT request_hash, model, api_base, request, attempts FROM llm_batch_requests
            WHERE state = 'pending' ORDER BY model, api_base NULLS FIRST, request_hash
            FOR UPDATE SKIP LOCKED""")).all()
        groups: dict[tuple[str, str | None], list] = {}
        for row in rows:
            groups.setdefault((row.model, row.api_base), []).append(row)
        for (model, api_base), members in groups.items():
            attempts = {r.request_hash: r.attempts for r in members}
            lines = [(r.request_hash, jsonl_line(r.request_hash, r.request)) for r in members]
            batches, too_large = plan_batches(lines, max_requests, max_bytes)
            if too_large:
                conn.execute(sa.text("""
                    UPDATE llm_batch_requests SET state = 'failed', updated_at = now(),
                        last_error = 'the request is larger than a batch file may be (DEEPSCHOLAR_BATCH_MAX_BYTES)'
                    WHERE request_hash = ANY(:h)"""), {"h": too_large})
            for batch in batches:
                hashes = [h for h, _ in batch]
                key = _batch_key(model, api_base, [(h, attempts[h] + 1) for h in hashes])
                conn.execute(sa.text("""
                    INSERT INTO llm_batches (batch_key, provider, model, api_base, n_requests, n_bytes)
                    VALUES (:k, :p, :m, :b, :n, :size) ON CONFLICT (batch_key) DO NOTHING"""),
                    {"k": key, "p": PROVIDER, "m": model, "b": api_base, "n": len(batch),
                     "size": sum(len(line) for _, line in batch)})
                conn.execute(sa.text("""
                    UPDATE llm_batch_requests SET state = 'submitted', batch_key = :k, attempts = attempts + 1,
                        updated_at = now()
                    WHERE request_hash = ANY(:h) AND state = 'pending'"""), {"k": key, "h": hashes})
                made.append(key)
    return made


def _default_api(api_base: str | None) -> OpenAIBatches:
    return OpenAIBatches(api_base, max_file_bytes=current_settings().batch_max_bytes)


def submit_pending(engine: Engine, *, api: Api = _default_api) -> list[str]:
    """Batch every pending request and send every batch not sent yet (also those a killed or failed earlier
    call left half sent); the keys of the batches sent by this call. `api(api_base)` makes the client of an
    endpoint (tests give their stub's; the default reads OPENAI_API_KEY)."""
    settings = current_settings()
    _assign(engine, settings.batch_max_requests, settings.batch_max_bytes, settings.batch_max_attempts)
    with engine.connect() as conn:
        unsent = conn.execute(sa.text("""
            SELECT batch_key FROM llm_batches WHERE state IN ('preparing', 'creating') ORDER BY created_at, batch_key
            """)).scalars().all()
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
            found = client.find(METADATA_KEY, key)
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

def poll_batches(engine: Engine, *, api: Api = _default_api) -> dict:
    """Ask the provider once about every submitted batch; {"open": batches still running, "ended": batches
    that ended (now or before) and wait for collect_results, "unsent": batches not created yet}."""
    with engine.connect() as conn:
        rows = conn.execute(sa.text("""
            SELECT batch_key, api_base, provider_batch_id FROM llm_batches WHERE state = 'submitted'
            ORDER BY batch_key""")).all()
    for key, api_base, batch_id in rows:
        batch = api(api_base).retrieve(batch_id)
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
    return batch_status(engine)


def cancel_batches(engine: Engine, keys: Sequence[str], reason: str, *, api: Api = _default_api) -> list[str]:
    """Ask the provider to cancel these submitted batches (a budget they would pass); the provider's ids of
    those asked now (one already cancelling is not asked again). The next polls see them end (`cancelled`);
    collect_results then stores what they answered before the cancel (paid for) and puts the rest back to
    pending, as for an expired batch. `reason` is kept as the batch's last error."""
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


def batch_status(engine: Engine) -> dict:
    """How many batches are running ("open"), ended and not collected ("ended"), not yet created ("unsent"),
    and how many requests wait ("pending", "submitted") or failed ("failed")."""
    with engine.connect() as conn:
        batches: dict[str, int] = dict(conn.execute(sa.text(
            "SELECT state, count(*) FROM llm_batches WHERE state <> 'collected' GROUP BY state")).all())
        requests: dict[str, int] = dict(conn.execute(sa.text(
            "SELECT state, count(*) FROM llm_batch_requests WHERE state <> 'done' GROUP BY state")).all())
    return {"open": batches.get("submitted", 0), "ended": batches.get("ended", 0),
            "unsent": batches.get("preparing", 0) + batches.get("creating", 0),
            "pending": requests.get("pending", 0), "submitted": requests.get("submitted", 0),
            "failed": requests.get("failed", 0)}


def _batch_error(batch: dict) -> str | None:
    errors = (batch.get("errors") or {}).get("data") if isinstance(batch.get("errors"), dict) else None
    if errors:
        return "; ".join(str(e.get("message") or e.get("code")) for e in errors[:3])
    return None


# --- collecting ---------------------------------------------------------------------------------------

def collect_results(engine: Engine, *, api: Api = _default_api) -> dict:
    """Store the answers of every batch that ended and put its unanswered requests back (or mark them
    failed); {"answered": n, "retried": n, "failed": n, "batches": n} over the batches collected now."""
    max_attempts = current_settings().batch_max_attempts
    with engine.connect() as conn:
        ended = conn.execute(sa.text("""
            SELECT batch_key, api_base, provider_status, output_file_id, error_file_id, last_error
            FROM llm_batches WHERE state = 'ended' ORDER BY batch_key""")).mappings().all()
    total = {"answered": 0, "retried": 0, "failed": 0, "batches": 0}
    for batch in ended:
        client = api(batch["api_base"])
        lines = []
        for file_id in (batch["output_file_id"], batch["error_file_id"]):
            if file_id:
                lines += _parse_lines(client.content(file_id))
        outcome = _store_batch(engine, batch, lines, max_attempts)
        if outcome is None:  # collected by another process
            continue
        for k, v in outcome.items():
            total[k] += v
        total["batches"] += 1
    return total


def _parse_lines(content: bytes) -> list[dict]:
    out = []
    for raw in content.decode("utf-8", errors="replace").splitlines():
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            log.warning("a batch file line that is not JSON was skipped: %r", raw[:200])
            continue
        if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
            out.append(line)
    return out


def _line_outcome(line: dict) -> tuple[dict | None, str | None, bool]:
    """(response body when answered, error otherwise, whether resubmitting cannot help)."""
    response = line.get("response") or {}
    status = response.get("status_code")
    body = response.get("body")
    if status == 200 and isinstance(body, dict) and body.get("choices") is not None:
        return body, None, False
    error = line.get("error") or (body.get("error") if isinstance(body, dict) else None) or {}
    message = error.get("message") if isinstance(error, dict) else str(error)
    code = error.get("code") if isinstance(error, dict) else None
    text = f"{status or code or 'error'}: {message or 'no message'}"
    return None, text, isinstance(status, int) and status in _FINAL_STATUSES


def _store_batch(engine: Engine, batch, lines: list[dict], max_attempts: int) -> dict | None:
    key = batch["batch_key"]
    with engine.begin() as conn:
        # One collector per batch: another process collecting it holds the row (skipped, not waited for),
        # and one that collected it first leaves it 'collected' (nothing to do, its counts kept).
        if conn.execute(sa.text("""
                SELECT 1 FROM llm_batches WHERE batch_key = :k AND state = 'ended' FOR UPDATE SKIP LOCKED"""),
                {"k": key}).first() is None:
            return None
        members = {r.request_hash: r for r in conn.execute(sa.text("""
            SELECT request_hash, model, api_base, purpose, request, attempts, billed_to FROM llm_batch_requests
            WHERE batch_key = :k AND state = 'submitted' FOR UPDATE"""), {"k": key})}
        calls, errors = [], {}
        seen: set[str] = set()
        for line in lines:
            member = members.get(line["custom_id"])
            if member is None or member.request_hash in seen:  # not this batch's, or a line repeated
                continue
            seen.add(member.request_hash)
            body, error, final = _line_outcome(line)
            if body is None:
                errors[member.request_hash] = (error, final)
                continue
            usage = body.get("usage") or {}
            calls.append(cache.call_from_body(
                member.request_hash, member.request, member.model, member.api_base, member.purpose, body,
                cost_usd=prices.batch_cost_usd(body.get("model"), member.model, usage.get("prompt_tokens"),
                                               usage.get("completion_tokens")),
                latency_ms=None, transport=TRANSPORT, billed_to=member.billed_to))
        answered = {c.request_hash for c in calls}
        why = (f"batch {batch['provider_status']} without answering it"
               + (f" ({batch['last_error']})" if batch["last_error"] else ""))
        for request_hash in members:
            if request_hash not in answered and request_hash not in errors:
                errors[request_hash] = (why, False)
        cache.store_in(conn, calls)
        if answered:
            conn.execute(sa.text("""
                UPDATE llm_batch_requests SET state = 'done', last_error = NULL, updated_at = now()
                WHERE request_hash = ANY(:h)"""), {"h": sorted(answered)})
        retried = [h for h, (_, final) in errors.items() if not final and members[h].attempts < max_attempts]
        failed = [h for h in errors if h not in retried]
        for state, hashes in (("pending", retried), ("failed", failed)):
            if hashes:
                conn.execute(sa.text("""
                    UPDATE llm_batch_requests q SET state = :state, last_error = e.error, updated_at = now()
                    FROM unnest(CAST(:h AS text[]), CAST(:e AS text[])) AS e(request_hash, error)
                    WHERE q.request_hash = e.request_hash"""),
                    {"state": state, "h": hashes, "e": [errors[h][0] for h in hashes]})
        conn.execute(sa.text("""
            UPDATE llm_batches SET state = 'collected', collected_at = now(), n_answered = :a, n_errored = :e
            WHERE batch_key = :k"""), {"k": key, "a": len(answered), "e": len(errors)})
    if errors:
        log.warning("batch %s (%s): %d answered, %d to submit again, %d failed for good", key,
                    batch["provider_status"], len(answered), len(retried), len(failed))
    return {"answered": len(answered), "retried": len(retried), "failed": len(failed)}
