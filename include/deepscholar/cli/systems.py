"""`deepscholar systems add | backfill | cutoff | list | deactivate | activate`: the registered systems."""

from __future__ import annotations

import json
import sys

from deepscholar.cli.common import ready_engine


def add_commands(sub) -> None:
    """systems add | backfill | cutoff | list | deactivate | activate."""
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


def cmd_systems_add(args) -> int:
    from deepscholar.systems.registry import add_system, parse_config

    config = parse_config(args.config)
    engine = ready_engine()
    outcome = add_system(engine, args.name, args.kind, config, version=args.version,
                         knowledge_cutoff=args.knowledge_cutoff)
    if outcome == "moved":
        from deepscholar.systems.generation import current_build
        from deepscholar.systems.registry import get_system

        print(f"system {args.name} ({args.kind}) moved to a new endpoint: its reports from now on are build "
              f"{current_build(get_system(engine, args.name))}; a month that already has reports of its earlier "
              f"build fails its reports check until `deepscholar reports generate --release MONTH --system "
              f"{args.name} --regenerate-outdated` writes them again")
    else:
        print(f"system {args.name} ({args.kind}) {outcome}")
    if args.backfill or args.backfill_plan:
        return _backfill(engine, args.name, queue=args.backfill)
    return 0


def cmd_systems_backfill(args) -> int:
    return _backfill(ready_engine(), args.name, queue=not args.plan)


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

    value = set_knowledge_cutoff(ready_engine(), args.name, args.cutoff)
    print(f"system {args.name}: knowledge cutoff {value or 'unknown'} (boards change at their next roll-up, as "
          "new versions of published ones)")
    return 0


def cmd_systems_list(args) -> int:
    from tabulate import tabulate

    from deepscholar.systems.registry import list_systems

    rows = [r | {"build": _current_build(r)} for r in list_systems(ready_engine())]
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

    set_active(ready_engine(), args.name, args.command_name == "activate")
    print(f"system {args.name} {args.command_name}d")
    return 0
