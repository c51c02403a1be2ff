"""The `systems` table: which systems exist, their kind, version, config and whether they are active."""

from __future__ import annotations

import calendar
import re
from collections.abc import Mapping
from datetime import date

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.errors import InvalidInput, NotFound, UserError
from deepscholar.systems.build import ENDPOINT_KEYS, LOCATION_KEYS  # declared with the build they leave out

# The systems table's CHECK constraint, checked here first so a bad name gets a sentence, not a traceback.
NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]*$"
_NAME_RE = re.compile(NAME_PATTERN)
MAX_NAME_LENGTH = 100
CASE_INDEX = "systems_name_any_case"  # the unique index on lower(system_id) (migration 0037)


class SystemConflict(UserError):
    """Re-registering a name as a different system: its old reports would stay on the board under it."""


class SystemExists(UserError):
    """A registration that may only create (the page's) names a system that is already registered."""


def validate_name(name: str) -> str:
    """A system name as stored: ASCII letters, digits, '.', '_' and '-' (the pattern), so no mixed-script
    look-alike of another name can pass. A name whose NFKC form differs (full-width letters or digits, which
    read like another, ASCII name) is refused too, naming that form, rather than silently registered as it."""
    from deepscholar.systems.config_schema import normalised

    if isinstance(name, str) and (plain := normalised(name)) != name:
        raise InvalidInput(f"invalid system name {name!r}: it looks like {plain!r} but is written with other "
                           f"characters (Unicode NFKC); use the plain form (pattern {NAME_PATTERN})")
    if not isinstance(name, str) or not _NAME_RE.fullmatch(name) or len(name) > MAX_NAME_LENGTH:
        raise InvalidInput(f"invalid system name {name!r}: use letters, digits, '.', '_' and '-', starting with a "
                           f"letter or digit (pattern {NAME_PATTERN}), at most {MAX_NAME_LENGTH} characters")
    return name


def endpoint_of(config: dict) -> dict:
    """The config's ENDPOINT_KEYS: which server a system's reports come from, and with whose key."""
    return {k: v for k, v in config.items() if k in ENDPOINT_KEYS}


def _identity(config: dict) -> dict:
    return {k: v for k, v in config.items() if k not in LOCATION_KEYS}


def parse_config(text: str | None, what: str = "--config") -> dict:
    """A system's config as the CLI and the page take it: a JSON object (empty text: {}); `what` names the
    field in the error."""
    from deepscholar.systems.config_schema import loads_config

    config = loads_config(text, what) if text and text.strip() else {}
    if not isinstance(config, dict):
        raise UserError(f"{what} must be a JSON object, e.g. {{\"top_k\": 5}}")
    return config


def parse_cutoff(text: str | date | None) -> date | None:
    """A knowledge cutoff as the CLI and the page take it: YYYY-MM-DD, YYYY-MM (its last day), or
    'unknown' / '' / None (not given)."""
    if text is None or isinstance(text, date):
        return text
    value = text.strip().lower()
    if value in ("", "unknown"):
        return None
    try:
        if re.fullmatch(r"[0-9]{4}-[0-9]{2}", value):
            year, month = map(int, value.split("-"))
            return date(year, month, calendar.monthrange(year, month)[1])
        if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value):
            return date.fromisoformat(value)
    except ValueError:
        pass
    raise InvalidInput(f"invalid knowledge cutoff {text!r}: a date YYYY-MM-DD, a month YYYY-MM (its last day), "
                       "or 'unknown'")


def set_knowledge_cutoff(engine: Engine, name: str, cutoff: str | date | None) -> date | None:
    """Record (or correct) a system's knowledge cutoff; boards pick it up at their next roll-up, as a new
    version of any published board it changes."""
    from deepscholar.systems.config_schema import check_cutoff_range

    value = check_cutoff_range(parse_cutoff(cutoff))
    with engine.begin() as conn:
        n = conn.execute(sa.text("UPDATE systems SET knowledge_cutoff = :c, updated_at = now() WHERE system_id = :s"),
                         {"c": value, "s": name}).rowcount
    if not n:
        raise NotFound(f"no system {name!r}; `deepscholar systems list` shows the registered ones")
    return value


def add_system(engine: Engine, name: str, kind: str, config: dict | None = None, version: str = "1",
               active: bool = True, knowledge_cutoff: str | date | None = None, *, create_only: bool = False,
               from_page: bool = False) -> str:
    """Register a system; returns "registered", "unchanged", "updated" (location keys other than the
    endpoint's only) or "moved" (an endpoint key changed: a new build from now on).

    A name is one system for good: its reports stay on the leaderboard under it, so registering it
    again with another kind, version or output-defining config is refused (SystemConflict). A new
    version of a system is a new name (e.g. `my_system_v2`). Re-registering the same system is a no-op
    (its `active` flag is left alone); only LOCATION_KEYS may change in place, and a change of ENDPOINT_KEYS
    raises `endpoint_revision`, so the reports written from then on are a new build. `knowledge_cutoff` (the
    model's, see parse_cutoff) is recorded when given; a different one given again corrects it.

    Checked first (systems/config_schema.py): the name (NFKC-normalised), the version, the cutoff's range
    and the config against the kind's schema, `api_key_env` against DEEPSCHOLAR_SYSTEM_KEY_VARIABLES.
    `create_only` (the page): an already registered name is refused (SystemExists), so changing a system,
    above all where it runs and with which key, stays the operator's (`deepscholar systems add`).
    `from_page`: recorded (systems.registered_from), so its `api_base` is held to DEEPSCHOLAR_WEB_API_BASES
    whenever it runs; an operator's move of its endpoint makes it the operator's. A name differing from a
    registered one only by case is that system's name, so it is refused (names are one system in any case).
    """
    from deepscholar.systems import config_schema as cs
    from deepscholar.systems.base import system_kind

    name = validate_name(name)
    kind_class = system_kind(kind)  # NotFound naming the known kinds
    version = cs.check_version(version)
    cutoff = cs.check_cutoff_range(parse_cutoff(knowledge_cutoff))
    if not isinstance(config, dict | None):
        raise InvalidInput("config must be a JSON object, e.g. {\"top_k\": 5}")
    config = cs.check_config(kind, kind_class.config_schema, dict(config or {}))
    try:
        with engine.begin() as conn:
            return _write_system(conn, name, kind, version, config, active, cutoff, kind_class.uses_model_knowledge,
                                 create_only, from_page)
    except sa.exc.IntegrityError as exc:  # a concurrent registration of the same name in another case won
        if CASE_INDEX not in str(exc.orig):
            raise
        with engine.connect() as conn:
            _refuse_case_twin(conn, name, create_only)
        raise


def _write_system(conn: sa.Connection, name: str, kind: str, version: str, config: dict, active: bool,
                  cutoff: date | None, model_knowledge: bool, create_only: bool, from_page: bool) -> str:
    """add_system's writes, in its transaction (the checks of its arguments done)."""
    _refuse_case_twin(conn, name, create_only)
    row = conn.execute(sa.text(
        "SELECT kind, version, config, knowledge_cutoff FROM systems WHERE system_id = :s FOR UPDATE"),
                       {"s": name}).mappings().first()
    new = {"system_id": name, "kind": kind, "version": version, "config": config, "active": active,
           "model_knowledge": model_knowledge, "knowledge_cutoff": cutoff,
           "registered_from": "page" if from_page else "operator"}
    if row is None:
        # A concurrent first write wins; the loser is told when it may only create.
        if not db.upsert(conn, "systems", [new], key=["system_id"], update=[]) and create_only:
            raise SystemExists(f"system {name!r} is already registered")
        return "registered"
    if create_only:
        raise SystemExists(f"system {name!r} is already registered: the page only registers new systems. "
                           f"Changing one (its endpoint, its key) is an operator's `deepscholar systems add "
                           f"{name} --kind {row['kind']} --config ...`; a new system is a new name, e.g. {name}_v2")
    old = dict(row["config"] or {})
    _refuse_another_system(name, row, kind, version, config)
    changed_cutoff = cutoff is not None and cutoff != row["knowledge_cutoff"]
    if old == config and not changed_cutoff:
        return "unchanged"
    db.upsert(conn, "systems", [new], key=["system_id"],
              update=["config", *(["knowledge_cutoff"] if changed_cutoff else [])])
    if endpoint_of(old) == endpoint_of(config):
        return "updated"
    # The operator moved it: where it runs is theirs now, whoever registered it.
    conn.execute(sa.text("UPDATE systems SET endpoint_revision = endpoint_revision + 1, registered_from = 'operator' "
                         "WHERE system_id = :s"), {"s": name})
    return "moved"


def case_twin(conn: sa.Connection, name: str) -> str | None:
    """The registered system whose name is `name` in another case, if any (names are ASCII: lower() folds)."""
    return conn.execute(sa.text("SELECT system_id FROM systems WHERE lower(system_id) = lower(:s) AND system_id <> :s"),
                        {"s": name}).scalar()


def _refuse_case_twin(conn: sa.Connection, name: str, create_only: bool) -> None:
    """SystemExists (the page) or SystemConflict when a system is registered under `name` in another case."""
    if (twin := case_twin(conn, name)) is not None:
        raise (SystemExists if create_only else SystemConflict)(
            f"system {name!r} differs from the registered system {twin!r} only by case: a name is one system in "
            f"any case; use {twin!r} itself, or a new name")


def _refuse_another_system(name: str, row: Mapping, kind: str, version: str, config: dict) -> None:
    """SystemConflict when `name` is registered with another kind, version or output-defining config."""
    differences = [f"{what} {theirs!r} -> {ours!r}" for what, theirs, ours in (
        ("kind", row["kind"], kind), ("version", row["version"], version),
        ("config", _identity(dict(row["config"] or {})), _identity(config))) if theirs != ours]
    if differences:
        raise SystemConflict(
            f"system {name!r} is already registered as another system ({'; '.join(differences)}); its "
            f"reports would stay on the leaderboard under the new definition. Register the new one under a "
            f"new name, e.g. {name}_v2 (and `deepscholar systems deactivate {name}` to stop running the old)")


def set_active(engine: Engine, name: str, active: bool) -> None:
    with engine.begin() as conn:
        n = conn.execute(sa.text("UPDATE systems SET active = :a, updated_at = now() WHERE system_id = :s"),
                         {"a": active, "s": name}).rowcount
    if not n:
        raise NotFound(f"no system {name!r}; `deepscholar systems list` shows the registered ones")


def list_systems(engine: Engine) -> list[dict]:
    with engine.connect() as conn:
        return [dict(r) for r in conn.execute(sa.text(
            "SELECT s.system_id, s.kind, s.version, s.active, s.config, s.registered_at, s.knowledge_cutoff, "
            "s.model_knowledge, s.endpoint_revision, "
            "(SELECT count(*) FROM reports r WHERE r.system_id = s.system_id AND r.status = 'ok') AS ok_reports "
            "FROM systems s ORDER BY s.system_id")).mappings()]


def get_system(engine: Engine, name: str) -> dict:
    with engine.connect() as conn:
        row = conn.execute(sa.text("SELECT * FROM systems WHERE system_id = :s"), {"s": name}).mappings().first()
    if row is None:
        raise NotFound(f"no system {name!r}; register it with `deepscholar systems add`")
    return dict(row)
