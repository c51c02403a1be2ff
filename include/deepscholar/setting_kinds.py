"""Kinds of value a setting takes (deepscholar.settings): how a variable's text becomes a value, and what
a valid one looks like for the error message. Kept apart from the declarations so settings.py stays one
list of settings."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

_TRUE, _FALSE = {"1", "true", "yes", "on"}, {"0", "false", "no", "off"}


@dataclass(frozen=True)
class Kind:
    """How a variable's text becomes a value: `parse` raises ValueError on anything but `expected`."""

    expected: str
    parse: Callable[[str], Any]


def number(cast: Callable[[str], Any], expected: str, minimum: float, *, above: bool = False,
            maximum: float | None = None) -> Kind:
    def parse(raw: str) -> Any:
        value = cast(raw)
        if not math.isfinite(value) or value < minimum or (above and value == minimum) or (
                maximum is not None and value > maximum):
            raise ValueError(raw)
        return value

    return Kind(expected, parse)


def choice(*choices: str) -> Kind:
    def parse(raw: str) -> str:
        if raw.lower() not in choices:
            raise ValueError(raw)
        return raw.lower()

    return Kind("one of " + ", ".join(choices), parse)


def _bool(raw: str) -> bool:
    if raw.lower() in _TRUE | _FALSE:
        return raw.lower() in _TRUE
    raise ValueError(raw)


def _names(raw: str) -> tuple[str, ...]:
    """A comma-separated list; `none` is no entry (so `none` alone is the empty list)."""
    return tuple(x.strip() for x in raw.split(",") if x.strip() and x.strip().lower() != "none")


def _base_urls(raw: str) -> tuple[str, ...]:
    """Base URLs a key may be sent to, each one url_bases.py takes (userinfo, a query: refused)."""
    from deepscholar.url_bases import parse_base_url

    names = _names(raw)
    for name in names:
        parse_base_url(name)  # ValueError: the setting is malformed
    return names


def _categories(raw: str) -> tuple[str, ...]:
    names = _names(raw)
    if not names:
        raise ValueError(raw)
    return names


def _cap(raw: str) -> int | None:
    """A positive number of queries; empty, none, all or 0: no cap."""
    if raw.lower() in {"", "none", "all", "0"}:
        return None
    value = int(raw)
    if value < 1:
        raise ValueError(raw)
    return value


def _url(raw: str) -> str:
    if not re.match(r"^https?://[^/\s]+", raw):
        raise ValueError(raw)
    return raw


def _database_url(raw: str) -> str:
    if "://" not in raw:
        raise ValueError(raw)
    return raw


def _month(raw: str) -> str:
    match = re.fullmatch(r"(\d{4})-(\d{1,2})", raw)
    if not match or not 1 <= int(match.group(2)) <= 12:
        raise ValueError(raw)
    return raw


def _positive(value: Any, whole: bool) -> bool:
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
        return False
    return math.isfinite(value) and value > 0


def _serving(raw: str) -> tuple[tuple[str, float | None, int | None], ...]:
    """(model, timeout_seconds or None, concurrency or None) per entry of a JSON object
    {"<model>": {"timeout_seconds": s, "concurrency": n}}; a tuple, so Settings stays hashable."""
    data = json.loads(raw) if raw.strip() else {}
    if not isinstance(data, dict):
        raise ValueError(raw)
    out = []
    for model, entry in data.items():
        if not model.strip() or not isinstance(entry, dict) or not entry or set(entry) - {"timeout_seconds",
                                                                                         "concurrency"}:
            raise ValueError(raw)
        timeout, concurrency = entry.get("timeout_seconds"), entry.get("concurrency")
        if (timeout is not None and not _positive(timeout, False)) or (
                concurrency is not None and not _positive(concurrency, True)):
            raise ValueError(raw)
        out.append((model.strip(), None if timeout is None else float(timeout), concurrency))
    return tuple(out)


# The events the DAGs notify about (deepscholar.notifications; docs/RUNBOOK.md says what each means).
NOTIFY_EVENTS = ("release_failed", "run_failed", "board_published", "approval_asked", "deadline_missed")


def _notify_routes(raw: str) -> tuple[tuple[str, str], ...]:
    """`event,event:conn_id,conn_id;event:conn_id` as sorted (event, conn_id) pairs; `*` is every event."""
    routes: set[tuple[str, str]] = set()
    for group in filter(str.strip, raw.split(";")):
        events, sep, conns = group.partition(":")
        names, conn_ids = _names(events), _names(conns)
        if not sep or not names or not conn_ids or not all(re.fullmatch(r"[\w.-]+", c) for c in conn_ids):
            raise ValueError(raw)
        names = NOTIFY_EVENTS if names == ("*",) else names
        if set(names) - set(NOTIFY_EVENTS):
            raise ValueError(raw)
        routes |= {(event, conn) for event in names for conn in conn_ids}
    return tuple(sorted(routes))


TEXT = Kind("text", str)
URL = Kind("an http(s) URL", _url)
DATABASE_URL = Kind("a database URL (postgresql://user:password@host:port/database)", _database_url)
PATH = Kind("a path", Path)
BOOL = Kind("true or false (also 1/0, yes/no, on/off)", _bool)
NAMES = Kind("a comma-separated list", _names)
URL_PREFIXES = Kind("a comma-separated list of URL prefixes (none: no licence allows it)", _names)
ENDPOINT_PREFIXES = Kind("a comma-separated list of base URLs (http(s)://host[:port][/path], no user@), or none",
                         _base_urls)  # web page block
CATEGORIES = Kind("a comma-separated list of arXiv categories", _categories)
CAP = Kind("a positive number of queries, or none for no cap", _cap)
MONTH = Kind("a month, YYYY-MM", _month)
COUNT = number(int, "an integer >= 0", 0)
POSITIVE_INT = number(int, "a positive integer", 0, above=True)
SECONDS = number(float, "a number of seconds >= 0", 0)
HOURS = number(float, "a number of hours >= 0", 0)
POSITIVE_SECONDS = number(float, "a positive number of seconds", 0, above=True)
PORT = number(int, "a port number (0: any free one)", 0, maximum=65535)
FRACTION = number(float, "a number from 0 to 1", 0, maximum=1)
USD = number(float, "an amount of US dollars >= 0", 0)
NOTIFY_ROUTES = Kind(f"event,...:connection_id,...;... (events: {', '.join(NOTIFY_EVENTS)}, or *)", _notify_routes)
SERVING = Kind('a JSON object {"<model>": {"timeout_seconds": s, "concurrency": n}, ...}', _serving)


def or_none(kind: Kind) -> Kind:
    """`kind`, or `none` for no value (no bound)."""
    def parse(raw: str) -> Any:
        return None if raw.lower() == "none" else kind.parse(raw)

    return Kind(f"{kind.expected}, or none", parse)


# --- showing values -----------------------------------------------------------------------------------------

def masked(text: str) -> str:
    """A URL's password (user:password@) replaced by ***: no setting is a secret, but a database URL may
    carry one."""
    return re.sub(r"([^/@:\s]*:)[^/@\s]*@", r"\1***@", text)


def shown(value: Any) -> str:
    """A value as the docs and `deepscholar settings` print it."""
    if value is None:
        return "unset"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(value) if value else "(none)"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return masked(str(value))
