"""A local stand-in for arXiv (search API, e-prints) and OpenAlex (works) serving a snapshot folder.

Design notes: docs/MODULE_NOTES.md, `deepscholar.replay.server`.
"""

from __future__ import annotations

import gzip
import io
import json
import logging
import re
import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Self
from urllib.parse import unquote, urlsplit

from werkzeug.serving import WSGIRequestHandler, make_server
from werkzeug.wrappers import Request, Response

from deepscholar.replay.arxiv_query import QueryError, matches, parse_query, relevance
from deepscholar.replay.atom import error_feed, render_feed
from deepscholar.replay.oai import oai_error, oai_record
from deepscholar.replay.snapshot import Snapshot, bare_doi
from deepscholar.text import strip_arxiv_version

__all__ = ["Delay", "ReplayServer", "RequestRecord", "Snapshot", "Throttled", "Truncated", "serve_forever"]

logger = logging.getLogger(__name__)


# --- the WSGI app ---------------------------------------------------------------------------------------


DEMO_SYSTEM_PATH = "/demo-system/report"


@dataclass(frozen=True)
class RequestRecord:
    method: str
    path: str
    query: str
    time: float  # time.monotonic() when the request arrived
    status: int | None  # None while the response is still being produced (an injected delay)


@dataclass(frozen=True)
class Delay:
    """An injected failure that stalls the response, so the client's timeout fires."""

    seconds: float
    status: int = 200


@dataclass(frozen=True)
class Truncated:
    """The normal answer cut to a share of its bytes, sent as a complete 200 (a proxy's cut-off body)."""

    keep: float = 0.5


@dataclass(frozen=True)
class Throttled:
    """429 Too Many Requests with a Retry-After header (whole seconds, as HTTP defines it), as OpenAlex
    answers past the polite pool's rate."""

    retry_after: int = 1


Injected = int | Delay | Truncated | Throttled | None


def sniff_content_type(content: bytes) -> str:
    """The content type arXiv would send: tar (gzipped), single gzipped file, PDF, or plain text."""
    if content.startswith(b"%PDF"):
        return "application/pdf"
    if content[:2] == b"\x1f\x8b":
        try:
            with gzip.GzipFile(fileobj=io.BytesIO(content)) as gz:
                head = gz.read(512)
        except (OSError, EOFError):
            return "application/x-eprint"
        if len(head) >= 262 and head[257:262] == b"ustar":
            return "application/x-eprint-tar"
        return "application/x-eprint"
    if len(content) >= 262 and content[257:262] == b"ustar":
        return "application/x-tar"
    return "text/plain; charset=utf-8" if content[:1] in (b"\\", b"%") else "application/octet-stream"


class ReplayApp:
    def __init__(self, snapshot: Snapshot) -> None:
        self.snapshot = snapshot
        self._lock = threading.Lock()
        self._log: list[RequestRecord] = []
        self._failures: dict[str, list[Injected]] = {}
        # arXiv answers a page with at most this many entries whatever max_results asks (None: no cap);
        # clients must page on by the entries they got, not by the page size they asked for.
        self.arxiv_page_cap: int | None = None
        # Rate limits as the real hosts keep them (path prefix -> seconds wanted between request starts,
        # e.g. {"/api/query": 3.0, "/e-print/": 3.0, "/works": 0.1}, scaled down for benches) and the
        # latency each answer takes. A request starting less than 90% of an interval after the one before
        # is counted in `pacing` as early; more than PACING_WINDOW + 1 requests within PACING_WINDOW
        # intervals are throttled (429, as arXiv and OpenAlex do; see _too_early).
        self.min_intervals: dict[str, float] = {}
        self._recent: dict[str, list[float]] = {}
        self.latency: float = 0.0
        self.pacing: dict[str, dict] = {}
        self._demo_reports: dict[str, dict] | None = None
        month = snapshot.manifest.get("month", "2000-01")
        # A fixed feed timestamp keeps responses reproducible.
        self._feed_updated = f"{month}-01T00:00:00Z" if re.fullmatch(r"\d{4}-\d{2}", month) else \
            "2000-01-01T00:00:00Z"

    # test hooks
    def inject_failures(self, path_prefix: str, statuses: list[Injected]) -> None:
        with self._lock:
            self._failures.setdefault(path_prefix, []).extend(statuses)

    def clear_failures(self) -> None:
        with self._lock:
            self._failures.clear()

    @property
    def requests(self) -> list[RequestRecord]:
        with self._lock:
            return list(self._log)

    def clear_requests(self) -> None:
        with self._lock:
            self._log.clear()

    def _next_failure(self, path: str) -> Injected:
        """The next injected outcome for this path; None (also as a queued item) means answer normally."""
        with self._lock:
            prefixes = sorted((p for p, q in self._failures.items() if q and path.startswith(p)), key=len,
                              reverse=True)
            if not prefixes:
                return None
            return self._failures[prefixes[0]].pop(0)

    def __call__(self, environ, start_response):
        arrived = time.monotonic()
        request = Request(environ)
        # PATH_INFO is already unquoted; the raw URI keeps "%2F" inside OpenAlex ids apart from "/".
        raw_uri = environ.get("REQUEST_URI") or environ.get("RAW_URI") or request.full_path
        raw_path = urlsplit(raw_uri).path
        path = unquote(raw_path)
        # Logged on arrival so a request stalled by an injected delay is already counted.
        record = RequestRecord(request.method, path, request.query_string.decode("latin-1"), arrived, None)
        with self._lock:
            self._log.append(record)
            index = len(self._log) - 1
        failure = self._next_failure(path)
        if failure is None and self._too_early(path, arrived):
            failure = Throttled(retry_after=1)
        if self.latency:
            time.sleep(self.latency)
        if isinstance(failure, Delay):
            time.sleep(failure.seconds)
            response = self._dispatch(request, path, raw_path) if failure.status == 200 else \
                self._status_response(failure.status)
        elif isinstance(failure, Truncated):
            whole = self._dispatch(request, path, raw_path).get_data()
            response = Response(whole[: int(len(whole) * failure.keep)], status=200,
                                content_type="application/atom+xml; charset=utf-8"
                                if path.startswith("/api/query") else "application/octet-stream")
        elif isinstance(failure, Throttled):
            response = self._status_response(429)
            response.headers["Retry-After"] = str(failure.retry_after)
        elif failure is not None:
            response = self._status_response(failure)
        else:
            try:
                response = self._dispatch(request, path, raw_path)
            except Exception:  # a bug here must surface as a 500 the client sees, not a dead socket
                logger.exception("replay server error for %s", raw_uri)
                response = Response("internal error", status=500)
        with self._lock:
            if index < len(self._log) and self._log[index] is record:
                self._log[index] = replace(record, status=response.status_code)
            stats = next((v for p, v in self.pacing.items() if path.startswith(p)), None)
            if stats is not None:
                stats["busy_seconds"] += time.monotonic() - arrived
        return response(environ, start_response)

    # A host's limit as its rate limiter keeps it: over any window of this many intervals, at most this
    # many requests plus one. A single request a little early (a client thread woken late before, one on
    # time after) passes, as it does at the real hosts; a sustained excess is throttled.
    PACING_WINDOW = 5

    def _too_early(self, path: str, arrived: float) -> bool:
        """Note this request's spacing; True when the host's rate over the last window is exceeded."""
        prefix = next((p for p in self.min_intervals if path.startswith(p)), None)
        if prefix is None:
            return False
        interval = self.min_intervals[prefix]
        with self._lock:
            stats = self.pacing.setdefault(prefix, {"requests": 0, "early": 0, "throttled": 0, "busy_seconds": 0.0,
                                                    "min_gap": None, "first": arrived, "last": arrived})
            recent = self._recent.setdefault(prefix, [])
            last = stats["last"] if stats["requests"] else None
            stats["requests"] += 1
            stats["last"] = arrived
            window = self.PACING_WINDOW * interval
            recent[:] = [t for t in recent if arrived - t < window] + [arrived]
            if last is not None:
                gap = arrived - last
                stats["min_gap"] = gap if stats["min_gap"] is None else min(stats["min_gap"], gap)
                stats["early"] += gap < 0.9 * interval  # 10% slack: the client's clock is not ours
            throttled = len(recent) > self.PACING_WINDOW + 1
            stats["throttled"] += throttled
            return throttled

    @staticmethod
    def _status_response(status: int) -> Response:
        return Response(json.dumps({"error": f"injected HTTP {status}"}), status=status,
                        mimetype="application/json")

    def _dispatch(self, request: Request, path: str, raw_path: str) -> Response:
        if path in ("/api/query", "/api/query/"):
            return self.arxiv_query(request)
        if path.startswith("/e-print/"):
            return self.eprint(path[len("/e-print/"):])
        if path in ("/oai2", "/oai2/"):
            return self.oai(request)
        if path == "/works" or path == "/works/":
            return self.works_list(request)
        if path.startswith("/works/"):
            return self.work_get(unquote(raw_path[len("/works/"):]))
        if path == DEMO_SYSTEM_PATH and request.method == "POST":
            return self.demo_system_report(request)
        if path == "/_replay/pacing":  # for benches running the server in another process
            with self._lock:
                return self._json({"min_intervals": self.min_intervals, "latency": self.latency,
                                   "pacing": self.pacing})
        if path == "/":
            return self._json({"snapshot": str(self.snapshot.root), "month": self.snapshot.manifest.get("month"),
                               "endpoints": ["/api/query", "/e-print/<id>", "/oai2", "/works", "/works/<id>"]})
        return self._json({"error": "Not Found", "message": f"no route for {path}"}, 404)

    def demo_system_report(self, request: Request) -> Response:
        """The demo's external system reached over HTTP (systems/external/http_system.py): it answers a
        query with the report replay/demo_external.py makes for that paper, as a third-party service would."""
        from deepscholar.replay.demo_external import build_external_reports

        with self._lock:
            if self._demo_reports is None:
                self._demo_reports = {r["arxiv_id"]: r for r in build_external_reports(self.snapshot.root)}
        query = request.get_json(silent=True) or {}
        report = self._demo_reports.get(str(query.get("arxiv_id", "")).split("v")[0])
        if report is None:
            return self._json({"error": f"no report for {query.get('arxiv_id')!r}"}, 404)
        return self._json({"text": report["text"], "sources": report["sources"]})

    @staticmethod
    def _json(payload: dict, status: int = 200) -> Response:
        return Response(json.dumps(payload, ensure_ascii=False), status=status, mimetype="application/json")

    # arXiv
    def arxiv_query(self, request: Request) -> Response:
        args = request.args
        self_url = "http://arxiv.org/api/query?" + request.query_string.decode("latin-1")
        try:
            start = int(args.get("start", "0") or 0)
            max_results = int(args.get("max_results", "10") or 10)
            if start < 0 or max_results < 0:
                raise ValueError
        except ValueError:
            return self._atom(error_feed("start and max_results must be non-negative integers", self_url,
                                          self._feed_updated), 400)
        query = (args.get("search_query") or "").strip()
        id_list = [i.strip() for i in (args.get("id_list") or "").split(",") if i.strip()]
        try:
            tree = parse_query(query) if query else None
        except QueryError as exc:
            return self._atom(error_feed(f"malformed query: {exc}", self_url, self._feed_updated), 400)

        if id_list:
            entries = []
            for raw in id_list:
                base, _ = strip_arxiv_version(raw)
                if not re.fullmatch(r"\d{4}\.\d{4,5}|[a-z][a-z.\-]*/\d{7}", base, flags=re.IGNORECASE):
                    return self._atom(error_feed(f"incorrect id format for {raw}", self_url,
                                                  self._feed_updated), 400)
                entry = self.snapshot.lookup(raw)
                if entry is not None and entry not in entries:
                    entries.append(entry)
        else:
            entries = self.snapshot.latest_entries(tree)
        try:
            if tree is not None:
                entries = [e for e in entries if matches(tree, e)]
        except QueryError as exc:
            return self._atom(error_feed(f"malformed query: {exc}", self_url, self._feed_updated), 400)

        sort_by = args.get("sortBy", "relevance")
        descending = args.get("sortOrder", "descending") != "ascending"
        if id_list and not query:
            pass  # arXiv keeps id_list order
        elif sort_by == "submittedDate":
            entries.sort(key=lambda e: (e.submitted, e.base_id), reverse=descending)
        elif sort_by == "lastUpdatedDate":
            entries.sort(key=lambda e: (e.updated, e.base_id), reverse=descending)
        else:
            scored = [(relevance(tree, e) if tree else 0, e) for e in entries]
            scored.sort(key=lambda se: se[1].base_id)
            scored.sort(key=lambda se: se[0], reverse=descending)
            entries = [e for _, e in scored]
        if self.arxiv_page_cap is not None:
            max_results = min(max_results, self.arxiv_page_cap)
        page = entries[start:start + max_results]
        return self._atom(render_feed([e.data for e in page], len(entries), start, max_results, self_url,
                                      self._feed_updated))

    def oai(self, request: Request) -> Response:
        """arXiv's OAI-PMH GetRecord in the `arXiv` format (the licence lookup); errors as OAI-PMH has them."""
        args = {k: v for k, v in request.args.items()}
        date = self._feed_updated
        if args.get("verb") != "GetRecord":
            body = oai_error("badVerb", f"verb {args.get('verb')!r} is not served by the replay", args, date)
        elif args.get("metadataPrefix") != "arXiv":
            body = oai_error("cannotDisseminateFormat", f"{args.get('metadataPrefix')!r} is not served", args, date)
        else:
            identifier = args.get("identifier", "")
            base = identifier.removeprefix("oai:arXiv.org:")
            entry = self.snapshot.lookup(base) if base != identifier and "v" not in base.split(".")[-1] else None
            if base == identifier or not base:
                body = oai_error("badArgument", f"malformed identifier {identifier!r}", args, date)
            elif entry is None:
                body = oai_error("idDoesNotExist", f"{identifier} has the structure of a valid identifier for "
                                 "this repository, but it maps to no known item", args, date)
            else:
                body = oai_record(entry.data, entry.base_id, args, date)
        return Response(body, status=200, content_type="text/xml; charset=utf-8")

    @staticmethod
    def _atom(body: bytes, status: int = 200) -> Response:
        return Response(body, status=status, content_type="application/atom+xml; charset=utf-8")

    def eprint(self, arxiv_id: str) -> Response:
        path = self.snapshot.eprint_path(arxiv_id)
        if path is None:
            return Response(f"e-print {arxiv_id} not found", status=404, mimetype="text/plain")
        content = path.read_bytes()
        base, _ = strip_arxiv_version(path.name)
        return Response(content, status=200, content_type=sniff_content_type(content),
                        headers={"Content-Disposition": f'attachment; filename="{base.replace("/", "_")}"'})

    # OpenAlex
    def work_get(self, key: str) -> Response:
        key = key.strip()
        work = None
        if re.match(r"^(?:https?://(?:dx\.)?doi\.org/|doi:)", key, flags=re.IGNORECASE) or key.startswith("10."):
            work = self.snapshot.works_by_doi.get(bare_doi(key))
        else:
            short = key.rsplit("/", 1)[-1].upper()
            work = self.snapshot.works_by_id.get(short)
        if work is None:
            return self._json({"error": "Not Found", "message": f"no work {key}"}, 404)
        return self._json(work)

    def works_list(self, request: Request) -> Response:
        args = request.args
        results = self.snapshot.works
        for key, value in _parse_filters(args.get("filter", "")):
            filtered = self._apply_filter(results, key, value)
            if filtered is None:
                return self._json({"error": "Invalid query parameters error.",
                                   "message": f"{key} is not a valid filter here"}, 400)
            results = filtered
        if args.get("search"):
            hits = self.snapshot.work_search(args["search"], title_only=False)
            allowed = {id(r) for r in results}
            results = [w for w in hits if id(w) in allowed]
        try:
            per_page = int(args.get("per-page") or args.get("per_page") or 25)
            cursor = args.get("cursor")
            page = int(cursor) if cursor and cursor != "*" else int(args.get("page") or 1)
        except ValueError:
            return self._json({"error": "Invalid query parameters error.", "message": "bad paging"}, 400)
        if not 1 <= per_page <= 200:
            return self._json({"error": "Invalid query parameters error.",
                               "message": "per-page must be between 1 and 200"}, 400)
        chunk = results[(page - 1) * per_page: page * per_page]
        meta: dict[str, Any] = {"count": len(results), "db_response_time_ms": 1,
                                "page": None if cursor else page, "per_page": per_page, "groups_count": None}
        if cursor:
            meta["next_cursor"] = str(page + 1) if page * per_page < len(results) else None
        return self._json({"meta": meta, "results": chunk, "group_by": []})

    def _apply_filter(self, works: list[dict], key: str, value: str) -> list[dict] | None:
        options = [v for v in value.split("|") if v]
        if key == "doi":
            wanted = {bare_doi(v) for v in options}
            if works is self.snapshot.works:  # the whole snapshot: its DOI index answers at once
                found = [self.snapshot.works_by_doi.get(d) for d in wanted]
                return sorted((w for w in found if w), key=lambda w: w["id"])
            return [w for w in works if bare_doi(w.get("doi")) in wanted]
        if key in ("openalex", "openalex_id", "ids.openalex"):
            wanted = {v.rsplit("/", 1)[-1].upper() for v in options}
            if works is self.snapshot.works:
                found = [self.snapshot.works_by_id.get(i) for i in wanted]
                return sorted((w for w in found if w), key=lambda w: w["id"])
            return [w for w in works if w["id"].rsplit("/", 1)[-1].upper() in wanted]
        if key in ("title.search", "display_name.search", "title_and_abstract.search", "default.search"):
            title_only = key != "title_and_abstract.search" and key != "default.search"
            hits: dict[int, dict] = {}
            for option in options:
                for w in self.snapshot.work_search(option, title_only=title_only):
                    hits.setdefault(id(w), w)
            allowed = {id(r) for r in works}
            return [w for w in hits.values() if id(w) in allowed]
        if key == "publication_year":
            return [w for w in works if str(w.get("publication_year") or (w.get("publication_date") or "")[:4])
                    in options]
        if key == "ids.arxiv" or key == "arxiv":
            from deepscholar.sources.openalex import arxiv_id_from_work

            wanted = {strip_arxiv_version(v)[0] for v in options}
            return [w for w in works if arxiv_id_from_work(w) in wanted]
        return None


def _parse_filters(text: str) -> list[tuple[str, str]]:
    """'doi:10.1/x,title.search:graph nets' -> pairs; a comma only splits before another 'key:'."""
    if not text:
        return []
    parts = re.split(r",(?=[A-Za-z_.]+:)", text)
    out = []
    for part in parts:
        key, _, value = part.partition(":")
        out.append((key.strip(), value.strip()))
    return out


# --- server ---------------------------------------------------------------------------------------------


class _QuietRequestHandler(WSGIRequestHandler):
    """Request lines go to this module's logger at DEBUG instead of werkzeug's stderr handler."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        logger.debug("%s %s", self.requestline, code)


class ThreadedServer:
    """A WSGI app on a werkzeug server in a background thread: started and stopped by `with`, on a free port
    unless one is given (the local stand-ins for the services: replay, the batch API stub)."""

    thread_name = "wsgi-server"

    def __init__(self, app: Any, host: str = "127.0.0.1", port: int = 0) -> None:
        self._server = make_server(host, port, app, threaded=True, request_handler=_QuietRequestHandler)
        self.host = host
        self.port = self._server.server_port
        self._thread: threading.Thread | None = None

    def start(self) -> Self:
        if self._thread is None:
            # A short poll interval keeps stop() (and each test's teardown) fast.
            self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                            name=self.thread_name, daemon=True)
            self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread.join(timeout=10)
            self._thread = None
        self._server.server_close()

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class ReplayServer(ThreadedServer):
    """The replay app on a werkzeug server in a background thread (`with ReplayServer(dir) as s:`)."""

    thread_name = "replay-server"

    def __init__(self, snapshot_dir: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.snapshot = Snapshot(Path(snapshot_dir))
        self.app = ReplayApp(self.snapshot)
        super().__init__(self.app, host, port)

    @property
    def url(self) -> str:
        host = self.host if ":" not in self.host else f"[{self.host}]"
        return f"http://{host}:{self.port}"

    @property
    def arxiv_api_url(self) -> str:
        return f"{self.url}/api/query"

    @property
    def eprint_url(self) -> str:
        return f"{self.url}/e-print"

    @property
    def oai_url(self) -> str:
        return f"{self.url}/oai2"

    @property
    def openalex_url(self) -> str:
        return self.url

    @property
    def demo_system_url(self) -> str:
        return f"{self.url}{DEMO_SYSTEM_PATH}"

    @property
    def requests(self) -> list[RequestRecord]:
        return self.app.requests

    def clear_requests(self) -> None:
        self.app.clear_requests()

    def inject_failures(self, path_prefix: str, statuses: list[Injected]) -> None:
        """The next requests under the prefix get these statuses (or delays; None = normal answer), in order."""
        self.app.inject_failures(path_prefix, statuses)

    def clear_failures(self) -> None:
        self.app.clear_failures()

    def serve_forever(self) -> None:
        self._server.serve_forever()


def serve_forever(snapshot_dir: Path, host: str = "127.0.0.1", port: int = 8765) -> None:
    """Serve in the foreground until interrupted (`deepscholar replay serve`)."""
    server = ReplayServer(Path(snapshot_dir), host=host, port=port)
    print(f"replaying {snapshot_dir} at {server.url}")
    print(f"  arXiv API:  {server.arxiv_api_url}")
    print(f"  e-prints:   {server.eprint_url}")
    print(f"  OAI-PMH:    {server.oai_url}")
    print(f"  OpenAlex:   {server.openalex_url}")
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server._server.server_close()
