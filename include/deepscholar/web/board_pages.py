"""The board pages: `/` (a month's board, or a window's pooled board), `/history` and `/versions`.

Each is a conditional read (page_reads.conditional) of what web/freshness.py declares for it; the window and
category boards, computed from every score of their months, are kept per page stamp (PageReads.boards).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import HTMLResponse
from sqlalchemy.engine import Engine

from deepscholar.web import queries as q
from deepscholar.web.page_reads import PageReads, conditional
from deepscholar.web.queries import NotFound
from deepscholar.web.render import board_context, history_context, versions_context, window_context
from deepscholar.web.responses import base_of, page

__all__ = ["install_board_pages", "board_page", "board_page_context"]


def _computed(_key: tuple, compute: Callable[[], Any]) -> Any:
    return compute()


def board_page_context(engine: Engine, judge_config: str | None, release: str | None, version: int | None,
                       window_from: str | None, window_to: str | None, base: str, *,
                       kept: Callable[[tuple, Callable[[], Any]], Any] = _computed,
                       static: bool = False) -> tuple[str, dict]:
    """(title, context) of the board page: a month's board (a release, a board version) with its tracks,
    agreement and trust rows, or a window's pooled board (from/to) that has none of those; with the category
    boards, the months to choose a window from and (the latest board's) standard windows. `kept(key,
    compute)`: where computed boards are kept (the app's per-stamp cache); `static`: the static site's page."""
    from deepscholar.evaluation.boards.leaderboard import pick_board
    from deepscholar.evaluation.boards.selection import Selection
    from deepscholar.settings import current_settings

    minimum = current_settings().category_min_queries
    pooled = bool(window_from or window_to)
    if pooled:
        if release is not None or version is not None:
            raise NotFound("a window (from/to) is a board of its own: no release or version with it")
        board, tracks, selection = kept(("window", judge_config, window_from, window_to),
                                        lambda: q.pooled_page_board(engine, judge_config, window_from, window_to))
        agreement: list[dict] = []
        trust: list[dict] = []
    else:
        with engine.connect() as conn:
            board, tracks, agreement = q.board_with_tracks(conn, judge_config, release, version)
        selection = None if board.release_id is None else Selection((board.release_id,), board.release_id)
        trust = q.trust_rows(engine, board.release_id, board.judge_config)
    judge = board.judge_config
    categories = [] if selection is None or version is not None or judge is None else kept(
        ("categories", selection, judge, minimum), lambda: q.category_page_boards(engine, selection, judge, minimum))
    with engine.connect() as conn:
        months = q.board_months(conn, judge)
        # The standard windows hang off the judge's latest board (and each other): a month's page stays as it
        # was when a new month comes.
        latest = pooled or (version is None and judge is not None and pick_board(conn, None, judge) == (
            board.release_id, judge))
    return f"Leaderboard {board.release_id or ''}".strip(), {
        **board_context(board, base, tracks, agreement, trust),
        **window_context(months, window_from, window_to, judge, base, categories, minimum, pooled=pooled,
                         static=static, standard=latest)}


def board_page(request: Request, engine: Callable[[], Engine], reads: PageReads, stamp: str,
               judge_config: str | None, release: str | None, version: int | None, window_from: str | None,
               window_to: str | None) -> HTMLResponse:
    """The board page (board_page_context), its computed boards kept per page stamp."""
    url = str(engine().url)
    base = base_of(request)
    title, context = board_page_context(
        engine(), judge_config, release, version, window_from, window_to, base,
        kept=lambda key, compute: reads.boards.get((*key, url, stamp), compute))
    return page("board.html", title, base, **context)


def _history_page(request: Request, engine: Callable[[], Engine], judge_config: str | None) -> HTMLResponse:
    with engine().connect() as conn:
        configs = q.history_judge_configs(conn)
        chosen = q.pick(configs, judge_config)
        if judge_config is not None and chosen is None:
            raise NotFound(f"no history for judge config {judge_config!r}")
        rows = q.history_rows(conn, chosen) if chosen else []
    base = base_of(request)
    return page("history.html", "History", base, **history_context(rows, chosen, configs, base))


def _versions_page(request: Request, engine: Callable[[], Engine], release: str, judge_config: str) -> HTMLResponse:
    with engine().connect() as conn:
        rows = q.existing_board_versions(conn, release, judge_config)
    base = base_of(request)
    return page("versions.html", f"Versions of {release}", base, **versions_context(release, judge_config, rows, base))


def install_board_pages(app: FastAPI, engine: Callable[[], Engine], reads: PageReads) -> None:
    @app.get("/", response_class=HTMLResponse)
    def leaderboard(request: Request, judge_config: str | None = None, release: str | None = None,
                    version: int | None = None, window_from: str | None = Query(None, alias="from"),
                    window_to: str | None = Query(None, alias="to")):
        shows = ("board", judge_config, release, version, window_from, window_to)
        return conditional(request, engine, reads, shows, lambda stamp: board_page(
            request, engine, reads, stamp, judge_config, release, version, window_from, window_to))

    @app.get("/history", response_class=HTMLResponse)
    def history(request: Request, judge_config: str | None = None):
        return conditional(request, engine, reads, ("history", judge_config),
                           lambda _: _history_page(request, engine, judge_config))

    @app.get("/versions", response_class=HTMLResponse)
    def versions(request: Request, release: str, judge_config: str):
        return conditional(request, engine, reads, ("versions", release, judge_config),
                           lambda _: _versions_page(request, engine, release, judge_config))
