"""The default warehouse: an embedded PostgreSQL started by the project under DEEPSCHOLAR_HOME."""

import pytest
import sqlalchemy as sa

from deepscholar import db

pytestmark = pytest.mark.slow  # starts an embedded PostgreSQL


def test_embedded_postgres_starts_persists_and_takes_the_schema(tmp_path, monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_HOME", str(tmp_path))
    monkeypatch.delenv("DEEPSCHOLAR_DB_URL", raising=False)
    monkeypatch.delenv("AIRFLOW_CONN_DEEPSCHOLAR_DB", raising=False)
    url = db.resolve_db_url()
    assert str(tmp_path) in url.replace("%2F", "/")
    engine = db.get_engine()
    assert db.init_db(engine)[0] == "0001_baseline"  # a new warehouse runs every revision from the baseline
    with engine.begin() as conn:
        db.upsert(conn, "releases", [{"release_id": "2025-06", "status": "building"}], key=["release_id"])
    engine.dispose()
    # A second resolution reuses the running server and finds the data.
    again = db.get_engine(db.resolve_db_url())
    with again.connect() as conn:
        assert conn.execute(sa.text("SELECT status FROM releases")).scalar_one() == "building"
    again.dispose()
    assert db.stop_embedded_server(tmp_path)
