"""Hostile endpoints of external systems: a third party's server that answers too much or too slowly.

A tiny threaded HTTP server on a real socket plays the endpoint; the real ExternalHTTPSystem (requests under
http_guard.bounded_request) asks it. An answer over DEEPSCHOLAR_EXTERNAL_MAX_RESPONSE_BYTES (declared or
streamed) and an answer still trickling in at the system's `timeout` each end that query as system_error at
once, with memory and time bounded, and the run's other reports are written as usual.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import tracemalloc
from collections import Counter
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import sqlalchemy as sa

from deepscholar import db
from deepscholar.errors import SystemFailure
from deepscholar.systems.base import Query, SystemContext, make_system
from deepscholar.systems.generation import generate_batch, plan_pairs
from deepscholar.systems.registry import add_system

pytestmark = pytest.mark.slow  # waits out deadlines

RELEASE = "2025-06"
CUTOFF = datetime(2025, 6, 10, tzinfo=UTC)
QUERIES = ["2506.00001", "2506.00002"]
LIMIT = 20_000_000  # the setting's default
HUGE = 50 * 10**6
REPORT = {"text": "## Related Work\n\nAgents for tax policy [1].",
          "sources": [{"idx": 1, "arxiv_id": "2108.02755v1", "title": "The AI Economist", "snippet": "RL."}]}


class Endpoint(BaseHTTPRequestHandler):
    """POST /ok a report; /overcited one citing [5000]; /huge 50 MB made as it is sent (no length); /declared a
    Content-Length of 3 GB; /trickle headers, then a byte every 0.5 s; /trickle-headers the status line, then
    a header byte every 0.5 s. `sent` counts the body bytes each path got out; `requests` the requests."""

    sent: Counter = Counter()
    requests: Counter = Counter()
    lock = threading.Lock()

    def log_message(self, *args) -> None:
        pass

    def _count(self, n: int) -> None:
        with self.lock:
            self.sent[self.path] += n

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with self.lock:
            self.requests[self.path] += 1
        try:
            getattr(self, "_" + self.path.strip("/").replace("-", "_"))()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client hung up: what a bounded reader does

    def _ok(self) -> None:
        body = json.dumps(REPORT).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _overcited(self) -> None:
        body = json.dumps({**REPORT, "text": REPORT["text"] + " Also [5000]."}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _huge(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()  # no length: the body runs until the connection closes
        piece = b'{"text": "' + b"x" * (2**20 - 10)
        self.wfile.write(piece[:10])
        sent = 10
        while sent < HUGE:  # generated as it goes: the server holds 1 MB, never 50
            chunk = piece[10:10 + min(len(piece) - 10, HUGE - sent)]
            self.wfile.write(chunk)
            sent += len(chunk)
            self._count(len(chunk))

    def _declared(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(3 * 10**9))
        self.end_headers()
        self.wfile.write(b"[" * 1024)
        self._count(1024)
        self.wfile.flush()
        time.sleep(5)

    def _trickle(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.flush()
        for _ in range(240):  # two minutes at most
            self.wfile.write(b" ")
            self.wfile.flush()
            self._count(1)
            time.sleep(0.5)

    def _trickle_headers(self) -> None:
        self.wfile.write(b"HTTP/1.0 200 OK\r\n")
        for byte in b"X-Slow: " + b"y" * 240:
            self.wfile.write(bytes([byte]))
            self.wfile.flush()
            time.sleep(0.5)


@pytest.fixture
def endpoint():
    Endpoint.sent.clear()
    Endpoint.requests.clear()
    server = ThreadingHTTPServer(("127.0.0.1", 0), Endpoint)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def remote(url: str, **config):
    return make_system("remote", "external", {"endpoint": url, "retry_wait": 0, **config}, SystemContext(engine=None))


def query(arxiv_id: str = QUERIES[0]) -> Query:
    return Query(RELEASE, arxiv_id, "TaxAgent", "Economic inequality...", CUTOFF)


def _wait_for(condition, seconds: float = 5.0) -> None:
    """The server side notices a hung-up client at its next write."""
    end = time.monotonic() + seconds
    while not condition() and time.monotonic() < end:
        time.sleep(0.05)


# --- an answer too large -----------------------------------------------------------------------------------

def test_a_streamed_answer_over_the_limit_is_refused_while_reading(endpoint, monkeypatch):
    monkeypatch.delenv("DEEPSCHOLAR_EXTERNAL_MAX_RESPONSE_BYTES", raising=False)
    system = remote(f"{endpoint}/huge")  # the system kinds imported before memory is traced
    tracemalloc.start()
    try:
        with pytest.raises(SystemFailure, match=f"answer passed {LIMIT} bytes, over the limit of {LIMIT} bytes "
                                                r"\(DEEPSCHOLAR_EXTERNAL_MAX_RESPONSE_BYTES\)"):
            system.generate(query(), None)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The limit's worth held at most (the in-process server's buffers included), not the 50 MB.
    assert peak < LIMIT + 8 * 2**20, f"peak {peak / 2**20:.1f} MB"
    _wait_for(lambda: Endpoint.sent["/huge"] > 0)
    assert Endpoint.requests["/huge"] == 1  # refused, not retried

    # A smaller limit stops it sooner: the server got out little more than that before the client hung up.
    monkeypatch.setenv("DEEPSCHOLAR_EXTERNAL_MAX_RESPONSE_BYTES", "1000000")
    Endpoint.sent.clear()
    with pytest.raises(SystemFailure, match="over the limit of 1000000 bytes"):
        remote(f"{endpoint}/huge").generate(query(), None)
    time.sleep(0.5)
    assert Endpoint.sent["/huge"] < 12 * 10**6, Endpoint.sent  # socket buffers aside, far below 50 MB


RSS_PROBE = """
import json, re, sys
from datetime import datetime, UTC
from deepscholar.errors import SystemFailure
from deepscholar.systems.base import Query, SystemContext, make_system

def status(field):
    return int(re.search(field + r":\\s+(\\d+) kB", open("/proc/self/status").read()).group(1))

system = make_system("remote", "external", {"endpoint": sys.argv[1], "retry_wait": 0}, SystemContext(engine=None))
query = Query("2025-06", "2506.00001", "T", "A", datetime(2025, 6, 10, tzinfo=UTC))
open("/proc/self/clear_refs", "w").write("5")  # the peak resident size starts again from the current one
before = status("VmRSS")
try:
    system.generate(query, None)
    error = None
except SystemFailure as exc:
    error = str(exc)
print(json.dumps({"peak_growth_kb": status("VmHWM") - before, "error": error}))
"""


@pytest.mark.skipif(not os.path.exists("/proc/self/clear_refs"), reason="needs Linux's peak-RSS reset")
def test_the_process_peak_memory_stays_bounded_on_a_50mb_answer(endpoint):
    """In a fresh process whose peak resident size is reset before the call, so the peak is the call's."""
    env = {k: v for k, v in os.environ.items() if k != "DEEPSCHOLAR_EXTERNAL_MAX_RESPONSE_BYTES"}
    out = subprocess.run([sys.executable, "-c", RSS_PROBE, f"{endpoint}/huge"], capture_output=True, text=True,
                         timeout=120, env={**env, "LITELLM_LOCAL_MODEL_COST_MAP": "True"})
    assert out.returncode == 0, out.stderr
    probe = json.loads(out.stdout.splitlines()[-1])
    assert f"over the limit of {LIMIT} bytes" in probe["error"]
    # The limit's worth and buffers (about 22 MB); reading the whole 50 MB as requests.post did grew it by
    # about 100 MB, and a 3 GB answer by 9 GB.
    assert probe["peak_growth_kb"] * 1024 < 32 * 10**6, probe


def test_a_declared_length_over_the_limit_is_refused_before_reading(endpoint):
    started = time.monotonic()
    with pytest.raises(SystemFailure, match=f"answer declares 3000000000 bytes, over the limit of {LIMIT} bytes"):
        remote(f"{endpoint}/declared").generate(query(), None)
    assert time.monotonic() - started < 2  # not waiting for the server's pause


def test_an_answer_over_the_import_caps_is_refused_as_an_import_would_be(endpoint, monkeypatch):
    """Within the byte limit, but a report no file import would store: over DEEPSCHOLAR_IMPORT_MAX_REPORT_CHARS,
    or citing a number past DEEPSCHOLAR_IMPORT_MAX_CITATIONS. The query ends as system_error with the cap named."""
    assert remote(f"{endpoint}/ok").generate(query(), None).text == REPORT["text"]  # within the caps: as sent
    monkeypatch.setenv("DEEPSCHOLAR_IMPORT_MAX_REPORT_CHARS", "20")
    with pytest.raises(SystemFailure, match=rf"sent a report over the caps: report text of {len(REPORT['text'])} "
                                            r"characters, more than DEEPSCHOLAR_IMPORT_MAX_REPORT_CHARS \(20\); not stored"):
        remote(f"{endpoint}/ok").generate(query(), None)
    monkeypatch.delenv("DEEPSCHOLAR_IMPORT_MAX_REPORT_CHARS")
    with pytest.raises(SystemFailure, match=r"citation number 5000, higher than DEEPSCHOLAR_IMPORT_MAX_CITATIONS"):
        remote(f"{endpoint}/overcited").generate(query(), None)
    assert Endpoint.requests["/overcited"] == 1  # an answer, not a failure to answer: not asked again


# --- an answer too slow ------------------------------------------------------------------------------------

def test_an_answer_trickling_past_the_timeout_ends_at_the_deadline(endpoint):
    started = time.monotonic()
    with pytest.raises(SystemFailure, match=r"no complete answer within 2 s \(its `timeout`, the deadline of the "
                                            r"whole request; \d+ bytes of the answer had come\)"):
        remote(f"{endpoint}/trickle", timeout=2).generate(query(), None)  # attempts: the default 3
    elapsed = time.monotonic() - started
    assert 2 <= elapsed < 2.5, elapsed  # each read took 0.5 s: requests' own timeout never fired
    assert Endpoint.requests["/trickle"] == 1  # an answer that came too slowly is not asked for again
    assert 3 <= Endpoint.sent["/trickle"] <= 5


def test_headers_trickling_past_the_timeout_are_a_timeout_and_retried(endpoint):
    started = time.monotonic()
    with pytest.raises(SystemFailure, match="failed after 2 attempts: ReadTimeout: no answer within 1 s"):
        remote(f"{endpoint}/trickle-headers", timeout=1, attempts=2).generate(query(), None)
    assert time.monotonic() - started < 2 * 1 + 0.5
    assert Endpoint.requests["/trickle-headers"] == 2


# --- in a run: the other reports are written as usual ------------------------------------------------------

def test_a_run_with_hostile_endpoints_stores_their_failures_and_the_other_reports(engine, endpoint):
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "published"}], key=["release_id"])
        db.upsert(conn, "release_queries", [
            {"release_id": RELEASE, "arxiv_id": a, "title": f"Paper {a}", "abstract": "A.", "published": CUTOFF,
             "section_raw_latex": "x", "section_text": "x", "word_count": 1} for a in QUERIES],
            key=["release_id", "arxiv_id"])
    for name, path in [("good", "/ok"), ("huge", "/huge"), ("trickle", "/trickle")]:
        add_system(engine, name, "external", {"endpoint": f"{endpoint}{path}", "retry_wait": 0, "timeout": 2})
    add_system(engine, "exemplar", "human_exemplar")
    pairs = plan_pairs(engine, RELEASE)
    assert len(pairs) == 8
    started = time.monotonic()
    results = {(r["system_id"], r["arxiv_id"]): r for r in generate_batch(engine, pairs)}
    assert time.monotonic() - started < 2 * (2 + 0.5) + 10  # two trickles at the deadline, the rest quick

    with engine.connect() as conn:
        stored = {(r.system_id, r.arxiv_id): r for r in conn.execute(sa.text(
            "SELECT system_id, arxiv_id, status, error, latency_ms FROM reports WHERE release_id = :r"),
            {"r": RELEASE})}
    assert len(stored) == 8
    for a in QUERIES:
        assert results[("good", a)]["status"] == "ok" and stored[("good", a)].status == "ok"
        assert stored[("exemplar", a)].status in ("ok", "system_error")  # its own business; it was written
        huge, trickle = stored[("huge", a)], stored[("trickle", a)]
        assert huge.status == "system_error" and f"over the limit of {LIMIT} bytes" in huge.error
        assert trickle.status == "system_error" and "no complete answer within 2 s" in trickle.error
        assert trickle.latency_ms < (2 + 0.5) * 1000
    assert plan_pairs(engine, RELEASE, ["good"]) == []
