"""Settings: every environment variable declared once (deepscholar/settings.py), parsed and validated there,
documented by the generated table in README.md, and read nowhere else; the release spec apart from them."""

from __future__ import annotations

import ast
import logging
import re
from pathlib import Path

import pytest

from deepscholar import settings as settings_module
from deepscholar.errors import InvalidInput
from deepscholar.release.spec import ReleaseSpec
from deepscholar.settings import GROUPS, SETTINGS, Settings, current_settings
from deepscholar.settings_docs import markdown_table

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "include" / "deepscholar"
MODULES = sorted([*PACKAGE.rglob("*.py"), *(ROOT / "dags").glob("*.py")])
BY_ENV = {s.env: s for s in SETTINGS}

# Reads whose variable cannot be known from the source, and why they are not settings.
DYNAMIC_READS = {
    "include/deepscholar/systems/deepscholar_base.py": "the API-key variable a system's config names (a secret)",
    "include/deepscholar/local_airflow.py": "the whole environment, copied for the Airflow processes it starts",
    "include/deepscholar/airflow_api.py": "the Airflow password, from the variable DEEPSCHOLAR_AIRFLOW_PASSWORD_ENV "
                                          "names (a secret)",
    "include/deepscholar/warehouse_backup.py": "the whole environment, copied for pg_dump / pg_restore with the "
                                               "warehouse's password (a secret) added as PGPASSWORD",
    "include/deepscholar/connection_budget.py": "Airflow's own AIRFLOW__* variables (parallelism, its pools), "
                                                "for the connection budget",
}


# --- the docs -----------------------------------------------------------------------------------------------

def test_readme_shows_the_generated_table():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    found = re.search(r"<!-- settings:begin -->\n(.*?)\n<!-- settings:end -->", readme, flags=re.S)
    assert found, "README.md lacks the <!-- settings:begin --> ... <!-- settings:end --> block"
    assert found.group(1) == markdown_table(), (
        "README.md's settings table differs from the declarations in deepscholar/settings.py: run "
        "`deepscholar settings --markdown` and paste its output between <!-- settings:begin --> and "
        "<!-- settings:end -->")


def test_every_setting_is_declared_once_with_a_group_and_one_line_of_docs():
    assert len(BY_ENV) == len(SETTINGS) == len({s.name for s in SETTINGS})
    for s in SETTINGS:
        assert s.env.startswith("DEEPSCHOLAR_") and s.group in GROUPS, s.env
        assert s.doc and "\n" not in s.doc and "|" not in s.doc, s.env


def test_every_deepscholar_variable_the_code_names_is_a_setting():
    named = set()
    for path in MODULES:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and re.fullmatch(
                    r"DEEPSCHOLAR_[A-Z0-9_]+", node.value):
                named.add(node.value)
    assert not named - set(BY_ENV), f"declare these in deepscholar/settings.py: {sorted(named - set(BY_ENV))}"


def test_constants_that_mirror_a_default_agree_with_it():
    from deepscholar.evaluation.metrics.core.claim_coverage import DEFAULT_W_MAX, SWEEP_W_MAX
    from deepscholar.orchestration import GENERATION_LANES, lane_pool

    defaults = Settings()
    assert DEFAULT_W_MAX == defaults.claim_coverage_w_max
    assert BY_ENV["DEEPSCHOLAR_CLAIM_COVERAGE_W_MAX"].read({"DEEPSCHOLAR_CLAIM_COVERAGE_W_MAX": str(SWEEP_W_MAX)}) == 5
    assert {lane: lane_pool(lane, {}) for lane in GENERATION_LANES} == {
        lane: "default_pool" if lane == "offline" else f"llm_{lane}" for lane in GENERATION_LANES}
    assert all(f"DEEPSCHOLAR_POOL_{lane.upper()}" in BY_ENV for lane in GENERATION_LANES)


# --- parsing and validation ---------------------------------------------------------------------------------

def test_defaults_without_any_variable():
    s = Settings.from_env({})
    assert s == Settings()
    assert (s.categories, s.max_queries, s.judge, s.judge_concurrency, s.judge_tasks, s.judge_pool) == (
        ("cs.CL", "cs.LG", "cs.IR", "cs.AI"), 200, "local", 16, 4, "default_pool")
    assert (s.generation_concurrency, s.task_retries, s.judge_job_reports, s.openalex_url, s.http_retries) == (
        4, 2, 8000, None, None)


def test_values_are_parsed_by_their_kind():
    s = Settings.from_env({
        "DEEPSCHOLAR_CATEGORIES": " cs.CL , cs.IR ", "DEEPSCHOLAR_REQUIRE_VENUE": "No", "DEEPSCHOLAR_MAX_QUERIES": "none",
        "DEEPSCHOLAR_SAMPLE_SEED": "-3", "DEEPSCHOLAR_ARXIV_DELAY_SECONDS": "0", "DEEPSCHOLAR_CATCHUP": "yes",
        "DEEPSCHOLAR_LLM_TRANSPORT": "LiteLLM", "DEEPSCHOLAR_WARM_IMPORTS": "none", "DEEPSCHOLAR_HOME": "/tmp/x",
        "DEEPSCHOLAR_SCHEDULE_END": "2025-6", "DEEPSCHOLAR_HTTP_RETRIES": "0"})
    assert (s.categories, s.require_venue, s.max_queries, s.sample_seed) == (("cs.CL", "cs.IR"), False, None, -3)
    assert (s.arxiv_delay_seconds, s.catchup, s.llm_transport, s.warm_imports) == (0.0, True, "litellm", ())
    assert (s.home, s.schedule_end, s.http_retries) == (Path("/tmp/x"), "2025-6", 0)


def test_an_empty_value_is_the_default_except_where_empty_means_something():
    s = Settings.from_env({"DEEPSCHOLAR_CATEGORIES": "", "DEEPSCHOLAR_OPENALEX_URL": "", "DEEPSCHOLAR_JUDGE_API_BASE": " ",
                           "DEEPSCHOLAR_VENUES": "", "DEEPSCHOLAR_MAX_QUERIES": "", "DEEPSCHOLAR_WARM_IMPORTS": ""})
    assert (s.categories, s.openalex_url, s.judge_api_base) == (Settings().categories, None, None)
    assert (s.venues, s.max_queries, s.warm_imports) == ((), None, ())  # an empty list, no cap, nothing warmed


@pytest.mark.parametrize(("env", "raw", "expected"), [
    ("DEEPSCHOLAR_MAX_QUERIES", "lots", "a positive number of queries"),
    ("DEEPSCHOLAR_MAX_QUERIES", "-4", "a positive number of queries"),
    ("DEEPSCHOLAR_JUDGE_CONCURRENCY", "0", "a positive integer"),
    ("DEEPSCHOLAR_ARXIV_DELAY_SECONDS", "soon", "a number of seconds >= 0"),
    ("DEEPSCHOLAR_REQUIRE_VENUE", "maybe", "true or false"),
    ("DEEPSCHOLAR_ARXIV_API_URL", "export.arxiv.org", "an http(s) URL"),
    ("DEEPSCHOLAR_SCHEDULE_START", "2025-13", "YYYY-MM"),
    ("DEEPSCHOLAR_PROGRESS", "fancy", "one of auto, bar, plain"),
    ("DEEPSCHOLAR_CATEGORIES", ",", "a comma-separated list of arXiv categories"),
    ("DEEPSCHOLAR_DEMO_PORT", "70000", "a port number"),
    ("DEEPSCHOLAR_LLM_SERVING", '{"openai/m": {"timeout_seconds": 0}}', '{"<model>": {"timeout_seconds": s'),
    ("DEEPSCHOLAR_LLM_SERVING", '{"openai/m": {"concurrency": 1.5}}', "a JSON object"),
    ("DEEPSCHOLAR_LLM_SERVING", '{"openai/m": {"slots": 1}}', "a JSON object"),
    ("DEEPSCHOLAR_LLM_SERVING", '["openai/m"]', "a JSON object"),
    ("DEEPSCHOLAR_LLM_SERVING", "{not json", "a JSON object"),
])
def test_a_malformed_value_names_the_variable_and_what_was_expected(env, raw, expected):
    with pytest.raises(InvalidInput) as caught:
        Settings.from_env({env: raw})
    assert str(caught.value).startswith(f"{env}={raw!r}: expected ") and expected in str(caught.value)


def test_every_malformed_variable_is_named_at_once_and_no_password_is_shown():
    with pytest.raises(InvalidInput) as caught:
        Settings.from_env({"DEEPSCHOLAR_TASK_RETRIES": "-1", "DEEPSCHOLAR_DB_URL": "user:hunter2@db",
                           "DEEPSCHOLAR_JUDGE_API_BASE": "ftp://u:hunter2@x/"})
    message = str(caught.value)
    assert all(name in message for name in ("DEEPSCHOLAR_TASK_RETRIES", "DEEPSCHOLAR_DB_URL",
                                            "DEEPSCHOLAR_JUDGE_API_BASE"))
    assert "hunter2" not in message


def test_tolerant_settings_log_a_bad_value_and_keep_the_default(caplog):
    with caplog.at_level(logging.WARNING, logger="deepscholar.settings"):
        s = Settings.from_env({"DEEPSCHOLAR_RELEASE_SHARDS": "many", "DEEPSCHOLAR_HTTP_TIMEOUT_SECONDS": "0",
                               "DEEPSCHOLAR_CLAIM_COVERAGE_W_MAX": "9"})
    assert (s.release_shards, s.http_timeout_seconds, s.claim_coverage_w_max) == (4, None, 1)
    for name in ("DEEPSCHOLAR_RELEASE_SHARDS", "DEEPSCHOLAR_HTTP_TIMEOUT_SECONDS", "DEEPSCHOLAR_CLAIM_COVERAGE_W_MAX"):
        assert name in caplog.text


# --- the current environment's settings ---------------------------------------------------------------------

def test_current_settings_follow_the_environment_and_parse_each_environment_once(monkeypatch):
    parsed = []
    from_env = Settings.from_env.__func__

    def counting(cls, environ=None):
        parsed.append(dict(environ or {}).get("DEEPSCHOLAR_JUDGE_TASKS"))
        return from_env(cls, environ)

    monkeypatch.setattr(Settings, "from_env", classmethod(counting))
    monkeypatch.setenv("DEEPSCHOLAR_JUDGE_TASKS", "7")
    first = current_settings()
    assert first.judge_tasks == 7 and current_settings() is first and parsed == ["7"]
    monkeypatch.setenv("DEEPSCHOLAR_JUDGE_TASKS", "9")
    assert current_settings().judge_tasks == 9 and parsed == ["7", "9"]
    monkeypatch.setenv("DEEPSCHOLAR_JUDGE_TASKS", "7")
    assert current_settings() is first and parsed == ["7", "9"]  # that environment was parsed already
    monkeypatch.setenv("DEEPSCHOLAR_JUDGE_TASKS", "none")
    with pytest.raises(InvalidInput, match="DEEPSCHOLAR_JUDGE_TASKS"):
        current_settings()


def test_the_cache_keeps_a_bounded_number_of_environments(monkeypatch):
    for n in range(settings_module._CACHE_SIZE + 5):
        monkeypatch.setenv("DEEPSCHOLAR_SAMPLE_SEED", str(1000 + n))
        assert current_settings().sample_seed == 1000 + n
    assert len(settings_module._CACHE) <= settings_module._CACHE_SIZE


def test_replace_gives_a_changed_copy():
    s = Settings()
    changed = s.replace(arxiv_delay_seconds=0, openalex_url="http://127.0.0.1:9")
    assert (changed.arxiv_delay_seconds, changed.openalex_url, s.openalex_url) == (0, "http://127.0.0.1:9", None)


# --- the release spec ---------------------------------------------------------------------------------------

def test_the_spec_holds_only_what_defines_a_month():
    assert set(ReleaseSpec().to_dict()) == {
        "categories", "require_venue", "venues", "max_words", "min_references", "title_match_threshold",
        "min_resolution_rate", "max_queries", "sample_seed", "judge", "tracks"}
    assert ReleaseSpec() == ReleaseSpec.from_settings(Settings())  # a new month's defaults are the settings'


def test_a_release_stored_with_the_old_endpoint_keys_still_loads():
    stored = {"categories": ["cs.CL"], "require_venue": True, "venues": None, "max_words": 800, "min_references": 5,
              "title_match_threshold": 0.9, "min_resolution_rate": 0.5, "max_queries": 50, "sample_seed": 3,
              "judge": "local", "arxiv_api_url": "http://127.0.0.1:1/api/query",
              "arxiv_eprint_url": "http://127.0.0.1:1/e-print", "openalex_url": None, "openalex_email": None,
              "arxiv_delay_seconds": 0, "judge_api_base": None, "judge_concurrency": 8}
    spec = ReleaseSpec.from_dict(stored)
    assert (spec.categories, spec.max_words, spec.max_queries, spec.sample_seed) == (["cs.CL"], 800, 50, 3)
    assert "arxiv_api_url" not in spec.to_dict() and ReleaseSpec.from_dict(spec.to_dict()) == spec


def test_the_spec_takes_its_environment_defaults_through_the_settings(monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_CATEGORIES", "cs.IR")
    monkeypatch.setenv("DEEPSCHOLAR_REQUIRE_VENUE", "false")
    monkeypatch.setenv("DEEPSCHOLAR_VENUES", "ACL,SIGIR")
    monkeypatch.setenv("DEEPSCHOLAR_JUDGE", "openai/gpt-4o")
    monkeypatch.setenv("DEEPSCHOLAR_ARXIV_API_URL", "http://127.0.0.1:9/api/query")  # a setting, not spec
    spec = ReleaseSpec.from_env(judge=None, sample_seed=4)
    assert (spec.categories, spec.require_venue, spec.venues, spec.judge, spec.sample_seed) == (
        ["cs.IR"], False, ["ACL", "SIGIR"], "openai/gpt-4o", 4)
    assert "http://127.0.0.1:9/api/query" not in str(spec.to_dict())


# --- the command ----------------------------------------------------------------------------------------------

def test_the_settings_command_prints_values_and_sources_but_no_password(monkeypatch, capsys):
    from deepscholar.cli import main

    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", "postgresql://analyst:hunter2@db.example:5432/deepscholar")
    monkeypatch.setenv("DEEPSCHOLAR_JUDGE_TASKS", "6")
    monkeypatch.delenv("DEEPSCHOLAR_JUDGE_POOL", raising=False)
    assert main(["settings"]) == 0
    out = capsys.readouterr().out
    assert "hunter2" not in out and "postgresql://analyst:***@db.example:5432/deepscholar" in out
    rows = {re.search(r"DEEPSCHOLAR_\w+", line).group(0): line.split() for line in out.splitlines()
            if "DEEPSCHOLAR_" in line}
    assert set(rows) == set(BY_ENV)
    assert rows["DEEPSCHOLAR_JUDGE_TASKS"][-2:] == ["6", "env"]
    assert rows["DEEPSCHOLAR_JUDGE_POOL"][-2:] == ["default_pool", "default"]
    assert main(["settings", "--markdown"]) == 0
    assert capsys.readouterr().out == markdown_table() + "\n"


def test_the_settings_command_names_a_malformed_variable(monkeypatch, capsys):
    from deepscholar.cli import main

    monkeypatch.setenv("DEEPSCHOLAR_OFFLINE_BATCH", "lots")
    assert main(["settings"]) == 2
    assert "DEEPSCHOLAR_OFFLINE_BATCH='lots': expected a positive integer" in capsys.readouterr().err


# --- nothing else reads them ----------------------------------------------------------------------------------

def _key(expr: ast.expr | None, constants: dict[str, str]) -> str:
    """The variable name an expression gives, "<prefix>{...}" for an f-string, "?" when unknowable."""
    if isinstance(expr, ast.Constant) and isinstance(expr.value, str):
        return expr.value
    if isinstance(expr, ast.JoinedStr) and expr.values and isinstance(expr.values[0], ast.Constant):
        return f"{expr.values[0].value}{{...}}"
    if isinstance(expr, ast.Name) and expr.id in constants:
        return constants[expr.id]
    return "?"


def _environ_key(node: ast.expr, parents: dict[ast.AST, ast.AST], constants: dict[str, str]) -> str:
    """The variable read by the use of the environment mapping `node` ("?": a computed key or all of it)."""
    parent = parents.get(node)
    if isinstance(parent, ast.Attribute) and isinstance(call := parents.get(parent), ast.Call) and \
            call.func is parent:  # os.environ.get(key) / .pop / .setdefault
        return _key(call.args[0] if call.args else None, constants)
    if isinstance(parent, ast.Subscript) and parent.value is node:  # os.environ[key]
        return _key(parent.slice, constants)
    if isinstance(parent, ast.Compare) and node in parent.comparators:  # key in os.environ
        return _key(parent.left, constants)
    return "?"


def environment_reads(source: str) -> list[tuple[int, str]]:
    """(line, variable) of every use of the process environment in a module's source: os.environ and
    os.getenv, also imported by name. The variable is "?" when the source does not say which one it is."""
    tree = ast.parse(source)
    constants = {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
                 and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
                 for target in node.targets if isinstance(target, ast.Name)}
    imported = {alias.asname or alias.name: alias.name for node in ast.walk(tree)
                if isinstance(node, ast.ImportFrom) and node.module == "os" for alias in node.names}
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    found = []
    for node in ast.walk(tree):
        name = (node.attr if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                and node.value.id == "os" else imported.get(node.id) if isinstance(node, ast.Name) else None)
        if name == "environ":
            found.append((node.lineno, _environ_key(node, parents, constants)))
        elif name == "getenv" and isinstance(call := parents.get(node), ast.Call) and call.func is node:
            found.append((node.lineno, _key(call.args[0] if call.args else None, constants)))
    return sorted(found)


def settings_violations(source: str, dynamic_allowed: bool = False) -> list[str]:
    """Reads of DEEPSCHOLAR_* variables that bypass deepscholar.settings (and, unless allowed, reads whose
    variable cannot be known from the source)."""
    return [f"line {line}: {'an unknown variable' if key == '?' else key}" for line, key in environment_reads(source)
            if key.startswith("DEEPSCHOLAR_") or (key == "?" and not dynamic_allowed)]


def test_no_module_reads_a_deepscholar_variable_outside_settings():
    problems = []
    for path in MODULES:
        rel = path.relative_to(ROOT).as_posix()
        if rel in ("include/deepscholar/settings.py", "include/deepscholar/settings_docs.py"):
            continue  # the declarations, and showing where each value comes from (`deepscholar settings`)
        found = settings_violations(path.read_text(encoding="utf-8"), dynamic_allowed=rel in DYNAMIC_READS)
        problems += [f"{rel} {problem}" for problem in found]
    assert not problems, ("read these through deepscholar.settings.current_settings() (declare the setting "
                          "there if it is new):\n" + "\n".join(problems))


def test_the_checker_finds_a_planted_violation(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text('''import os
from os import environ as env, getenv

NAME = "DEEPSCHOLAR_PLANTED"
a = os.environ.get("DEEPSCHOLAR_A", "1")
b = os.getenv("DEEPSCHOLAR_B")
c = os.environ[NAME]
d = "DEEPSCHOLAR_D" in os.environ
e = os.environ.get(f"DEEPSCHOLAR_POOL_{a.upper()}")
f = env.get("DEEPSCHOLAR_F")
g = getenv("DEEPSCHOLAR_G")
h = dict(os.environ)
ok = os.environ.get("HF_HUB_OFFLINE"), os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
''')
    source = planted.read_text()
    assert settings_violations(source) == [
        "line 5: DEEPSCHOLAR_A", "line 6: DEEPSCHOLAR_B", "line 7: DEEPSCHOLAR_PLANTED", "line 8: DEEPSCHOLAR_D",
        "line 9: DEEPSCHOLAR_POOL_{...}", "line 10: DEEPSCHOLAR_F", "line 11: DEEPSCHOLAR_G",
        "line 12: an unknown variable"]
    assert settings_violations(source, dynamic_allowed=True)[-1] == "line 11: DEEPSCHOLAR_G"


def test_per_model_serving_is_read_into_model_timeout_and_concurrency():
    s = Settings.from_env({"DEEPSCHOLAR_LLM_SERVING": '{"openai/a": {"timeout_seconds": 600, "concurrency": 1}, '
                                                      '" openai/b ": {"concurrency": 32}}'})
    assert s.llm_serving == (("openai/a", 600.0, 1), ("openai/b", None, 32))
    assert Settings.from_env({"DEEPSCHOLAR_LLM_SERVING": ""}).llm_serving == () == Settings().llm_serving
