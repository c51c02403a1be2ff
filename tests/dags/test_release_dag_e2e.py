"""End to end: `airflow dags test` of the release DAG against the replay server and real PostgreSQL.

A corrupted month failing its gate is tested under the real scheduler (tests/dags/test_scheduled_month.py,
the failed gate and the rebuild), not here again."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa

from deepscholar.demo import replay_endpoints, run_release_dag

pytestmark = pytest.mark.slow  # real Airflow processes: minutes, not seconds

MONTH = "2025-06"


@pytest.fixture(scope="module")
def snapshot(tmp_path_factory) -> Path:
    from deepscholar.replay.demo_snapshot import write_demo_snapshot

    dest = tmp_path_factory.mktemp("snapshot")
    write_demo_snapshot(dest, month=MONTH)
    return dest


@pytest.fixture(scope="module")
def airflow_home(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("deepscholar_home")


def _run(snapshot: Path, home: Path, db_url: str) -> tuple[int, str]:
    from deepscholar.replay.server import ReplayServer

    manifest = json.loads((snapshot / "manifest.json").read_text())
    log_file = home / "dag.log"
    log_file.write_text("")
    with ReplayServer(snapshot) as server:
        # No task retries here: a failure should surface at once, not after minutes of back-off.
        env = replay_endpoints(server, manifest, db_url) | {"DEEPSCHOLAR_TASK_RETRIES": "0"}
        rc = run_release_dag(MONTH, env, home, log_file)
    return rc, log_file.read_text()


def _content_fingerprint(engine, release_id: str = MONTH) -> dict:
    """The stored values users rely on of one release (and its seal), so a re-run that rewrote them would show."""
    params = {"r": release_id}
    with engine.connect() as conn:
        return {
            "release": tuple(conn.execute(sa.text(
                "SELECT status, manifest_hash, published_at FROM releases WHERE release_id = :r"), params).one()),
            "queries": conn.execute(sa.text(
                "SELECT array_agg(arxiv_id || ':' || word_count ORDER BY arxiv_id) FROM release_queries "
                "WHERE release_id = :r"), params).scalar(),
            "references": conn.execute(sa.text(
                "SELECT array_agg(cite_key || ':' || coalesce(resolved_arxiv_id, '-') || ':' || "
                "coalesce(cited_by_count::text, '-') || ':' || coalesce(is_important::text, '-') "
                "ORDER BY arxiv_id, cite_key) FROM exemplar_references WHERE release_id = :r"), params).scalar(),
            "nuggets": conn.execute(sa.text(
                "SELECT md5(string_agg(text || importance, '|' ORDER BY arxiv_id, nugget_idx)) FROM nuggets "
                "WHERE release_id = :r"), params).scalar(),
        }


def test_release_dag_publishes_the_month_and_a_rerun_changes_nothing(engine, db_url, snapshot, airflow_home):
    rc, log = _run(snapshot, airflow_home, db_url)
    assert rc == 0, log[-5000:]
    manifest = json.loads((snapshot / "manifest.json").read_text())
    expected = manifest["expected"]
    with engine.connect() as conn:
        release = conn.execute(sa.text("SELECT * FROM releases WHERE release_id = :r"), {"r": MONTH}).mappings().one()
        outcomes = dict(conn.execute(sa.text(
            "SELECT arxiv_id, CASE WHEN status = 'kept' THEN 'kept' ELSE reason END FROM release_candidates"
        )).all())
        queries = conn.execute(sa.text("SELECT count(*) FROM release_queries")).scalar_one()
    assert release["status"] == "published" and release["gx_success"] is True
    assert release["window_start"].date().isoformat() == "2025-06-01"
    assert {k.split("v")[0]: v for k, v in expected.items()} == outcomes
    assert queries == sum(v == "kept" for v in expected.values()) >= 6
    assert "extract 1 of" in log and "published release 2025-06" in log

    # The publish task emitted an Asset event for the benchmark DAG.
    with sqlite3.connect(airflow_home / "airflow" / "airflow.db") as meta:
        events = meta.execute(
            "SELECT count(*) FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.name = 'deepscholar_release'"
        ).fetchone()[0]
    assert events >= 1

    # Published means immutable: running the month again is a rebuild, which becomes version 2 of the month
    # (the same sources give the same content and manifest hash) and leaves version 1 exactly as it was.
    before = _content_fingerprint(engine)
    rc, log = _run(snapshot, airflow_home, db_url)
    assert rc == 0, log[-5000:]
    assert _content_fingerprint(engine) == before
    again = _content_fingerprint(engine, f"{MONTH}.v2")
    assert again["release"][:2] == ("published", before["release"][1])
    assert {k: again[k] for k in ("queries", "references", "nuggets")} == {
        k: before[k] for k in ("queries", "references", "nuggets")}
    with engine.connect() as conn:
        changelog = conn.execute(sa.text(
            "SELECT previous_release, reason, changes FROM release_changelog WHERE release_id = :r"),
            {"r": f"{MONTH}.v2"}).one()
    assert changelog[:2] == (MONTH, "rebuild requested") and changelog[2]
