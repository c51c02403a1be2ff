"""Page reads answered from what was already rendered: conditional requests (ETag, 304) and the rendered
pages kept per app, keyed by what a page shows and bounded in bytes; and the boards the page computes.

Design notes: docs/MODULE_NOTES.md, `deepscholar.web.page_reads`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from fastapi import Request
from fastapi.responses import Response
from sqlalchemy.engine import Engine

from deepscholar.web.freshness import PageStamps
from deepscholar.web.stamped_cache import StampedCache

__all__ = ["PageReads", "conditional", "RENDERED_PAGES_KEPT", "RENDERED_BYTES_KEPT", "BOARDS_KEPT"]

RENDERED_PAGES_KEPT = 128  # board reads kept rendered per cache (a board page is tens of kilobytes)
# Bytes of rendered pages kept per cache (two per app: boards, reports). Sized for Airflow's API server, which
# serves the page among its own work: a month's boards fit many times over; a report page of the largest an
# import keeps (DEEPSCHOLAR_IMPORT_MAX_REPORT_CHARS of text, its sources capped) fits a few times.
RENDERED_BYTES_KEPT = 32 * 1024 * 1024
BOARDS_KEPT = 64  # computed boards kept per app: a month's categories, a few windows


def _page_code_stamp() -> str:
    """A digest of the page's own code and templates: a new deployment's pages never match an old ETag."""
    folder = Path(__file__).parent
    digest = hashlib.sha256()
    for path in sorted([*folder.glob("*.py"), *folder.glob("templates/*.html")]):
        digest.update(path.name.encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def _if_none_match(request: Request) -> set[str]:
    """The entity tags a conditional request names (weak ones compared as strong: these pages are whole)."""
    raw = request.headers.get("if-none-match", "")[:2048]
    return {part.strip().removeprefix("W/") for part in raw.split(",") if part.strip()}


def _weight(kept: tuple[int, bytes, str | None]) -> int:
    return len(kept[1]) + 200  # the body, and the tuple and key around it


class PageReads:
    """What every page read of one app shares: the digest of the page's code, each page's stamp statement
    (web/freshness.py), the responses already rendered, kept by ETag, and the boards the page computes. A
    tag names the page's code, the mount, the page and the parameters it shows, and the page's stamp, so a
    kept response is what building the page again would give, and a write to what it shows is a new tag."""

    def __init__(self) -> None:
        self.code_stamp = _page_code_stamp()
        self.stamps = PageStamps()
        self.rendered = StampedCache(RENDERED_PAGES_KEPT, max_bytes=RENDERED_BYTES_KEPT, weigh=_weight)
        # Apart: a crawl of reports does not push boards out.
        self.reports = StampedCache(RENDERED_PAGES_KEPT, max_bytes=RENDERED_BYTES_KEPT, weigh=_weight)
        # Window and category boards (seconds of bootstrap each), kept per page stamp: computed once per
        # roll-up, however many readers and pages show them.
        self.boards = StampedCache(BOARDS_KEPT)


def conditional(request: Request, engine: Callable[[], Engine], reads: PageReads, shows: tuple[Any, ...],
                build: Callable[[str], Response], *, key: object = None, kept: StampedCache | None = None) -> Response:
    """A page read, answered 304 when nothing it shows has changed since the client's copy.

    `shows`: the page's name (a key of freshness.PAGES) and the parameters it reads, as the route parsed them
    (other query parameters change nothing); `key`: the page's own row (a report id, a system id) for a page
    whose stamp reads it. The ETag digests them with the mount and the page's stamp (one statement over what
    the page reads: web/freshness.py); the page is assembled only when it does not match, and `build` gets
    the stamp (the page's computed boards are keyed by it: one read a request). `no-cache`: a browser or
    proxy may keep the page but asks again before showing it.

    The rendered answer is kept by its tag (`reads.rendered`, or `kept`: the reports'): every later reader of
    the same page under the same stamp, with or without a conditional request, gets it for the stamp's read
    alone, and readers arriving together while it is built wait for that one build. At 20 concurrent readers
    on 2 cores the pages' own CPU (30-85 ms a board page) was most of their time; errors (a 404) are not kept."""
    with engine().connect() as conn:
        stamp = reads.stamps.stamp(conn, shows[0], key)
    digest = "\0".join([reads.code_stamp, request.scope.get("root_path", ""), *map(repr, shows), stamp])
    tag = '"' + hashlib.sha256(digest.encode()).hexdigest()[:32] + '"'
    headers = {"ETag": tag, "Cache-Control": "no-cache"}
    named = _if_none_match(request)
    if tag in named or "*" in named:
        return Response(status_code=304, headers=headers)
    cache = reads.rendered if kept is None else kept
    status, body, media_type = cache.get((str(engine().url), tag), lambda: _kept(build(stamp)))
    return Response(content=body, status_code=status, media_type=media_type, headers=headers)


def _kept(response: Response) -> tuple[int, bytes, str | None]:
    return response.status_code, bytes(response.body), response.media_type
