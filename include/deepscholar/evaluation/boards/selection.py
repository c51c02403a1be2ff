"""Which queries a pooled board is over (evaluation/boards/pooled.py): a window of published months, one arXiv
primary category, the queries published after a date. Apart from the computation so that a reader can name a
selection, and find its kept board (evaluation/boards/pooled_store.py), without importing pandas and the
roll-up's numerics."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import InvalidInput, NotFound
from deepscholar.migrations.wide_views import current_releases_sql
from deepscholar.release.window import MONTH_RE

__all__ = ["Selection", "STANDARD_WINDOWS", "standard_windows", "current_releases", "window_judge"]

# The version of every month readers count: the latest published one (release_changelog keeps the rest).
_CURRENT_SQL = current_releases_sql()
# The windows every board offers beside its own month (the page's links, the static site's pages): the last
# 3, 6 and 12 calendar months up to the judge's latest board, and all its months.
STANDARD_WINDOWS: tuple[tuple[str, int | None], ...] = (
    ("Last 3 months", 3), ("Last 6 months", 6), ("Last 12 months", 12), ("All months", None))


@dataclass(frozen=True)
class Selection:
    """Which queries a pooled board is over."""

    releases: tuple[str, ...]
    label: str
    category: str | None = None
    published_after: date | None = None

    def describe(self) -> str:
        parts = [self.label]
        if self.category:
            parts.append(f"category {self.category}")
        if self.published_after:
            parts.append(f"queries published after {self.published_after.isoformat()}")
        return " · ".join(parts)


def _month(text: str, what: str) -> date:
    if not isinstance(text, str) or not MONTH_RE.fullmatch(text) or not 1 <= int(text[5:7]) <= 12:
        raise InvalidInput(f"{what} must be a month YYYY-MM, got {text!r}")
    return date(int(text[:4]), int(text[5:7]), 1)


def standard_windows(months: Sequence[str]) -> list[tuple[str, str, str]]:
    """(label, from, to) of each standard window over `months` (YYYY-MM with a board, oldest first) that pools
    two of them or more: `to` the latest, `from` the first month inside the window, so two windows covering the
    same months are one (the shorter's label)."""
    if not months:
        return []
    last = months[-1]
    latest = int(last[:4]) * 12 + int(last[5:7]) - 1
    out: list[tuple[str, str, str]] = []
    for label, span in STANDARD_WINDOWS:
        first = 0 if span is None else latest - span + 1
        inside = [m for m in months if int(m[:4]) * 12 + int(m[5:7]) - 1 >= first]
        if len(inside) >= 2 and all(inside[0] != start for _, start, _ in out):
            out.append((label, inside[0], last))
    return out


def current_releases(engine: Engine, from_month: str | None = None, to_month: str | None = None) -> Selection:
    """The current version of every published month in [from_month, to_month] (either open)."""
    low = _month(from_month, "--from") if from_month else date.min
    high = _month(to_month, "--to") if to_month else date.max
    if low > high:
        raise InvalidInput(f"--from {from_month} is after --to {to_month}")
    with engine.connect() as conn:
        months = [(r.release_id, r.month) for r in conn.execute(sa.text(_CURRENT_SQL))
                  if r.month is not None and low <= r.month <= high]
    if not months:
        raise NotFound(f"no published month between {from_month or 'the first'} and {to_month or 'the last'}; "
                       "`deepscholar release list` lists them")
    months.sort(key=lambda m: m[1])
    first, last = months[0][1].strftime("%Y-%m"), months[-1][1].strftime("%Y-%m")
    label = first if first == last else f"{first}..{last}"
    return Selection(tuple(r for r, _ in months), label)


def window_judge(engine: Engine, releases: Sequence[str]) -> str:
    """The judge config with boards on most of these releases (then the most systems): the default."""
    with engine.connect() as conn:
        picked = conn.execute(sa.text("""
            SELECT judge_config FROM leaderboard_releases WHERE release_id = ANY(:r)
            GROUP BY judge_config ORDER BY count(*) DESC, sum(n_systems) DESC, judge_config LIMIT 1"""),
            {"r": list(releases)}).scalar()
    if picked is None:
        raise NotFound(f"no leaderboard for any of {', '.join(releases)} yet: run `deepscholar evaluate` first")
    return picked
