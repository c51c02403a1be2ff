"""Collecting a batch's answers (llm/batch_transport.py sends the batches): its output and error files, read
line by line, each line the answer or the error of one request.

Design notes: docs/MODULE_NOTES.md, `deepscholar.llm.batch_results`.
"""

from __future__ import annotations

import json
import logging
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import IO, Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import InfrastructureError
from deepscholar.llm import cache, prices
from deepscholar.llm.batch_transport import POLLED, TRANSPORT, Api, BatchQueue, default_api
from deepscholar.llm.batches import BatchAPIError

__all__ = ["COLLECT_TRIES", "MAX_LINE_BYTES", "LineOutcome", "collect_results", "line_outcome", "read_lines"]

log = logging.getLogger(__name__)

MAX_LINE_BYTES = 1_000_000  # a judge's answer is a few kilobytes: a line over this is not one
MAX_ATTEMPTS = 3  # submissions of one request (errored line, expired or cancelled batch) before it fails
COLLECT_TRIES = 3  # downloads of a batch's files that may fail before it is collected with what was read
_CHUNK_LINES = 500  # answers stored per statement (and per savepoint)
_CHUNK_BYTES = 1_000_000  # ... or fewer, when their lines are long: what a worker holds parsed at once
# Line errors a new submission would not change: the request itself is refused (as on the direct path, where
# such a request makes its item unscored at once). Anything else (5xx, 429, timeouts, expiry) is retried.
_FINAL_STATUSES = frozenset({400, 401, 403, 404, 413, 422})
# A line that cannot be parsed may still name its request; the provider writes custom_id near the start.
_CUSTOM_ID = re.compile(rb'"custom_id"\s*:\s*"([^"\\]{1,200})"')


@dataclass(frozen=True)
class LineOutcome:
    custom_id: str
    body: dict | None  # the chat completion when answered
    error: str | None  # else why not
    final: bool = False  # a refusal that resubmitting cannot change


def read_lines(file: IO[bytes], *, complete: bool = True) -> Iterator[tuple[bytes, str | None]]:
    """(line, problem) for each line of a JSONL file, split on b"\\n" only. A line over MAX_LINE_BYTES is
    skipped past and given as its first bytes with the problem. `complete=False`: the file was cut short,
    so a last line without its newline is left out."""
    while raw := file.readline(MAX_LINE_BYTES + 1):
        if len(raw) > MAX_LINE_BYTES and not raw.endswith(b"\n"):
            head = raw[:4096]
            while raw and not raw.endswith(b"\n"):
                raw = file.readline(1 << 16)
            yield head, f"its line is over the {MAX_LINE_BYTES} bytes an answer line may have"
            continue
        if not raw.endswith(b"\n") and not complete:
            return
        if raw.strip():
            yield raw, None


def _unparsed(raw: bytes, why: str) -> LineOutcome | None:
    found = _CUSTOM_ID.search(raw[:4096])
    return LineOutcome(found.group(1).decode("utf-8", "replace"), None, f"malformed answer line: {why}") \
        if found else None


def line_outcome(raw: bytes, problem: str | None = None) -> LineOutcome | None:
    """What one line of a batch's output or error file says about its request; None when it names none
    (nothing to attribute it to: logged and left out, the request counts as unanswered)."""
    if problem is not None:
        return _unparsed(raw, problem)
    try:
        line = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError):
        return _unparsed(raw, "not JSON")
    if not isinstance(line, dict) or not isinstance(line.get("custom_id"), str):
        return None
    custom_id = line["custom_id"]
    response = line.get("response")
    if response is not None and not isinstance(response, dict):
        return LineOutcome(custom_id, None, f"malformed answer line: `response` is a {type(response).__name__}")
    status = (response or {}).get("status_code")
    body = (response or {}).get("body")
    if status == 200 and not isinstance(line.get("error"), dict):
        if why := malformed_completion(body):
            return LineOutcome(custom_id, None, f"malformed answer line: {why}")
        return LineOutcome(custom_id, body, None)
    error = line.get("error") or (body.get("error") if isinstance(body, dict) else None) or {}
    message = error.get("message") if isinstance(error, dict) else error
    code = error.get("code") if isinstance(error, dict) else None
    text = f"{_short(status or code or 'error')}: {_short(message or 'no message')}"
    return LineOutcome(custom_id, None, text, isinstance(status, int) and status in _FINAL_STATUSES)


def _short(value: Any) -> str:
    return " ".join(str(value).split())[:300]


def _is_count(value: Any) -> bool:
    return value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0)


def malformed_completion(body: Any) -> str | None:
    """Why a 200 line's body is not a chat completion the cache can hold (what cache.call_from_body and the
    client read of it), or None."""
    if not isinstance(body, dict):
        return "`body` is not an object"
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
        return "`choices` is not a list of objects"
    message = choices[0].get("message")
    if not isinstance(message, dict) or not isinstance(message.get("content"), str | None):
        return "`choices[0].message` is not a message"
    usage = body.get("usage")
    if usage is not None and not isinstance(usage, dict):
        return "`usage` is not an object"
    if not all(_is_count((usage or {}).get(k)) for k in ("prompt_tokens", "completion_tokens")):
        return "a token count of `usage` is not a whole number"
    if not isinstance(body.get("model"), str | None):
        return "`model` is not a string"
    if "\\u0000" in json.dumps(body):  # neither jsonb nor text holds a NUL
        return "it holds a NUL character"
    try:
        json.dumps(body, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return "it holds text that is not Unicode (a lone surrogate)"
    return None


# --- collecting -----------------------------------------------------------------------------------------

def collect_results(engine: Engine, queue: BatchQueue, *, api: Api = default_api) -> dict:
    """Store the answers of the queue's batches that ended and put their unanswered requests back (or mark
    them failed); {"answered", "retried", "failed", "batches", "deferred"} over this call (deferred: batches
    whose files could not be downloaded now, left for the next call)."""
    with engine.connect() as conn:
        ended = conn.execute(sa.text(f"""
            SELECT batch_key, api_base, provider_status, output_file_id, error_file_id, last_error, collect_failures
            FROM llm_batches WHERE {POLLED} AND state = 'ended' ORDER BY batch_key"""), queue.key).mappings().all()
    total = dict.fromkeys(("answered", "retried", "failed", "batches", "deferred"), 0)
    for batch in ended:
        with tempfile.TemporaryFile() as output, tempfile.TemporaryFile() as errors:
            files = {"output": (batch["output_file_id"], output), "error": (batch["error_file_id"], errors)}
            read, cut, may_retry = _download(api(batch["api_base"]), files)
            if cut is not None and may_retry and batch["collect_failures"] + 1 < COLLECT_TRIES:
                _defer(engine, batch["batch_key"], cut)
                total["deferred"] += 1
                continue
            outcome = _store_batch(engine, batch, read, cut)
        if outcome is None:  # collected by another process
            continue
        for k, v in outcome.items():
            total[k] += v
        total["batches"] += 1
    return total


def _download(client, files: Mapping[str, tuple[str | None, IO[bytes]]]
              ) -> tuple[list[tuple[IO[bytes], bool]], str | None, bool]:
    """Each file into its temporary file, rewound: ([(file, whether it came whole)], why one did not or
    None, whether a later try may do better). After a cut the next files are not asked for."""
    read: list[tuple[IO[bytes], bool]] = []
    cut: str | None = None
    may_retry = False
    for what, (file_id, into) in files.items():
        if cut is not None or not file_id:
            continue
        try:
            client.download(file_id, into)
        except BatchAPIError as exc:
            cut = f"its {what} file could not be read whole: {exc}"
        except InfrastructureError as exc:
            cut, may_retry = f"its {what} file could not be downloaded: {exc}", True
        into.seek(0)
        read.append((into, cut is None))
    return read, cut, may_retry


def _defer(engine: Engine, key: str, why: str) -> None:
    log.warning("batch %s: %s; collected at a later step", key, why)
    with engine.begin() as conn:
        conn.execute(sa.text("""
            UPDATE llm_batches SET collect_failures = collect_failures + 1, last_error = :e
            WHERE batch_key = :k AND state = 'ended'"""), {"k": key, "e": why[:1000]})


def _store_batch(engine: Engine, batch, files: list[tuple[IO[bytes], bool]], cut: str | None) -> dict | None:
    """One batch's lines stored in one transaction; its requests' counts, or None when another process has
    it. `cut`: why its files were not read whole (their whole lines before the cut are used)."""
    key = batch["batch_key"]
    max_attempts = MAX_ATTEMPTS
    with engine.begin() as conn:
        # One collector per batch: another process collecting it holds the row (skipped, not waited for),
        # and one that collected it first leaves it 'collected' (nothing to do, its counts kept).
        if conn.execute(sa.text("""
                SELECT 1 FROM llm_batches WHERE batch_key = :k AND state = 'ended' FOR UPDATE SKIP LOCKED"""),
                {"k": key}).first() is None:
            return None
        attempts: dict[str, int] = dict(conn.execute(sa.text("""
            SELECT request_hash, attempts FROM llm_batch_requests WHERE batch_key = :k AND state = 'submitted'
            FOR UPDATE"""), {"k": key}).all())
        answered, errors = _store_lines(conn, key, files, attempts)
        why = cut or (f"batch {batch['provider_status']} without answering it"
                      + (f" ({batch['last_error']})" if batch["last_error"] else ""))
        for request_hash in attempts:
            if request_hash not in answered and request_hash not in errors:
                errors[request_hash] = (why, False)
        retried = [h for h, (_, final) in errors.items() if not final and attempts[h] < max_attempts]
        failed = [h for h in errors if h not in retried]
        _mark(conn, key, answered, retried, failed, errors)
        conn.execute(sa.text("""
            UPDATE llm_batches SET state = 'collected', collected_at = now(), n_answered = :a, n_errored = :e,
                last_error = coalesce(:cut, last_error)
            WHERE batch_key = :k"""), {"k": key, "a": len(answered), "e": len(errors), "cut": cut})
    if errors:
        log.warning("batch %s (%s): %d answered, %d to submit again, %d failed for good%s", key,
                    batch["provider_status"], len(answered), len(retried), len(failed), f"; {cut}" if cut else "")
    return {"answered": len(answered), "retried": len(retried), "failed": len(failed)}


def _store_lines(conn: sa.Connection, key: str, files: list[tuple[IO[bytes], bool]], members: dict[str, int]
                 ) -> tuple[set[str], dict[str, tuple[str, bool]]]:
    """(requests answered and stored, {request: (error, final)}) from the files' lines, the first line of a
    request counting (a repeated one is left out)."""
    answered: set[str] = set()
    errors: dict[str, tuple[str, bool]] = {}
    chunk: list[LineOutcome] = []
    size = 0
    for file, complete in files:
        for raw, problem in read_lines(file, complete=complete):
            outcome = line_outcome(raw, problem)
            if outcome is None:
                log.warning("batch %s: a line naming no request was left out: %r", key, raw[:200])
                continue
            request_hash = outcome.custom_id
            if request_hash not in members or request_hash in answered or request_hash in errors:
                continue  # not this batch's, or a line repeated
            if outcome.body is None:
                errors[request_hash] = (outcome.error or "no answer", outcome.final)
                continue
            answered.add(request_hash)
            chunk.append(outcome)
            size += len(raw)
            if len(chunk) >= _CHUNK_LINES or size >= _CHUNK_BYTES:
                _store_answers(conn, key, chunk, answered, errors)
                chunk, size = [], 0
    _store_answers(conn, key, chunk, answered, errors)
    return answered, errors


def _store_answers(conn: sa.Connection, key: str, chunk: list[LineOutcome], answered: set[str],
                   errors: dict[str, tuple[str, bool]]) -> None:
    """A chunk of answers stored in llm_calls as the direct path stores them (cost at the batch price), under
    a savepoint; an answer the warehouse refuses becomes its request's error (moved out of `answered`)."""
    if not chunk:
        return
    requests = {r.request_hash: r for r in conn.execute(sa.text("""
        SELECT request_hash, model, api_base, purpose, request, billed_to FROM llm_batch_requests
        WHERE batch_key = :k AND request_hash = ANY(:h)"""), {"k": key, "h": [o.custom_id for o in chunk]})}
    calls = []
    for outcome in chunk:
        try:
            calls.append(_call_of(requests[outcome.custom_id], outcome.body or {}))
        except Exception as exc:  # noqa: BLE001 (whatever a provider's answer makes fail is that answer's)
            answered.discard(outcome.custom_id)
            errors[outcome.custom_id] = (f"malformed answer line: {type(exc).__name__}: {_short(exc)}", False)
    try:
        with conn.begin_nested():
            cache.store_in(conn, calls)
        return
    except sa.exc.StatementError:
        pass
    for call in calls:  # one by one: the answers the warehouse takes are kept, the others are errors
        try:
            with conn.begin_nested():
                cache.store_in(conn, [call])
        except sa.exc.StatementError as exc:
            answered.discard(call.request_hash)
            errors[call.request_hash] = (f"the warehouse refused the answer: {_short(exc.orig)}", False)


def _call_of(member, body: dict) -> cache.CachedCall:
    """The llm_calls row the direct path would have written for this answer, at the batch price, billed to
    the budget its request was recorded for."""
    usage = body.get("usage") or {}
    return cache.call_from_body(
        member.request_hash, member.request, member.model, member.api_base, member.purpose, body,
        cost_usd=prices.batch_cost_usd(body.get("model"), member.model, usage.get("prompt_tokens"),
                                       usage.get("completion_tokens")),
        latency_ms=None, transport=TRANSPORT, billed_to=member.billed_to)


def _mark(conn: sa.Connection, key: str, answered: set[str], retried: list[str], failed: list[str],
          errors: dict[str, tuple[str, bool]]) -> None:
    """The batch's requests: done, pending again (with the error), or failed for good (with the error)."""
    if answered:
        conn.execute(sa.text("""
            UPDATE llm_batch_requests SET state = 'done', last_error = NULL, updated_at = now()
            WHERE batch_key = :k AND request_hash = ANY(:h)"""), {"k": key, "h": sorted(answered)})
    for state, hashes in (("pending", retried), ("failed", failed)):
        if hashes:
            conn.execute(sa.text("""
                UPDATE llm_batch_requests q SET state = :state, last_error = e.error, updated_at = now()
                FROM unnest(CAST(:h AS text[]), CAST(:e AS text[])) AS e(request_hash, error)
                WHERE q.batch_key = :k AND q.request_hash = e.request_hash"""),
                {"state": state, "k": key, "h": hashes, "e": [errors[h][0] for h in hashes]})
