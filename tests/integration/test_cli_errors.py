"""CLI error discipline: a user's mistake is one line on stderr and exit 2; a bug is a traceback and exit 1.

The commands run as real subprocesses against the session database; `main()` is also called in-process
with a command that raises, which no subprocess can provoke.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import sqlalchemy as sa

from deepscholar import cli
from deepscholar.errors import InfrastructureError, UserError

pytestmark = pytest.mark.slow  # CLI subprocesses, seconds each

CLI = [sys.executable, "-m", "deepscholar.cli"]


def run(*args: str, db_url: str, drop_env: tuple[str, ...] = ()) -> subprocess.CompletedProcess:
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", DEEPSCHOLAR_DB_URL=db_url)
    for name in drop_env:
        env.pop(name, None)
    return subprocess.run([*CLI, *args], capture_output=True, text=True, env=env, timeout=300)


def one_line_error(out: subprocess.CompletedProcess) -> str:
    """The process exited 2 with exactly one line on stderr (returned) and no traceback."""
    assert out.returncode == 2, (out.returncode, out.stderr)
    lines = out.stderr.splitlines()
    assert len(lines) == 1 and "Traceback" not in out.stderr, out.stderr
    return lines[0]


def systems(engine) -> dict[str, tuple]:
    with engine.connect() as conn:
        return {r.system_id: (r.kind, r.version, r.config) for r in conn.execute(sa.text(
            "SELECT system_id, kind, version, config FROM systems"))}


def test_evaluate_names_an_empty_release_and_a_missing_api_key_in_one_line(engine, db_url, shared_fixtures):
    from deepscholar.release.official_import import import_official
    from deepscholar.systems.generation import generate_release
    from deepscholar.systems.registry import add_system

    import_official(engine, shared_fixtures / "deepscholar_official", "official")
    line = one_line_error(run("evaluate", "--release", "official", db_url=db_url))
    assert "release official has no ok reports to judge" in line and "deepscholar reports generate --release official" in line

    add_system(engine, "human_exemplar", "human_exemplar")
    assert generate_release(engine, "official", ["human_exemplar"])["ok"] == 5
    out = run("evaluate", "--release", "official", "--judge", "openai/gpt-4o", "--metrics", "organization",
              db_url=db_url, drop_env=("OPENAI_API_KEY", "DEEPSCHOLAR_JUDGE_API_BASE"))
    line = one_line_error(out)
    assert line.startswith("deepscholar: error: OPENAI_API_KEY is not set") and "openai/gpt-4o" in line
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM llm_calls")).scalar() == 0

    line = one_line_error(run("evaluate", "--release", "official", "--metrics", "fluency", db_url=db_url))
    assert "unknown metrics: fluency" in line
    line = one_line_error(run("evaluate", "--release", "official", "--metric-model", "organization", db_url=db_url))
    assert "--metric-model takes METRIC=MODEL" in line


def test_a_bad_system_name_is_refused_before_the_database(engine, db_url):
    line = one_line_error(run("systems", "add", "x'; DROP TABLE reports; --", "--kind", "extractive", db_url=db_url))
    assert "invalid system name" in line and "^[A-Za-z0-9][A-Za-z0-9._-]*$" in line
    line = one_line_error(run("systems", "add", "ok_name", "--kind", "extractive", "--config", "{top_k: 6}",
                              db_url=db_url))
    assert "--config is not valid JSON" in line
    assert systems(engine) == {}
    with engine.connect() as conn:  # the injection attempt never reached SQL either way
        assert conn.execute(sa.text("SELECT to_regclass('deepscholar.reports')")).scalar() is not None


def test_re_registering_a_name_as_another_system_is_refused(engine, db_url):
    assert run("systems", "add", "mine", "--kind", "extractive", db_url=db_url).returncode == 0
    before = systems(engine)
    same = run("systems", "add", "mine", "--kind", "extractive", "--config", "{}", db_url=db_url)
    assert same.returncode == 0 and "unchanged" in same.stdout, same.stderr

    line = one_line_error(run("systems", "add", "mine", "--kind", "oracle", db_url=db_url))
    assert "system 'mine' is already registered as another system (kind 'extractive' -> 'oracle')" in line
    assert "new name, e.g. mine_v2" in line
    line = one_line_error(run("systems", "add", "mine", "--kind", "extractive", "--config", '{"top_k": 6}',
                              db_url=db_url))
    assert "config {} -> {'top_k': 6}" in line
    assert one_line_error(run("systems", "add", "mine", "--kind", "extractive", "--version", "2", db_url=db_url))
    assert systems(engine) == before

    added = run("systems", "add", "mine_v2", "--kind", "extractive", "--config", '{"top_k": 6}', db_url=db_url)
    assert added.returncode == 0 and "registered" in added.stdout
    assert systems(engine)["mine_v2"] == ("extractive", "1", {"top_k": 6})


def test_commands_on_an_unknown_release_say_what_to_do(engine, db_url):
    for args in (["reports", "--release", "1999-01"], ["release", "summary", "1999-01"],
                 ["leaderboard", "--release", "1999-01"], ["generate", "--release", "1999-01"]):
        line = one_line_error(run(*args, db_url=db_url))
        assert "1999-01" in line and ("deepscholar release list" in line or "release DAG" in line), (args, line)
    line = one_line_error(run("release", "build", "2025-13", db_url=db_url))
    assert "has no month 13" in line
    line = one_line_error(run("generate", "--release", "1999-01", "--system", "a b", db_url=db_url))
    assert "1999-01" in line
    line = one_line_error(run("latex", "inspect", "/nonexistent/project", db_url=db_url))
    assert "no such file or folder: /nonexistent/project" in line
    usage = run("evaluate", "--concurrency", "0", "--release", "x", db_url=db_url)
    assert usage.returncode == 2 and "must be a positive integer" in usage.stderr


# --- main() in-process: what each kind of exception becomes -----------------------------------------------

def _command_raising(monkeypatch, exc: BaseException) -> None:
    def cmd_releases(args):
        raise exc

    monkeypatch.setattr(cli.release, "cmd_release_list", cmd_releases)  # `releases` is `release list`


def test_an_unexpected_exception_is_a_traceback_and_exit_1(monkeypatch, capsys):
    _command_raising(monkeypatch, RuntimeError("the code is wrong"))
    assert cli.main(["releases"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Traceback (most recent call last):") and "RuntimeError: the code is wrong" in err
    assert "in cmd_releases" in err and "error:" not in err


@pytest.mark.parametrize("exc", [LookupError("no such thing"), ValueError("bad value"), FileNotFoundError("x")])
def test_builtin_errors_are_not_mistaken_for_user_errors(monkeypatch, capsys, exc):
    _command_raising(monkeypatch, exc)
    assert cli.main(["releases"]) == 1
    assert "Traceback" in capsys.readouterr().err


def test_a_user_error_is_one_line_and_exit_2(monkeypatch, capsys):
    _command_raising(monkeypatch, UserError("release 2031-01 is not\npublished yet"))
    assert cli.main(["releases"]) == 2
    assert capsys.readouterr().err == "deepscholar: error: release 2031-01 is not published yet\n"


def test_an_infrastructure_failure_is_one_line_and_exit_1(monkeypatch, capsys):
    _command_raising(monkeypatch, InfrastructureError("LLM provider openai/gpt-4o", "HTTP 503"))
    assert cli.main(["releases"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("deepscholar: LLM provider openai/gpt-4o unavailable: HTTP 503")


def test_an_argparse_error_exits_2(capsys):
    with pytest.raises(SystemExit) as exit_:
        cli.main(["evaluate"])
    assert exit_.value.code == 2 and "--release" in capsys.readouterr().err
