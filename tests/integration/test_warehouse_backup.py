"""`deepscholar db backup` / `db restore` on real PostgreSQL: the demo month backed up, restored into a fresh
warehouse and exported again gives the same files byte for byte; a backup of a newer schema and a target
holding data are refused in one line (exit 2) with nothing changed."""

from __future__ import annotations

import filecmp
import subprocess

import pytest
import sqlalchemy as sa
from support.demo_month import MONTH, build_demo_month
from support.warehouse import environment, throwaway_warehouse

from deepscholar import cli, db
from deepscholar.export import export_release
from deepscholar.warehouse_backup import backup_revision, libpq_target, pg_tool, rotate


def _url(engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def _cli(engine, *argv: str) -> int:
    """The command line in-process against `engine`'s warehouse (DEEPSCHOLAR_DB_URL)."""
    with environment(DEEPSCHOLAR_DB_URL=_url(engine)):
        return cli.main(list(argv))


def _same_tree(left, right) -> list[str]:
    """Files that differ or exist on one side only, compared byte for byte."""
    names = sorted({p.relative_to(left) for p in left.rglob("*") if p.is_file()}
                   | {p.relative_to(right) for p in right.rglob("*") if p.is_file()})
    return [str(n) for n in names if not ((left / n).is_file() and (right / n).is_file()
                                           and filecmp.cmp(left / n, right / n, shallow=False))]


@pytest.mark.slow  # the demo month's release and reports (about a minute)
def test_the_demo_month_restored_into_a_fresh_warehouse_exports_identically(engine, tmp_path):
    build_demo_month(engine, tmp_path / "home")
    before = export_release(engine, MONTH, tmp_path / "before")
    assert before.rows["reports"] > 0, before.rows
    assert _cli(engine, "db", "backup", "--out", str(tmp_path / "month.dump")) == 0
    assert backup_revision(tmp_path / "month.dump") == db.migrations.head_revision()
    with throwaway_warehouse("deepscholar_restore_", database="auto", set_home=False) as (fresh, _):
        assert _cli(fresh, "db", "restore", str(tmp_path / "month.dump")) == 0
        after = export_release(db.get_engine(_url(fresh)), MONTH, tmp_path / "after")
        assert after.rows == before.rows
        assert _same_tree(tmp_path / "before", tmp_path / "after") == []
        assert db.row_counts(fresh) == db.row_counts(engine)


def _seed(engine, release_id: str = "2099-01") -> None:
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": release_id, "status": "published"}], key=["release_id"])


def test_a_target_holding_data_is_refused_unless_clean(engine, tmp_path, capsys):
    _seed(engine, "2099-01")
    assert _cli(engine, "db", "backup", "--out", str(tmp_path / "a.dump")) == 0
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE releases SET release_id = '2099-02'"))
    capsys.readouterr()
    assert _cli(engine, "db", "restore", str(tmp_path / "a.dump")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds data" in err[0] and "--clean" in err[0], err
    with engine.connect() as conn:  # refused: nothing changed
        assert conn.execute(sa.text("SELECT release_id FROM releases")).scalars().all() == ["2099-02"]
    assert _cli(engine, "db", "restore", "--clean", str(tmp_path / "a.dump")) == 0
    engine = db.get_engine(_url(engine))
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT release_id FROM releases")).scalars().all() == ["2099-01"]


def test_a_backup_of_a_newer_schema_is_refused_in_one_line(engine, tmp_path, capsys):
    """Made by newer code: its alembic_version names a revision this code does not know."""
    newer = "9999_from_the_future"
    with throwaway_warehouse("deepscholar_newer_", database="auto", set_home=False) as (other, _):
        with other.begin() as conn:
            conn.execute(sa.text("UPDATE deepscholar.alembic_version SET version_num = :v"), {"v": newer})
        conninfo, env = libpq_target(other)  # `db backup` itself refuses a revision it does not know
        dump = tmp_path / "newer.dump"
        subprocess.run([pg_tool("pg_dump"), "--format=custom", "--schema=deepscholar", f"--file={dump}",
                        f"--dbname={conninfo}"], check=True, capture_output=True, env=env)
    _seed(engine)
    assert backup_revision(dump) == newer
    capsys.readouterr()
    assert _cli(engine, "db", "restore", "--clean", str(dump)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and newer in err[0] and "newer than this code" in err[0], err
    assert db.row_counts(engine)["releases"] == 1  # refused before anything changed


def test_a_file_that_is_not_a_backup_is_one_line(engine, tmp_path, capsys):
    (tmp_path / "junk.dump").write_text("not a dump\n")
    assert _cli(engine, "db", "restore", str(tmp_path / "junk.dump")) == 2
    assert _cli(engine, "db", "restore", str(tmp_path / "missing.dump")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "not appear to be a valid archive" in err[0] and "no backup at" in err[1], err


def test_rotation_keeps_the_newest_backups(tmp_path):
    names = [f"warehouse-2026{m:02d}01T000000Z-2026-{m:02d}.dump" for m in range(1, 6)]
    for name in names:
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "notes.txt").write_text("kept")
    gone = rotate(tmp_path, keep=3)
    assert [p.name for p in gone] == names[:2]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([*names[2:], "notes.txt"])
