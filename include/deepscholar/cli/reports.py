"""`deepscholar reports list | import | check | generate`: the systems' reports of a release, listed, imported
from files, a submission checked before its import (stores nothing), generated. The older spellings are aliases (same arguments and output): `reports --release M` (no
sub-command) is `reports list`, `import-reports` is `reports import`, `generate` is `reports generate`."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from deepscholar.cli.common import CommandParser, named_release, ready_engine

LIST_HELP = "reports of a release with citation and leakage counts"
IMPORT_HELP = "import reports produced elsewhere as an external system"
CHECK_HELP = ("check a submission against a release as `reports import` would, storing nothing: exit 0 when it "
              "would import cleanly, 2 when not")
GENERATE_HELP = "write the missing reports of a release (same code as the DAG)"
BARE_EPILOG = ("This is `deepscholar reports list`. The group's commands: reports list --release ID [--json]; "
               "reports import SYSTEM PATH --release ID ... (also `import-reports`); reports check PATH --release ID ...; "
               "reports generate --release ID "
               "... (also `generate`). `deepscholar reports COMMAND --help` shows each.")


def add_commands(sub) -> None:
    """import-reports (alias), generate (alias), reports [list | import | generate]."""
    _add_import_args(sub.add_parser("import-reports", help=IMPORT_HELP))
    _add_generate_args(sub.add_parser("generate", help=GENERATE_HELP))

    group = sub.add_parser("reports", help=LIST_HELP)
    group.bare = CommandParser(prog=group.prog, epilog=BARE_EPILOG)  # `reports --release M`, as it always was
    _add_list_args(group.bare)
    commands = group.add_subparsers(dest="reports_command", required=True)
    _add_list_args(commands.add_parser("list", help=LIST_HELP))
    _add_import_args(commands.add_parser("import", help=IMPORT_HELP))
    _add_check_args(commands.add_parser("check", help=CHECK_HELP))
    _add_generate_args(commands.add_parser("generate", help=GENERATE_HELP))


def _add_list_args(p) -> None:
    p.add_argument("--release", required=True)
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_reports_list)


class _FormatOption(argparse.Action):
    """`reports import --format`, whose help lists the import formats: found when the help is shown, so
    building the parser (which every command does) does not import every format module (about 0.3 s)."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        setattr(namespace, self.dest, values)

    @property
    def help(self) -> str:
        from deepscholar.systems.external.formats import format_names

        return ("auto (default: each output recognised by its files and content) or one import format: "
                f"{', '.join(format_names())} (one module each in systems/external/formats/)")

    @help.setter
    def help(self, value: str | None) -> None:
        """argparse sets it on construction; the property above is the help."""


def _add_import_args(p) -> None:
    p.add_argument("system")
    _add_reading_args(p)
    p.add_argument("--json", action="store_true", help="the whole summary as JSON")
    p.set_defaults(func=cmd_reports_import)


def _add_check_args(p) -> None:
    _add_reading_args(p)
    p.add_argument("--system", help="also check the name the outputs would be imported under")
    p.add_argument("--json", action="store_true", help="every problem and the summary as JSON")
    p.set_defaults(func=cmd_reports_check)


def _add_reading_args(p) -> None:
    """How PATH is read and judged: the same options for `reports import` and `reports check`."""
    p.add_argument("path")
    p.add_argument("--release", required=True)
    p.add_argument("--format", default="auto", action=_FormatOption)
    p.add_argument("--title-search", default="arxiv", choices=["arxiv", "corpus"],
                   help="where reference entries that give only a title are looked up: the corpus, then arXiv "
                        "title search (default), or the corpus only")
    p.add_argument("--max-unresolved", type=float, default=0.2, metavar="SHARE",
                   help="flag a report when more than this share of its cited [n] is unresolved (default 0.2)")


def _add_generate_args(p) -> None:
    p.add_argument("--release", required=True)
    p.add_argument("--system", action="append", help="only this system (repeatable)")
    p.add_argument("--regenerate-outdated", action="store_true",
                   help="with --system: first delete the system's reports of the release (and their scores) that "
                        "its current build did not write, so they are written again; costs those reports again")
    p.set_defaults(func=cmd_reports_generate)


def cmd_reports_import(args) -> int:
    """Exit 2 when any output could not be read or placed (one line each on stderr, as it is met); the rest is
    stored."""
    from deepscholar.systems.external.importer import format_import_summary, import_reports

    def print_error(e: dict) -> None:
        print(f"deepscholar: error: {e['path']}: {' '.join(str(e['error']).split())}", file=sys.stderr)

    engine = ready_engine()
    summary = import_reports(engine, args.system, Path(args.path), named_release(engine, args.release),
                             fmt=args.format, title_search=args.title_search,
                             max_unresolved_share=args.max_unresolved, on_error=print_error)
    print(json.dumps(summary.as_dict(), default=str, indent=2) if args.json else format_import_summary(summary))
    return 2 if summary.n_errors else 0


def cmd_reports_check(args) -> int:
    """Exit 0 when the submission would import cleanly (every query answered, nothing refused or marked), 2
    when not; writes nothing."""
    from deepscholar.systems.external.check import check_submission, format_check

    engine = ready_engine()
    result = check_submission(engine, Path(args.path), named_release(engine, args.release), fmt=args.format,
                              title_search=args.title_search, max_unresolved_share=args.max_unresolved,
                              system_id=args.system)
    print(json.dumps(result.as_dict(), default=str, indent=2) if args.json else format_check(result))
    return 0 if result.clean else 2


def cmd_reports_generate(args) -> int:
    from deepscholar.systems.generation import generate_release, regenerate_outdated

    engine = ready_engine()
    release_id = named_release(engine, args.release)
    if args.regenerate_outdated:
        summary = regenerate_outdated(engine, release_id, args.system or [])
    else:
        summary = generate_release(engine, release_id, args.system or None)
    print(json.dumps(summary, indent=2))
    return 0


def cmd_reports_list(args) -> int:
    from tabulate import tabulate

    from deepscholar.systems.generation import list_reports

    engine = ready_engine()
    rows = list_reports(engine, named_release(engine, args.release))
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
