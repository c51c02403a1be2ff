"""`deepscholar latex inspect`, `replay serve`, `demo [snapshot]`, `settings`: tools around the benchmark."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from deepscholar.errors import UserError


def add_commands(sub) -> None:
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
    """The effective settings (variable, value, where it comes from), or docs/OPERATIONS.md's tables with --markdown."""
    from tabulate import tabulate

    from deepscholar.settings_docs import effective_rows, markdown_table

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
