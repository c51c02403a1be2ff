"""What the leaderboard page reads from the warehouse, and the JSON the API serves of it.

Only reads of what the roll-up and the label import stored (leaderboard, leaderboard_metrics, reports,
judgments, human_agreement_stats; schema in deepscholar/migrations/versions/); no metric is computed here.
Which board is "the latest" is decided by `deepscholar.evaluation.boards.leaderboard.pick_board`, the function
`deepscholar leaderboard` uses too. What each page reads is declared in web/freshness.py (its ETag's stamp).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from deepscholar import errors
from deepscholar.evaluation.boards.leaderboard import pick_board
from deepscholar.evaluation.metrics import registry

__all__ = ["Board", "TrackBoard", "NotFound", "load_board", "board_versions_of", "load_track_boards", "load_agreement_rows", "trust_rows", "board_json",
           "tracks_json", "metric_mean", "finite", "json_value", "pick",
           "history_rows", "history_judge_configs", "system_info", "system_page_data", "system_reports", "report_detail", "report_details",
           "pooled_page_board", "pooled_board_json", "category_page_boards", "board_months", "board_with_tracks", "existing_board_versions"]


class NotFound(errors.NotFound):
    """What the request names is not stored (a 404 for the page and the API)."""


def _rows(conn: sa.Connection, sql: str, **params: Any) -> list[dict]:
    return [dict(r) for r in conn.execute(sa.text(sql), params).mappings()]


def finite(value: Any) -> float | None:
    """A float that can be shown or served as JSON; None for missing, non-numeric, NaN and infinities."""
    if value is None:
        return None
    try:
        f = float(value)
    except (TypeError, ValueError):
        return None
    return f if math.isfinite(f) else None


def json_value(value: Any) -> Any:
    if isinstance(value, float):
        return finite(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return value


def pick(options: Sequence[str], wanted: str | None) -> str | None:
    """The requested option when it exists, else the first (sorted) one; None when there are none."""
    if wanted is not None:
        return wanted if wanted in options else None
    return options[0] if options else None


# --- the board -----------------------------------------------------------------------------------------

@dataclass
class Board:
    """One leaderboard: a release, a judge config and its rows with their per-metric cells."""

    release_id: str | None
    judge_config: str | None
    judge_configs: list[str]
    rows: list[dict]
    cells: dict[tuple[str, str], dict] = field(default_factory=dict)
    # The track's figures as its authors' released scorer aggregates them, kept with the board version
    # (evaluation/boards/published.py): one row per system; [] when the authors aggregate as we do.
    published: list[dict] = field(default_factory=list)
    latest: bool = True
    board_version: int | None = None
    versions: list[dict] = field(default_factory=list)  # every version of this board, newest first
    costs: dict[str, dict] | None = None  # {system: its month_costs row}; None: not a stored board
    spend: dict | None = None  # the month's judging predicted and actual (costs.judging_spend)

    @property
    def version_info(self) -> dict | None:
        """The shown version's board_versions row (status, changes, published_at)."""
        return next((v for v in self.versions if v["board_version"] == self.board_version), None)


def metric_mean(row: Mapping, cell: Mapping, metric: str) -> Any:
    """A system's mean of a metric: the board's wide column, else (a metric without one) its cell's mean."""
    return row[metric] if metric in row else cell.get("mean")


def _sort_board(rows: Iterable[Mapping]) -> list[dict]:
    def key(r: Mapping) -> tuple:
        gm = finite(r.get("geometric_mean"))
        return (r.get("rank") is None, r.get("rank") or 0, -(gm if gm is not None else -1.0), r["system_id"])
    return sorted((dict(r) for r in rows), key=key)


def _metric_cells(conn: sa.Connection, release_id: str, judge_config: str,
                  version: int) -> dict[tuple[str, str], dict]:
    rows = _rows(conn, "SELECT * FROM deepscholar.leaderboard_metrics WHERE release_id = :r AND judge_config = :j "
                       "AND board_version = :v", r=release_id, j=judge_config, v=version)
    return {(r["system_id"], r["metric"]): r for r in rows}


def _board_judge_configs(conn: sa.Connection, release_id: str | None) -> list[str]:
    sql = "SELECT DISTINCT judge_config FROM deepscholar.leaderboard"
    if release_id is None:
        return list(conn.execute(sa.text(sql + " ORDER BY 1")).scalars())
    return list(conn.execute(sa.text(sql + " WHERE release_id = :r ORDER BY 1"), {"r": release_id}).scalars())


def board_versions_of(conn: sa.Connection, release_id: str, judge_config: str) -> list[dict]:
    """Every version of one board, newest first (the leaderboard_board_versions view)."""
    return _rows(conn, "SELECT * FROM deepscholar.leaderboard_board_versions WHERE release_id = :r "
                       "AND judge_config = :j ORDER BY board_version DESC", r=release_id, j=judge_config)


def existing_board_versions(conn: sa.Connection, release_id: str, judge_config: str) -> list[dict]:
    """`board_versions_of`, NotFound when the board does not exist (the versions page and its API)."""
    rows = board_versions_of(conn, release_id, judge_config)
    if not rows:
        raise NotFound(f"no board for release {release_id!r} under judge config {judge_config!r}")
    return rows


def board_with_tracks(conn: sa.Connection, judge_config: str | None, release_id: str | None,
                      version: int | None) -> tuple[Board, list[TrackBoard], list[dict]]:
    """A stored board with its tracks' boards and the agreement between them (the page and its API)."""
    board = load_board(conn, judge_config, release_id, version)
    tracks = load_track_boards(conn, board.release_id, board.judge_config, board.board_version)
    return board, tracks, load_agreement_rows(conn, board.release_id, board.judge_config, board.board_version)


def load_board(conn: sa.Connection, judge_config: str | None = None, release_id: str | None = None,
               version: int | None = None) -> Board:
    """The board `deepscholar leaderboard` shows for the same release and judge (`pick_board`).

    Without a release: the latest release that has a board (under judge_config when given); without a
    judge config: that release's most complete board. NotFound when a named release or judge has none.
    `version`: that version of the board instead of the one readers see (the latest published one).
    """
    picked = pick_board(conn, release_id, judge_config)
    if picked is None:
        if release_id is None and judge_config is None:
            return Board(None, None, [], [], latest=True)
        configs = _board_judge_configs(conn, release_id)
        if release_id is not None and not configs:
            raise NotFound(f"no leaderboard for release {release_id!r}")
        raise NotFound(f"no leaderboard for judge config {judge_config!r}; available: {', '.join(configs) or 'none'}")
    release, chosen = picked
    versions = board_versions_of(conn, release, chosen)
    shown = next((v["board_version"] for v in versions if v["is_current"]), None) if version is None else version
    if version is not None and not any(v["board_version"] == version for v in versions):
        raise NotFound(f"no version {version} of the board of {release} under {chosen}; versions: "
                       f"{', '.join(str(v['board_version']) for v in versions) or 'none'}")
    rows = _rows(conn, "SELECT * FROM deepscholar.leaderboard_versions WHERE release_id = :r AND judge_config = :j "
                       "AND board_version = :v", r=release, j=chosen, v=shown)
    from deepscholar.evaluation.money.costs import judging_spend

    costs = {c["system_id"]: c for c in _rows(
        conn, "SELECT * FROM deepscholar.month_costs WHERE release_id = :r AND judge_config = :j",
        r=release, j=chosen)}
    return Board(release, chosen, _board_judge_configs(conn, release), _sort_board(rows),
                 _metric_cells(conn, release, chosen, shown or 0), latest=release_id is None, board_version=shown,
                 versions=versions, costs=costs, spend=judging_spend(conn, release, chosen))


@dataclass
class TrackBoard:
    """One evaluation track's board of the same release and judge as the core board it is shown under."""

    family: str
    ranking_metric: str
    rows: list[dict]
    cells: dict[tuple[str, str], dict] = field(default_factory=dict)
    # The track's figures as its authors' released scorer aggregates them, kept with the board version
    # (evaluation/boards/published.py): one row per system; [] when the authors aggregate as we do.
    published: list[dict] = field(default_factory=list)


def load_track_boards(conn: sa.Connection, release_id: str | None, judge_config: str | None,
                      version: int | None = None) -> list[TrackBoard]:
    """Every track that has a board for this release, judge and board version, in the registry's order of
    families."""
    if release_id is None or judge_config is None or version is None:
        return []
    rows = _rows(conn, "SELECT * FROM deepscholar.track_boards WHERE release_id = :r AND judge_config = :j "
                       "AND board_version = :v ORDER BY rank, system_id", r=release_id, j=judge_config, v=version)
    cells = _rows(conn, "SELECT * FROM deepscholar.track_board_metrics WHERE release_id = :r AND judge_config = :j "
                        "AND board_version = :v", r=release_id, j=judge_config, v=version)
    boards: dict[str, TrackBoard] = {}
    for r in rows:
        if r["family"] in registry.families():  # a track no longer registered waits for the next roll-up to go
            boards.setdefault(r["family"], TrackBoard(r["family"], r["ranking_metric"], [])).rows.append(r)
    for c in cells:
        if c["family"] in boards:
            boards[c["family"]].cells[(c["system_id"], c["metric"])] = c
    from deepscholar.evaluation.boards.published import stored_published

    for family, published in stored_published(conn, release_id, judge_config, version).items():
        if family in boards:
            boards[family].published = published
    return [boards[f] for f in sorted(boards, key=registry.family_order)]


def load_agreement_rows(conn: sa.Connection, release_id: str | None, judge_config: str | None,
                        version: int | None = None) -> list[dict]:
    if release_id is None or judge_config is None or version is None:
        return []
    rows = _rows(conn, "SELECT family_a, family_b, n_systems, kendall_tau, p_value, movers "
                       "FROM deepscholar.board_agreement WHERE release_id = :r AND judge_config = :j "
                       "AND board_version = :v", r=release_id, j=judge_config, v=version)
    from deepscholar.evaluation.boards.rank_agreement import in_registry_order

    return in_registry_order(rows)


def _metric_json(row: Mapping, cell: Mapping, metric: str) -> dict:
    return {
        "mean": finite(metric_mean(row, cell, metric)),
        "variant": cell.get("variant", registry.headline_variant(metric)),
        **{k: json_value(cell.get(k)) for k in ("n", "n_unscored", "ci_low", "ci_high", "is_best", "significant",
                                                 "p_value")},
    }


def board_json(board: Board) -> dict:
    out_rows = []
    for r in board.rows:
        metrics = {m: _metric_json(r, board.cells.get((r["system_id"], m), {}), m) for m in registry.metric_names(registry.CORE)}
        out_rows.append({
            "rank": r.get("rank"),
            "system_id": r["system_id"],
            "n_queries": r.get("n_queries"),
            "n_reports": r.get("n_reports"),
            "n_failed": r.get("n_failed"),
            "geometric_mean": finite(r.get("geometric_mean")),
            "geometric_mean_ci_low": finite(r.get("geometric_mean_ci_low")),
            "geometric_mean_ci_high": finite(r.get("geometric_mean_ci_high")),
            "metrics": metrics,
            "metric_versions": r.get("metric_versions"),
            "computed_at": json_value(r.get("computed_at")),
            "contamination": r.get("contamination"), "knowledge_cutoff": json_value(r.get("knowledge_cutoff")),
            **({} if board.costs is None else {"costs": {
                k: json_value(v) for k, v in (board.costs.get(r["system_id"]) or {}).items()
                if k not in ("release_id", "system_id", "judge_config")}}),
        })
    return {"release_id": board.release_id, "judge_config": board.judge_config,
            "judge_configs": board.judge_configs, "board_version": board.board_version,
            "versions": [{k: json_value(v) for k, v in version.items()} for version in board.versions],
            "rows": out_rows}


def tracks_json(tracks: Sequence[TrackBoard], agreement: Sequence[Mapping]) -> dict:
    """The track boards and the agreement table, as the API serves them beside the core board."""
    out = {}
    for t in tracks:
        names = registry.metric_names(t.family)
        out[t.family] = {"ranking_metric": t.ranking_metric, "rows": [{
            "rank": r["rank"], "system_id": r["system_id"], "n_queries": r["n_queries"], "n_reports": r["n_reports"],
            "n_failed": r["n_failed"],
            "metrics": {m: _metric_json({}, t.cells.get((r["system_id"], m), {}), m) for m in names},
            "metric_versions": r.get("metric_versions"), "computed_at": json_value(r.get("computed_at")),
            "contamination": r.get("contamination"), "knowledge_cutoff": json_value(r.get("knowledge_cutoff")),
        } for r in t.rows], "as_published": [{k: finite(v) if isinstance(v, float) else v for k, v in p.items()}
                                             for p in t.published]}
    return {"tracks": out, "agreement": [{k: json_value(v) for k, v in a.items()} for a in agreement]}


def pooled_board_json(board: Board, tracks: Sequence[TrackBoard], selection: Any) -> dict:
    """A window's pooled board (pooled_page_board) as the API serves it: the stored board's shape, no agreement,
    and the months (each one's current release version) it pools."""
    return board_json(board) | tracks_json(tracks, []) | {"releases": list(selection.releases)}


# --- history and systems -------------------------------------------------------------------------------

def history_rows(conn: sa.Connection, judge_config: str | None = None, system_id: str | None = None) -> list[dict]:
    where, params = [], {}
    if judge_config is not None:
        where.append("h.judge_config = :j")
        params["j"] = judge_config
    if system_id is not None:
        where.append("h.system_id = :s")
        params["s"] = system_id
    clause = ("WHERE " + " AND ".join(where)) if where else ""
    # `month` is the view's reading of when a release stands for (window, else its YYYY-MM id, else creation).
    return _rows(conn, f"SELECT h.* FROM deepscholar.leaderboard_history h {clause} "
                       "ORDER BY h.month, h.release_id, h.system_id", **params)


def history_judge_configs(conn: sa.Connection, system_id: str | None = None) -> list[str]:
    sql = "SELECT DISTINCT judge_config FROM deepscholar.leaderboard_history"
    if system_id is not None:
        return list(conn.execute(sa.text(sql + " WHERE system_id = :s ORDER BY 1"), {"s": system_id}).scalars())
    return list(conn.execute(sa.text(sql + " ORDER BY 1")).scalars())


def system_info(conn: sa.Connection, system_id: str) -> dict | None:
    rows = _rows(conn, "SELECT system_id, kind, version, active FROM deepscholar.systems WHERE system_id = :s",
                 s=system_id)
    return rows[0] if rows else None


def system_page_data(conn: sa.Connection, system_id: str, judge_config: str | None, release: str | None) -> dict:
    """What a system's page shows: its registration and its board months under the chosen judge; with a
    `release`, that month's reports with their headline scores (NotFound for an unknown system, judge or month)."""
    info = system_info(conn, system_id)
    configs = history_judge_configs(conn, system_id)
    if info is None and not configs:
        raise NotFound(f"no system {system_id!r}")
    chosen = pick(configs, judge_config)
    if judge_config is not None and chosen is None:
        raise NotFound(f"no leaderboard rows for {system_id!r} with judge config {judge_config!r}")
    rows = history_rows(conn, chosen, system_id) if chosen else []
    months = list(dict.fromkeys(r["release_id"] for r in rows))
    if release is not None and release not in months:
        raise NotFound(f"no leaderboard row for {system_id!r} in {release!r}")
    reports = system_reports(conn, system_id, release, chosen) if release and chosen else []
    return {"system": info, "system_id": system_id, "rows": rows, "judge_config": chosen, "configs": configs,
            "release_id": release, "reports": reports}


def system_reports(conn: sa.Connection, system_id: str, release_id: str, judge_config: str) -> list[dict]:
    """A system's reports of a month, each with `scores`: {metric: its headline score under the judge}."""
    reports = _rows(conn, """
        SELECT rp.report_id, rp.arxiv_id, rp.status, rp.error, q.title AS query_title
        FROM deepscholar.reports rp
        LEFT JOIN deepscholar.release_queries q ON q.release_id = rp.release_id AND q.arxiv_id = rp.arxiv_id
        WHERE rp.system_id = :s AND rp.release_id = :r
        ORDER BY rp.arxiv_id""", s=system_id, r=release_id)
    core = registry.metric_names(registry.CORE)
    scores = _rows(conn, """
        SELECT ms.report_id, ms.metric, ms.variant, ms.value, ms.unscored_reason
        FROM deepscholar.reports rp
        JOIN deepscholar.metric_scores ms ON ms.report_id = rp.report_id
        JOIN unnest(CAST(:metrics AS text[]), CAST(:variants AS text[])) AS h (metric, variant)
          ON h.metric = ms.metric AND h.variant = ms.variant
        WHERE rp.system_id = :s AND rp.release_id = :r AND ms.judge_config = :j""",
                   s=system_id, r=release_id, j=judge_config, metrics=list(core),
                   variants=[registry.headline_variant(m) for m in core])
    by_report: dict[int, dict[str, dict]] = {}
    for s in scores:  # the core's headline scores only (a report has every variant of every family's metrics)
        by_report.setdefault(s["report_id"], {})[s["metric"]] = s
    for r in reports:
        r["scores"] = by_report.get(r["report_id"], {})
    return reports


# --- one report ----------------------------------------------------------------------------------------

def report_detail(conn: sa.Connection, report_id: int) -> dict | None:
    """A report with its `sources`, `scores` (every judge, variant and metric version) and `judgments`; None if
    unknown."""
    return report_details(conn, [report_id]).get(report_id)


def report_details(conn: sa.Connection, report_ids: Sequence[int]) -> dict[int, dict]:
    """`report_detail` of many reports in four statements (the static site reads a month's this way): {report id:
    its detail} of those that exist."""
    ids = sorted({int(i) for i in report_ids if -2**63 <= int(i) < 2**63})  # past bigint: no such report
    reports = {r["report_id"]: r for r in _rows(conn, """
        SELECT rp.report_id, rp.release_id, rp.system_id, rp.arxiv_id, rp.status, rp.error, rp.text,
               rp.system_version, rp.system_build, rp.search_backend, rp.search_cutoff, rp.n_citations, rp.created_at,
               rp.quality_flags, rp.n_unresolved_citations, rp.n_leaked_retrieved,
               q.title AS query_title, s.kind AS system_kind
        FROM deepscholar.reports rp
        LEFT JOIN deepscholar.release_queries q ON q.release_id = rp.release_id AND q.arxiv_id = rp.arxiv_id
        LEFT JOIN deepscholar.systems s ON s.system_id = rp.system_id
        WHERE rp.report_id = ANY(CAST(:ids AS bigint[]))""", ids=ids)}
    for report in reports.values():
        report["sources"], report["scores"], report["judgments"] = [], [], []
    found = sorted(reports)
    children = (
        ("sources", "SELECT * FROM deepscholar.report_sources WHERE report_id = ANY(CAST(:ids AS bigint[])) "
                    "ORDER BY report_id, source_idx"),
        # Every metric version's (a superseded score stays readable beside the current one: migration 0036).
        ("scores", """
            SELECT report_id, metric, judge_config, variant, metric_version, is_current, value, unscored_reason,
                   n_items, details
            FROM deepscholar.metric_score_versions WHERE report_id = ANY(CAST(:ids AS bigint[]))
            ORDER BY report_id, metric, judge_config, variant, metric_version, is_current"""),
        ("judgments", """
            SELECT report_id, metric, judge_config, item_key, metric_version, is_current, label, unscored_reason,
                   explanation, n_calls
            FROM deepscholar.judgment_versions WHERE report_id = ANY(CAST(:ids AS bigint[]))
            ORDER BY report_id, metric, judge_config, item_key, metric_version, is_current"""))
    for key, sql in children:
        for row in _rows(conn, sql, ids=found) if found else []:
            owner = row["report_id"] if key == "sources" else row.pop("report_id")
            reports[owner][key].append(row)
    return reports


# --- boards over a window of months or one category (computed, not stored) ------------------------------

def board_months(conn: sa.Connection, judge_config: str | None) -> list[str]:
    """The months (YYYY-MM) with a board under this judge, oldest first: the window selector's options."""
    if judge_config is None:
        return []
    return [m.strftime("%Y-%m") for m in conn.execute(sa.text(
        "SELECT DISTINCT month FROM deepscholar.leaderboard_releases WHERE judge_config = :j AND month IS NOT NULL "
        "ORDER BY month"), {"j": judge_config}).scalars()]


def pooled_page_board(engine, judge_config: str | None, window_from: str | None,
                      window_to: str | None) -> tuple[Board, list[TrackBoard], Any]:
    """The core board and the track boards pooled over a window of months, as the page shows a stored one:
    computed from every score of the window's months (seconds for a year; the page keeps it per stamp)."""
    from deepscholar.evaluation.boards import pooled
    from deepscholar.evaluation.boards.selection import current_releases, window_judge

    selection = current_releases(engine, window_from, window_to)
    judge = judge_config or window_judge(engine, selection.releases)
    rows = pooled.pooled_board(engine, selection, judge)
    if not rows:
        raise NotFound(f"no scored query in {selection.label} under {judge}")
    cells = {(r["system_id"], m): d for r in rows for m, d in r["metrics"].items()}
    board = Board(selection.label, judge, [judge], rows, cells, latest=False)
    tracks = []
    for family in registry.tracks():
        track_rows = pooled.pooled_board(engine, selection, judge, family=family)
        if track_rows:
            tracks.append(TrackBoard(family, registry.ranking_metric(family) or "", track_rows,
                                     {(r["system_id"], m): d for r in track_rows for m, d in r["metrics"].items()}))
    return board, tracks, selection


def category_page_boards(engine, selection, judge_config: str, min_queries: int) -> list:
    """The core board of each primary category with at least `min_queries` queries (ranks and geometric
    means; 200 bootstrap replicates: the page shows no category interval). Computed from the month's
    per-query scores (about 2 s for a 200-query month of 20 systems; the page keeps them per stamp)."""
    from deepscholar.evaluation.boards import pooled

    return pooled.category_boards(engine, selection, judge_config, min_queries=min_queries, n_boot=200)[1]


def trust_rows(engine, release_id: str | None, judge_config: str | None) -> list[dict]:
    """How far can you trust each column: the board's judge against the month's human labels, per metric,
    as `annotate import` (or `deepscholar judges agreement`) stored it (human_agreement_stats); [] when nothing is
    stored for this month and judge. One indexed read: labels someone imported cost the page nothing."""
    from deepscholar.evaluation.judge_validation.judge_vs_humans import stored_agreement

    if release_id is None or judge_config is None:
        return []
    with engine.connect() as conn:
        return stored_agreement(conn, release_id, judge_config)
