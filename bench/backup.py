"""What a year of the benchmark costs to back up and restore (issue 49): bench/history.py's fill of N
real-size months in a scratch warehouse, then `deepscholar db backup` and `db restore` into a second, fresh
warehouse, timed, with the dump's size against the database's.

Usage: .venv/bin/python bench/backup.py [--months 12] [--queries 200] [--systems 20] [--scale 1.0] [--n-boot 200]
Prints one JSON line per measurement ({"measure": ...}); the last is {"measure": "summary", ...}.
Database: like history.py, on the local server when it answers, else the embedded PostgreSQL; gone afterwards.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import history  # noqa: E402  (bench/history.py: its fill and scratch warehouses)
import sqlalchemy as sa  # noqa: E402
from support.warehouse import throwaway_warehouse  # noqa: E402


def fill(engine, args) -> list[str]:
    """history.py's months: bulk rows at head, then every month's boards by the project's roll-up."""
    months = [f"{history.YEAR}-{m:02d}" for m in range(1, args.months + 1)]
    plan = history.metric_plan()
    with engine.begin() as conn:
        history.fill_static(conn, args.systems, max(100, round(25_000 * args.months * args.scale)))
    for month in months:
        with engine.begin() as conn:
            history.fill_month(conn, month, args.queries, args.systems, args.scale, plan)
        history.say(f"filled {month}")
    for i, month in enumerate(months):
        history.boards_of_month(engine, month, args.n_boot, rejudge=(i + 1) % 4 == 0)
    with engine.begin() as conn:
        conn.execute(sa.text("ANALYZE"))
    return months


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--months", type=int, default=12)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--n-boot", type=int, default=200)
    args = parser.parse_args(argv)

    from deepscholar import db
    from deepscholar.warehouse_backup import backup, restore

    out = Path(tempfile.mkdtemp(prefix="deepscholar_bench_backup_")) / "warehouse.dump"
    with throwaway_warehouse("deepscholar_bench_backup_", database="auto", set_home=False) as (engine, _):
        t = time.perf_counter()
        months = fill(engine, args)
        history.emit("fill", months=len(months), seconds=round(time.perf_counter() - t, 1))
        sizes = history.table_sizes(engine, months)
        made = backup(engine, out)
        history.emit("backup", seconds=round(made.seconds, 1), dump_mb=round(made.bytes / 2**20, 1),
                     database_mb=sizes["database_mb"], revision=made.revision)
        counts = db.row_counts(engine)
    with throwaway_warehouse("deepscholar_bench_restore_", database="auto", set_home=False) as (fresh, _):
        _, applied, seconds = restore(fresh, out)
        same = db.row_counts(db.get_engine(fresh.url.render_as_string(hide_password=False))) == counts
        history.emit("restore", seconds=round(seconds, 1), upgraded=applied, same_row_counts=same)
    out.unlink()
    out.parent.rmdir()
    history.emit("summary", months=len(months), queries=args.queries, systems=args.systems, scale=args.scale,
                 database_mb=sizes["database_mb"], dump_mb=round(made.bytes / 2**20, 1),
                 backup_seconds=round(made.seconds, 1), restore_seconds=round(seconds, 1), same_row_counts=same)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
