"""`deepscholar db init | status | url | stop | backup | restore`: warehouse administration."""

from __future__ import annotations

import json
import sys


def add_commands(sub) -> None:
    """db init | status | url | stop | backup | restore."""
    dbp = sub.add_parser("db", help="warehouse administration").add_subparsers(dest="db_command", required=True)
    dbp.add_parser("init", help="upgrade the schema to the newest revision, keeping the data (idempotent)"
                   ).set_defaults(func=cmd_db_init)
    p = dbp.add_parser("status", help="current schema revision, head and pending revisions (read-only)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_db_status)
    dbp.add_parser("url", help="print the resolved warehouse URL").set_defaults(func=cmd_db_url)
    dbp.add_parser("stop", help="stop the embedded PostgreSQL (its data stays; the next command restarts it)"
                   ).set_defaults(func=cmd_db_stop)
    p = dbp.add_parser("backup", help="write the warehouse (schema, rows, schema revision) to FILE with pg_dump's "
                                      "custom format")
    p.add_argument("--out", required=True, help="the backup file to write (replaced whole when it exists)")
    p.set_defaults(func=cmd_db_backup)
    p = dbp.add_parser("restore", help="restore a backup into an empty warehouse, then upgrade it to this code's "
                                       "schema; refused for a backup of a newer schema")
    p.add_argument("file", help="a file written by `deepscholar db backup`")
    p.add_argument("--clean", action="store_true", help="the target holds data: drop all of it first")
    p.set_defaults(func=cmd_db_restore)


def cmd_db_init(args) -> int:
    from deepscholar import db, migrations

    engine = db.get_engine()
    applied = db.init_db(engine)
    print(f"schema ready at {db.describe_url(engine)} (revision {migrations.head_revision()}); "
          f"applied: {', '.join(applied) or 'nothing new'}")
    return 0


def cmd_db_status(args) -> int:
    """Read-only: never creates or upgrades anything. Exit 1 when the warehouse is in an unknown state."""
    from deepscholar import db, migrations
    from deepscholar.connection_budget import describe_budget

    engine = db.get_engine()
    status = migrations.status(engine) | {"url": db.describe_url(engine)}
    budget, limit, lines = describe_budget(engine)
    if args.json:
        print(json.dumps(status | {"connections": {"worst_case": budget.worst_case, "warehouse": budget.warehouse,
                                                   "airflow": budget.airflow, "server_limit": limit}}, indent=2))
    else:
        print(f"warehouse: {status['url']}\nstate:     {status['state']}\n"
              f"current:   {status['current'] or 'none'}\nhead:      {status['head']}\n"
              f"pending:   {', '.join(status['pending']) or 'none'}")
        if status["detail"]:
            print(f"note:      {status['detail']}")
    if not args.json:
        print("connections (worst case of this configuration):\n  " + "\n  ".join(lines))
    if limit is not None and budget.worst_case > limit:
        print(f"deepscholar: warning: {lines[-1].removeprefix('WARNING: ')}", file=sys.stderr)
    return 1 if status["state"] == "unknown" else 0


def cmd_db_stop(args) -> int:
    """Stop the embedded PostgreSQL (it keeps running after every command, shared by the CLI, the demo's
    Airflow and its tasks); its data stays under DEEPSCHOLAR_HOME and the next command starts it again."""
    from deepscholar import db
    from deepscholar.settings import current_settings

    if current_settings().db_url:
        print("DEEPSCHOLAR_DB_URL is set: the warehouse is not the embedded server, nothing to stop")
        return 0
    home = current_settings().home.resolve()
    print(f"embedded PostgreSQL under {home / 'pgdata'}: "
          + ("stopped" if db.stop_embedded_server(home) else "was not running"))
    return 0


def cmd_db_url(args) -> int:
    from deepscholar import db

    print(db.resolve_db_url())
    return 0


def cmd_db_backup(args) -> int:
    """One line: where, which revision, how big, how long."""
    from pathlib import Path

    from deepscholar import db
    from deepscholar.warehouse_backup import backup

    result = backup(db.get_engine(), Path(args.out))
    print(f"backed up {db.describe_url(db.get_engine())} at schema revision {result.revision} to {result.path} "
          f"({result.bytes / 2**20:.1f} MiB in {result.seconds:.1f} s)")
    return 0


def cmd_db_restore(args) -> int:
    """Exit 2, nothing changed, for a newer backup or a target holding data without --clean."""
    from pathlib import Path

    from deepscholar import db
    from deepscholar.warehouse_backup import restore

    engine = db.get_engine()
    revision, applied, seconds = restore(engine, Path(args.file), clean=args.clean)
    print(f"restored {args.file} (schema revision {revision}) into {db.describe_url(engine)} in {seconds:.1f} s; "
          f"upgraded since: {', '.join(applied) or 'nothing'}")
    return 0
