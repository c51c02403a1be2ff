"""Document importance's cited-by lookups with OpenAlex down: how long and how many requests until the
step gives up, without the per-host circuit breaker (before) and with it (after).

Usage: .venv/bin/python bench/host_down.py [--sources 60] [--mode 503|reset] [--runs before after]
                                           [--retries N --backoff S]

A local server stands in for OpenAlex and fails every request: `503` answers 503, `reset` accepts each
connection and closes it at once (what an unreachable proxy or a dying host looks like); it counts what it
receives. One ok report cites `--sources` arXiv papers, none frozen yet; `freeze_source_counts` runs with
the production OpenAlex session (5 retries, backoff 1 s: about 30 s per failed lookup) unless --retries /
--backoff say otherwise. "before" disables the breaker through its environment variables. Prints one JSON
line per run: {"run", "sources", "requests", "seconds", "error", "stored_rows"}.
Database: as bench/rollup.py (DEEPSCHOLAR_DB_URL, else a throwaway database, else embedded PostgreSQL).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))

import sqlalchemy as sa  # noqa: E402
from rollup import bench_database  # noqa: E402

RELEASE = "2090-01"  # bench/rollup.py's clean-up removes 2090-* releases and bench_sys_* systems
SYSTEM = "bench_sys_host_down"


class _Counter:
    def __init__(self) -> None:
        self.n = 0
        self.lock = threading.Lock()

    def add(self) -> None:
        with self.lock:
            self.n += 1


def serve_503(counter: _Counter) -> tuple[str, callable]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self):  # noqa: N802 - http.server's name
            counter.add()
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args):
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{server.server_address[1]}", server.shutdown


def serve_reset(counter: _Counter) -> tuple[str, callable]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    stop = threading.Event()

    def loop():
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = sock.accept()
            except (TimeoutError, OSError):
                continue
            counter.add()
            conn.close()

    threading.Thread(target=loop, daemon=True).start()

    def shutdown():
        stop.set()
        sock.close()

    return f"http://127.0.0.1:{sock.getsockname()[1]}", shutdown


def seed(engine, n_sources: int) -> None:
    from deepscholar import db

    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM releases WHERE release_id = :r"), {"r": RELEASE})
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "published"}], key=["release_id"])
        db.upsert(conn, "release_queries", [{
            "release_id": RELEASE, "arxiv_id": "9001.00001", "title": "Q", "abstract": "A",
            "section_raw_latex": "x", "section_text": "x", "word_count": 1}], key=["release_id", "arxiv_id"])
        db.upsert(conn, "systems", [{"system_id": SYSTEM, "kind": "external"}], key=["system_id"])
        report_id = conn.execute(sa.text(
            "INSERT INTO reports (release_id, system_id, arxiv_id, status, text) "
            "VALUES (:r, :s, '9001.00001', 'ok', 'x') RETURNING report_id"), {"r": RELEASE, "s": SYSTEM}).scalar()
        db.upsert(conn, "report_sources", [
            {"report_id": report_id, "source_idx": i, "arxiv_id": f"2401.{i:05d}", "title": f"Source paper {i}"}
            for i in range(1, n_sources + 1)], key=["report_id", "source_idx"])


def run(engine, which: str, mode: str, n_sources: int, retries: int | None, backoff: float | None) -> dict:
    from deepscholar.http_guard import BREAKER
    from deepscholar.release.source_counts import freeze_source_counts
    from deepscholar.settings import Settings
    from deepscholar.sources.openalex import OpenAlexSource

    seed(engine, n_sources)
    BREAKER.reset()
    if which == "before":  # a breaker that never opens is no breaker
        os.environ["DEEPSCHOLAR_BREAKER_FAILURES"] = str(10 ** 9)
        os.environ["DEEPSCHOLAR_BREAKER_SECONDS"] = str(10 ** 9)
    else:
        os.environ.pop("DEEPSCHOLAR_BREAKER_FAILURES", None)
        os.environ.pop("DEEPSCHOLAR_BREAKER_SECONDS", None)
    counter = _Counter()
    url, shutdown = (serve_503 if mode == "503" else serve_reset)(counter)
    kwargs = {k: v for k, v in (("max_retries", retries), ("backoff_seconds", backoff)) if v is not None}
    started = time.perf_counter()
    error = None
    try:
        freeze_source_counts(engine, RELEASE, settings=Settings.from_env().replace(openalex_url=url),
                             openalex=OpenAlexSource(base_url=url, **kwargs))
    except Exception as exc:  # the outcome being measured
        error = f"{type(exc).__name__}: {exc}"
    seconds = time.perf_counter() - started
    shutdown()
    with engine.connect() as conn:
        stored = conn.execute(sa.text("SELECT count(*) FROM source_cited_by WHERE release_id = :r"),
                              {"r": RELEASE}).scalar()
    return {"run": which, "mode": mode, "sources": n_sources, "requests": counter.n, "seconds": round(seconds, 1),
            "error": error, "stored_rows": stored}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sources", type=int, default=60)
    parser.add_argument("--mode", choices=["503", "reset"], default="503")
    parser.add_argument("--runs", nargs="+", choices=["before", "after"], default=["before", "after"])
    parser.add_argument("--retries", type=int, default=None, help="OpenAlex session retries (default: production)")
    parser.add_argument("--backoff", type=float, default=None, help="OpenAlex backoff factor (default: production)")
    args = parser.parse_args()
    from deepscholar import db

    with bench_database() as (engine, where):
        print(f"# database: {where}", file=sys.stderr)
        db.init_db(engine)
        for which in args.runs:
            print(json.dumps(run(engine, which, args.mode, args.sources, args.retries, args.backoff)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
