"""Slicing a step's work into shards: which slice a row belongs to, and running every slice at once."""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

from deepscholar.settings import Settings, current_settings

if TYPE_CHECKING:
    from deepscholar.release.context import ReleaseContext

__all__ = ["DEFAULT_RELEASE_SHARDS", "Shard", "in_shard", "release_shards", "run_sharded", "shard_label", "shard_of"]

Shard = tuple[int, int]  # (k, n): the k-th of n slices of a step's work, k from 0
DEFAULT_RELEASE_SHARDS = Settings.release_shards


def release_shards(settings: Settings | None = None) -> int:
    """How many slices extraction and resolution run as (DEEPSCHOLAR_RELEASE_SHARDS; default: this
    process's settings)."""
    return (settings or current_settings()).release_shards


def shard_of(row: dict, n: int) -> int:
    """A candidate's or reference's slice, stable however much of the month is already done: by sample
    rank (consecutive ranks in different slices, so slices advance through the sample side by side),
    else by a hash of the paper's arXiv id."""
    rank = row.get("sample_rank")
    return (rank if rank is not None else zlib.crc32(row["arxiv_id"].encode())) % n


def shard_label(shard: Shard | None) -> str:
    """How logs and the UI name a slice: "slice 2 of 4" ("" for the whole month)."""
    return f"slice {shard[0] + 1} of {shard[1]}" if shard else ""


def in_shard(rows: list[dict], shard: Shard | None) -> list[dict]:
    """The rows of slice k of n, in their order (None: all of them)."""
    if shard is None:
        return rows
    k, n = shard
    if not 0 <= k < n:
        raise ValueError(f"shard {k} of {n} does not exist")
    return [row for row in rows if shard_of(row, n) == k]


def run_sharded(ctx: ReleaseContext, step, **kwargs) -> None:
    """Run a sharded step's slices at once in threads, as the DAG's mapped tasks run in processes; the
    first failure is raised once every slice has stopped (each keeps what it stored)."""
    from concurrent.futures import ThreadPoolExecutor

    n = release_shards(ctx.settings)
    if n == 1:
        step(ctx, **kwargs)
        return
    with ThreadPoolExecutor(n, thread_name_prefix=step.__name__) as pool:
        futures = [pool.submit(step, ctx, (k, n), **kwargs) for k in range(n)]
    for future in futures:
        future.result()
