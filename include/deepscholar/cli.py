"""The `deepscholar` command line. Every command honours the settings (`deepscholar settings`), e.g.
DEEPSCHOLAR_DB_URL / DEEPSCHOLAR_HOME."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import traceback
from pathlib import Path
from typing import overload

from deepscholar.errors import InfrastructureError, UserError, is_warehouse_outage
from deepscholar.progress import terminal_bars

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def _engine():
    from deepscholar import db

    engine = db.get_engine()
    db.init_db(engine)
    return engine


def cmd_db_init(args) -> int:
    from deepscholar import db, migrations

    engine = db.get_engine()
    applied = db.init_db(engine)
    print(f"schema ready at {db.describe_url(engine)} (revision {migrations.head_revision()}); "
          f"applied: {', '.join(applied) or 'nothing new'}")
    return 0


def cmd_db_status(args) -> int:
    """Read-only: never creates or upgrades anything. Exit 1 when the warehouse is in an unknown state."""
    from deepscholar import db, migrations
    from deepscholar.connection_budget import describe_budget

    engine = db.get_engine()
    status = migrations.status(engine) | {"url": db.describe_url(engine)}
    budget, limit, lines = describe_budget(engine)
    if args.json:
        print(json.dumps(status | {"connections": {"worst_case": budget.worst_case, "warehouse": budget.warehouse,
                                                   "airflow": budget.airflow, "server_limit": limit}}, indent=2))
    else:
        print(f"warehouse: {status['url']}\nstate:     {status['state']}\n"
              f"current:   {status['current'] or 'none'}\nhead:      {status['head']}\n"
              f"pending:   {', '.join(status['pending']) or 'none'}")
        if status["detail"]:
            print(f"note:      {status['detail']}")
    if not args.json:
        print("connections (worst case of this configuration):\n  " + "\n  ".join(lines))
    if limit is not None and budget.worst_case > limit:
        print(f"deepscholar: warning: {lines[-1].removeprefix('WARNING: ')}", file=sys.stderr)
    return 1 if status["state"] == "unknown" else 0


def cmd_db_stop(args) -> int:
    """Stop the embedded PostgreSQL (it keeps running after every command, shared by the CLI, the demo's
    Airflow and its tasks); its data stays under DEEPSCHOLAR_HOME and the next command starts it again."""
    from deepscholar import db
    from deepscholar.settings import current_settings

    if current_settings().db_url:
        print("DEEPSCHOLAR_DB_URL is set: the warehouse is not the embedded server, nothing to stop")
        return 0
    home = current_settings().home.resolve()
    print(f"embedded PostgreSQL under {home / 'pgdata'}: "
          + ("stopped" if db.stop_embedded_server(home) else "was not running"))
    return 0


def cmd_db_url(args) -> int:
    from deepscholar import db

    print(db.resolve_db_url())
    return 0


@overload
def _release(engine, name: str) -> str: ...


@overload
def _release(engine, name: None) -> None: ...


def _release(engine, name: str | None) -> str | None:
    """The release a command's release argument means: a month (or dataset name) is its current version,
    the latest published one (release/versions.py); `2025-06.v2` names that version."""
    from deepscholar.release.versions import resolve_release
    from deepscholar.release.window import validate_release_id

    if name is None:
        return None
    validate_release_id(name)  # InvalidInput before any query for what no release can be named
    with engine.connect() as conn:
        return resolve_release(conn, name)


def cmd_releases(args) -> int:
    from deepscholar.reporting import format_releases, list_releases

    print(format_releases(list_releases(_engine()), as_json=args.json))
    return 0


def cmd_release_build(args) -> int:
    from deepscholar.release.spec import ReleaseSpec
    from deepscholar.release.steps import build_release
    from deepscholar.release.versions import parse_version
    from deepscholar.reporting import print_release_summary

    engine = _engine()
    spec = ReleaseSpec.from_env(judge=args.judge, max_queries=args.max_queries, sample_seed=args.seed)
    result = build_release(engine, args.month, spec, reason=args.reason)
    built = result["release_id"]
    base, n = parse_version(built)
    print(f"built release {built} (version {n or 1} of {base}): "
          f"{'published' if result['gx_success'] else 'failed its quality gate'}")
    print_release_summary(engine, built)
    return 0 if result["gx_success"] else 1


def cmd_release_enrich(args) -> int:
    from deepscholar.release.context import ReleaseContext
    from deepscholar.release.steps import enrich_release
    from deepscholar.reporting import release_summary

    engine = _engine()
    release_id = _release(engine, args.month)
    release_summary(engine, release_id)  # NotFound (a UserError) for an unknown release
    result = enrich_release(ReleaseContext.load(engine, release_id), _comma_list(args.tracks) or [])
    if args.json:
        print(json.dumps(result, default=str, indent=2))
    else:
        for track, counts in result["tracks"].items():
            print(f"{release_id} {track}: {', '.join(f'{k} {v}' for k, v in counts.items())}")
        print(result["summary"])
    return 0 if result["gx_success"] else 1


def cmd_release_licences(args) -> int:
    """Fetch the licences a month's query papers lack (writes only paper_licences: works on a sealed release)."""
    from deepscholar.release.context import ReleaseContext
    from deepscholar.release.licences import fetch_licences
    from deepscholar.reporting import release_summary

    engine = _engine()
    release_summary(engine, args.month)  # NotFound (a UserError) for an unknown release
    counts = fetch_licences(ReleaseContext.load(engine, args.month))
    print(f"{args.month} licences: {counts['papers']} query papers ({counts['looked_up']} looked up now): "
          f"{counts['redistributable']} allow redistribution, {counts['not_redistributable']} do not, "
          f"{counts['unknown']} unknown, {counts['never_fetched']} not fetched")
    return 0


def cmd_export(args) -> int:
    from deepscholar.export import export_release

    result = export_release(_engine(), args.release, Path(args.out), judge=args.judge)
    for line in result.warnings:
        print(f"deepscholar: warning: {line}", file=sys.stderr)
    print(f"exported {args.release} to {result.out} ({', '.join(result.formats)}, README.md): "
          + ", ".join(f"{name} {n}" for name, n in result.rows.items())
          + f"; texts withheld for their licence: {result.withheld_papers} papers, {result.withheld_reports} reports")
    return 0


def cmd_release_summary(args) -> int:
    from deepscholar.reporting import print_release_summary, release_summary

    engine = _engine()
    release_id = _release(engine, args.release)
    summary = release_summary(engine, release_id)  # NotFound (a UserError) for an unknown release
    if args.json:
        print(json.dumps(summary, default=str, indent=2))
    else:
        print_release_summary(engine, release_id)
    return 0


def cmd_import_official(args) -> int:
    from deepscholar.release.official_import import import_official

    summary = import_official(_engine(), Path(args.directory), args.release)
    print(json.dumps(summary if isinstance(summary, dict) else getattr(summary, "__dict__", summary),
                     default=str, indent=2))
    return 0


def cmd_latex_inspect(args) -> int:
    from deepscholar.sources.eprint import EprintError
    from deepscholar.sources.inspect import inspect_latex

    try:
        result = inspect_latex(Path(args.path))
    except (EprintError, OSError) as exc:  # not a project we can read: the user's path, not a bug
        raise UserError(f"{args.path}: {exc}") from exc
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
        return 0
    if not result.get("section_title"):
        print(f"{args.path}: no related-work section found")
        return 0
    print(f"section:   {result['section_title']} ({result.get('section_level')}, {result.get('section_file')})")
    print(f"cite keys: {len(result['cite_keys'])}; resolved in bibliography: {len(result['bib_entries'])}")
    print()
    print(result["section_text"])
    print()
    for key, title in result["bib_entries"].items():
        print(f"  [{key}] {title}")
    return 0


def cmd_systems_add(args) -> int:
    from deepscholar.systems.registry import add_system, parse_config

    config = parse_config(args.config)
    engine = _engine()
    outcome = add_system(engine, args.name, args.kind, config, version=args.version,
                         knowledge_cutoff=args.knowledge_cutoff)
    if outcome == "moved":
        from deepscholar.systems.generation import current_build
        from deepscholar.systems.registry import get_system

        print(f"system {args.name} ({args.kind}) moved to a new endpoint: its reports from now on are build "
              f"{current_build(get_system(engine, args.name))}; a month that already has reports of its earlier "
              f"build fails its reports check until `deepscholar generate --release MONTH --system {args.name} "
              f"--regenerate-outdated` writes them again")
    else:
        print(f"system {args.name} ({args.kind}) {outcome}")
    if args.backfill or args.backfill_plan:
        return _backfill(engine, args.name, queue=args.backfill)
    return 0


def cmd_systems_backfill(args) -> int:
    return _backfill(_engine(), args.name, queue=not args.plan)


def _backfill(engine, name: str, *, queue: bool) -> int:
    """Print a system's backfill plan with its cost estimate, then (queue) create its runs in Airflow."""
    from deepscholar.airflow_api import AirflowAPI
    from deepscholar.settings import current_settings
    from deepscholar.systems.backfill import (
        describe_queued,
        format_plan,
        missing_months,
        not_configured_hint,
        plan_backfill,
        queue_backfill,
    )

    plan = plan_backfill(engine, name)
    print(format_plan(plan))
    if not queue:
        return 0
    if not missing_months(plan):
        print("nothing to backfill: every eligible month already has its reports")
        return 0
    if not current_settings().airflow_api_url:
        print(not_configured_hint(plan), file=sys.stderr)
        return 1
    for created in queue_backfill(plan, AirflowAPI.from_settings()):
        print(describe_queued(created))
    return 0


def cmd_systems_cutoff(args) -> int:
    from deepscholar.systems.registry import set_knowledge_cutoff

    value = set_knowledge_cutoff(_engine(), args.name, args.cutoff)
    print(f"system {args.name}: knowledge cutoff {value or 'unknown'} (boards change at their next roll-up, as "
          "new versions of published ones)")
    return 0


def cmd_systems_list(args) -> int:
    from tabulate import tabulate

    from deepscholar.systems.registry import list_systems

    rows = [r | {"build": _current_build(r)} for r in list_systems(_engine())]
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
    else:
        print(tabulate([[r["system_id"], r["kind"], r["version"], r["active"], json.dumps(r["config"]),
                         r["ok_reports"], r["build"],
                         r["knowledge_cutoff"] or ("unknown" if r["model_knowledge"] else "n/a (no model)")]
                        for r in rows],
                       headers=["system", "kind", "version", "active", "config", "ok reports", "current build",
                                "knowledge cutoff"]))
    return 0


def _current_build(row: dict) -> str | None:
    """The build the system's next report gets; None when its kind is no longer known."""
    from deepscholar.errors import NotFound
    from deepscholar.systems.generation import current_build

    try:
        return current_build(row)
    except NotFound:
        return None


def cmd_systems_active(args) -> int:
    from deepscholar.systems.registry import set_active

    set_active(_engine(), args.name, args.command_name == "activate")
    print(f"system {args.name} {args.command_name}d")
    return 0


def cmd_import_reports(args) -> int:
    """Exit 2 when any output could not be read or placed (one line each on stderr); the rest is stored."""
    from deepscholar.systems.external.importer import format_import_summary, import_reports

    engine = _engine()
    summary = import_reports(engine, args.system, Path(args.path), _release(engine, args.release), fmt=args.format,
                             title_search=args.title_search, max_unresolved_share=args.max_unresolved)
    print(json.dumps(summary.as_dict(), default=str, indent=2) if args.json else format_import_summary(summary))
    for e in summary.errors:
        print(f"deepscholar: error: {e['path']}: {' '.join(str(e['error']).split())}", file=sys.stderr)
    return 2 if summary.n_errors else 0


def cmd_generate(args) -> int:
    from deepscholar.systems.generation import generate_release, regenerate_outdated

    engine = _engine()
    release_id = _release(engine, args.release)
    if args.regenerate_outdated:
        summary = regenerate_outdated(engine, release_id, args.system or [])
    else:
        summary = generate_release(engine, release_id, args.system or None)
    print(json.dumps(summary, indent=2))
    return 0


def cmd_reports(args) -> int:
    from tabulate import tabulate

    from deepscholar.systems.generation import list_reports

    engine = _engine()
    rows = list_reports(engine, _release(engine, args.release))
    if args.json:
        print(json.dumps(rows, default=str, indent=2))
        return 0
    cols = ["system_id", "arxiv_id", "status", "n_sources", "n_citations", "n_unresolved_citations",
            "leaked_sources", "leaked_retrieved", "quality_flags"]
    # disable_numparse: an arXiv id such as 2506.00418 is text, not the number 2506.0.
    print(tabulate([[",".join(r[c]) if c == "quality_flags" else r[c] for c in cols] for r in rows], headers=cols,
                   disable_numparse=True))
    print(_builds_footer(rows))
    return 0


def _builds_footer(rows: list[dict]) -> str:
    """Each system's builds among its ok reports (two of one reader mix: the reports check fails)."""
    builds: dict[str, dict[str, int]] = {}
    for r in (r for r in rows if r["status"] == "ok"):
        build = r["system_build"] or "(unknown: stored before builds were recorded)"
        builds.setdefault(r["system_id"], {}).setdefault(build, 0)
        builds[r["system_id"]][build] += 1
    lines = ["\nbuilds of the ok reports:"]
    for system_id, counts in sorted(builds.items()):
        several = f"  ({len(counts)} builds)" if len(counts) > 1 else ""
        lines += [f"  {system_id}{several}"] + [f"    {b}  ({n} reports)" for b, n in sorted(counts.items())]
    return "\n".join(lines)


def _metric_models(pairs: list[str] | None) -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        metric, sep, model = pair.partition("=")
        if not sep or not metric or not model:
            raise UserError(f"--metric-model takes METRIC=MODEL, got {pair!r}")
        out[metric] = model
    return out


def _comma_list(values: list[str] | None) -> list[str] | None:
    """`--tracks race fact` and `--tracks race,fact` alike (as `release enrich` reads them); None stays None."""
    if values is None:
        return None
    return [v.strip() for arg in values for v in arg.split(",") if v.strip()]


def cmd_evaluate(args) -> int:
    from deepscholar.evaluation.runner import evaluate_release
    from deepscholar.settings import current_settings

    engine = _engine()
    result = evaluate_release(engine, _release(engine, args.release), judge=args.judge or current_settings().judge,
                              metric_models=_metric_models(args.metric_model), metrics=args.metrics or None,
                              systems=args.system or None, api_base=args.api_base, concurrency=args.concurrency,
                              tracks=_comma_list(args.tracks))
    published = _publish_board(args.release, result["judge_config"]) if args.publish else None
    if published is not None:
        result["publish"] = published
    if args.json:
        print(json.dumps(result, default=str, indent=2))
    else:
        from tabulate import tabulate

        cols = ["metric", "system_id", "reports", "items", "unscored_reports", "llm_requests", "seconds"]
        print(tabulate([[r[c] if c != "seconds" else round(r[c], 2) for c in cols] for r in result["runs"]],
                       headers=cols))
        print(f"\n{result['reports_judged']} report scores written under {result['judge_config']}, "
              f"{result['llm_requests']} LLM requests, {result['unscored_reports']} unscored; "
              f"leaderboard rows: {result.get('leaderboard_rows', 0)}")
        if published is not None:
            print(published["message"], file=sys.stdout if published["published"] else sys.stderr)
    return 1 if published is not None and not published["published"] else 0


def cmd_annotate_export(args) -> int:
    from deepscholar.evaluation.annotation import export_sample

    engine = _engine()
    result = export_sample(engine, _release(engine, args.release), args.metric, args.judge, args.n, args.seed, args.out)
    files = " and ".join(str(f) for f in result.files)
    again = " (the same draw as an earlier export: its record is reused)" if result.reused else ""
    print(f"sample {result.sample_id}: {result.n_items} of {result.n_candidates} scored {result.metric} units of "
          f"{result.release_id} under {result.judge_config}, stratified over {result.n_strata} (system, judge "
          f"label) strata, seed {args.seed}{again}; wrote {files} (blind: fill the 'label' column, then "
          "`deepscholar annotate import FILE --annotator NAME`)")
    return 0


def _listed(names: list[str], most: int = 20) -> str:
    """Names for one line: the first `most`, then how many more."""
    if not names:
        return "none"
    more = f" and {len(names) - most} more" if len(names) > most else ""
    return ", ".join(names[:most]) + more


def cmd_annotate_import(args) -> int:
    from deepscholar.evaluation.annotation import import_labels

    s = import_labels(_engine(), args.file, args.annotator)
    print(f"imported {s.path}: {s.stored} labels stored, {s.replaced} replaced (the old ones kept in the history), "
          f"{s.unchanged} unchanged, {s.skipped_empty} rows without a label skipped; annotators: "
          f"{_listed(s.annotators)}; judge-vs-humans agreement stored anew: {s.agreement_rows} "
          f"(metric, judge) entries")
    return 0


def _publish_board(release_id: str, judge_config: str) -> dict:
    """The benchmark DAG's check_leaderboard and publish_leaderboard, for a board rolled up by hand."""
    from deepscholar.evaluation.board_versions import publish_board
    from deepscholar.evaluation.leaderboard_quality import check_leaderboard

    engine = _engine()
    check = check_leaderboard(engine, release_id, judge_config)
    if not check.success:
        return {"published": False, "message": f"not published: {check.summary}"}
    version = publish_board(engine, release_id, judge_config)
    changes = f" ({version['changes']})" if version["changes"] else ""
    return {"published": True, "board_version": version["board_version"], "changes": version["changes"],
            "message": f"board of {release_id} under {judge_config} published as version "
                       f"{version['board_version']}{changes}"}


def cmd_leaderboard(args) -> int:
    from deepscholar.evaluation.judges import JudgeSpec
    from deepscholar.evaluation.leaderboard import format_leaderboard, load_leaderboard

    judge_config = JudgeSpec.parse(args.judge).config_id if args.judge else None
    engine = _engine()
    args.release = _release(engine, args.release)
    if args.versions:
        return _print_board_versions(engine, args.release, judge_config, args.format)
    if args.window_from or args.window_to or args.category or args.after:
        return _print_pooled_board(engine, args, judge_config)
    rows = load_leaderboard(engine, args.release, judge_config, track=args.track, board_version=args.version)
    if not rows:
        from deepscholar.reporting import release_summary

        if args.release:
            release_summary(engine, args.release)  # NotFound names an unknown release
        where = f"release {args.release}" if args.release else "any release"
        judged = f" judged by {args.judge}" if args.judge else ""
        if args.track and args.track != "core":
            raise UserError(f"no {args.track} track board for {where}{judged} yet: run `deepscholar evaluate "
                            f"--release {args.release or 'YYYY-MM'} --tracks {args.track}` (or enable the track in "
                            "the benchmark DAG's `tracks` param / DEEPSCHOLAR_TRACKS)")
        raise UserError(f"no leaderboard for {where}{judged} yet: run `deepscholar evaluate --release "
                        f"{args.release or 'YYYY-MM'}` or the benchmark DAG")
    if args.agreement:
        from deepscholar.evaluation.agreement import format_agreement, load_agreement

        print(format_agreement(load_agreement(engine, rows[0]["release_id"], rows[0]["judge_config"]), args.format))
        return 0
    if args.as_published:
        return _print_as_published(engine, rows[0]["release_id"], rows[0]["judge_config"], args)
    print(format_leaderboard(rows, args.format))
    return 0


def _print_as_published(engine, release_id: str, judge_config: str, args) -> int:
    """The track's figures as its authors' released scorer aggregates them (evaluation/published.py)."""
    from deepscholar.evaluation.published import FIGURES, format_published, load_published

    family = args.track or "core"
    if family not in FIGURES:
        raise UserError(f"--as-published: the {family} board already aggregates as its authors' released scorer "
                        f"does (a mean over the queries scored); tracks with other figures: {', '.join(FIGURES)}")
    print(format_published(load_published(engine, release_id, judge_config, family), family, args.format))
    return 0


def _print_pooled_board(engine, args, judge_config: str | None) -> int:
    """A board over a window of months, one primary category and/or the queries published after a date,
    computed from the stored per-query scores (evaluation/pooled.py)."""
    from dataclasses import replace

    from deepscholar.evaluation import pooled
    from deepscholar.evaluation.leaderboard import format_leaderboard, pick_board
    from deepscholar.settings import current_settings

    if args.version or args.agreement:
        raise UserError("--version and --agreement read a stored board; --from/--to/--category/--after compute one")
    if args.window_from or args.window_to:
        if args.release:
            raise UserError("give either --release or a window (--from/--to), not both")
        selection = pooled.current_releases(engine, args.window_from, args.window_to)
    else:
        with engine.connect() as conn:
            picked = pick_board(conn, args.release, judge_config)
        if picked is None:
            raise UserError(f"no leaderboard for {args.release or 'any release'} yet")
        selection = pooled.Selection((picked[0],), picked[0])
    after = None
    if args.after:
        from deepscholar.systems.registry import parse_cutoff

        after = parse_cutoff(args.after)
        if after is None:
            raise UserError("--after needs a date YYYY-MM-DD (or a month YYYY-MM: after its last day)")
    selection = replace(selection, category=args.category, published_after=after)
    judge = judge_config or pooled.window_judge(engine, selection.releases)
    family = args.track or "core"
    if args.category:
        minimum = current_settings().category_min_queries
        _, boards = pooled.category_boards(engine, replace(selection, category=None), judge, min_queries=1,
                                           family=family)
        board = next((b for b in boards if b.category == args.category), None)
        if board is None:
            raise UserError(f"no query of primary category {args.category} in {selection.label}")
        if board.n_queries < minimum:
            print(f"note: only {board.n_queries} queries of {args.category} (the page shows category boards from "
                  f"DEEPSCHOLAR_CATEGORY_MIN_QUERIES = {minimum})", file=sys.stderr)
        rows = board.rows
    else:
        rows = pooled.pooled_board(engine, selection, judge, family=family)
    if not rows:
        raise UserError(f"no scored query in {selection.describe()} under {judge}")
    print(format_leaderboard(rows, args.format))
    return 0


def _print_board_versions(engine, release_id: str | None, judge_config: str | None, fmt: str) -> int:
    from deepscholar.evaluation.board_versions import list_versions
    from deepscholar.evaluation.leaderboard import pick_board

    with engine.connect() as conn:
        picked = pick_board(conn, release_id, judge_config)
    if picked is None:
        raise UserError(f"no leaderboard for {release_id or 'any release'} yet")
    versions = list_versions(engine, *picked)
    if fmt == "json":
        print(json.dumps(versions, default=str, indent=2))
        return 0
    from tabulate import tabulate

    print(f"Versions of the board of {picked[0]} under {picked[1]} (newest first)")
    print(tabulate([[f"v{v['board_version']}" + (" *" if v["is_current"] else ""), v["status"],
                     v["published_at"] or "", (v["manifest_hash"] or "")[:12], v["n_systems"],
                     v["changes"] or "first version"] for v in versions],
                   headers=["version", "status", "published", "manifest", "systems", "what changed"],
                   tablefmt="github" if fmt == "markdown" else "simple"))
    print("* the version readers see (`deepscholar leaderboard --version N` shows any other)")
    return 0


def cmd_agreement(args) -> int:
    from deepscholar.evaluation.human_agreement import (
        agreement_report,
        format_agreement_report,
        lock_labels,
        save_agreement,
    )
    from deepscholar.evaluation.judges import judge_config_of

    engine = _engine()
    release = _release(engine, args.release)
    judge = judge_config_of(args.judge)
    # Computed on connections of its own (none held meanwhile: the pool rule), then stored under the labels'
    # lock in one short transaction: what the page then shows.
    report = agreement_report(engine, release, args.metric, judge)
    with engine.begin() as conn:
        lock_labels(conn)
        save_agreement(conn, release, judge, report)
    print(format_agreement_report(report, args.format))
    return 0


def cmd_judges_compare(args) -> int:
    from deepscholar.evaluation.judge_comparison import compare_judges, format_comparison

    engine = _engine()
    result = compare_judges(engine, _release(engine, args.release), args.a, args.b)
    print(format_comparison(result, args.format))
    return 0


def cmd_cost(args) -> int:
    from deepscholar.evaluation.costs import format_cost_summary, judge_cost_summary
    from deepscholar.reporting import release_summary
    from deepscholar.settings import current_settings

    engine = _engine()
    release_summary(engine, args.release)  # NotFound (a UserError) for an unknown release
    summary = judge_cost_summary(engine, args.release, args.judge or current_settings().judge,
                                 metrics=args.metrics or None, systems=args.system or None)
    print(json.dumps(summary, default=str, indent=2) if args.json else format_cost_summary(summary))
    return 0


def cmd_judges_drift(args) -> int:
    from deepscholar.evaluation.drift import check_drift, format_drift
    from deepscholar.settings import current_settings

    engine = _engine()
    check = check_drift(engine, _release(engine, args.release), args.judge or current_settings().judge,
                        metrics=args.metrics or None, api_base=args.api_base,
                        say=lambda line: print(line, file=sys.stderr))
    if args.json:
        print(json.dumps({"release_id": check.release_id, "judge_config": check.judge_config,
                          "summary": check.summary, "refused": check.refused,
                          "predicted_cost_usd": check.predicted_cost_usd, "cost_usd": check.cost_usd,
                          "metrics": [{k: v for k, v in vars(d).items() if k != "request_hashes"}
                                      for d in check.metrics]}, default=str, indent=2))
    else:
        print(format_drift(check))
    return 1 if check.tripped else 0


def cmd_web(args) -> int:
    import uvicorn

    from deepscholar.web import create_app

    _engine()  # schema ready before the first page asks for it
    print(f"DeepScholar leaderboard on http://{args.host}:{args.port}/ (Ctrl-C to stop)")
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="warning")
    return 0


def cmd_replay_serve(args) -> int:
    from deepscholar.replay.server import serve_forever

    serve_forever(Path(args.snapshot), args.host, args.port)
    return 0


def cmd_demo_snapshot(args) -> int:
    from deepscholar.replay.demo_snapshot import write_demo_snapshot

    summary = write_demo_snapshot(Path(args.dest), month=args.month)
    print(summary)
    return 0


def cmd_demo(args) -> int:
    from deepscholar.demo import run_demo

    return run_demo(month=args.month, keep_running=args.keep_running)


def cmd_settings(args) -> int:
    """The effective settings (variable, value, where it comes from), or README's table with --markdown."""
    from tabulate import tabulate

    from deepscholar.settings import effective_rows, markdown_table

    if args.markdown:
        print(markdown_table())
        return 0
    print(tabulate(effective_rows(), headers=["group", "variable", "value", "source"], disable_numparse=True))
    from deepscholar import db
    from deepscholar.connection_budget import describe_budget

    try:
        engine = db.get_engine()
    except Exception as exc:  # the settings are worth showing without a warehouse
        print(f"\n(warehouse not reachable, its max_connections unknown: {exc})")
        engine = None
    budget, limit, lines = describe_budget(engine)
    print("\nwarehouse connections, worst case of these settings (docs/ARCHITECTURE.md, \"Connections\"):\n  "
          + "\n  ".join(lines))
    if limit is not None and budget.worst_case > limit:
        print(f"deepscholar: warning: {lines[-1].removeprefix('WARNING: ')}", file=sys.stderr)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="deepscholar", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)
    _add_db_commands(sub)
    _add_release_commands(sub)
    _add_system_commands(sub)
    _add_report_commands(sub)
    _add_evaluation_commands(sub)
    _add_annotation_commands(sub)
    _add_judge_validation_commands(sub)
    _add_tool_commands(sub)
    return parser


def _add_db_commands(sub) -> None:
    """db init | status | url | stop."""
    dbp = sub.add_parser("db", help="warehouse administration").add_subparsers(dest="db_command", required=True)
    dbp.add_parser("init", help="upgrade the schema to the newest revision, keeping the data (idempotent)"
                   ).set_defaults(func=cmd_db_init)
    p = dbp.add_parser("status", help="current schema revision, head and pending revisions (read-only)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_db_status)
    dbp.add_parser("url", help="print the resolved warehouse URL").set_defaults(func=cmd_db_url)
    dbp.add_parser("stop", help="stop the embedded PostgreSQL (its data stays; the next command restarts it)"
                   ).set_defaults(func=cmd_db_stop)


def _add_release_commands(sub) -> None:
    """releases, release build | summary, import-official."""
    p = sub.add_parser("releases", help="list releases with status, window and counts")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_releases)

    rel = sub.add_parser("release", help="build or inspect one release").add_subparsers(
        dest="release_command", required=True)
    p = rel.add_parser("build", help="build month M outside Airflow (same code as the DAG)")
    p.add_argument("month", help="YYYY-MM")
    p.add_argument("--judge", default=None, help="'local' or a litellm model string")
    p.add_argument("--max-queries", type=_non_negative_int, default=None,
                   help="at most this many queries, a seeded sample stratified by primary category; 0 = no cap "
                        "(default: DEEPSCHOLAR_MAX_QUERIES, else 200)")
    p.add_argument("--seed", type=int, default=None, help="seed of the sample (default: DEEPSCHOLAR_SAMPLE_SEED, else 0)")
    p.add_argument("--reason", default=None,
                   help="why the month is built again: a published month is never changed in place, so this "
                        "builds its next version (M.v2, ...) and writes the reason in its changelog")
    p.set_defaults(func=cmd_release_build)
    p = rel.add_parser("enrich", help="add evaluation tracks' release-time artefacts to a release, even a published "
                                      "one (its queries, references, nuggets and status are left as they are)")
    p.add_argument("month", help="the release, e.g. 2025-06")
    p.add_argument("--tracks", nargs="+", required=True, metavar="TRACK",
                   help="race, claims (comma- or space-separated)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_release_enrich)
    p = rel.add_parser("licences", help="fetch the licences of a month's query papers from arXiv's OAI-PMH (also for "
                                        "a published, sealed month: only paper_licences is written)")
    p.add_argument("month", help="the release, e.g. 2025-06")
    p.set_defaults(func=cmd_release_licences)
    p = rel.add_parser("summary", help="what a release kept, dropped and why")
    p.add_argument("release")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_release_summary)

    p = sub.add_parser("export", help="write a month's dataset, reports, judgments, scores and boards as CSV and "
                                      "Parquet files with a datacard (README.md)")
    p.add_argument("--release", required=True, help="the release, e.g. 2025-06")
    p.add_argument("--out", required=True, help="folder to write into (created)")
    p.add_argument("--judge", default=None, help="judge config (or 'local' / a model) to export; default: every "
                                                  "judge with a board")
    p.set_defaults(func=cmd_export)

    p = sub.add_parser("import-official", help="load the published DeepScholar-bench dataset as a release")
    p.add_argument("directory", help="folder holding dataset/ and nuggets/")
    p.add_argument("--release", required=True, help="release id to store it under")
    p.set_defaults(func=cmd_import_official)


def _add_system_commands(sub) -> None:
    """systems add | list | deactivate | activate."""
    systems = sub.add_parser("systems", help="register and list systems").add_subparsers(
        dest="systems_command", required=True)
    p = systems.add_parser("add", help="register (or update) a system")
    p.add_argument("name")
    p.add_argument("--kind", required=True)
    p.add_argument("--config", default=None, help="JSON object")
    p.add_argument("--version", default="1")
    p.add_argument("--backfill", action="store_true",
                   help="then queue its backfill in Airflow over every eligible past month (after its knowledge "
                        "cutoff) and the frozen comparison slice, printing the plan and its cost estimate first")
    p.add_argument("--backfill-plan", action="store_true", help="print that plan and estimate only")
    p.add_argument("--knowledge-cutoff", default=None, metavar="DATE",
                   help="the model's knowledge cutoff, YYYY-MM-DD or YYYY-MM (its last day) or 'unknown': on a month "
                        "whose papers were published by then the system is shown but not ranked")
    p.set_defaults(func=cmd_systems_add)
    p = systems.add_parser("backfill", help="queue a system's backfill (eligible months and the frozen slice) in "
                                            "Airflow, printing the plan and its cost estimate first")
    p.add_argument("name")
    p.add_argument("--plan", action="store_true", help="print the plan and estimate only")
    p.set_defaults(func=cmd_systems_backfill)

    p = systems.add_parser("cutoff", help="record or correct a system's model knowledge cutoff")
    p.add_argument("name")
    p.add_argument("cutoff", help="YYYY-MM-DD, YYYY-MM (its last day) or 'unknown'")
    p.set_defaults(func=cmd_systems_cutoff)

    p = systems.add_parser("list", help="systems with kind, config and report counts")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_systems_list)
    for verb in ("deactivate", "activate"):
        p = systems.add_parser(verb, help=f"{verb} a system")
        p.add_argument("name")
        p.set_defaults(func=cmd_systems_active, command_name=verb)


def _add_report_commands(sub) -> None:
    """import-reports, generate, reports."""
    p = sub.add_parser("import-reports", help="import reports produced elsewhere as an external system")
    p.add_argument("system")
    p.add_argument("path")
    p.add_argument("--release", required=True)
    from deepscholar.systems.external.formats import format_names

    p.add_argument("--format", default="auto",
                   help="auto (default: each output recognised by its files and content) or one import format: "
                        f"{', '.join(format_names())} (one module each in systems/external/formats/)")
    p.add_argument("--title-search", default="arxiv", choices=["arxiv", "corpus"],
                   help="where reference entries that give only a title are looked up: the corpus, then arXiv "
                        "title search (default), or the corpus only")
    p.add_argument("--max-unresolved", type=float, default=0.2, metavar="SHARE",
                   help="flag a report when more than this share of its cited [n] is unresolved (default 0.2)")
    p.add_argument("--json", action="store_true", help="the whole summary as JSON")
    p.set_defaults(func=cmd_import_reports)

    p = sub.add_parser("generate", help="write the missing reports of a release (same code as the DAG)")
    p.add_argument("--release", required=True)
    p.add_argument("--system", action="append", help="only this system (repeatable)")
    p.add_argument("--regenerate-outdated", action="store_true",
                   help="with --system: first delete the system's reports of the release (and their scores) that "
                        "its current build did not write, so they are written again; costs those reports again")
    p.set_defaults(func=cmd_generate)

    p = sub.add_parser("reports", help="reports of a release with citation and leakage counts")
    p.add_argument("--release", required=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_reports)


def _add_evaluation_commands(sub) -> None:
    """evaluate, leaderboard, web."""
    p = sub.add_parser("evaluate", help="judge a release's reports and roll up its leaderboard (same code as the DAG)")
    p.add_argument("--release", required=True)
    p.add_argument("--judge", default=None,
                   help="'local' (offline embedding judge) or a litellm model string, e.g. openai/gpt-4o "
                        "(default: DEEPSCHOLAR_JUDGE, else local)")
    p.add_argument("--metric-model", action="append", metavar="METRIC=MODEL",
                   help="a different judge model for one metric (repeatable), e.g. nugget_coverage=openai/gpt-4.1")
    p.add_argument("--metrics", nargs="+", metavar="METRIC", help="only these metrics")
    p.add_argument("--tracks", nargs="*", metavar="TRACK", default=None,
                   help="evaluation tracks judged besides the core seven when --metrics is not given, e.g. "
                        "reportbench; none after the flag: the core only (default: DEEPSCHOLAR_TRACKS)")
    p.add_argument("--system", action="append", help="only this system's reports (repeatable)")
    p.add_argument("--api-base", default=None, help="judge API base URL (default: DEEPSCHOLAR_JUDGE_API_BASE)")
    p.add_argument("--concurrency", type=_positive_int, default=None, help="judge requests in flight (default 16)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--publish", action="store_true",
                   help="then check the board (Great Expectations) and publish it, as the benchmark DAG does: a "
                        "published board version never changes, a later different roll-up is the next version")
    p.set_defaults(func=cmd_evaluate)

    p = sub.add_parser("leaderboard", help="print a month's leaderboard (the latest by default)")
    p.add_argument("--release", default=None)
    p.add_argument("--judge", default=None, help="which judge's board: 'local' or a model (default: all)")
    p.add_argument("--track", default=None, metavar="NAME",
                   help="an evaluation track's board (race, fact, reportbench, claims, ...; default: the core board)")
    p.add_argument("--agreement", action="store_true",
                   help="instead of a board: how the families' rankings of that month agree (Kendall's tau)")
    p.add_argument("--as-published", dest="as_published", action="store_true",
                   help="with --track: beside the board, the track's numbers as its authors' released scorer "
                        "aggregates them (docs/METRICS.md, Conformance)")
    p.add_argument("--version", type=_positive_int, default=None, metavar="N",
                   help="that version of the board (default: the latest published one, else the latest draft)")
    p.add_argument("--versions", action="store_true",
                   help="instead of a board: every version of it, with status and what changed")
    p.add_argument("--from", dest="window_from", default=None, metavar="YYYY-MM",
                   help="a board pooled over the months from this one (each month's current version; bootstrap "
                        "and paired test over the pooled queries)")
    p.add_argument("--to", dest="window_to", default=None, metavar="YYYY-MM", help="... up to this month")
    p.add_argument("--category", default=None, metavar="CAT",
                   help="only the queries of this arXiv primary category (e.g. cs.CL), with each system's rank "
                        "change against the board of all the queries")
    p.add_argument("--after", default=None, metavar="DATE",
                   help="only the queries published after this day (YYYY-MM-DD; YYYY-MM: after its last day), "
                        "e.g. a model's knowledge cutoff")
    p.add_argument("--format", choices=["table", "csv", "json", "markdown"], default="table")
    p.set_defaults(func=cmd_leaderboard)

    p = sub.add_parser("cost", help="a month's judge cost: predicted (before a run) and actual (the audit trail), "
                                    "and each system's generation and judge tokens and cost")
    p.add_argument("--release", required=True)
    p.add_argument("--judge", default=None, help="'local' or a litellm model string (default: DEEPSCHOLAR_JUDGE)")
    p.add_argument("--metrics", nargs="+", metavar="METRIC", help="only these metrics (default: the core and the "
                                                                    "enabled tracks)")
    p.add_argument("--system", action="append", help="only this system (repeatable)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_cost)

    p = sub.add_parser("web", help="serve the leaderboard page (the same app the Airflow plugin mounts)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8050)
    p.set_defaults(func=cmd_web)


def _add_tool_commands(sub) -> None:
    """latex inspect, replay serve, demo [snapshot], settings."""
    latex = sub.add_parser("latex", help="LaTeX tools").add_subparsers(dest="latex_command", required=True)
    p = latex.add_parser("inspect", help="show the related-work section and its references")
    p.add_argument("path", help="a LaTeX project folder or an e-print file")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_latex_inspect)

    replay = sub.add_parser("replay", help="local replay of arXiv/OpenAlex").add_subparsers(
        dest="replay_command", required=True)
    p = replay.add_parser("serve", help="serve a snapshot folder over HTTP")
    p.add_argument("--snapshot", required=True)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8765)
    p.set_defaults(func=cmd_replay_serve)

    demo = sub.add_parser("demo", help="run the monthly flow offline through Airflow")
    demo.add_argument("--month", default="2025-06")
    demo.add_argument("--keep-running", action="store_true",
                      help="leave Airflow (UI, leaderboard page) running after the month until Ctrl-C")
    demo.set_defaults(func=cmd_demo)
    demo_sub = demo.add_subparsers(dest="demo_command")
    p = demo_sub.add_parser("snapshot", help="write the bundled demo snapshot to a folder")
    p.add_argument("dest")
    p.add_argument("--month", default="2025-06")
    p.set_defaults(func=cmd_demo_snapshot)

    p = sub.add_parser("settings", help="the effective settings: variable, value and whether the environment "
                                        "or the default set it (nothing secret is printed)")
    p.add_argument("--markdown", action="store_true", help="the documentation table of every setting instead")
    p.set_defaults(func=cmd_settings)


def _add_annotation_commands(sub) -> None:
    """annotate export | import: human labels for judge validation."""
    ann = sub.add_parser("annotate", help="human labels for judge validation: export a blind sample of a metric's "
                                          "judged items, import annotators' labels").add_subparsers(
        dest="annotate_command", required=True)
    p = ann.add_parser("export", help="write a blind sample of one metric's judged units (OUT.jsonl and OUT.csv), "
                                      "stratified over systems and the judge's labels, and record it")
    p.add_argument("--release", required=True, help="the release, e.g. 2025-06")
    p.add_argument("--metric", required=True, help="a judged metric (core or track), e.g. citation_precision")
    p.add_argument("--judge", default=None,
                   help="whose judgments: 'local', a litellm model string (as `evaluate --judge`) or a stored judge "
                        "config such as llm:openai/gpt-4o (default: DEEPSCHOLAR_JUDGE, else local)")
    p.add_argument("--n", type=_positive_int, required=True, help="how many units to sample")
    p.add_argument("--seed", type=int, required=True, help="the sample's seed: the same seed draws the same units")
    p.add_argument("--out", required=True, metavar="FILE",
                   help="output name: FILE.jsonl and FILE.csv are written (a .jsonl or .csv suffix is dropped first)")
    p.set_defaults(func=cmd_annotate_export)
    p = ann.add_parser("import", help="store annotators' labels from a filled annotation file (JSONL or CSV); a "
                                      "bad row refuses the whole file")
    p.add_argument("file", help="the annotation file, with at least the columns item_id and label")
    p.add_argument("--annotator", default=None,
                   help="who labelled it (a row's own 'annotator' column wins); required unless every labelled "
                        "row names its annotator")
    p.set_defaults(func=cmd_annotate_import)


def _add_judge_validation_commands(sub) -> None:
    """agreement (judge vs human labels) and the `judges` group (judge vs judge)."""
    p = sub.add_parser("agreement", help="how far the judge agrees with human labels, per metric (percent "
                                          "agreement, Cohen's kappa, confusion, humans' Krippendorff alpha)")
    p.add_argument("--release", required=True)
    p.add_argument("--metric", default=None, help="one annotatable metric (default: every one with human labels)")
    p.add_argument("--judge", default=None, help="judge config, or a judge spec as `evaluate --judge` takes it "
                                                 "(default: DEEPSCHOLAR_JUDGE)")
    p.add_argument("--format", choices=["table", "json", "markdown"], default="table")
    p.set_defaults(func=cmd_agreement)

    judges = sub.add_parser("judges", help="judge validation across judge configs").add_subparsers(
        dest="judges_command", required=True)
    p = judges.add_parser("compare", help="two judge configs on one month: item agreement and kappa per metric, "
                                          "score deltas per system, rank stability of the boards (stored)")
    p.add_argument("--release", required=True)
    p.add_argument("--a", required=True, metavar="CONFIG_A",
                   help="a judge config (e.g. local:all-MiniLM-L6-v2:v1) or a judge spec ('local', a model)")
    p.add_argument("--b", required=True, metavar="CONFIG_B", help="the other one, likewise")
    p.add_argument("--format", choices=["table", "json", "markdown"], default="table")
    p.set_defaults(func=cmd_judges_compare)
    _add_judges_drift(judges)


def _add_judges_drift(judges) -> None:
    p = judges.add_parser("drift", help="re-judge the judge's fixed calibration slice for a month, bypassing the "
                                        "cache, and report agreement and the drift alarm (as the benchmark DAG does)")
    p.add_argument("--release", required=True, help="the month the check is for (its current version)")
    p.add_argument("--judge", default=None, metavar="CONFIG",
                   help="'local' or a litellm model string (default: DEEPSCHOLAR_JUDGE)")
    p.add_argument("--metrics", nargs="+", metavar="METRIC",
                   help="only these metrics (default: every metric a human could annotate)")
    p.add_argument("--api-base", default=None, help="judge API base URL (default: DEEPSCHOLAR_JUDGE_API_BASE)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_judges_drift)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (no cap) or a positive integer, got {text!r}")
    return value


def _one_line(exc: BaseException, limit: int = 1000) -> str:
    """The message on one line, its middle cut when a value it quotes is huge (a 10k-character name)."""
    text = " ".join(str(exc).split())
    if len(text) <= limit:
        return text
    head, tail = limit * 2 // 3, limit // 3
    return f"{text[:head]} [... {len(text) - head - tail} characters ...] {text[-tail:]}"


def main(argv: list[str] | None = None) -> int:
    """Exit 0 on success; 2 for a usage error (argparse) or a UserError, as one line on stderr; 1 for an
    infrastructure failure (one line: try again) and for anything else, which is a bug: its traceback."""
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    # Long steps report "n of N" on this logger (deepscholar.progress): shown without --verbose too,
    # as live bars when stderr is a terminal (DEEPSCHOLAR_PROGRESS=plain|bar overrides), gone before any
    # error below is printed.
    logging.getLogger("deepscholar.progress").setLevel(logging.INFO)
    try:
        with terminal_bars(sys.stderr):
            return args.func(args)
    except UserError as exc:
        print(f"deepscholar: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except InfrastructureError as exc:
        print(f"deepscholar: {' '.join(str(exc).split())}; nothing was stored for the interrupted work, "
              "run the command again once it is back", file=sys.stderr)
        return 1
    except Exception as exc:
        if is_warehouse_outage(exc):
            print(f"deepscholar: the warehouse is unreachable: {' '.join(str(getattr(exc, 'orig', None) or exc).split())}; check "
                  "DEEPSCHOLAR_DB_URL (`deepscholar db url`) and that PostgreSQL is running", file=sys.stderr)
            return 1
        traceback.print_exc()  # a bug: show where, never dress it up as a user error
        return 1


if __name__ == "__main__":
    sys.exit(main())
