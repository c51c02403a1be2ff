"""The command line's older spellings are aliases of its noun-first forms (`deepscholar.cli.ALIASES`): each
parses to the same handler and the same arguments as its canonical form, and refuses the same mistakes.
Every command's and group's --help works (the parser is walked, so a new command is covered)."""

from __future__ import annotations

import argparse
import re

import pytest

from deepscholar.cli import ALIASES, build_parser

# Per alias: its required arguments only (the defaults compared), then every argument it takes.
SAMPLE_ARGS: dict[str, list[list[str]]] = {
    "releases": [[], ["--json"]],
    "import-official": [["official/", "--release", "2025-06"]],
    "import-reports": [["acme", "out/", "--release", "2025-06"],
                       ["acme", "out/", "--release", "2025-06.v2", "--format", "jsonl", "--title-search", "corpus",
                        "--max-unresolved", "0.5", "--json"]],
    "generate": [["--release", "2025-06"],
                 ["--release", "2025-06", "--system", "a", "--system", "b", "--regenerate-outdated"]],
    "reports": [["--release", "2025-06"], ["--json", "--release", "2025-06"]],
    "agreement": [["--release", "2025-06"],
                  ["--release", "2025-06", "--metric", "citation_precision", "--judge", "local", "--format", "json"]],
}


def _parsed(argv: list[str]) -> dict:
    """What the handler is given: the parsed arguments without the names argparse records for dispatch."""
    parsed = vars(build_parser().parse_args(argv))
    return {k: v for k, v in parsed.items() if k != "command" and not k.endswith("_command")}


def _error(argv: list[str], capsys) -> str:
    """The usage error's message (after the command's name, which the two spellings do not share)."""
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err.splitlines()[-1].partition(": error: ")[2]


def test_every_alias_is_sampled():
    assert set(SAMPLE_ARGS) == set(ALIASES)


@pytest.mark.parametrize("old", sorted(ALIASES))
def test_an_alias_parses_to_the_same_handler_and_arguments_as_its_canonical_form(old):
    new = ALIASES[old].split()
    for args in SAMPLE_ARGS[old]:
        for verbose in ([], ["-v"]):
            as_old, as_new = _parsed([*verbose, old, *args]), _parsed([*verbose, *new, *args])
            assert as_old["func"] is as_new["func"], (old, args)
            assert as_old == as_new, (old, args)
    assert as_old["func"].__name__ == "cmd_" + "_".join(new).replace("-", "_")  # handlers named as the canonical form


@pytest.mark.parametrize("old", sorted(ALIASES))
def test_an_alias_refuses_what_its_canonical_form_refuses(old, capsys):
    new = ALIASES[old].split()
    for args in ([], ["--bogus-flag"], ["--release"], ["--format", "nonesuch"], ["--release", "M", "--format", "x"]):
        if args or old != "releases":  # `releases` alone is no mistake
            assert _error([old, *args], capsys) == _error([*new, *args], capsys), (old, args)


def test_reports_without_a_sub_command_is_the_command_it_always_was(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["reports", "--help"])
    out = capsys.readouterr().out
    assert out.startswith("usage: deepscholar reports [-h] --release RELEASE [--json]\n")
    assert "reports import" in out and "reports generate" in out
    assert _error(["reports"], capsys) == "the following arguments are required: --release"
    assert _error(["reports", "--release", "2025-06", "list"], capsys) == "unrecognized arguments: list"


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    yield path
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


COMMANDS = list(_commands(build_parser()))


def test_the_walk_finds_every_group_and_the_canonical_forms():
    assert {("db",), ("release",), ("systems",), ("reports",), ("judges",), ("annotate",), ("latex",),
            ("replay",), ("demo",)} <= set(COMMANDS)
    assert {tuple(new.split()) for new in ALIASES.values()} <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "deepscholar")
def test_help_works(path, capsys):
    with pytest.raises(SystemExit) as exit_:
        build_parser().parse_args([*path, "--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(" ".join(["usage: deepscholar", *path]).rstrip() + " ")
    if not path:  # the aliases are listed
        shown = " ".join(out.split()).replace("- ", "-")  # argparse wraps lines after a hyphen too
        assert all(re.search(rf"\b{old}( \(no sub-command\))? = {new}[;.]", shown) for old, new in ALIASES.items())
