"""When a page is fresh: what each page reads, and the stamp its ETag is computed from.

Design notes: docs/MODULE_NOTES.md, `deepscholar.web.freshness`.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from dataclasses import dataclass, field

import sqlalchemy as sa

__all__ = ["Source", "Page", "SOURCES", "PAGES", "PageStamps", "Uncovered", "base_tables", "STAMP_MARK", "BOARDS",
           "REPORT_ROWS", "SYSTEM_ROW"]

STAMP_MARK = "/* page stamp */"  # starts every stamp statement (tests and pg_stat_statements tell it apart)


class Uncovered(RuntimeError):
    """A page reads a base table that no source covers: its 304s could not tell that table changed."""


@dataclass(frozen=True)
class Source:
    """How writes to some base tables show: a scalar SQL expression that any write to them changes. A page's
    row source reads its own rows only, named by the parameter :key (a report id, a system id)."""

    covers: frozenset[str]
    sql: str


def _small_table(table: str) -> str:
    """Rows and the sum of their xmin (which any insert, update or delete changes), for a table of a few
    hundred rows."""
    return f"(SELECT count(*) || '.' || coalesce(sum(xmin::text::bigint), 0) FROM {table})"


def _rows_of_report(table: str) -> str:
    """One report's rows of a child table: their count (a delete) and newest xmin (an insert, an update)."""
    return (f"(SELECT count(*) || '.' || coalesce(max(xmin::text::bigint), 0) FROM deepscholar.{table} "
            "WHERE report_id = rp.report_id)")


# A roll-up writes a board's tables only with a new or refreshed board version (rollup.roll_up).
BOARDS = Source(frozenset({"board_versions", "leaderboard_systems", "leaderboard_metrics", "track_boards",
                           "track_board_metrics", "board_agreement"}), """(SELECT count(*) || '.' || coalesce(
    max(greatest(created_at, computed_at, coalesce(published_at, created_at)))::text, '') FROM board_versions)""")

SOURCES: tuple[Source, ...] = (
    BOARDS,
    # Judge-vs-humans, a row per month, judge and labelled metric: a hand-edited entry shows too (xmin).
    Source(frozenset({"human_agreement_stats"}), _small_table("human_agreement_stats")),
    # A version rolled up before its published figures were kept gains them at its next roll-up.
    Source(frozenset({"board_published_figures"}),
           "(SELECT count(*) || '.' || coalesce(max(computed_at)::text, '') FROM board_published_figures)"),
    Source(frozenset({"judging_estimates"}),
           "(SELECT count(*) || '.' || coalesce(max(estimated_at)::text, '') FROM judging_estimates)"),
    # Rewritten by every roll-up, also one that leaves the board unchanged (costs.store_month_spend).
    Source(frozenset({"month_costs"}), _small_table("month_costs")),
    Source(frozenset({"month_judging_spend"}), _small_table("month_judging_spend")),
    Source(frozenset({"releases"}), _small_table("releases")),
    Source(frozenset({"systems"}), _small_table("systems")),
)

# A report's page: its row, its query's and system's (xmin), and per child table its rows' count and newest
# xmin. The superseded tables change only in the statements that rewrite the same report's current rows
# (judging's store_results, a report's new content), so the current tables' figures cover them.
REPORT_ROWS = Source(frozenset({"reports", "release_queries", "systems", "report_sources", "metric_scores",
                                "judgments", "superseded_metric_scores", "superseded_judgments"}), f"""(
    SELECT concat_ws('/', rp.xmin, q.xmin, s.xmin, {_rows_of_report('report_sources')},
                     {_rows_of_report('metric_scores')}, {_rows_of_report('judgments')})
    FROM deepscholar.reports rp
    LEFT JOIN deepscholar.release_queries q ON q.release_id = rp.release_id AND q.arxiv_id = rp.arxiv_id
    LEFT JOIN deepscholar.systems s ON s.system_id = rp.system_id
    WHERE rp.report_id = :key)""")
# A system's page: its registration (a re-registration, a new version, deactivation change its xmin).
SYSTEM_ROW = Source(frozenset({"systems"}), "(SELECT xmin::text FROM deepscholar.systems WHERE system_id = :key)")


@dataclass(frozen=True)
class Page:
    """What one page (or API answer) reads: `reads`, the tables and views its statements name; `as_of_rollup`,
    base tables it shows as the last roll-up left them (a change shows with the next board version); `row`:
    the source of its own rows (a report's page, a system's), read with the page's key."""

    reads: frozenset[str]
    as_of_rollup: frozenset[str] = field(default_factory=frozenset)
    row: Source | None = None


_BOARD = frozenset({
    "leaderboard_releases", "leaderboard_board_versions", "leaderboard_versions", "leaderboard",
    "leaderboard_metrics", "month_costs", "judging_estimates", "month_judging_spend", "track_boards",
    "track_board_metrics", "board_published_figures", "systems", "board_agreement"})
# Window and category boards: computed from the months' per-query scores kept with their board versions (a
# month rolled up before they were kept: its live scores), queries and reports, as of the months' roll-ups.
_POOLED = frozenset({"board_current", "board_queries", "board_query_scores", "metric_scores", "reports",
                     "release_queries", "papers"})

PAGES: dict[str, Page] = {
    "board": Page(_BOARD | {"human_agreement_stats"} | _POOLED, as_of_rollup=_POOLED - {"board_current"}),
    "history": Page(frozenset({"leaderboard_history"})),
    "versions": Page(frozenset({"leaderboard_board_versions"})),
    # A system's months and its reports' scores as of the roll-up, like the board they link from.
    "system": Page(frozenset({"systems", "leaderboard_history", "reports", "release_queries", "metric_scores"}),
                   as_of_rollup=frozenset({"reports", "release_queries", "metric_scores"}), row=SYSTEM_ROW),
    "report": Page(frozenset({"reports", "release_queries", "systems", "report_sources", "metric_score_versions",
                              "judgment_versions"}), row=REPORT_ROWS),
    "api-board": Page(_BOARD),
    "api-window": Page(_BOARD | _POOLED, as_of_rollup=_POOLED - {"board_current"}),
    "api-history": Page(frozenset({"leaderboard_history"})),
    "api-versions": Page(frozenset({"leaderboard_board_versions"})),
}

# Each named relation with the base tables it reads: itself for a table, a view's (at any depth) for a view.
_BASE_TABLES_SQL = """
    WITH RECURSIVE reads (name, oid) AS (
        SELECT c.relname::text, c.oid FROM pg_class c
        WHERE c.relnamespace = to_regnamespace('deepscholar') AND c.relname = ANY(CAST(:names AS text[]))
        UNION
        SELECT r.name, d.refobjid FROM reads r
        JOIN pg_rewrite w ON w.ev_class = r.oid
        JOIN pg_depend d ON d.classid = 'pg_rewrite'::regclass AND d.objid = w.oid
                        AND d.refclassid = 'pg_class'::regclass AND d.refobjid <> r.oid)
    SELECT r.name, c.relname::text FROM reads r JOIN pg_class c ON c.oid = r.oid WHERE c.relkind IN ('r', 'p')"""


def base_tables(conn: sa.Connection, names: Iterable[str]) -> dict[str, set[str]]:
    """{relation: the base tables it reads} for the named tables and views that exist."""
    out: dict[str, set[str]] = {}
    for name, table in conn.execute(sa.text(_BASE_TABLES_SQL), {"names": sorted(set(names))}):
        out.setdefault(name, set()).add(table)
    return out


def _stamp_sql(name: str, page: Page, tables: set[str]) -> str:
    """The page's stamp statement: every source its base tables need, in SOURCES' order."""
    needed: list[Source] = [BOARDS] if page.as_of_rollup else []
    for table in sorted(tables - page.as_of_rollup):
        source = page.row if page.row is not None and table in page.row.covers else next(
            (s for s in SOURCES if table in s.covers), None)
        if source is None:
            raise Uncovered(f"the {name!r} page reads {table}, which no source in web/freshness.py covers: add a "
                            "Source saying how its writes show, or name it in the page's as_of_rollup")
        if source not in needed:
            needed.append(source)
    parts = [s.sql for s in sorted(needed, key=lambda s: SOURCES.index(s) if s in SOURCES else len(SOURCES))]
    return f"{STAMP_MARK} SELECT concat_ws('/', {', '.join(parts)})"


class PageStamps:
    """Each page's stamp statement, made from PAGES and SOURCES and the warehouse's views at the first
    request (kept while every named relation exists; a warehouse not initialised yet is asked again). A
    page with an uncovered table is refused at each of its requests; the other pages are served."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._statements: dict[str, sa.TextClause | str] | None = None

    def _made(self, conn: sa.Connection) -> dict[str, sa.TextClause | str]:
        """{page: its stamp statement, or why it has none}."""
        with self._lock:
            if self._statements is not None:
                return self._statements
            named = {r for page in PAGES.values() for r in page.reads}
            resolved = base_tables(conn, named)
            statements: dict[str, sa.TextClause | str] = {}
            for name, page in PAGES.items():
                try:
                    tables = set().union(*(resolved.get(r, {r}) for r in page.reads))
                    statements[name] = sa.text(_stamp_sql(name, page, tables))
                except Uncovered as exc:
                    statements[name] = str(exc)
            if named <= resolved.keys():
                self._statements = statements
            return statements

    def stamp(self, conn: sa.Connection, page: str, key: object = None) -> str:
        """The page's stamp as it stands: one statement (`key`: the page's own row, for a row page)."""
        statement = self._made(conn)[page]
        if isinstance(statement, str):
            raise Uncovered(statement)
        params = {"key": key} if PAGES[page].row is not None else {}
        return conn.execute(statement, params).scalar() or "-"
