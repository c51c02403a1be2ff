"""`deepscholar evaluate`, `leaderboard`, `cost`, `web`: judging a release's reports, and the boards (and
costs) that come of it."""

from __future__ import annotations

import json
import sys

from deepscholar.cli.common import (
    comma_list,
    existing_release,
    named_release,
    positive_float,
    positive_int,
    ready_engine,
    usd_amount,
)
from deepscholar.errors import UserError
from deepscholar.llm.answer_shapes import CONSTRAINED_OUTPUTS


def add_commands(sub) -> None:
    """evaluate, leaderboard, cost, web."""
    _add_evaluate(sub)
    _add_leaderboard(sub)

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
    p.add_argument("--trusted-proxy", action="append", default=[], metavar="ADDRESS",
                   help="a reverse proxy's address (or network, e.g. 10.0.0.0/8) whose X-Forwarded-For and "
                        "X-Forwarded-Proto are believed (repeatable); without one the client is the socket's peer, "
                        "so no client can choose the address the sign-in limit counts")
    p.set_defaults(func=cmd_web)


def _add_evaluate(sub) -> None:
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
    p.add_argument("--concurrency", type=positive_int, default=None,
                   help="judge requests in flight (default: DEEPSCHOLAR_JUDGE_CONCURRENCY, 16; DEEPSCHOLAR_LLM_SERVING "
                        "caps it per model)")
    p.add_argument("--timeout", type=positive_float, default=None, metavar="SECONDS",
                   help="each judge request's timeout for this run (direct transport), over DEEPSCHOLAR_LLM_SERVING "
                        "and DEEPSCHOLAR_LLM_TIMEOUT_SECONDS (a 1-slot local server wants minutes)")
    p.add_argument("--constrained", choices=CONSTRAINED_OUTPUTS, default=None,
                   help="constrain the judge's answers to each question's JSON schema: 'json_schema' sends it "
                        "OpenAI's way (vLLM, SGLang, llama-server), 'json_object' as JSON mode with the schema "
                        "(llama-cpp-python's server); a judge config of its own (...;output=json_schema)")
    p.add_argument("--max-cost", type=usd_amount, default=None, metavar="USD",
                   help="the most this month's judging may cost: predicted over it (or unpriced), nothing is sent "
                        "unless --yes; while judging, it stops once the month's spend passes it by "
                        "DEEPSCHOLAR_JUDGE_BUDGET_MARGIN (default: DEEPSCHOLAR_JUDGE_BUDGET_USD, else no bound)")
    p.add_argument("--yes", action="store_true",
                   help="approve a prediction over --max-cost (or an unpriced one): judge it, up to what was predicted")
    p.add_argument("--transport", choices=("direct", "batch"), default=None,
                   help="'direct': requests one by one; 'batch': the provider's batch API (about half the price, "
                        "answered within 24 h; this command waits, polling every DEEPSCHOLAR_BATCH_POLL_SECONDS; "
                        "openai/<model> judges) (default: DEEPSCHOLAR_JUDGE_TRANSPORT)")
    p.add_argument("--json", action="store_true")
    p.add_argument("--publish", action="store_true",
                   help="then check the board (Great Expectations) and publish it, as the benchmark DAG does: a "
                        "published board version never changes, a later different roll-up is the next version")
    p.set_defaults(func=cmd_evaluate)


def _add_leaderboard(sub) -> None:
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
    p.add_argument("--version", type=positive_int, default=None, metavar="N",
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


def _metric_models(pairs: list[str] | None) -> dict[str, str]:
    out = {}
    for pair in pairs or []:
        metric, sep, model = pair.partition("=")
        if not sep or not metric or not model:
            raise UserError(f"--metric-model takes METRIC=MODEL, got {pair!r}")
        out[metric] = model
    return out


def cmd_evaluate(args) -> int:
    from deepscholar.evaluation.pipeline import evaluate_release
    from deepscholar.settings import current_settings

    engine = ready_engine()
    judge = args.judge or current_settings().judge
    if args.constrained:
        judge = f"{judge};output={args.constrained}"
    result = evaluate_release(engine, named_release(engine, args.release),
                              judge=judge,
                              metric_models=_metric_models(args.metric_model), metrics=args.metrics or None,
                              systems=args.system or None, api_base=args.api_base, concurrency=args.concurrency,
                              timeout=args.timeout,
                              tracks=comma_list(args.tracks), budget_usd=args.max_cost,
                              approve_over_budget=args.yes,
                              transport=args.transport or current_settings().judge_transport)
    published = _publish_board(args.release, result["judge_config"]) if args.publish else None
    if published is not None:
        result["publish"] = published
    if args.json:
        print(json.dumps(result, default=str, indent=2))
    else:
        _print_evaluation(result, published)
    return 1 if published is not None and not published["published"] else 0


def _print_evaluation(result: dict, published: dict | None) -> None:
    from tabulate import tabulate

    cols = ["metric", "system_id", "reports", "items", "unscored_reports", "llm_requests", "seconds"]
    print(tabulate([[r[c] if c != "seconds" else round(r[c], 2) for c in cols] for r in result["runs"]],
                   headers=cols))
    asked = (f"{result['answered']} requests answered through {result['batches']} batches ({result['retried']} "
             f"sent again, {result['failed']} failed)" if "batches" in result
             else f"{result['llm_requests']} LLM requests")
    print(f"\n{result['reports_judged']} report scores written under {result['judge_config']}, "
          f"{asked}, {result['unscored_reports']} unscored; leaderboard rows: {result.get('leaderboard_rows', 0)}")
    if budget := result.get("budget"):
        from deepscholar.llm.prices import usd_text

        def shown(x: float | None) -> str:
            return "unknown" if x is None else usd_text(x)

        approved = " (approved over it)" if budget["approved_over_budget"] else ""
        print(f"budget {usd_text(budget['budget_usd'])}{approved}: predicted {shown(budget['predicted_cost_usd'])} "
              f"for {budget['predicted_calls']:,.0f} calls, {shown(result.get('cost_usd'))} spent by this run")
    if published is not None:
        print(published["message"], file=sys.stdout if published["published"] else sys.stderr)


def _publish_board(release_id: str, judge_config: str) -> dict:
    """The benchmark DAG's check_leaderboard and publish_leaderboard, for a board rolled up by hand."""
    from deepscholar.evaluation.boards.board_versions import publish_board
    from deepscholar.evaluation.boards.leaderboard_quality import check_leaderboard

    engine = ready_engine()
    check = check_leaderboard(engine, release_id, judge_config)
    if not check.success:
        return {"published": False, "message": f"not published: {check.summary}"}
    version = publish_board(engine, release_id, judge_config)
    changes = f" ({version['changes']})" if version["changes"] else ""
    return {"published": True, "board_version": version["board_version"], "changes": version["changes"],
            "message": f"board of {release_id} under {judge_config} published as version "
                       f"{version['board_version']}{changes}"}


def cmd_leaderboard(args) -> int:
    from deepscholar.evaluation.boards.leaderboard import format_leaderboard, load_leaderboard
    from deepscholar.evaluation.judge_spec import JudgeSpec

    judge_config = JudgeSpec.parse(args.judge).config_id if args.judge else None
    engine = ready_engine()
    args.release = named_release(engine, args.release)
    if args.versions:
        return _print_board_versions(engine, args.release, judge_config, args.format)
    if args.window_from or args.window_to or args.category or args.after:
        return _print_pooled_board(engine, args, judge_config)
    rows = load_leaderboard(engine, args.release, judge_config, track=args.track, board_version=args.version)
    if not rows:
        raise _no_board(engine, args)
    if args.agreement:
        from deepscholar.evaluation.boards.rank_agreement import format_agreement, load_agreement

        print(format_agreement(load_agreement(engine, rows[0]["release_id"], rows[0]["judge_config"]), args.format))
        return 0
    if args.as_published:
        return _print_as_published(engine, rows[0], args)
    print(format_leaderboard(rows, args.format))
    return 0


def _no_board(engine, args) -> UserError:
    """What to run for the board that is not there (NotFound instead for an unknown release)."""
    if args.release:
        existing_release(engine, args.release)  # NotFound names an unknown release
    where = f"release {args.release}" if args.release else "any release"
    judged = f" judged by {args.judge}" if args.judge else ""
    if args.track and args.track != "core":
        return UserError(f"no {args.track} track board for {where}{judged} yet: run `deepscholar evaluate "
                         f"--release {args.release or 'YYYY-MM'} --tracks {args.track}` (or enable the track in "
                         "the benchmark DAG's `tracks` param / DEEPSCHOLAR_TRACKS)")
    return UserError(f"no leaderboard for {where}{judged} yet: run `deepscholar evaluate --release "
                     f"{args.release or 'YYYY-MM'}` or the benchmark DAG")


def _print_as_published(engine, board: dict, args) -> int:
    """The track's figures as its authors' released scorer aggregates them, as the board version shown (the
    current one, or --version N) keeps them (evaluation/boards/published.py)."""
    from deepscholar.evaluation.boards.published import FIGURES, format_published, load_published

    family = args.track or "core"
    if family not in FIGURES:
        raise UserError(f"--as-published: the {family} board already aggregates as its authors' released scorer "
                        f"does (a mean over the queries scored); tracks with other figures: {', '.join(FIGURES)}")
    rows = load_published(engine, board["release_id"], board["judge_config"], family, board["board_version"])
    print(format_published(rows, family, args.format))
    return 0


def _print_pooled_board(engine, args, judge_config: str | None) -> int:
    """A board over a window of months, one primary category and/or the queries published after a date,
    computed from the stored per-query scores (evaluation/boards/pooled.py), kept once computed
    (evaluation/boards/pooled_store.py: a later process with nothing changed reads it back)."""
    from deepscholar.evaluation.boards import pooled_store
    from deepscholar.evaluation.boards.leaderboard import format_leaderboard
    from deepscholar.evaluation.boards.selection import window_judge

    if args.version or args.agreement:
        raise UserError("--version and --agreement read a stored board; --from/--to/--category/--after compute one")
    selection = _pooled_selection(engine, args, judge_config)
    judge = judge_config or window_judge(engine, selection.releases)
    family = args.track or "core"
    if args.category:
        rows = pooled_store.kept_board(engine, selection, judge, family, "category",
                                       lambda: _category_board_rows(engine, selection, judge, family, args.category))
        _note_a_small_category(rows, args.category)
    else:
        def window_rows() -> list[dict]:
            from deepscholar.evaluation.boards import pooled

            return pooled.pooled_board(engine, selection, judge, family=family)

        rows = pooled_store.kept_board(engine, selection, judge, family, "window", window_rows)
    if not rows:
        raise UserError(f"no scored query in {selection.describe()} under {judge}")
    print(format_leaderboard(rows, args.format))
    return 0


def _pooled_selection(engine, args, judge_config: str | None):
    """The months (a window, or the one board --release picks), the category and the --after date."""
    from dataclasses import replace

    from deepscholar.evaluation.boards.leaderboard import pick_board
    from deepscholar.evaluation.boards.selection import Selection, current_releases

    if args.window_from or args.window_to:
        if args.release:
            raise UserError("give either --release or a window (--from/--to), not both")
        selection = current_releases(engine, args.window_from, args.window_to)
    else:
        with engine.connect() as conn:
            picked = pick_board(conn, args.release, judge_config)
        if picked is None:
            raise UserError(f"no leaderboard for {args.release or 'any release'} yet")
        selection = Selection((picked[0],), picked[0])
    after = None
    if args.after:
        from deepscholar.systems.registry import parse_cutoff

        after = parse_cutoff(args.after)
        if after is None:
            raise UserError("--after needs a date YYYY-MM-DD (or a month YYYY-MM: after its last day)")
    return replace(selection, category=args.category, published_after=after)


def _category_board_rows(engine, selection, judge: str, family: str, category: str) -> list:
    """One primary category's board, with each system's overall rank over the selection."""
    from dataclasses import replace

    from deepscholar.evaluation.boards import pooled

    _, boards = pooled.category_boards(engine, replace(selection, category=None), judge, min_queries=1,
                                       family=family)
    board = next((b for b in boards if b.category == category), None)
    if board is None:
        raise UserError(f"no query of primary category {category} in {selection.label}")
    return board.rows


def _note_a_small_category(rows: list[dict], category: str) -> None:
    """A note on stderr when the category has fewer queries than the page shows category boards from."""
    from deepscholar.settings import current_settings

    minimum = current_settings().category_min_queries
    n_queries = rows[0]["n_queries"] if rows else 0
    if n_queries < minimum:
        print(f"note: only {n_queries} queries of {category} (the page shows category boards from "
              f"DEEPSCHOLAR_CATEGORY_MIN_QUERIES = {minimum})", file=sys.stderr)


def _print_board_versions(engine, release_id: str | None, judge_config: str | None, fmt: str) -> int:
    from deepscholar.evaluation.boards.board_versions import list_versions
    from deepscholar.evaluation.boards.leaderboard import pick_board

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


def cmd_cost(args) -> int:
    from deepscholar.evaluation.judge_spec import JudgeSpec
    from deepscholar.evaluation.money.costs import format_cost_summary, judge_cost_summary
    from deepscholar.settings import current_settings

    engine = ready_engine()
    release_id = existing_release(engine, args.release)  # NotFound (a UserError) for an unknown release
    summary = judge_cost_summary(engine, release_id, JudgeSpec.parse(args.judge or current_settings().judge),
                                 metrics=args.metrics or None, systems=args.system or None)
    print(json.dumps(summary, default=str, indent=2) if args.json else format_cost_summary(summary))
    return 0


def cmd_web(args) -> int:
    import uvicorn

    from deepscholar.web import create_app

    ready_engine()  # schema ready before the first page asks for it
    print(f"DeepScholar leaderboard on http://{args.host}:{args.port}/ (Ctrl-C to stop)")
    # uvicorn believes X-Forwarded-For from 127.0.0.1 by default: any local process (or a same-host proxy
    # passing it on) could then pick the address the page's sign-in throttle counts (issue 46 §14).
    trusted = [a.strip() for a in args.trusted_proxy if a.strip()]
    uvicorn.run(create_app(), host=args.host, port=args.port, log_level="warning", proxy_headers=bool(trusted),
                forwarded_allow_ips=trusted or None)
    return 0
