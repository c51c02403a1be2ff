"""The per-query headline scores a board version counted, kept beside it as one array per system and metric
(board_queries, board_query_scores: migration 0032).

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.boards.query_scores`.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import numpy as np
import pandas as pd
import sqlalchemy as sa

from deepscholar import db

__all__ = ["store_query_scores", "has_query_scores", "stored_query_scores", "metric_versions"]

_COLUMNS = ["release_id", "system_id", "arxiv_id", "metric", "value", "metric_version"]


def has_query_scores(conn: sa.Connection, release_id: str, judge_config: str, version: int) -> bool:
    return conn.execute(sa.text("""
        SELECT EXISTS (SELECT 1 FROM board_queries WHERE release_id = :r AND judge_config = :j AND board_version = :v)
        """), {"r": release_id, "j": judge_config, "v": version}).scalar_one()


def store_query_scores(conn: sa.Connection, release_id: str, judge_config: str, version: int,
                       scores: pd.DataFrame) -> None:
    """Keep `scores` (load_scores' frame: one row per system, query and metric, NaN = unscored) as board
    version `version`'s arrays, aligned with the release's queries sorted by arXiv id. Rewrites the version's
    arrays whole (a draft's roll-up), so a system or metric that left the board leaves its array too."""
    queries = set(conn.execute(sa.text("SELECT arxiv_id FROM release_queries WHERE release_id = :r"),
                               {"r": release_id}).scalars())
    order = sorted(queries | set(scores["arxiv_id"]))
    key = {"release_id": release_id, "judge_config": judge_config, "board_version": version}
    conn.execute(sa.text("DELETE FROM board_queries WHERE release_id = :release_id "
                         "AND judge_config = :judge_config AND board_version = :board_version"),
                 key)  # its arrays cascade
    conn.execute(db.table(conn, "board_queries").insert(), [key | {"arxiv_ids": order}])
    if scores.empty:
        return
    # One (system, metric) per row of a matrix over the queries: -inf (no score row) becomes NULL.
    groups = scores.groupby(["system_id", "metric"], sort=True)
    names = list(groups.size().index)  # the rows' order: ngroup numbers the sorted groups
    matrix = np.full((len(names), len(order)), -np.inf)
    matrix[groups.ngroup().to_numpy(), pd.Index(order).get_indexer(scores["arxiv_id"])] = \
        scores["value"].to_numpy(dtype=float)
    versions = metric_versions(scores)
    # One statement, each array as PostgreSQL's array text (repr is the shortest exact form of a float): an
    # executemany of 84,000 numbers as SQL literals took most of a second.
    arrays = ["{" + ",".join("NULL" if v == -np.inf else repr(v) for v in values) + "}"
              for values in matrix.tolist()]
    conn.execute(sa.text("""
        INSERT INTO board_query_scores (release_id, judge_config, board_version, system_id, metric, metric_version,
                                        scores)
        SELECT :release_id, :judge_config, :board_version, s, m, v, CAST(x AS double precision[])
        FROM unnest(CAST(:s AS text[]), CAST(:m AS text[]), CAST(:v AS text[]), CAST(:x AS text[])) AS u (s, m, v, x)"""),
        key | {"s": [n[0] for n in names], "m": [n[1] for n in names], "v": [versions.get(n) for n in names],
               "x": arrays})


def metric_versions(scores: pd.DataFrame) -> dict[tuple[str, str], str]:
    """metric_version per (system, metric); comma-joined when a system's scores mix versions (kept scores carry
    their board's comma-joined versions: split, so each version is named once)."""
    found: dict[tuple[str, str], set[str]] = {}
    unique = scores[["system_id", "metric", "metric_version"]].dropna().drop_duplicates()
    for system, metric, version in unique.itertuples(index=False):
        found.setdefault((system, metric), set()).update(version.split(","))
    return {k: ",".join(sorted(v)) for k, v in found.items()}


def stored_query_scores(conn: sa.Connection, releases: Sequence[str], judge_config: str,
                        metrics: Sequence[str]) -> tuple[pd.DataFrame, list[str]]:
    """The kept scores of these metrics on the current board version of each release (board_current) as one
    row per (release, system, query, metric) with value (NaN = unscored) and metric_version, like the rows
    read from metric_scores; and the releases that have no kept scores (read them from metric_scores).
    Columns hold plain Python strings (object), not pandas' inferred string type, whose conversion of some
    300,000 repeated names would cost more than the whole read."""
    kept = {r: np.asarray(ids, dtype=object) for r, ids in conn.execute(sa.text("""
        SELECT c.release_id, q.arxiv_ids
        FROM board_current c
        JOIN board_queries q USING (release_id, judge_config, board_version)
        WHERE c.release_id = ANY(:r) AND c.judge_config = :j"""), {"r": list(releases), "j": judge_config})}
    missing = [r for r in releases if r not in kept]
    # NULL (no score) comes back as -Infinity, which no score is, so the arrays convert to floats in one go.
    rows = conn.execute(sa.text("""
        SELECT s.release_id, s.system_id, s.metric, s.metric_version,
               array_replace(s.scores, NULL, '-Infinity'::float8)
        FROM board_current c
        JOIN board_query_scores s USING (release_id, judge_config, board_version)
        WHERE c.release_id = ANY(:r) AND c.judge_config = :j AND s.metric = ANY(:m)
        ORDER BY s.release_id, s.system_id, s.metric"""),
        {"r": list(kept), "j": judge_config, "m": list(metrics)}).all()
    if not rows:
        return pd.DataFrame({c: pd.Series(dtype=float if c == "value" else object) for c in _COLUMNS}), missing
    lengths = np.fromiter((len(r[4]) for r in rows), dtype=np.int64, count=len(rows))
    values = np.fromiter(itertools.chain.from_iterable(r[4] for r in rows), dtype=float, count=int(lengths.sum()))
    present = values != -np.inf
    columns: dict[str, np.ndarray] = {}
    for name, index in (("release_id", 0), ("system_id", 1), ("metric", 2), ("metric_version", 3)):
        per_row = np.empty(len(rows), dtype=object)
        per_row[:] = [r[index] for r in rows]
        columns[name] = np.repeat(per_row, lengths)[present]
    columns["arxiv_id"] = np.concatenate([kept[r[0]] for r in rows])[present]
    columns["value"] = values[present]
    return pd.DataFrame({c: pd.Series(columns[c], dtype=float if c == "value" else object)
                         for c in _COLUMNS}), missing
