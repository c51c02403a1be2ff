"""Hostile names and ids (system names, release ids, DAG params): a clear refusal, and no table touched.

Every value goes through `deepscholar.cli.main` (what the `deepscholar` command runs: exit 2 and one
line on stderr) for each command that takes a name or an id, through the library functions behind those
commands, and through the DAG's `month` Param; a few go through a real subprocess too. NUL bytes cannot
be passed on a command line, so they are tried on the library and the Params only. The warehouse holds a
release, systems and reports meanwhile, and its fingerprint must not change.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

# Airflow reads its home at first import (the DAG Param cases load the DAG files); never touch ~/airflow.
os.environ.setdefault("AIRFLOW_HOME", tempfile.mkdtemp(prefix="airflow_home_"))

import pytest  # noqa: E402
import sqlalchemy as sa  # noqa: E402
from support.warehouse import empty_warehouse  # noqa: E402

from deepscholar import cli, db  # noqa: E402
from deepscholar.errors import UserError  # noqa: E402
from faults.conftest import assert_no_loss, warehouse_fingerprint  # noqa: E402

pytestmark = pytest.mark.slow  # CLI subprocesses and Airflow triggers

DAGS = Path(__file__).resolve().parents[2] / "dags"
RELEASE = "2025-06"

# Values a command line can carry (no NUL).
HOSTILE = {
    "sql-injection": "x'; DROP TABLE reports; --",
    "double-quotes": '"quoted" name',
    "html": "<script>alert(1)</script>",
    "path-traversal": "../../etc",
    "path-absolute": "/etc/passwd",
    "10k-chars": "a" * 10_000,
    "fullwidth-digits": "\uff12\uff10\uff12\uff15-\uff10\uff16",  # ２０２５-０６
    "unicode-hyphen": "2025\u201006",
    "cyrillic-lookalike": "\u0435\u0445tractive",  # е, х
    "trailing-newline": RELEASE + "\n",
    "empty": "",
}
NUL = {
    "nul-byte": RELEASE + "\x00",
    "nul-then-sql": "ok\x00'; DROP TABLE reports; --",
}


def command(kind: str, value: str, path: Path) -> list[str]:
    return {
        "systems-add": ["systems", "add", value, "--kind", "extractive"],
        "import-reports-system": ["import-reports", value, str(path), "--release", RELEASE],
        "import-reports-release": ["import-reports", "newcomer", str(path), "--release", value],
        "release-build": ["release", "build", value],
        "leaderboard-release": ["leaderboard", "--release", value],
        "reports-release": ["reports", "--release", value],
        "generate-system": ["generate", "--release", RELEASE, "--system", value],
    }[kind]


COMMANDS = ["systems-add", "import-reports-system", "import-reports-release", "release-build",
            "leaderboard-release", "reports-release", "generate-system"]
CLI_CASES = [pytest.param(kind, value, id=f"cli-{kind}-{name}") for kind in COMMANDS for name, value in HOSTILE.items()]


@pytest.fixture(scope="module")
def warehouse(db_url, tmp_path_factory):
    """A release with a query, two systems and their reports, the CLI pointed at it, and its fingerprint.

    Seeded once for the module: every case must leave it exactly as it is, which each test checks.
    """
    engine = db.get_engine(db_url)
    empty_warehouse(engine)
    with engine.begin() as conn:  # apart: db.upsert reflects tables on another connection
        db.upsert(conn, "releases", [{"release_id": RELEASE, "status": "published",
                                      "window_start": f"{RELEASE}-01T00:00:00+00:00"}], key=["release_id"])
        db.upsert(conn, "release_queries", [{"release_id": RELEASE, "arxiv_id": "2506.00001", "title": "T",
                                             "abstract": "A", "section_raw_latex": "x", "section_text": "x",
                                             "word_count": 1}], key=["release_id", "arxiv_id"])
        db.upsert(conn, "systems", [{"system_id": s, "kind": "extractive"} for s in ("extractive", "other")],
                  key=["system_id"])
        db.upsert(conn, "reports", [{"release_id": RELEASE, "system_id": s, "arxiv_id": "2506.00001",
                                     "status": "ok", "text": f"{s} [1]."} for s in ("extractive", "other")],
                  key=["release_id", "system_id", "arxiv_id"])
    path = tmp_path_factory.mktemp("outputs") / "outputs.jsonl"
    path.write_text('{"arxiv_id": "2506.00001", "text": "imported [1]."}\n')
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEEPSCHOLAR_DB_URL", db_url)
        yield Warehouse(engine, path, warehouse_fingerprint(engine))


@dataclass
class Warehouse:
    engine: sa.Engine
    path: Path
    baseline: dict

    def assert_unchanged(self) -> None:
        assert_no_loss(self.baseline, warehouse_fingerprint(self.engine))


def one_line(capsys) -> str:
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err[:2000]
    return err


@pytest.mark.parametrize(("kind", "value"), CLI_CASES)
def test_cli_refuses_in_one_line_and_changes_nothing(warehouse, capsys, kind, value):
    code = cli.main(command(kind, value, warehouse.path))
    warehouse.assert_unchanged()
    line = one_line(capsys)
    assert code == 2, line
    assert line.startswith("deepscholar: error: ")
    assert len(line) < 2000  # a 10k-character value is not echoed whole


SUBPROCESS_CASES = [
    pytest.param("systems-add", HOSTILE["sql-injection"], id="subprocess-systems-add-sql"),
    pytest.param("import-reports-release", HOSTILE["sql-injection"], id="subprocess-import-reports-release-sql"),
    pytest.param("release-build", HOSTILE["fullwidth-digits"], id="subprocess-release-build-fullwidth"),
    pytest.param("leaderboard-release", HOSTILE["html"], id="subprocess-leaderboard-release-html"),
]


@pytest.mark.parametrize(("kind", "value"), SUBPROCESS_CASES)
def test_the_command_exits_2_with_one_line(warehouse, kind, value):
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    out = subprocess.run([sys.executable, "-m", "deepscholar.cli", *command(kind, value, warehouse.path)],
                         capture_output=True, text=True, env=env, timeout=120)
    warehouse.assert_unchanged()
    assert out.returncode == 2, out.stderr
    assert len(out.stderr.splitlines()) == 1 and out.stderr.startswith("deepscholar: error: "), out.stderr


def _library_calls(engine, path: Path):
    from deepscholar.evaluation.boards.leaderboard import load_leaderboard
    from deepscholar.release.spec import ReleaseSpec
    from deepscholar.release.steps import build_release
    from deepscholar.settings import Settings
    from deepscholar.systems.external.importer import import_reports
    from deepscholar.systems.registry import add_system

    return {
        "add-system": lambda v: add_system(engine, v, "extractive"),
        "import-reports-system": lambda v: import_reports(engine, v, path, RELEASE),
        "import-reports-release": lambda v: import_reports(engine, "newcomer", path, v),
        "build-release": lambda v: build_release(engine, v, ReleaseSpec(),
                                                 Settings.from_env().replace(arxiv_delay_seconds=0)),
        "load-leaderboard": lambda v: load_leaderboard(engine, v),
    }


LIBRARY_CASES = [pytest.param(call, value, id=f"library-{call}-{name}")
                 for call in ("add-system", "import-reports-system", "import-reports-release", "build-release",
                              "load-leaderboard")
                 for name, value in {**NUL, **{k: HOSTILE[k] for k in ("sql-injection", "fullwidth-digits",
                                                                      "trailing-newline", "10k-chars")}}.items()]


@pytest.mark.parametrize(("call", "value"), LIBRARY_CASES)
def test_library_raises_a_user_error_and_changes_nothing(warehouse, call, value):
    with pytest.raises(UserError) as raised:
        _library_calls(warehouse.engine, warehouse.path)[call](value)
    warehouse.assert_unchanged()
    message = str(raised.value)
    assert "\x00" not in message and "\n" not in message.strip(), message[:300]


# --- the DAGs' `month` Param --------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def dags():
    from airflow.dag_processing.dagbag import DagBag

    os.environ.setdefault("AIRFLOW__CORE__LOAD_EXAMPLES", "False")
    bag = DagBag(dag_folder=str(DAGS))
    assert bag.import_errors == {}
    return bag


MONTH_CASES = [pytest.param(value, id=f"month-param-{name}") for name, value in {
    **HOSTILE, **NUL, "month-13": "2025-13", "month-00": "2025-00", "no-dash": "202506", "day": "2025-06-01"}.items()]


@pytest.mark.parametrize("value", MONTH_CASES)
@pytest.mark.parametrize("dag_id", ["deepscholar_benchmark", "deepscholar_release"])
def test_month_param_refuses_at_trigger_time(dags, dag_id, value):
    from airflow.sdk.definitions.param import ParamValidationError

    params = copy.deepcopy(dags.dags[dag_id].params)
    with pytest.raises(ParamValidationError, match="month"):
        params["month"] = value
        params.validate()
    good = copy.deepcopy(dags.dags[dag_id].params)
    good["month"] = RELEASE
    assert good.validate()["month"] == RELEASE
