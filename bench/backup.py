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
from support.warehouse import throwaway_warehouse  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    history.size_arguments(parser, n_boot=200)
    args = parser.parse_args(argv)

    from deepscholar import db
    from deepscholar.warehouse_backup import backup, restore

    out = Path(tempfile.mkdtemp(prefix="deepscholar_bench_backup_")) / "warehouse.dump"
    with throwaway_warehouse("deepscholar_bench_backup_", database="auto", set_home=False) as (engine, _):
        t = time.perf_counter()
        months = history.fill_months(engine, args, history.metric_plan())
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
