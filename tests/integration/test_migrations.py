"""Schema migrations on real PostgreSQL: upgrades keep every row, pre-migration warehouses are adopted,
unknown states are refused, `db status` reports, and concurrent callers migrate exactly once."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import threading
import time
import uuid

import pytest
import sqlalchemy as sa

from deepscholar import db, migrations

pytestmark = pytest.mark.slow  # migrates databases it creates, CLI subprocesses, concurrent processes

HEAD = migrations.head_revision()
ALL = migrations.revision_ids()
CLI = [sys.executable, "-m", "deepscholar.cli"]
LOCK = sa.text(f"SELECT pg_advisory_lock(hashtext('{migrations.LOCK_KEY}'))")
UNLOCK = sa.text(f"SELECT pg_advisory_unlock(hashtext('{migrations.LOCK_KEY}'))")

# Rows for most tables, each statement run only when its table exists (older warehouses lack some).
SEED = [
    ("releases", "INSERT INTO deepscholar.releases (release_id, status, counts) VALUES "
                 "('2025-05', 'published', '{\"queries\": 1}'), ('2025-06', 'building', '{}')"),
    ("papers", "INSERT INTO deepscholar.papers (arxiv_id, version, title, comment) VALUES "
               "('2505.00001', 1, 'A paper', 'Accepted at ACL 2025'), ('2505.00001', 2, 'A paper v2', NULL)"),
    ("release_candidates", "INSERT INTO deepscholar.release_candidates (release_id, arxiv_id, version, stage, "
                           "status, reason) VALUES ('2025-05', '2505.00001', 1, 'kept', 'kept', NULL), "
                           "('2025-05', '2505.00002', 2, 'version', 'skipped', 'not_v1')"),
    ("release_queries", "INSERT INTO deepscholar.release_queries (release_id, arxiv_id, title, abstract, "
                        "section_raw_latex, section_text, word_count) VALUES "
                        "('2025-05', '2505.00001', 'A paper', 'abs', '\\section{Related}', 'Related [1].', 2)"),
    ("exemplar_references", "INSERT INTO deepscholar.exemplar_references (release_id, arxiv_id, cite_key, "
                            "bib_title, cited_by_count) VALUES ('2025-05', '2505.00001', 'smith2020', 'Old', 12)"),
    ("nuggets", "INSERT INTO deepscholar.nuggets (release_id, arxiv_id, nugget_idx, text, importance, "
                "judge_config) VALUES ('2025-05', '2505.00001', 0, 'a fact', 'vital', 'local:m:v1')"),
    ("corpus", "INSERT INTO deepscholar.corpus (arxiv_id, title, abstract, source) VALUES "
               "('2001.00001', 'Dense retrieval', 'We retrieve.', 'reference')"),
    ("llm_calls", "INSERT INTO deepscholar.llm_calls (request_hash, model, request, response_text) VALUES "
                  "('h1', 'openai/gpt-4o', '{\"messages\": []}', 'ok')"),
    ("systems", "INSERT INTO deepscholar.systems (system_id, kind, config) VALUES "
                "('extractive', 'extractive', '{}'), ('mine', 'deepscholar_base', '{\"model\": \"x\"}')"),
    ("reports", "INSERT INTO deepscholar.reports (release_id, system_id, arxiv_id, status, text, error) VALUES "
                "('2025-05', 'extractive', '2505.00001', 'ok', 'Prior work [1].', NULL), "
                "('2025-05', 'mine', '2505.00001', 'system_error', NULL, 'timeout')"),
    ("report_sources", "INSERT INTO deepscholar.report_sources (report_id, source_idx, arxiv_id, title) "
                       "SELECT report_id, 1, '2001.00001', 'Dense retrieval' FROM deepscholar.reports "
                       "WHERE status = 'ok'"),
    ("judgments", "INSERT INTO deepscholar.judgments (report_id, metric, judge_config, item_key, metric_version, "
                  "label) SELECT report_id, 'relevance_rate', 'local:m:v1', 's1', 'v1', '{\"grade\": 2}' "
                  "FROM deepscholar.reports WHERE status = 'ok'"),
    ("metric_scores", "INSERT INTO deepscholar.metric_scores (report_id, metric, judge_config, variant, "
                      "metric_version, value) SELECT report_id, 'relevance_rate', 'local:m:v1', 'default', 'v1', "
                      "1.0 FROM deepscholar.reports WHERE status = 'ok'"),
    ("source_cited_by", "INSERT INTO deepscholar.source_cited_by (release_id, arxiv_id, cited_by_count) VALUES "
                        "('2025-05', '2001.00001', 40)"),
    ("leaderboard", "INSERT INTO deepscholar.leaderboard (release_id, system_id, judge_config, n_queries, "
                    "n_reports, n_failed, relevance_rate, rank) VALUES "
                    "('2025-05', 'extractive', 'local:m:v1', 1, 1, 0, 1.0, 1)"),
    ("leaderboard_metrics", "INSERT INTO deepscholar.leaderboard_metrics (release_id, system_id, judge_config, "
                            "metric, dimension, metric_position, variant, mean, n, n_unscored) VALUES "
                            "('2025-05', 'extractive', 'local:m:v1', 'relevance_rate', 'retrieval_quality', 3, "
                            "'default', 1.0, 1, 0)"),
]


@pytest.fixture
def new_database(db_url):
    """Factory of empty databases on the session's server (dropped afterwards): URL strings."""
    admin_url = sa.engine.make_url(db_url).set(database="postgres")
    made: list[str] = []

    def make() -> str:
        name = f"deepscholar_mig_{uuid.uuid4().hex[:8]}"
        admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
        with admin.connect() as conn:
            conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
        admin.dispose()
        made.append(name)
        return admin_url.set(database=name).render_as_string(hide_password=False)

    yield make
    admin = sa.create_engine(admin_url, isolation_level="AUTOCOMMIT")
    for name in made:
        db.get_engine(admin_url.set(database=name).render_as_string(hide_password=False)).dispose()
        with admin.connect() as conn:
            conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _seed(engine) -> list[str]:
    seeded = []
    with engine.begin() as conn:
        for name, statement in SEED:
            if conn.execute(sa.text("SELECT to_regclass(:t) IS NOT NULL"), {"t": f"deepscholar.{name}"}).scalar():
                conn.exec_driver_sql(statement)
                seeded.append(name)
    return seeded


# 0016's columns of releases (a published release is sealed by it: checked in its own test below).
_RELEASE_VERSIONS = "- 'base_id' - 'version' - 'manifest_hash' - 'manifest'"


def _snapshot(engine) -> dict[str, list[str]]:
    """Every row of every data table as JSON, without the columns later revisions add.

    From 0008 on the wide `leaderboard` is a view over leaderboard_systems and leaderboard_metrics: it is
    read in the table's place, and must show exactly the rows the table held."""
    with engine.connect() as conn:
        names = conn.execute(sa.text(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'deepscholar' "
            "AND table_type = 'BASE TABLE' AND table_name NOT IN ('alembic_version', 'schema_files') "
            "ORDER BY 1")).scalars().all()
        names = sorted({"leaderboard" if n == "leaderboard_systems" else n for n in names})
        return {n: sorted(conn.execute(sa.text(
            f"SELECT (to_jsonb(t) - 'quality_flags' - 'cited' - 'n_leaked_retrieved' - 'sample_rank' "
            f"- 'system_build' - 'system_build_detail' - 'local_judge' - 'board_version' - 'knowledge_cutoff' "
            f"- 'model_knowledge' - 'contamination' - 'request_hashes' - 'endpoint_revision' - 'transport' "
            f"- 'registered_from' - 'billed_to' "
            f"{_RELEASE_VERSIONS if n == 'releases' else ''})::text FROM deepscholar.\"{n}\" t")).scalars().all())
            for n in names}


def _init_db_the_old_way(engine, files) -> None:
    """The pre-migration init_db, step for step: schema_files, then every file whose sha256 is new."""
    with engine.begin() as conn:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext('deepscholar_init_db'))"))
        conn.execute(sa.text("CREATE SCHEMA IF NOT EXISTS deepscholar"))
        conn.execute(sa.text(
            "CREATE TABLE IF NOT EXISTS deepscholar.schema_files ("
            " filename text PRIMARY KEY, sha256 text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"))
        for path in files:
            body = path.read_text()
            digest = hashlib.sha256(body.encode()).hexdigest()
            seen = conn.execute(sa.text("SELECT sha256 FROM deepscholar.schema_files WHERE filename = :f"),
                                {"f": path.name}).scalar()
            if seen == digest:
                continue
            conn.exec_driver_sql(body)
            conn.execute(sa.text(
                "INSERT INTO deepscholar.schema_files (filename, sha256) VALUES (:f, :d) "
                "ON CONFLICT (filename) DO UPDATE SET sha256 = excluded.sha256, applied_at = now()"),
                {"f": path.name, "d": digest})


def _assert_quality_flags_column(engine) -> None:
    with engine.connect() as conn:
        column = conn.execute(sa.text(
            "SELECT data_type, udt_name, is_nullable, column_default FROM information_schema.columns "
            "WHERE table_schema = 'deepscholar' AND table_name = 'reports' AND column_name = 'quality_flags'")).one()
        assert tuple(column) == ("ARRAY", "_text", "NO", "'{}'::text[]")
        assert conn.execute(sa.text("SELECT count(*) FROM reports WHERE quality_flags <> '{}'")).scalar() == 0


def test_baseline_warehouse_upgrades_to_head_keeping_every_row(new_database):
    engine = db.get_engine(new_database())
    assert migrations.upgrade(engine, migrations.BASELINE) == [migrations.BASELINE]
    assert migrations.status(engine)["pending"] == ALL[1:]
    seeded = _seed(engine)
    assert len(seeded) == len(SEED)
    before = _snapshot(engine)
    assert all(before[name] for name in seeded)

    assert db.init_db(engine) == ALL[1:]
    after = _snapshot(engine)
    added = ("benchmark_runs", "resolution_cache", "host_rate_limits", "judge_configs",  # later revisions add
             "judge_claims", "track_boards", "track_board_metrics", "board_agreement", "release_track_artefacts",
             "race_rubrics", "gt_claims", "release_changelog", "paper_licences", "annotation_items",
             "annotation_samples", "annotation_sample_items", "human_labels", "human_label_history",
             "judge_comparison_metrics", "judge_comparisons",
             "calibration_items", "judge_drift_checks", "human_agreement_stats", "llm_batches",
             "llm_batch_requests", "judging_estimates", "month_judging_spend", "board_queries",
             "board_query_scores", "pooled_boards", "month_judge_requests", "superseded_metric_scores",
             "superseded_judgments", "board_published_figures")
    assert all(after.pop(table) == [] for table in added)
    # 0027 stored the existing board's costs (month_costs), the same rows leaderboard_costs showed before.
    costs = [json.loads(row) for row in after.pop("month_costs")]
    assert costs and {(c["release_id"], c["judge_config"]) for c in costs} == {("2025-05", c["judge_config"]) for c in costs}
    # The board that existed became version 1 of its board, published, with every row kept (as version 1).
    versions = after.pop("board_versions")  # (the snapshot leaves out board_version: checked below)
    assert [(v["release_id"], v["status"]) for v in map(json.loads, versions)] == [("2025-05", "published")]
    assert after == before
    with engine.connect() as conn:
        assert set(conn.execute(sa.text("SELECT board_version FROM leaderboard_systems UNION "
                                        "SELECT board_version FROM leaderboard_metrics UNION "
                                        "SELECT board_version FROM board_versions")).scalars()) == {1}
    _assert_quality_flags_column(engine)
    with engine.begin() as conn:
        flags = conn.execute(sa.text("SELECT quality_flags FROM reports ORDER BY system_id")).scalars().all()
        assert flags == [[], []]  # existing rows took the default
        # Reports stored before builds were recorded: an unknown build (NULL), not an empty one.
        assert conn.execute(sa.text("SELECT count(*) FROM reports WHERE system_build IS NULL "
                                    "AND system_build_detail IS NULL")).scalar() == 2
        # The importer's path: an upsert through the reflected table sets the new column.
        db.upsert(conn, "reports", [{"release_id": "2025-05", "system_id": "mine", "arxiv_id": "2505.00001",
                                     "status": "ok", "text": "x", "quality_flags": ["no_sources"]}],
                  key=["release_id", "system_id", "arxiv_id"])
        assert conn.execute(sa.text("SELECT quality_flags FROM reports WHERE system_id = 'mine'")).scalar() == [
            "no_sources"]
        assert conn.execute(sa.text("SELECT count(*) FROM leaderboard_latest")).scalar() == 1  # views intact
    assert db.init_db(engine) == []
    # A month whose reports all predate builds has one (unknown) build per system: not a mix.
    from deepscholar.systems.quality import run_reports_check

    check = run_reports_check(engine, "2025-05")
    assert check.success, check.summary
    assert migrations.status(engine) | {"detail": ""} == {
        "state": "versioned", "current": HEAD, "detail": "", "head": HEAD, "pending": []}


@pytest.mark.parametrize("n_files", [4, 2], ids=["current_files", "before_evaluation_files"])
def test_warehouse_built_by_the_previous_code_is_adopted_in_place(new_database, n_files):
    """4: the code just before migrations; 2: an earlier version that had only sql/001 and 002."""
    engine = db.get_engine(new_database())
    _init_db_the_old_way(engine, migrations.sql_paths(migrations.BASELINE)[:n_files])
    seeded = _seed(engine)
    before = _snapshot(engine)
    assert sum(map(len, before.values())) >= len(seeded) > 0
    status = migrations.status(engine)
    assert (status["state"], status["current"], status["pending"]) == ("legacy", None, ALL)

    assert db.init_db(engine) == ALL
    after = _snapshot(engine)
    assert {name: after[name] for name in before} == before
    # Tables the old files lacked: new, empty; but a board that existed is version 1 of itself, and its
    # month's costs are stored (month_costs, 0027).
    assert all(not after[name] for name in set(after) - set(before) - {"board_versions", "month_costs"})
    assert {json.loads(r)["release_id"] for r in after["month_costs"]} == {
        json.loads(r)["release_id"] for r in before.get("leaderboard", [])}
    assert len(after["board_versions"]) == len({json.loads(r)["release_id"] for r in before.get("leaderboard", [])})
    _assert_quality_flags_column(engine)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM schema_files")).scalar() == n_files  # kept as it was
    assert migrations.status(engine)["current"] == HEAD
    assert db.init_db(engine) == []


def test_pre_migration_warehouse_that_differs_from_the_baseline_is_refused(new_database):
    engine = db.get_engine(new_database())
    _init_db_the_old_way(engine, migrations.sql_paths(migrations.BASELINE))
    _seed(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("ALTER TABLE deepscholar.reports DROP COLUMN trace"))
        conn.execute(sa.text("ALTER TABLE deepscholar.papers ADD COLUMN notes text"))
    before = _snapshot(engine)
    with pytest.raises(migrations.WarehouseStateError, match=r"papers\.notes is not in the baseline; reports\.trace is missing"):
        db.init_db(engine)
    assert _snapshot(engine) == before  # rolled back: nothing changed, nothing stamped
    assert migrations.status(engine)["state"] == "legacy"

    with engine.begin() as conn:
        conn.execute(sa.text("INSERT INTO deepscholar.schema_files (filename, sha256) VALUES ('005_extra.sql', 'x')"))
    with pytest.raises(migrations.WarehouseStateError, match="005_extra.sql"):
        db.init_db(engine)


def test_unversioned_tables_and_unknown_revisions_are_refused(new_database):
    engine = db.get_engine(new_database())
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE SCHEMA deepscholar; CREATE TABLE deepscholar.reports (id int)"))
    with pytest.raises(migrations.WarehouseStateError, match="neither alembic_version nor schema_files"):
        db.init_db(engine)

    engine = db.get_engine(new_database())
    db.init_db(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("UPDATE deepscholar.alembic_version SET version_num = '0099_from_the_future'"))
    with pytest.raises(migrations.WarehouseStateError, match="0099_from_the_future, which this code does not know"):
        db.init_db(engine)


def test_init_db_at_head_costs_one_statement(engine):
    statements = []

    def record(conn, cursor, statement, *args):
        statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", record)
    try:
        assert db.init_db(engine) == []
    finally:
        sa.event.remove(engine, "before_cursor_execute", record)
    assert len(statements) == 1, statements


def _run_cli(url: str, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", DEEPSCHOLAR_DB_URL=url)
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=120)


def test_db_status_and_init_from_the_command_line(new_database):
    url = new_database()
    fresh = _run_cli(url, "db", "status", "--json")
    assert fresh.returncode == 0, fresh.stderr
    shown = json.loads(fresh.stdout)
    connections = shown.pop("connections")  # the connection budget against the server (connection_budget.py)
    assert connections["worst_case"] >= connections["warehouse"] > 0 and connections["server_limit"] > 0
    assert shown | {"url": ""} == {
        "state": "fresh", "current": None, "detail": "", "head": HEAD, "pending": ALL, "url": ""}
    engine = db.get_engine(url)
    with engine.connect() as conn:  # status is read-only: it created nothing
        assert conn.execute(sa.text("SELECT to_regnamespace('deepscholar')")).scalar() is None

    migrations.upgrade(engine, migrations.BASELINE)
    status = _run_cli(url, "db", "status")
    assert status.returncode == 0, status.stderr
    lines = dict(line.split(":", 1) for line in status.stdout.splitlines())
    assert lines["current"].strip() == migrations.BASELINE
    assert lines["head"].strip() == HEAD
    assert lines["pending"].strip() == ", ".join(ALL[1:])

    init = _run_cli(url, "db", "init")
    assert init.returncode == 0, init.stderr
    assert f"applied: {', '.join(ALL[1:])}" in init.stdout
    after = json.loads(_run_cli(url, "db", "status", "--json").stdout)
    assert (after["current"], after["pending"]) == (HEAD, [])
    assert "nothing new" in _run_cli(url, "db", "init").stdout

    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM deepscholar.alembic_version"))
    broken = _run_cli(url, "db", "status")
    assert broken.returncode == 1 and "state:     unknown" in broken.stdout and "refusing to guess" in broken.stdout
    refused = _run_cli(url, "db", "init")
    assert refused.returncode == 2 and "refusing to guess" in refused.stderr


def _waiting_for_lock(conn) -> int:
    return conn.execute(sa.text(
        "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())")).scalar()


def _until(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_concurrent_init_db_processes_migrate_exactly_once(new_database):
    url = new_database()
    gate = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    code = "import json, sys; from deepscholar import db; print(json.dumps(db.init_db(db.get_engine(sys.argv[1]))))"
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    with gate.connect() as conn:
        conn.execute(LOCK)  # every process reaches the lock before any may migrate
        procs = [subprocess.Popen([sys.executable, "-c", code, url], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env) for _ in range(4)]
        try:
            _until(lambda: _waiting_for_lock(conn) == len(procs) or any(p.poll() is not None for p in procs))
        finally:
            conn.execute(UNLOCK)
        outputs = [p.communicate(timeout=120) for p in procs]
    gate.dispose()
    assert all(p.returncode == 0 for p in procs), [err for _, err in outputs]
    results = sorted((json.loads(out) for out, _ in outputs), key=len)
    assert results == [[], [], [], ALL]
    assert migrations.status(db.get_engine(url))["current"] == HEAD


def test_concurrent_init_db_threads_migrate_exactly_once(new_database):
    url = new_database()
    engine = db.get_engine(url)
    gate = sa.create_engine(url, isolation_level="AUTOCOMMIT")
    results, errors = [], []

    def call() -> None:
        try:
            results.append(db.init_db(engine))
        except Exception as exc:  # reported below
            errors.append(exc)

    with gate.connect() as conn:
        conn.execute(LOCK)
        threads = [threading.Thread(target=call) for _ in range(4)]
        for t in threads:
            t.start()
        try:
            _until(lambda: _waiting_for_lock(conn) >= 1)
            time.sleep(0.2)  # the other threads queue up behind the first
        finally:
            conn.execute(UNLOCK)
        for t in threads:
            t.join(timeout=120)
    gate.dispose()
    assert not errors, errors
    assert sorted(results, key=len) == [[], [], [], ALL]


def test_releases_published_before_0016_are_sealed_as_they_are(new_database):
    engine = db.get_engine(new_database())
    migrations.upgrade(engine, "0015_track_artefacts")
    with engine.begin() as conn:  # 2025-05 published with a query, a reference and a nugget; 2025-06 building
        for name, statement in SEED:
            if name in ("releases", "release_queries", "exemplar_references", "nuggets"):
                conn.exec_driver_sql(statement)
    assert migrations.upgrade(engine)[0] == "0016_release_versions"
    with engine.begin() as conn:
        rows = conn.execute(sa.text("SELECT release_id, base_id, version, manifest_hash, manifest "
                                    "FROM releases ORDER BY release_id")).all()
        assert conn.execute(sa.text("SELECT deepscholar.release_manifest_hash('2025-05')")).scalar() == rows[0][3]
    (may, may_base, may_version, may_hash, manifest), june = rows
    assert (may, may_base, may_version) == ("2025-05", "2025-05", 1) and len(may_hash) == 64
    assert (manifest["n_queries"], manifest["n_references"], manifest["n_nuggets"]) == (1, 1, 1)
    assert list(manifest["query_digests"]) == ["2505.00001"]
    assert tuple(june[1:4]) == ("2025-06", 1, None)  # not published: not sealed
    with pytest.raises(sa.exc.IntegrityError, match="release 2025-05 is published and sealed"), \
            engine.begin() as conn:
        conn.execute(sa.text("UPDATE nuggets SET text = 'another fact' WHERE release_id = '2025-05'"))


def test_0028_reads_a_month_through_its_reports_and_re_creates_the_per_query_views(new_database):
    """0028 replaces month_costs_of (judgments read per report, JIT off) and re-creates the per-query views a
    warehouse already has in their new shape (scores read per report), for the headline variants they were
    made for; a warehouse without them gets none (its first roll-up makes them)."""
    from deepscholar.evaluation.metrics import registry
    from deepscholar.migrations import wide_views

    engine = db.get_engine(new_database())
    migrations.upgrade(engine, "0027_month_costs")
    heads = [(m, registry.family_of(m), registry.headline_variant(m)) for m in registry.metric_names()]
    plain_join = "JOIN deepscholar.metric_scores m ON m.report_id = r.report_id\n"
    with engine.begin() as conn:  # the views as 0027's code made them: a plain join, the old comment
        for statement in wide_views.query_views_sql(heads):
            if statement.startswith("COMMENT"):
                statement = statement.replace("shape 2; headline variants: ", "headline variants: ")
            elif "CROSS JOIN LATERAL" in statement:
                start = statement.index("CROSS JOIN LATERAL")
                statement = statement[:start] + plain_join + statement[statement.index("JOIN (VALUES"):]
            conn.exec_driver_sql(statement)

    def shape() -> tuple[str, str, list[str] | None]:
        with engine.connect() as conn:
            return (conn.execute(sa.text("SELECT pg_get_viewdef('deepscholar.leaderboard_query_scores')")).scalar(),
                    conn.execute(sa.text("SELECT obj_description(to_regclass('deepscholar.leaderboard_query_scores'),"
                                         " 'pg_class')")).scalar(),
                    conn.execute(sa.text("SELECT proconfig FROM pg_proc WHERE proname = 'month_costs_of'")).scalar())

    definition, comment, config = shape()
    assert "LATERAL" not in definition and comment.startswith("headline variants: ") and config is None
    assert migrations.upgrade(engine, "0028_month_costs_by_report") == ["0028_month_costs_by_report"]
    definition, comment, config = shape()
    assert "LATERAL" in definition and "OFFSET 0" in definition
    assert comment == "shape 2; headline variants: " + ",".join(f"{m}:{f}:{v}" for m, f, v in heads)
    assert sorted(config) == ["jit=off", "work_mem=32MB"]
    with engine.connect() as conn:  # the function still answers (an empty month: no rows), the views still read
        assert conn.execute(sa.text("SELECT count(*) FROM deepscholar.month_costs_of('2099-01')")).scalar() == 0
        assert conn.execute(sa.text("SELECT count(*) FROM deepscholar.leaderboard_categories")).scalar() == 0

    other = db.get_engine(new_database())  # no per-query views yet: 0028 makes none
    migrations.upgrade(other)
    with other.connect() as conn:
        assert conn.execute(sa.text("SELECT to_regclass('deepscholar.leaderboard_query_scores')")).scalar() is None


def test_the_batch_queue_keyed_by_month_keeps_the_batches_sent_before_it(new_database, monkeypatch):
    """0038: queue rows of no month. A batch at the provider stays, in the queue of no month, and any
    month's step polls and collects it (its answers were paid for); what was never sent or is settled is
    dropped (the next pass of its month records it again)."""
    from deepscholar.llm import batch_results, batch_transport
    from deepscholar.llm.batches import OpenAIBatches
    from deepscholar.replay.openai_batches import BatchStub

    engine = db.get_engine(new_database())
    migrations.upgrade(engine, "0037_system_registration")
    request = {"model": "openai/gpt-4o-mini", "api_base": None, "messages": [{"role": "user", "content": "q"}],
               "params": {"temperature": 0}}
    monkeypatch.setenv("OPENAI_API_KEY", "test")
    with BatchStub(answer=lambda body: "answered") as stub:
        api = OpenAIBatches(stub.url, "test")
        sent = api.create(api.upload("old.jsonl", batch_transport.jsonl_line("h-sent", request)), {})
        with engine.begin() as conn:
            conn.execute(sa.text("""
                INSERT INTO deepscholar.llm_batches (batch_key, provider, model, state, provider_batch_id, n_requests,
                                                     n_bytes) VALUES
                    ('old-sent', 'openai', 'openai/gpt-4o-mini', 'submitted', :id, 1, 10),
                    ('old-unsent', 'openai', 'openai/gpt-4o-mini', 'creating', NULL, 1, 10),
                    ('old-done', 'openai', 'openai/gpt-4o-mini', 'collected', 'batch_old', 1, 10)"""),
                {"id": sent["id"]})
            conn.execute(sa.text("""
                INSERT INTO deepscholar.llm_batch_requests (request_hash, model, request, state, batch_key) VALUES
                    ('h-sent', 'openai/gpt-4o-mini', CAST(:r AS jsonb), 'submitted', 'old-sent'),
                    ('h-unsent', 'openai/gpt-4o-mini', CAST(:r AS jsonb), 'submitted', 'old-unsent'),
                    ('h-pending', 'openai/gpt-4o-mini', CAST(:r AS jsonb), 'pending', NULL),
                    ('h-done', 'openai/gpt-4o-mini', CAST(:r AS jsonb), 'done', 'old-done'),
                    ('h-failed', 'openai/gpt-4o-mini', CAST(:r AS jsonb), 'failed', 'old-done')"""),
                {"r": json.dumps(request)})
        assert migrations.upgrade(engine) == ["0038_batch_queues", *ALL[ALL.index("0038_batch_queues") + 1:]]
        with engine.connect() as conn:
            assert conn.execute(sa.text("SELECT request_hash, release_id, judge_config, state, run_id "
                                        "FROM deepscholar.llm_batch_requests")).all() == [
                ("h-sent", "", "", "submitted", None)]
            assert conn.execute(sa.text("SELECT batch_key, release_id, judge_config, state FROM deepscholar.llm_batches "
                                        "ORDER BY batch_key")).all() == [
                ("old-done", "", "", "collected"), ("old-sent", "", "", "submitted")]
        month = batch_transport.BatchQueue("2025-05", "llm:openai/gpt-4o-mini", "run-1")
        status = batch_transport.poll_batches(engine, month, api=lambda base: api)
        assert status["ended"] == 0  # the month's own: none (the old batch is no month's to wait for)
        assert batch_results.collect_results(engine, month, api=lambda base: api)["answered"] == 1
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT response_text, transport FROM deepscholar.llm_calls "
                                    "WHERE request_hash = 'h-sent'")).one() == ("answered", "openai-batch")
