"""One key per part of the site (a month's boards, its reports, its export; a system's pages), from everything
the part's bytes depend on, so a build can copy an unchanged part from the previous build instead of
rendering it again. A key changes when the rendering code, a library, a setting or a row the part reads does.

Design notes: docs/MODULE_NOTES.md, `deepscholar.site.content_keys`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import importlib.metadata
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

__all__ = ["PACKAGE", "BOARD_TABLES", "REPORT_TABLES", "EXPORT_TABLES", "Stamps", "code_key", "read_stamps"]

PACKAGE = Path(__file__).resolve().parents[1]  # the deepscholar package: its code and templates
# What a month's parts read, per table: by the table's release_id, by its report's month (`reports`' children)
# or by its query papers' month (`papers`, `paper_licences`).
_BY_RELEASE = ("releases", "release_queries", "exemplar_references", "nuggets", "reports", "board_versions",
               "leaderboard_systems", "leaderboard_metrics", "track_boards", "track_board_metrics", "board_agreement",
               "board_published_figures", "board_queries", "board_query_scores", "month_costs", "judging_estimates",
               "month_judging_spend", "human_agreement_stats")
_BY_REPORT = ("report_sources", "metric_scores", "superseded_metric_scores", "judgments", "superseded_judgments")
_BY_QUERY = ("papers", "paper_licences")
# The board pages: the boards, costs, spend and trust; the category boards read the month's scores and papers.
BOARD_TABLES = ("releases", "release_queries", "reports", *_BY_RELEASE[5:], "metric_scores", "papers")
REPORT_TABLES = ("releases", "release_queries", "reports", *_BY_REPORT)
EXPORT_TABLES = (*_BY_RELEASE, *_BY_REPORT, *_BY_QUERY)
# A system's pages: its months' reports and their headline scores (the rest is its history rows).
SYSTEM_TABLES = ("release_queries", "reports", "metric_scores")


# Settings that differ between the machines of one deployment and shape no page: left out of the key, so a
# build kept in a shared folder is reused whichever Celery worker builds next.
_NOT_SHAPING = frozenset({"worker_hostname"})


def _stamp_sql(table: str) -> str:
    """Per month: the rows' count and the sum of their xmin, which any insert, update or delete changes."""
    stamp = "count(*)::text || '.' || coalesce(sum(t.xmin::text::bigint), 0)::text"
    if table in _BY_REPORT:
        return (f"SELECT r.release_id, {stamp} FROM deepscholar.{table} t "
                "JOIN deepscholar.reports r USING (report_id) GROUP BY 1")
    if table in _BY_QUERY:
        return (f"SELECT q.release_id, {stamp} FROM deepscholar.release_queries q "
                f"JOIN deepscholar.{table} t USING (arxiv_id) GROUP BY 1")
    return f"SELECT t.release_id, {stamp} FROM deepscholar.{table} t GROUP BY 1"


def _digest(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, default=str).encode()).hexdigest()


def code_key(settings: Any) -> str:
    """What renders every page: the package's files (code, templates), the installed libraries' versions and
    the settings; a change in any re-renders every part."""
    h = hashlib.sha256()
    for path in sorted(PACKAGE.rglob("*")):
        if path.is_file() and "__pycache__" not in path.parts:
            h.update(path.relative_to(PACKAGE).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    libraries = sorted(f"{d.metadata['Name']}=={d.version}" for d in importlib.metadata.distributions())
    h.update(json.dumps(libraries).encode())
    shaping = {k: v for k, v in dataclasses.asdict(settings).items() if k not in _NOT_SHAPING}
    h.update(repr(shaping).encode())
    return h.hexdigest()


@dataclass
class Stamps:
    """The warehouse's side of the keys, read once per build."""

    code: str
    tables: dict[str, dict[str, str]] = field(default_factory=dict)  # month -> table -> stamp
    systems: dict[str, str] = field(default_factory=dict)  # system -> its row's xmin
    month_systems: dict[str, set[str]] = field(default_factory=dict)  # month -> systems with reports or rows
    judges: dict[str, str] = field(default_factory=dict)  # judge config -> its row's xmin
    month_judges: dict[str, set[str]] = field(default_factory=dict)  # month -> judge configs with a board
    histories: dict[str, str] = field(default_factory=dict)  # system -> digest of its leaderboard_history rows
    history_months: dict[str, set[str]] = field(default_factory=dict)  # system -> months in its history

    def _month(self, release: str, tables: Iterable[str]) -> dict:
        stamps = self.tables.get(release, {})
        systems = sorted(self.month_systems.get(release, ()))
        return {"tables": {t: stamps.get(t, "0.0") for t in tables},
                "systems": {s: self.systems.get(s) for s in systems}}

    def board(self, release: str, latest_of: Iterable[str] = ()) -> str:
        """A month's board pages and their JSON, every judge's; `latest_of`: the judges whose latest board it
        is (that page links the standard windows, so the month before a new one changes too)."""
        return _digest(["board", self.code, release, self._month(release, BOARD_TABLES), sorted(latest_of)])

    def reports(self, release: str, report_ids: Iterable[int]) -> str:
        """A month's report pages (the reports the site shows)."""
        return _digest(["reports", self.code, release, self._month(release, REPORT_TABLES), sorted(report_ids)])

    def export(self, release: str, exported_by: str) -> str:
        """A month's `deepscholar export` (its datacard names the code version that wrote it)."""
        judges = {j: self.judges.get(j) for j in sorted(self.month_judges.get(release, ()))}
        return _digest(["export", self.code, exported_by, release, self._month(release, EXPORT_TABLES), judges])

    def system(self, system_id: str) -> str:
        """A system's pages: its row, its history rows, and its months' reports and scores."""
        months = {m: self._month(m, SYSTEM_TABLES)["tables"] for m in sorted(self.history_months.get(system_id, ()))}
        return _digest(["system", self.code, system_id, self.systems.get(system_id), self.histories.get(system_id),
                        months])


def read_stamps(engine: Engine, settings: Any) -> Stamps:
    """Every stamp the keys are made of: a statement per table (a scan of each, a few seconds for a year)."""
    stamps = Stamps(code_key(settings))
    with engine.connect() as conn:
        for table in dict.fromkeys((*EXPORT_TABLES, *BOARD_TABLES)):
            for release, stamp in conn.execute(sa.text(_stamp_sql(table))):
                stamps.tables.setdefault(release, {})[table] = stamp
        stamps.systems = dict(conn.execute(sa.text("SELECT system_id, xmin::text FROM deepscholar.systems")).all())
        for release, system in conn.execute(sa.text(
                "SELECT DISTINCT release_id, system_id FROM deepscholar.reports UNION "
                "SELECT DISTINCT release_id, system_id FROM deepscholar.leaderboard_systems")):
            stamps.month_systems.setdefault(release, set()).add(system)
        stamps.judges = dict(conn.execute(sa.text(
            "SELECT judge_config, xmin::text FROM deepscholar.judge_configs")).all())
        for release, judge in conn.execute(sa.text(
                "SELECT DISTINCT release_id, judge_config FROM deepscholar.board_versions")):
            stamps.month_judges.setdefault(release, set()).add(judge)
        rows: dict[str, list[dict]] = {}
        for row in conn.execute(sa.text("SELECT * FROM deepscholar.leaderboard_history "
                                        "ORDER BY system_id, judge_config, release_id")).mappings():
            rows.setdefault(row["system_id"], []).append(dict(row))
            stamps.history_months.setdefault(row["system_id"], set()).add(row["release_id"])
    stamps.histories = {system: _digest(found) for system, found in rows.items()}
    return stamps
