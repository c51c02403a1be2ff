"""The `deepscholar` command line. Every command honours the settings (`deepscholar settings`), e.g.
DEEPSCHOLAR_DB_URL / DEEPSCHOLAR_HOME.

One module per command group, each with its parser and its handlers: db, release, systems, reports, boards,
judges, site, tools; common holds what several share. Handlers import the library inside, so `deepscholar --help`
stays fast. Commands are named noun first (`release list`, `reports import`, `judges agreement`); the older
spellings stay as aliases (ALIASES): the same handler, arguments, output and exit status."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import traceback

from deepscholar.cli import boards, db, judges, release, reports, site, systems, tools
from deepscholar.cli.common import CommandParser
from deepscholar.errors import InfrastructureError, ProviderTooSlow, UserError, is_warehouse_outage
from deepscholar.progress import terminal_bars

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DESCRIPTION = ("The `deepscholar` command line. Every command honours the settings (`deepscholar settings`), e.g. "
               "DEEPSCHOLAR_DB_URL / DEEPSCHOLAR_HOME.")

# Older spelling -> canonical form. Both parse to the same handler and arguments; `reports` is the group's
# form without a sub-command (`deepscholar reports --release M` is `deepscholar reports list --release M`).
ALIASES = {
    "releases": "release list",
    "import-official": "release import-official",
    "import-reports": "reports import",
    "generate": "reports generate",
    "reports": "reports list",
    "agreement": "judges agreement",
}

EPILOG = ("Older spellings are aliases, with the same arguments, output and exit status: "
          + "; ".join(f"{old}{' (no sub-command)' if new.startswith(old + ' ') else ''} = {new}"
                      for old, new in ALIASES.items()) + ".")

__all__ = ["ALIASES", "build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(prog="deepscholar", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress at INFO level")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (db, release, systems, reports, boards, judges, site, tools):  # the order `--help` lists them in
        group.add_commands(sub)
    return parser


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
    except ProviderTooSlow as exc:  # up but slow: waiting will not help, the settings it names will
        print(f"deepscholar: {' '.join(str(exc).split())}; nothing was stored for the interrupted work",
              file=sys.stderr)
        return 1
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
