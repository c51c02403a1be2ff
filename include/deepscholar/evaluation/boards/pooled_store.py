"""Pooled boards kept once computed (table pooled_boards), for the command line.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.boards.pooled_store`.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
from collections.abc import Callable
from datetime import date, datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.evaluation.boards.selection import Selection
from deepscholar.evaluation.metrics import registry

__all__ = ["KEEP", "kept_board", "stamp_of"]

log = logging.getLogger(__name__)

KEEP = 200  # selections kept; each row is a board of some 20 systems (tens of kB)

# The modules whose arithmetic or row shape a pooled board is: a change to any of them is a new stamp.
_COMPUTING_MODULES = ("deepscholar.evaluation.boards.pooled", "deepscholar.evaluation.boards.rollup",
                      "deepscholar.evaluation.boards.contamination", "deepscholar.evaluation.boards.query_scores",
                      "deepscholar.evaluation.boards.rank_agreement")

_STAMP_SQL = """
    WITH months AS (
        SELECT m.release_id, c.board_version, q.release_id IS NOT NULL AS kept
        FROM unnest(CAST(:r AS text[])) AS m (release_id)
        LEFT JOIN board_current c ON c.release_id = m.release_id AND c.judge_config = :j
        LEFT JOIN board_queries q ON q.release_id = c.release_id AND q.judge_config = c.judge_config
                                 AND q.board_version = c.board_version)
    SELECT
      (SELECT string_agg(concat_ws(':', release_id, board_version), ',' ORDER BY release_id) FROM months) AS boards,
      (SELECT bool_and(kept) FROM months) AS all_kept,
      (SELECT concat_ws(':', count(*), max(xmin::text::bigint)) FROM reports
       WHERE release_id = ANY(CAST(:r AS text[]))) AS reports,
      (SELECT concat_ws(':', count(*), max(q.xmin::text::bigint), count(p.arxiv_id), max(p.xmin::text::bigint))
       FROM release_queries q LEFT JOIN papers p ON p.arxiv_id = q.arxiv_id AND p.version = q.version
       WHERE q.release_id = ANY(CAST(:r AS text[]))) AS queries,
      (SELECT concat_ws(':', count(*), max(xmin::text::bigint)) FROM systems) AS systems"""


def _code_fingerprint(family: str) -> str:
    """The computing modules' source and the family's metric definitions, as the board reads them."""
    digest = hashlib.sha256()
    for name in _COMPUTING_MODULES:
        spec = importlib.util.find_spec(name)
        origin = spec.origin if spec else None
        digest.update(name.encode() + b"\0" + (Path(origin).read_bytes() if origin else b"?"))
    metrics = [(m, registry.headline_variant(m), registry.is_bounded(m)) for m in registry.metric_names(family)]
    digest.update(json.dumps([registry.ranking_metric(family), metrics]).encode())
    return digest.hexdigest()


def stamp_of(conn: sa.Connection, selection: Selection, judge_config: str, family: str) -> str | None:
    """What a pooled board of this selection would be computed from, hashed; None when it must not be kept
    (a month without kept per-query scores under this judge: its board reads live scores)."""
    row = conn.execute(sa.text(_STAMP_SQL), {"r": list(selection.releases), "j": judge_config}).one()
    if not row.all_kept:
        return None
    parts = [row.boards, row.reports, row.queries, row.systems, _code_fingerprint(family)]
    return hashlib.sha256("\n".join(str(p) for p in parts).encode()).hexdigest()


def _selection_doc(selection: Selection, judge_config: str, family: str, view: str) -> dict:
    return {"releases": list(selection.releases), "label": selection.label, "category": selection.category,
            "published_after": selection.published_after.isoformat() if selection.published_after else None,
            "judge_config": judge_config, "family": family, "view": view}


def _encode(value: Any) -> Any:
    if isinstance(value, datetime):
        return {"$datetime": value.isoformat()}
    if isinstance(value, date):
        return {"$date": value.isoformat()}
    if hasattr(value, "item"):  # a numpy scalar
        return value.item()
    raise TypeError(f"a pooled board row holds a {type(value).__name__}, which the store cannot keep")


def _decode(obj: dict) -> Any:
    if len(obj) == 1:
        if "$date" in obj:
            return date.fromisoformat(obj["$date"])
        if "$datetime" in obj:
            return datetime.fromisoformat(obj["$datetime"])
    return obj


def kept_board(engine: Engine, selection: Selection, judge_config: str, family: str, view: str,
               compute: Callable[[], list[dict]]) -> list[dict]:
    """The rows `compute` returns for this selection, read back when kept with the current stamp, else
    computed and kept. `view` names what `compute` makes of the selection (a window board, one category's
    board with its overall ranks); it is part of the key."""
    doc = _selection_doc(selection, judge_config, family, view)
    key = hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()
    with engine.connect() as conn:
        stamp = stamp_of(conn, selection, judge_config, family)
        kept = None if stamp is None else conn.execute(sa.text(
            "SELECT rows_json FROM pooled_boards WHERE selection_key = :k AND stamp = :s"), {"k": key, "s": stamp}
        ).scalar()
    if kept is not None:
        return json.loads(kept, object_hook=_decode)
    rows = compute()
    if stamp is not None and rows:
        _keep(engine, key, doc, stamp, json.dumps(rows, default=_encode))
    return rows


def _keep(engine: Engine, key: str, doc: dict, stamp: str, rows_json: str) -> None:
    """Upsert the row and drop all but the KEEP newest; a warehouse that refuses the write (read-only role,
    a lock held past two seconds) only loses the saving."""
    try:
        with engine.begin() as conn:
            conn.execute(sa.text("SET LOCAL lock_timeout = '2s'"))
            conn.execute(sa.text("""
                INSERT INTO pooled_boards (selection_key, selection, stamp, rows_json, computed_at)
                VALUES (:k, CAST(:d AS jsonb), :s, :rows, now())
                ON CONFLICT (selection_key) DO UPDATE
                SET selection = EXCLUDED.selection, stamp = EXCLUDED.stamp, rows_json = EXCLUDED.rows_json,
                    computed_at = EXCLUDED.computed_at"""),
                {"k": key, "d": json.dumps(doc), "s": stamp, "rows": rows_json})
            conn.execute(sa.text("""
                DELETE FROM pooled_boards WHERE selection_key IN (
                    SELECT selection_key FROM pooled_boards ORDER BY computed_at DESC, selection_key OFFSET :keep)"""),
                {"keep": KEEP})
    except sa.exc.DBAPIError as exc:
        log.warning("the pooled board was computed but not kept (%s): the next command computes it again",
                    str(exc.orig).strip().splitlines()[0] if exc.orig else exc)
