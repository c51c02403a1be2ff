"""What several command groups share: the warehouse engine, the release a `--release` names, argument types,
and the parser class that lets a group keep its form without a sub-command (`deepscholar reports --release M`).

Nothing heavy is imported here at module level: `deepscholar --help` imports every group module."""

from __future__ import annotations

import argparse
import sys
from typing import overload


def ready_engine():
    """The warehouse engine, its schema upgraded to the newest revision first (idempotent)."""
    from deepscholar import db

    engine = db.get_engine()
    db.init_db(engine)
    return engine


@overload
def named_release(engine, name: str) -> str: ...


@overload
def named_release(engine, name: None) -> None: ...


def named_release(engine, name: str | None) -> str | None:
    """The release a command's release argument means: a month (or dataset name) is its current version,
    the latest published one (release/versions.py); `2025-06.v2` names that version."""
    from deepscholar.release.versions import resolve_release
    from deepscholar.release.window import validate_release_id

    if name is None:
        return None
    validate_release_id(name)  # InvalidInput before any query for what no release can be named
    with engine.connect() as conn:
        return resolve_release(conn, name)


def existing_release(engine, name: str) -> str:
    """named_release, and NotFound (exit 2, one line) when no such release was ever built: one indexed read,
    for commands that only need to know it exists (not release_summary, which loads the release machinery)."""
    import sqlalchemy as sa

    from deepscholar.errors import NotFound

    release_id = named_release(engine, name)
    with engine.connect() as conn:
        found = conn.execute(sa.text("SELECT 1 FROM releases WHERE release_id = :r"), {"r": release_id}).first()
    if found is None:
        raise NotFound(f"no release {release_id}; `deepscholar release list` lists the releases there are")
    return release_id


def comma_list(values: list[str] | None) -> list[str] | None:
    """`--tracks race fact` and `--tracks race,fact` alike (as `release enrich` reads them); None stays None."""
    if values is None:
        return None
    return [v.strip() for arg in values for v in arg.split(",") if v.strip()]


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (a number of seconds)."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def usd_amount(text: str) -> float:
    """An amount of US dollars >= 0 (a budget); `inf`, `nan` and negative amounts are refused."""
    try:
        value = float(text.strip().removeprefix("$").replace(",", ""))
    except ValueError:
        value = -1.0
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be an amount of US dollars >= 0, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 (no cap) or a positive integer, got {text!r}")
    return value



class CommandParser(argparse.ArgumentParser):
    """argparse's parser (every sub-parser is one too) with one addition: a group given a `bare` parser
    keeps the form it had before it had sub-commands. `deepscholar reports --release M` is parsed by
    `bare`, exactly as the command was (same arguments, usage, help and errors); a first argument naming
    one of the group's sub-commands (`reports list|import|generate ...`) goes to that sub-command."""

    bare: argparse.ArgumentParser | None = None

    def parse_known_args(self, args=None, namespace=None):
        if self.bare is not None:
            args = sys.argv[1:] if args is None else list(args)
            if not args or args[0] not in self._subcommand_names():
                return self.bare.parse_known_args(args, namespace)
        return super().parse_known_args(args, namespace)

    def _subcommand_names(self) -> set[str]:
        return {name for action in self._actions if isinstance(action, argparse._SubParsersAction)
                for name in action.choices}
