"""End to end: `airflow dags test` of the release DAG against the replay server and real PostgreSQL.

One run, on a published month: the demo month cloned from the suite's template (its release built by the
library, as the DAG's tasks build it). Running the month again is a rebuild: the DAG builds, gates and
publishes version 2 with the same content and leaves version 1 as it was. A DAG run publishing a month
from nothing is what tests/dags/test_scheduled_month.py's scheduler runs do (twice); a corrupted month
failing its gate is tested there too, not here again.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.demo_month import cloned_demo_month

from deepscholar.demo import replay_endpoints, run_release_dag

pytestmark = pytest.mark.slow  # real Airflow processes: minutes, not seconds

MONTH = "2025-06"


@pytest.fixture(scope="module")
def published_month(demo_template):
    """The demo month, published, in a database of its own; its snapshot written afresh (the same bytes)."""
    with cloned_demo_month(demo_template, "deepscholar_release_dag_") as built:
        assert built["month"] == MONTH
        yield built


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


def test_release_dag_publishes_the_month_and_a_rerun_changes_nothing(published_month, airflow_home):
    """Published means immutable: running the month again is a rebuild, which becomes version 2 of the month
    (the same sources give the same content and manifest hash), passes its gate with every candidate's
    outcome the snapshot states, emits the release Asset event, and leaves version 1 exactly as it was."""
    engine, snapshot, db_url = published_month["engine"], published_month["snapshot"], published_month["db_url"]
    before = _content_fingerprint(engine)
    assert before["release"][0] == "published"
    rc, log = _run(snapshot, airflow_home, db_url)
    assert rc == 0, log[-5000:]
    assert "extract 1 of" in log and f"published release {MONTH}.v2" in log
    expected = json.loads((snapshot / "manifest.json").read_text())["expected"]
    params = {"r": f"{MONTH}.v2"}
    with engine.connect() as conn:
        release = conn.execute(sa.text("SELECT * FROM releases WHERE release_id = :r"), params).mappings().one()
        outcomes = dict(conn.execute(sa.text(
            "SELECT arxiv_id, CASE WHEN status = 'kept' THEN 'kept' ELSE reason END FROM release_candidates "
            "WHERE release_id = :r"), params).all())
        queries = conn.execute(sa.text("SELECT count(*) FROM release_queries WHERE release_id = :r"),
                               params).scalar_one()
        changelog = conn.execute(sa.text(
            "SELECT previous_release, reason, changes FROM release_changelog WHERE release_id = :r"), params).one()
    assert release["status"] == "published" and release["gx_success"] is True
    assert release["window_start"].date().isoformat() == "2025-06-01"
    assert {k.split("v")[0]: v for k, v in expected.items()} == outcomes
    assert queries == sum(v == "kept" for v in expected.values()) >= 6

    # The publish task emitted an Asset event for the benchmark DAG.
    with sqlite3.connect(airflow_home / "airflow" / "airflow.db") as meta:
        events = meta.execute(
            "SELECT count(*) FROM asset_event e JOIN asset a ON a.id = e.asset_id WHERE a.name = 'deepscholar_release'"
        ).fetchone()[0]
    assert events >= 1

    assert _content_fingerprint(engine) == before
    again = _content_fingerprint(engine, f"{MONTH}.v2")
    assert again["release"][:2] == ("published", before["release"][1])
    assert {k: again[k] for k in ("queries", "references", "nuggets")} == {
        k: before[k] for k in ("queries", "references", "nuggets")}
    assert changelog[:2] == (MONTH, "rebuild requested") and changelog[2]
