"""The wide leaderboard views, one column per metric, generated from a list of metric names.

Design notes: docs/MODULE_NOTES.md, `deepscholar.migrations.wide_views`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence

import sqlalchemy as sa

from deepscholar.migrations import SCHEMA

__all__ = ["WIDE_VIEWS", "current_releases_sql", "CORE_SEVEN", "run_sql_around_views",
           "wide_view_sql", "wide_view_columns", "sync_wide_views", "TRACK_VIEW_PREFIX",
           "track_view_sql", "sync_track_views", "drop_generated_views", "query_views_sql", "sync_query_views",
           "refresh_query_views"]

WIDE_VIEWS = ("leaderboard_versions", "leaderboard", "leaderboard_latest", "leaderboard_history")  # creation order
_NAME_RE = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_LOCK_KEY = "deepscholar_wide_views"

_LEAD = ("release_id", "system_id", "judge_config", "local_judge", "n_queries", "n_reports", "n_failed")
# Numbers of the offline local judge say so in every view (the page and the CLI say it too).
# (No LIKE: the statements go through exec_driver_sql, where a percent sign is a parameter marker.)
_LOCAL = "({alias}.judge_config = 'local' OR starts_with({alias}.judge_config, 'local:'))"
_TAIL = ("geometric_mean", "geometric_mean_ci_low", "geometric_mean_ci_high", "rank", "metric_versions",
         "computed_at", "board_version")
# The version of each (release, judge) board that readers see.
_CURRENT = f"JOIN {SCHEMA}.board_current c USING (release_id, judge_config, board_version)"
# Columns of a board row that later revisions add; a view carries those its base table has, so the SQL
# generated here fits every revision from 0017 on (a revision's upgrade runs today's code).
EXTRA = ("contamination", "knowledge_cutoff")


def board_extras(conn: sa.Connection, table: str = "leaderboard_systems") -> tuple[str, ...]:
    """The EXTRA columns `table` has, in EXTRA's order."""
    present = set(conn.execute(sa.text(
        "SELECT column_name FROM information_schema.columns WHERE table_schema = :s AND table_name = :t"),
        {"s": SCHEMA, "t": table}).scalars())
    return tuple(c for c in EXTRA if c in present)


def _checked(names: Sequence[str]) -> list[str]:
    bad = [n for n in names if not _NAME_RE.match(n)]
    if bad or len(set(names)) != len(names):
        raise ValueError(f"metric names must be distinct lower_snake_case identifiers: {list(names)}")
    return list(names)


def wide_view_columns(names: Sequence[str], extras: Sequence[str] = EXTRA) -> list[str]:
    """The `leaderboard` view's columns for these metrics, in order."""
    return [*_LEAD, *_checked(names), *_TAIL, *extras]


def wide_view_sql(names: Sequence[str], extras: Sequence[str] = EXTRA) -> list[str]:
    """CREATE VIEW statements for the wide views, in creation order."""
    names = _checked(names)
    means = "".join(f",\n       max(m.mean) FILTER (WHERE m.metric = '{n}') AS {n}" for n in names)
    picked = "".join(f", l.{n}" for n in names)
    more_s = "".join(f", s.{c}" for c in extras)
    more_l = "".join(f", l.{c}" for c in extras)
    return [
        # Every version of every board.
        f"""CREATE VIEW {SCHEMA}.leaderboard_versions AS
SELECT s.release_id, s.system_id, s.judge_config, {_LOCAL.format(alias="s")} AS local_judge, s.n_queries,
       s.n_reports, s.n_failed{means},
       s.geometric_mean, s.geometric_mean_ci_low, s.geometric_mean_ci_high, s.rank, s.metric_versions,
       s.computed_at, s.board_version{more_s}
FROM {SCHEMA}.leaderboard_systems s
LEFT JOIN {SCHEMA}.leaderboard_metrics m
  ON m.release_id = s.release_id AND m.system_id = s.system_id AND m.judge_config = s.judge_config
 AND m.board_version = s.board_version
GROUP BY s.release_id, s.judge_config, s.board_version, s.system_id""",
        # The version readers see.
        f"""CREATE VIEW {SCHEMA}.leaderboard AS
SELECT v.* FROM {SCHEMA}.leaderboard_versions v
{_CURRENT}""",
        # Per judge_config, the rows of the latest release that has a leaderboard under it (of a month with
        # several release versions, the newest version with a board).
        f"""CREATE VIEW {SCHEMA}.leaderboard_latest AS
WITH latest AS (
    SELECT DISTINCT ON (lr.judge_config) lr.judge_config, lr.release_id, lr.month
    FROM {SCHEMA}.leaderboard_releases lr
    JOIN {SCHEMA}.releases r ON r.release_id = lr.release_id
    ORDER BY lr.judge_config, lr.month DESC, r.base_id DESC, r.version DESC
)
SELECT l.release_id, latest.month, l.system_id, l.judge_config, l.local_judge, l.n_queries, l.n_reports,
       l.n_failed{picked},
       l.geometric_mean, l.geometric_mean_ci_low, l.geometric_mean_ci_high, l.rank, l.metric_versions,
       l.computed_at, l.board_version{more_l}
FROM {SCHEMA}.leaderboard l
JOIN latest ON latest.judge_config = l.judge_config AND latest.release_id = l.release_id""",
        # One row per month x system x judge_config, for trends across releases: of a month corrected by a new
        # release version, the newest version that has a board under that judge.
        f"""CREATE VIEW {SCHEMA}.leaderboard_history AS
SELECT l.release_id, lr.month, l.system_id, l.judge_config, l.local_judge{picked},
       l.geometric_mean, l.rank, l.n_reports, l.board_version{more_l}
FROM {SCHEMA}.leaderboard l
JOIN {SCHEMA}.leaderboard_releases lr ON lr.release_id = l.release_id AND lr.judge_config = l.judge_config
JOIN {SCHEMA}.releases rel ON rel.release_id = l.release_id
WHERE NOT EXISTS (
    SELECT 1 FROM {SCHEMA}.leaderboard_releases newer
    JOIN {SCHEMA}.releases nr ON nr.release_id = newer.release_id
    WHERE newer.judge_config = l.judge_config AND nr.base_id = rel.base_id AND nr.version > rel.version)""",
    ]


def _current_columns(conn: sa.Connection) -> list[str]:
    return list(conn.execute(sa.text("""
        SELECT column_name FROM information_schema.columns
        WHERE table_schema = :s AND table_name = 'leaderboard' ORDER BY ordinal_position"""),
        {"s": SCHEMA}).scalars())


def sync_wide_views(conn: sa.Connection, names: Sequence[str]) -> bool:
    """Make the wide views have one column per name (in order); True when they had to be re-created.

    Runs in the caller's transaction (a failure leaves the old views). A view of the operator's own built
    on ours makes the DROP fail with PostgreSQL's message naming it: ours are never dropped with CASCADE.
    """
    extras = board_extras(conn)
    statements = wide_view_sql(names, extras)
    # The views' definition, not only their columns: a changed definition (e.g. the history's rule for a
    # month with several release versions) re-creates them too. Kept as the `leaderboard` view's comment.
    signature = "definition " + hashlib.sha256("\n".join(statements).encode()).hexdigest()[:16]

    def current() -> tuple[list[str], str | None]:
        return _current_columns(conn), conn.execute(sa.text(
            "SELECT obj_description(to_regclass(:v), 'pg_class')"), {"v": f"{SCHEMA}.leaderboard"}).scalar()

    wanted = (wide_view_columns(names, extras), signature)
    if current() == wanted:
        return False
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": _LOCK_KEY})
    if current() == wanted:  # another process did it while we waited
        return False
    for view in reversed(WIDE_VIEWS):
        conn.exec_driver_sql(f"DROP VIEW IF EXISTS {SCHEMA}.{view}")
    for statement in statements:
        conn.exec_driver_sql(statement)
    conn.exec_driver_sql(f"COMMENT ON VIEW {SCHEMA}.leaderboard IS '{signature}'")
    return True


# ------------------------------------------------------------------------------------ the tracks' views

TRACK_VIEW_PREFIX = "leaderboard_track_"  # leaderboard_track_<track>: one per track with metrics
_TRACK_LEAD = ("release_id", "judge_config", "local_judge", "system_id", "rank", "ranking_metric", "n_queries",
               "n_reports", "n_failed")
_TRACK_TAIL = ("metric_versions", "computed_at", "board_version")


def track_view_columns(names: Sequence[str], extras: Sequence[str] = EXTRA) -> list[str]:
    return [*_TRACK_LEAD, *_checked(names), *_TRACK_TAIL, *extras]


def track_view_sql(track: str, names: Sequence[str], extras: Sequence[str] = EXTRA) -> str:
    """CREATE VIEW leaderboard_track_<track>: the track's board (the version readers see), one column per
    metric mean."""
    (track,) = _checked([track])
    names = _checked(names)
    means = "".join(f",\n       max(m.mean) FILTER (WHERE m.metric = '{n}') AS {n}" for n in names)
    return f"""CREATE VIEW {SCHEMA}.{TRACK_VIEW_PREFIX}{track} AS
SELECT b.release_id, b.judge_config, {_LOCAL.format(alias="b")} AS local_judge, b.system_id, b.rank,
       b.ranking_metric, b.n_queries, b.n_reports, b.n_failed{means},
       b.metric_versions, b.computed_at, b.board_version{"".join(f", b.{c}" for c in extras)}
FROM {SCHEMA}.track_boards b
{_CURRENT}
LEFT JOIN {SCHEMA}.track_board_metrics m USING (release_id, judge_config, board_version, family, system_id)
WHERE b.family = '{track}'
GROUP BY b.release_id, b.judge_config, b.board_version, b.family, b.system_id"""


def _track_views(conn: sa.Connection) -> dict[str, list[str]]:
    """{view name: its columns} of the track views that exist."""
    found: dict[str, list[str]] = {}
    for name, column in conn.execute(sa.text("""
            SELECT table_name, column_name FROM information_schema.columns
            WHERE table_schema = :s AND table_name LIKE :p ORDER BY table_name, ordinal_position"""),
            {"s": SCHEMA, "p": TRACK_VIEW_PREFIX.replace("_", "\\_") + "%"}):
        found.setdefault(name, []).append(column)
    return found


def drop_generated_views(conn: sa.Connection) -> tuple[list[str] | None, dict[str, list[str]]]:
    """Drop every generated view (never with CASCADE), returning the metric columns they had: (the core's,
    or None when there was no `leaderboard` view; {track: its metrics}). For a migration that must change
    what they are built on and then re-create them with the same columns."""
    core_columns = _current_columns(conn)
    core = [c for c in core_columns if c not in (*_LEAD, *_TAIL, *EXTRA)] if core_columns else None
    tracks = {view.removeprefix(TRACK_VIEW_PREFIX): [c for c in columns
                                                     if c not in (*_TRACK_LEAD, *_TRACK_TAIL, *EXTRA)]
              for view, columns in _track_views(conn).items()}
    for view in (*reversed(WIDE_VIEWS), *(f"{TRACK_VIEW_PREFIX}{t}" for t in tracks)):
        conn.exec_driver_sql(f"DROP VIEW IF EXISTS {SCHEMA}.{view}")
    return core, tracks


# The metrics a warehouse without wide views gets them for; the roll-up re-creates them from the registry.
CORE_SEVEN = ("organization", "nugget_coverage", "relevance_rate", "reference_coverage", "document_importance",
              "citation_precision", "claim_coverage")


def run_sql_around_views(revision: str) -> None:
    """A revision's SQL run with the generated views out of the way: they select from the tables it alters,
    so they are dropped first and re-created after with the metric columns they had (the core seven when
    there were none), over the altered tables (a migration's upgrade())."""
    from alembic import op

    from deepscholar.migrations import run_sql

    conn = op.get_bind()
    core, tracks = drop_generated_views(conn)
    run_sql(revision)
    sync_wide_views(conn, core or CORE_SEVEN)
    sync_track_views(conn, tracks)


def sync_track_views(conn: sa.Connection, tracks: Mapping[str, Sequence[str]]) -> bool:
    """Make leaderboard_track_<track> exist, with one column per metric, for exactly these tracks (views of
    tracks no longer given are dropped, never with CASCADE); True when anything had to change."""
    extras = board_extras(conn, "track_boards")
    wanted = {f"{TRACK_VIEW_PREFIX}{t}": track_view_columns(names, extras) for t, names in tracks.items()}
    if _track_views(conn) == wanted:
        return False
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": _LOCK_KEY})
    current = _track_views(conn)
    if current == wanted:
        return False
    for view, columns in current.items():
        if wanted.get(view) != columns:
            conn.exec_driver_sql(f"DROP VIEW IF EXISTS {SCHEMA}.{view}")
    for track, names in tracks.items():
        if current.get(f"{TRACK_VIEW_PREFIX}{track}") != wanted[f"{TRACK_VIEW_PREFIX}{track}"]:
            conn.exec_driver_sql(track_view_sql(track, names, extras))
    return True


# ------------------------------------------------------------------- per-query scores, windows, categories

QUERY_SCORES_VIEW = "leaderboard_query_scores"
CATEGORY_VIEW = "leaderboard_categories"
WINDOW_FUNCTION = "leaderboard_window"
# The views' shape: bumped when their SQL changes, so a warehouse's views are re-created by the next sync
# (a roll-up) or by the migration that changed them (refresh_query_views). 2: scores read per report.
_QUERY_VIEWS_SHAPE = 2
_SIGNATURE_PREFIX = f"shape {_QUERY_VIEWS_SHAPE}; headline variants: "
_HEADLINES_MARK = "headline variants: "


def current_releases_sql(schema: str = "") -> str:
    """The version readers count of every month (its latest published one), with the month it covers: one
    SELECT shared by the pooled boards, the backfill plan and the per-query view, so they never disagree.
    `schema` qualifies the table for SQL that runs without the warehouse's search_path (generated views)."""
    prefix = f"{schema}." if schema else ""
    return f"""SELECT DISTINCT ON (r.base_id) r.release_id, r.base_id,
           date_trunc('month', coalesce(
               (r.window_start AT TIME ZONE 'UTC')::date,
               CASE WHEN r.base_id ~ '^[0-9]{{4}}-(0[1-9]|1[0-2])$' THEN to_date(r.base_id, 'YYYY-MM') END))::date
               AS month
    FROM {prefix}releases r
    WHERE r.status = 'published'
    ORDER BY r.base_id, r.version DESC"""


def query_views_sql(headlines: Sequence[tuple[str, str, str]]) -> list[str]:
    """The per-query scores of every month's current version (one row per query, system, judge and metric,
    its headline variant), the per-category means, and a function pooling any window of months.

    `headlines`: (metric, family, headline variant) of every registered metric. Scores are read per report
    (a LATERAL subquery on metric_scores' primary key, OFFSET 0 so the planner keeps it), so one month's read
    costs that month's rows: joined plainly, the planner scanned every month's scores for one month once the
    month was under a tenth of the table (565 ms at twelve months, growing with each)."""
    for metric, family, variant in headlines:
        _checked([metric, family])
        if not re.fullmatch(r"[a-z0-9_]+", variant):
            raise ValueError(f"bad headline variant {variant!r} of {metric}")
    values = ", ".join(f"('{m}', '{f}', '{v}')" for m, f, v in headlines) or "(NULL, NULL, NULL)"
    signature = _SIGNATURE_PREFIX + ",".join(f"{m}:{f}:{v}" for m, f, v in headlines)
    return [
        f"""CREATE VIEW {SCHEMA}.{QUERY_SCORES_VIEW} AS
WITH current AS ({current_releases_sql(SCHEMA)})
SELECT c.release_id, c.month, q.arxiv_id, q.published, p.primary_category, r.system_id, m.judge_config,
       h.family, m.metric, m.variant, m.value, m.unscored_reason IS NOT NULL AS unscored, m.metric_version
FROM current c
JOIN {SCHEMA}.release_queries q ON q.release_id = c.release_id
LEFT JOIN {SCHEMA}.papers p ON p.arxiv_id = q.arxiv_id AND p.version = q.version
JOIN {SCHEMA}.reports r ON r.release_id = q.release_id AND r.arxiv_id = q.arxiv_id AND r.status = 'ok'
CROSS JOIN LATERAL (SELECT s.judge_config, s.metric, s.variant, s.value, s.unscored_reason, s.metric_version
                    FROM {SCHEMA}.metric_scores s WHERE s.report_id = r.report_id OFFSET 0) m
JOIN (VALUES {values}) AS h (metric, family, variant) ON h.metric = m.metric AND h.variant = m.variant""",
        f"COMMENT ON VIEW {SCHEMA}.{QUERY_SCORES_VIEW} IS '{signature}'",
        # Per month, primary category, judge and system: each metric's mean over the category's queries.
        f"""CREATE VIEW {SCHEMA}.{CATEGORY_VIEW} AS
SELECT release_id, month, judge_config, primary_category, family, system_id, metric,
       avg(value) AS mean, count(value)::integer AS n, (count(*) FILTER (WHERE unscored))::integer AS n_unscored
FROM {SCHEMA}.{QUERY_SCORES_VIEW}
GROUP BY release_id, month, judge_config, primary_category, family, system_id, metric""",
        # Any window of months, pooled over its queries (means only; `deepscholar leaderboard --from --to` adds
        # the bootstrap intervals, the paired test and the ranks).
        f"""CREATE OR REPLACE FUNCTION {SCHEMA}.{WINDOW_FUNCTION}(p_from date, p_to date, p_judge text)
RETURNS TABLE (family text, system_id text, metric text, mean double precision, n integer, n_unscored integer,
               n_months integer)
LANGUAGE sql STABLE AS $fn$
SELECT s.family, s.system_id, s.metric, avg(s.value), count(s.value)::integer,
       (count(*) FILTER (WHERE s.unscored))::integer, count(DISTINCT s.month)::integer
FROM {SCHEMA}.{QUERY_SCORES_VIEW} s
WHERE s.month >= date_trunc('month', p_from) AND s.month <= p_to AND s.judge_config = p_judge
GROUP BY s.family, s.system_id, s.metric
$fn$""",
    ]


def refresh_query_views(conn: sa.Connection) -> bool:
    """Re-create the per-query views in today's shape for the headline variants they were made for (read from
    their comment); nothing when there are none yet (the first roll-up makes them). A migration's step."""
    comment = conn.execute(sa.text("SELECT obj_description(to_regclass(:v), 'pg_class')"),
                           {"v": f"{SCHEMA}.{QUERY_SCORES_VIEW}"}).scalar()
    if comment is None or _HEADLINES_MARK not in comment:
        return False
    listed = comment.split(_HEADLINES_MARK, 1)[1]
    headlines = [tuple(item.split(":")) for item in listed.split(",") if item]
    if any(len(h) != 3 for h in headlines):
        raise ValueError(f"{QUERY_SCORES_VIEW}'s comment does not list metric:family:variant items: {comment!r}")
    return sync_query_views(conn, headlines)


def sync_query_views(conn: sa.Connection, headlines: Sequence[tuple[str, str, str]]) -> bool:
    """Make the per-query views match these headline variants; True when they had to be re-created."""
    signature = _SIGNATURE_PREFIX + ",".join(f"{m}:{f}:{v}" for m, f, v in headlines)

    def current() -> str | None:
        return conn.execute(sa.text("SELECT obj_description(to_regclass(:v), 'pg_class')"),
                            {"v": f"{SCHEMA}.{QUERY_SCORES_VIEW}"}).scalar()

    if current() == signature:
        return False
    conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": _LOCK_KEY})
    if current() == signature:
        return False
    conn.exec_driver_sql(f"DROP VIEW IF EXISTS {SCHEMA}.{CATEGORY_VIEW}")
    conn.exec_driver_sql(f"DROP VIEW IF EXISTS {SCHEMA}.{QUERY_SCORES_VIEW}")
    for statement in query_views_sql(headlines):
        conn.exec_driver_sql(statement)
    return True
