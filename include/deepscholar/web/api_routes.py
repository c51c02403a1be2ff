"""The JSON API: `/api/leaderboard` (a month's board, or with from/to a window's pooled board), `/api/versions`,
`/api/history` — the board pages' numbers as JSON (queries.board_json, tracks_json), conditional like the pages
(web/freshness.py: the api-* pages)."""

from __future__ import annotations

from collections.abc import Callable

from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response
from sqlalchemy.engine import Engine

from deepscholar.web import queries as q
from deepscholar.web.page_reads import PageReads, conditional
from deepscholar.web.queries import NotFound

__all__ = ["install_api"]


def _board_api(engine: Callable[[], Engine], judge_config: str | None, release: str | None,
               version: int | None) -> JSONResponse:
    with engine().connect() as conn:
        board, tracks, agreement = q.board_with_tracks(conn, judge_config, release, version)
    return JSONResponse(q.board_json(board) | q.tracks_json(tracks, agreement))


def _window_api(engine: Callable[[], Engine], reads: PageReads, stamp: str, judge_config: str | None,
                window_from: str | None, window_to: str | None) -> JSONResponse:
    """A window's pooled board, computed once per stamp with the page's (the same kept boards)."""
    board, tracks, selection = reads.boards.get(
        ("window", judge_config, window_from, window_to, str(engine().url), stamp),
        lambda: q.pooled_page_board(engine(), judge_config, window_from, window_to))
    return JSONResponse(q.pooled_board_json(board, tracks, selection))


def _versions_api(engine: Callable[[], Engine], release: str, judge_config: str) -> JSONResponse:
    with engine().connect() as conn:
        rows = q.existing_board_versions(conn, release, judge_config)
    return JSONResponse({"versions": [{k: q.json_value(v) for k, v in r.items()} for r in rows]})


def _history_api(engine: Callable[[], Engine], judge_config: str | None, system_id: str | None) -> JSONResponse:
    with engine().connect() as conn:
        rows = q.history_rows(conn, judge_config, system_id)
    return JSONResponse({"rows": [{k: q.json_value(v) for k, v in r.items()} for r in rows]})


def install_api(app: FastAPI, engine: Callable[[], Engine], reads: PageReads) -> None:
    @app.get("/api/leaderboard")
    def leaderboard_route(request: Request, judge_config: str | None = None, release: str | None = None,
                          version: int | None = None, window_from: str | None = Query(None, alias="from"),
                          window_to: str | None = Query(None, alias="to")) -> Response:
        if window_from or window_to:
            if release is not None or version is not None:
                raise NotFound("a window (from/to) is a board of its own: no release or version with it")
            return conditional(request, engine, reads, ("api-window", judge_config, window_from, window_to),
                               lambda stamp: _window_api(engine, reads, stamp, judge_config, window_from, window_to))
        return conditional(request, engine, reads, ("api-board", judge_config, release, version),
                           lambda _: _board_api(engine, judge_config, release, version))

    @app.get("/api/versions")
    def versions_route(request: Request, release: str, judge_config: str) -> Response:
        return conditional(request, engine, reads, ("api-versions", release, judge_config),
                           lambda _: _versions_api(engine, release, judge_config))

    @app.get("/api/history")
    def history_route(request: Request, judge_config: str | None = None, system_id: str | None = None) -> Response:
        return conditional(request, engine, reads, ("api-history", judge_config, system_id),
                           lambda _: _history_api(engine, judge_config, system_id))
