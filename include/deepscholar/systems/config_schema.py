"""What a system's registration may say: its config checked against its kind's schema, its version, its
knowledge cutoff and its name, the same for the page and `deepscholar systems add` (registry.add_system).

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.config_schema`.
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any
from urllib.parse import urlsplit

from deepscholar.errors import InvalidInput

__all__ = ["Key", "positive_int", "number", "fraction", "flag", "text", "http_url", "base_url", "key_variable",
           "MAX_CONFIG_CHARS", "MAX_CONFIG_DEPTH", "loads_config", "check_config", "check_key_variable",
           "check_api_base", "check_version", "check_cutoff_range", "normalised", "EARLIEST_CUTOFF",
           "CUTOFF_MARGIN_DAYS"]

MAX_CONFIG_CHARS = 16_384
MAX_CONFIG_DEPTH = 8
MAX_TEXT_CHARS = 2_000
VERSION_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,39}$"
_VERSION_RE = re.compile(VERSION_PATTERN)
# arXiv opened in August 1991: no model's knowledge of its papers ends before that.
EARLIEST_CUTOFF = date(1991, 8, 1)
CUTOFF_MARGIN_DAYS = 31  # a cutoff may lie this far after today (a model announced for the coming weeks)


@dataclass(frozen=True)
class Key:
    """One config key: `check` returns the value or raises ValueError with what is expected."""

    expected: str
    check: Callable[[Any], Any]


def _positive_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1 or value > 1_000_000:
        raise ValueError
    return value


def _number(minimum: float, maximum: float) -> Callable[[Any], float]:
    def check(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not minimum <= value <= maximum:
            raise ValueError
        return value

    return check


def _flag(value: Any) -> bool:
    if not isinstance(value, bool):
        raise ValueError
    return value


def _text(value: Any) -> str:
    if not isinstance(value, str) or not value.strip() or len(value) > MAX_TEXT_CHARS:
        raise ValueError
    return value


def _http_url(value: Any) -> str:
    """An http(s) URL without userinfo: a password in it would be stored, and the host is the one after `@`."""
    if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS or not re.match(r"^https?://[^/\s]+\S*$", value):
        raise ValueError
    if "\\" in value or "@" in urlsplit(value).netloc:
        raise ValueError
    return value


def _base_url(value: Any) -> str:
    from deepscholar.url_bases import parse_base_url

    if not isinstance(value, str) or len(value) > MAX_TEXT_CHARS:
        raise ValueError
    parse_base_url(value)  # ValueError: userinfo, a query, two parsers disagreeing, ...
    return value


positive_int = Key("a positive integer", _positive_int)
flag = Key("true or false", _flag)
text = Key("a non-empty string", _text)
http_url = Key("an http(s) URL without user@ or user:password@", _http_url)
base_url = Key("an http(s) base URL: a host, no user@ or user:password@, no query or fragment", _base_url)
fraction = Key("a number from 0 to 1", _number(0, 1))


def number(minimum: float, maximum: float) -> Key:
    return Key(f"a number from {minimum:g} to {maximum:g}", _number(minimum, maximum))


def check_key_variable(name: Any) -> str:
    """`api_key_env` names a variable on DEEPSCHOLAR_SYSTEM_KEY_VARIABLES, else InvalidInput."""
    from deepscholar.settings import current_settings

    allowed = current_settings().system_key_variables
    if not isinstance(name, str) or name not in allowed:
        shown = repr(name)[:80]
        raise InvalidInput(f"config 'api_key_env' {shown} is not an allowed key variable: a system may only "
                           f"name one of {', '.join(allowed) or '(none)'} (DEEPSCHOLAR_SYSTEM_KEY_VARIABLES)")
    return name


key_variable = Key("a variable on DEEPSCHOLAR_SYSTEM_KEY_VARIABLES", check_key_variable)


def check_api_base(config: Mapping[str, Any], allowed: Sequence[str]) -> None:
    """A page-registered system's `api_base` lies under one of `allowed` (DEEPSCHOLAR_WEB_API_BASES), compared
    parsed (url_bases.py: scheme, host, port, path on a segment boundary), else InvalidInput: the provider's
    key would be sent there. Asked at registration and again when the system runs (the list may have
    narrowed, and rows stored before this check compared strings)."""
    from deepscholar.url_bases import under_any

    if "api_base" not in config:
        return
    value = config["api_base"]
    if not under_any(value, allowed):
        raise InvalidInput(f"config 'api_base' {repr(value)[:80]} is not allowed for a system registered from the "
                           f"page: its key would be sent there. Allowed base URLs: {', '.join(allowed) or '(none)'} "
                           "(DEEPSCHOLAR_WEB_API_BASES); an operator can register it with `deepscholar systems add`")


def _refuse_constant(name: str) -> Any:
    raise InvalidInput(f"config holds {name}: numbers must be finite (JSON has no NaN or Infinity)")


def _depth_of(text_: str) -> int:
    """The deepest nesting of objects and arrays in JSON text (brackets inside strings do not count)."""
    depth = deepest = 0
    in_string = escaped = False
    for ch in text_:
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch in "[{":
            depth += 1
            deepest = max(deepest, depth)
        elif ch in "]}":
            depth -= 1
    return deepest


def loads_config(raw: str, what: str) -> Any:
    """JSON text of a config, bounded before it is parsed: at most MAX_CONFIG_CHARS characters and
    MAX_CONFIG_DEPTH levels, no NaN / Infinity."""
    if len(raw) > MAX_CONFIG_CHARS:
        raise InvalidInput(f"{what} is too long ({len(raw)} characters; at most {MAX_CONFIG_CHARS})")
    if _depth_of(raw) > MAX_CONFIG_DEPTH:
        raise InvalidInput(f"{what} is nested too deep (at most {MAX_CONFIG_DEPTH} levels)")
    try:
        return json.loads(raw, parse_constant=_refuse_constant)
    except InvalidInput as exc:
        raise InvalidInput(f"{what}: {exc}") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"{what} is not valid JSON ({exc})") from None


def _check_values(value: Any, where: str, depth: int = 0) -> None:
    """Every config: finite numbers, no NUL (PostgreSQL's jsonb refuses it), bounded depth."""
    if depth > MAX_CONFIG_DEPTH:
        raise InvalidInput(f"config is nested too deep (at most {MAX_CONFIG_DEPTH} levels)")
    if isinstance(value, float) and not math.isfinite(value):
        raise InvalidInput(f"config {where} is {value}: numbers must be finite")
    if isinstance(value, str) and "\x00" in value:
        raise InvalidInput(f"config {where} holds a NUL character")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str) or "\x00" in k:
                raise InvalidInput(f"config {where}: a key holds a NUL character")
            _check_values(v, f"{where}.{k}" if where else repr(k), depth + 1)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            _check_values(v, f"{where}[{i}]", depth + 1)


def check_config(kind: str, schema: Mapping[str, Key] | None, config: Mapping[str, Any]) -> dict[str, Any]:
    """`config` as kind `kind` takes it, else InvalidInput naming the key and what it should be."""
    try:
        size = len(json.dumps(config, allow_nan=True, default=str))
    except (TypeError, ValueError, RecursionError):
        raise InvalidInput("config is not a JSON object") from None
    if size > MAX_CONFIG_CHARS:
        raise InvalidInput(f"config is too long ({size} characters as JSON; at most {MAX_CONFIG_CHARS})")
    _check_values(dict(config), "")
    if "api_key_env" in config:
        check_key_variable(config["api_key_env"])
    if schema is None:
        return dict(config)
    unknown = sorted(set(config) - set(schema))
    if unknown:
        shown = ", ".join(repr(k)[:60] for k in unknown[:5])
        raise InvalidInput(f"{kind} takes no config key {shown}; its keys are {', '.join(sorted(schema)) or '(none)'}")
    for k, v in config.items():
        try:
            schema[k].check(v)
        except ValueError:
            raise InvalidInput(f"{kind} config {k!r} must be {schema[k].expected}, got {repr(v)[:80]}") from None
    return dict(config)


def check_version(version: Any) -> str:
    """A registered version: NFKC-normalised, then letters, digits, '.', '_', '+' and '-', at most 40."""
    value = normalised(version if isinstance(version, str) else str(version)).strip()
    if not _VERSION_RE.fullmatch(value):
        raise InvalidInput(f"invalid version {repr(version)[:60]}: letters, digits, '.', '_', '+' and '-', starting "
                           "with a letter or digit, at most 40 characters (e.g. 1, 2.0, 2025-06)")
    return value


def check_cutoff_range(cutoff: date | None, today: date | None = None) -> date | None:
    """A knowledge cutoff between arXiv's opening and a month after today, else InvalidInput."""
    if cutoff is None:
        return None
    latest = (today or date.today()) + timedelta(days=CUTOFF_MARGIN_DAYS)
    if not EARLIEST_CUTOFF <= cutoff <= latest:
        raise InvalidInput(f"knowledge cutoff {cutoff.isoformat()} is out of range: between "
                           f"{EARLIEST_CUTOFF.isoformat()} (arXiv's first month) and {latest.isoformat()} "
                           f"({CUTOFF_MARGIN_DAYS} days after today)")
    return cutoff


def normalised(value: str) -> str:
    """NFKC: full-width and other compatibility forms become the characters they look like ('ｍｙ' -> 'my')."""
    return unicodedata.normalize("NFKC", value)
