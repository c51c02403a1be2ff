"""The fault and hostile-input suite: shared warehouse checks and the tally printed at the end.

Every case is one pytest item, named by the id in a `*_CASES` list of its module, so the counts of
`pytest tests/faults -q` are the figures: cases tried and passed. `assert_no_loss` compares two
`warehouse_fingerprint`s and adds what it found to the tally (support/fault_tally.py: rows lost, natural
keys duplicated), which the session's summary prints; both must be 0, and a case that finds otherwise
fails.

Test modules import the helpers: `from faults.conftest import warehouse_fingerprint, assert_no_loss`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine
from support.fault_tally import TALLY
from support.warehouse import MIGRATION_TABLES

SCHEMA = "deepscholar"
FAULTS_DIR = Path(__file__).resolve().parent
_NOT_DATA = frozenset(MIGRATION_TABLES)  # bookkeeping of the migration tool, not warehouse data



@dataclass(frozen=True)
class TableFingerprint:
    rows: int
    content: str  # md5 over the sorted md5 of every row: any changed, added or lost row changes it
    keys: frozenset[str]  # md5 of each row's primary key, to name lost rows
    duplicated: dict[str, int]  # per PRIMARY KEY / UNIQUE constraint: rows beyond the first per key value


def _key_constraints(conn: sa.Connection) -> dict[str, dict[str, list[str]]]:
    """table -> constraint name -> its columns in order, for every PRIMARY KEY and UNIQUE constraint."""
    rows = conn.execute(sa.text("""
        SELECT tc.table_name, tc.constraint_name, tc.constraint_type, kcu.column_name
        FROM information_schema.table_constraints tc
        JOIN information_schema.key_column_usage kcu
          ON kcu.constraint_schema = tc.constraint_schema AND kcu.constraint_name = tc.constraint_name
         AND kcu.table_name = tc.table_name
        WHERE tc.table_schema = :s AND tc.constraint_type IN ('PRIMARY KEY', 'UNIQUE')
        ORDER BY tc.table_name, tc.constraint_type, tc.constraint_name, kcu.ordinal_position"""),
        {"s": SCHEMA}).all()
    out: dict[str, dict[str, list[str]]] = {}
    for table, name, kind, column in rows:
        out.setdefault(table, {}).setdefault(f"{kind.lower()} {name}", []).append(column)
    return out


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def warehouse_fingerprint(engine: Engine, ignore_columns: Iterable[str] = ()) -> dict[str, TableFingerprint]:
    """Per base table of the schema: row count, content hash, primary-key hashes and duplicated keys.

    The keys come from information_schema, so a table added by a later migration is covered without
    touching this file. `ignore_columns` (e.g. "updated_at") are left out of the content hash.
    """
    ignored = "".join(f" - '{c}'" for c in ignore_columns)
    with engine.connect() as conn:
        tables = [t for t in conn.execute(sa.text(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = :s AND table_type = 'BASE TABLE' "
            "ORDER BY 1"), {"s": SCHEMA}).scalars() if t not in _NOT_DATA]
        constraints = _key_constraints(conn)
        out = {}
        for table in tables:
            qualified = f"{SCHEMA}.{_quote(table)}"
            rows, content = conn.execute(sa.text(
                f"SELECT count(*), coalesce(md5(string_agg(h, '' ORDER BY h)), '') "
                f"FROM (SELECT md5((to_jsonb(t){ignored})::text) AS h FROM {qualified} t) x")).one()
            keyed = constraints.get(table, {})
            primary = next((cols for name, cols in keyed.items() if name.startswith("primary")), None)
            keys: frozenset[str] = frozenset()
            if primary:
                cols = ", ".join(_quote(c) for c in primary)
                keys = frozenset(conn.execute(sa.text(
                    f"SELECT md5(jsonb_build_array({cols})::text) FROM {qualified}")).scalars())
            duplicated = {}
            for name, cols in keyed.items():
                listed = ", ".join(_quote(c) for c in cols)
                duplicated[name] = conn.execute(sa.text(
                    f"SELECT count(*) - count(DISTINCT jsonb_build_array({listed})) FROM {qualified}")).scalar_one()
            out[table] = TableFingerprint(rows, content, keys, duplicated)
    return out


def assert_no_loss(before: dict[str, TableFingerprint], after: dict[str, TableFingerprint],
                   allowed_to_change: Iterable[str] = ()) -> None:
    """No row lost anywhere, no natural key duplicated, and only `allowed_to_change` tables changed.

    A table allowed to change may gain rows and update them in place (an upsert), never lose one.
    """
    allowed = set(allowed_to_change)
    unknown = allowed - set(after)
    assert not unknown, f"allowed_to_change names no table of the schema: {sorted(unknown)}"
    lost = {t: len(fp.keys - after[t].keys) if t in after else fp.rows for t, fp in before.items()}
    lost = {t: n for t, n in lost.items() if n}
    duplicated = {(t, c): n for t, fp in after.items() for c, n in fp.duplicated.items() if n}
    changed = sorted(t for t, fp in before.items() if t in after and t not in allowed
                     and (fp.rows, fp.content) != (after[t].rows, after[t].content))
    changed += sorted(t for t in set(after) - set(before) - allowed if after[t].rows)
    TALLY["warehouse_checks"] += 1
    TALLY["rows_lost"] += sum(lost.values())
    TALLY["keys_duplicated"] += sum(duplicated.values())
    assert not lost, f"rows lost: {lost}"
    assert not duplicated, f"natural keys duplicated: {duplicated}"
    assert not changed, f"tables changed that should not have: {changed}"


@contextlib.contextmanager
def unchanged(engine: Engine, allowed_to_change: Iterable[str] = ()) -> Iterator[dict]:
    """`with unchanged(engine): <hostile call>`: fingerprints before and after, then assert_no_loss."""
    before = warehouse_fingerprint(engine)
    yield before
    assert_no_loss(before, warehouse_fingerprint(engine), allowed_to_change)
