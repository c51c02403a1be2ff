"""The JSON mirror: every board as the app's API answers for it, as files under api/.

- api/leaderboard.json: `/api/leaderboard` (the latest board);
- api/board/<month>/<judge>/current.json and v<N>.json: `/api/leaderboard?release=M&judge_config=J[&version=N]`;
- api/board/<month>/<judge>/versions.json: `/api/versions?release=M&judge_config=J`;
- api/history.json: `/api/history`.
Same builders (web/queries.py) and the same encoding as the app's JSONResponse, so a file holds the bytes
the live API sends for the same board.
"""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy.engine import Engine

from deepscholar.site import routes
from deepscholar.site.routes import SiteMap
from deepscholar.web import queries as q

__all__ = ["api_bytes", "board_json_pages", "json_pages"]


def api_bytes(content: Any) -> bytes:
    """What starlette's JSONResponse sends for `content`."""
    return json.dumps(content, ensure_ascii=False, allow_nan=False, indent=None, separators=(",", ":")).encode()


def _board(engine: Engine, judge: str | None, release: str | None, version: int | None) -> bytes:
    with engine.connect() as conn:
        board, tracks, agreement = q.board_with_tracks(conn, judge, release, version)
    return api_bytes(q.board_json(board) | q.tracks_json(tracks, agreement))


def board_json_pages(engine: Engine, sm: SiteMap, release: str) -> dict[str, bytes]:
    """{site path: JSON bytes} of one month's boards under every judge: each version and the versions list."""
    out = {}
    for (month, judge), _current in sorted(sm.current_version.items()):
        if month != release:
            continue
        with engine.connect() as conn:
            versions = q.existing_board_versions(conn, release, judge)
        out[routes.api_board_path(release, judge)] = _board(engine, judge, release, None)
        for v in versions:
            out[routes.api_board_path(release, judge, v["board_version"])] = _board(
                engine, judge, release, v["board_version"])
        folder = routes.api_board_path(release, judge).rsplit("/", 1)[0]
        out[f"{folder}/versions.json"] = api_bytes(
            {"versions": [{k: q.json_value(v) for k, v in r.items()} for r in versions]})
    return out


def json_pages(engine: Engine, sm: SiteMap) -> dict[str, bytes]:
    """{site path: JSON bytes} of what spans the months: the latest board and the history."""
    out = {"api/leaderboard.json": _board(engine, None, None, None)}
    with engine.connect() as conn:
        rows = q.history_rows(conn)
    out["api/history.json"] = api_bytes({"rows": [{k: q.json_value(v) for k, v in r.items()} for r in rows]})
    return out
