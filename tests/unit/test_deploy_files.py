"""Static checks of the deployment files: docker-compose.yaml, Dockerfile, .dockerignore, .env.example.

No Docker engine is needed (none exists on CI): the compose file is parsed with yaml.safe_load and the
Dockerfile line by line, and the checks cover what the project relies on -- the services of Airflow 3's
reference layout, a benchmark database apart from Airflow's metadata DB, one common image and
environment for every Airflow component, the Celery scale-out profile, healthchecks and dependencies,
and an image that installs the hash-checked locks and the package.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yaml"
DOCKERFILE = ROOT / "Dockerfile"
DOCKERIGNORE = ROOT / ".dockerignore"
ENV_EXAMPLE = ROOT / ".env.example"

AIRFLOW_METADATA_DB = "postgres"
BENCHMARK_DB = "benchmark-db"
INIT = "airflow-init"
REQUIRED_SERVICES = {
    AIRFLOW_METADATA_DB, BENCHMARK_DB, INIT, "airflow-apiserver", "airflow-scheduler",
    "airflow-dag-processor", "airflow-triggerer", "redis", "airflow-worker",
}
CELERY_SERVICES = {"redis", "airflow-worker"}
# Top-level commands and groups of the `airflow` CLI in 3.3.2 (`airflow --help`), plus the group the
# Celery provider adds. A service command must start with one of these.
AIRFLOW_COMMANDS = {
    "api-server", "cheat-sheet", "dag-processor", "info", "kerberos", "plugins", "rotate-fernet-key",
    "scheduler", "standalone", "triggerer", "version",
}
AIRFLOW_GROUPS = {
    "assets": None, "backfill": None, "config": None, "connections": None, "dags": None, "db": None,
    "db-manager": None, "jobs": None, "partitions": None, "pools": None, "providers": None,
    "state-store": None, "tasks": None, "teams": None, "variables": None,
    "celery": {"worker", "flower", "stop"},
}
# Files that other parts of the project create; a COPY of them is checked once they exist.
CREATED_ELSEWHERE = {"README.md", "dags", "plugins"}


# ------------------------------------------------------------------------------------------------
# helpers
# ------------------------------------------------------------------------------------------------
_VAR = re.compile(r"\$\$|\$\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?])(?P<arg>[^}]*))?\}")


def interpolate(value, env: dict[str, str] | None = None):
    """Compose-style ${VAR}, ${VAR:-default}, ${VAR-default} and $$ on a string, with the given env."""
    if not isinstance(value, str):
        return value
    env = env or {}

    def sub(m: re.Match) -> str:
        if m.group(0) == "$$":
            return "$"
        name, op, arg = m.group("name"), m.group("op"), m.group("arg")
        if op == ":-":
            return env.get(name) or arg
        if op == "-":
            return env.get(name, arg)
        return env.get(name, "")

    return _VAR.sub(sub, value)


def compose_variables(node) -> set[str]:
    """Variables compose reads from the shell/.env: ${VAR} in any value, and pass-through env keys."""
    found: set[str] = set()
    if isinstance(node, str):
        found |= {m.group("name") for m in _VAR.finditer(node) if m.group("name")}
    elif isinstance(node, dict):
        for key, value in node.items():
            if key == "environment" and isinstance(value, dict):
                found |= {k for k, v in value.items() if v is None}
            found |= compose_variables(value)
    elif isinstance(node, list):
        for item in node:
            found |= compose_variables(item)
    return found


def _strings(node):
    if isinstance(node, str):
        yield node
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(key)
            yield from _strings(value)
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)


def env_of(service: dict) -> dict:
    env = service.get("environment") or {}
    if isinstance(env, list):  # "KEY=value" form
        env = dict(item.split("=", 1) if "=" in item else (item, None) for item in env)
    return env


def command_words(service: dict) -> list[str]:
    cmd = service.get("command")
    if cmd is None:
        return []
    return shlex.split(cmd) if isinstance(cmd, str) else [str(c) for c in cmd]


def depends_on(service: dict) -> dict[str, dict]:
    deps = service.get("depends_on") or {}
    if isinstance(deps, list):
        return {d: {"condition": "service_started"} for d in deps}
    return {name: (spec or {"condition": "service_started"}) for name, spec in deps.items()}


def healthcheck_words(service: dict) -> list[str]:
    test = (service.get("healthcheck") or {}).get("test")
    return [test] if isinstance(test, str) else list(test or [])


def dockerfile_instructions() -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) pairs with comments dropped and continuation lines joined."""
    out, buf = [], ""
    for raw in DOCKERFILE.read_text().splitlines():
        line = raw.strip()
        if not buf and (not line or line.startswith("#")):
            continue
        if buf and line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            buf += line[:-1] + " "
            continue
        buf += line
        if buf.strip():
            keyword, _, rest = buf.strip().partition(" ")
            out.append((keyword.upper(), rest.strip()))
        buf = ""
    return out


def dockerfile_env() -> dict[str, str]:
    env: dict[str, str] = {}
    for keyword, args in dockerfile_instructions():
        if keyword == "ENV":
            for item in shlex.split(args):
                key, sep, val = item.partition("=")
                if sep:
                    env[key] = val
    return env


def copy_sources() -> list[str]:
    sources = []
    for keyword, args in dockerfile_instructions():
        if keyword in {"COPY", "ADD"}:
            words = [w for w in shlex.split(args) if not w.startswith("--")]
            sources.extend(words[:-1])
    return sources


@pytest.fixture(scope="module")
def compose() -> dict:
    assert COMPOSE_FILE.is_file(), "docker-compose.yaml is missing"
    data = yaml.safe_load(COMPOSE_FILE.read_text())
    assert isinstance(data, dict) and isinstance(data.get("services"), dict)
    return data


@pytest.fixture(scope="module")
def services(compose) -> dict[str, dict]:
    return compose["services"]


@pytest.fixture(scope="module")
def common(compose) -> dict:
    assert "x-airflow-common" in compose, "the x-airflow-common anchor block is missing"
    return compose["x-airflow-common"]


@pytest.fixture(scope="module")
def airflow_services(services, common) -> dict[str, dict]:
    """Every service built from the common Airflow block (same image)."""
    found = {n: s for n, s in services.items() if s.get("image") == common.get("image")}
    assert found, "no service uses the x-airflow-common image"
    return found


# ------------------------------------------------------------------------------------------------
# docker-compose.yaml
# ------------------------------------------------------------------------------------------------
def test_required_services_present(services):
    missing = REQUIRED_SERVICES - set(services)
    assert not missing, f"docker-compose.yaml lacks services: {sorted(missing)}"


def test_no_invalid_interpolation(compose):
    """Compose rejects a lone `$` (e.g. a shell `$(...)`): it must be `$$`, `${VAR...}` or `$VAR`."""
    bad = re.compile(r"\$(?!\$|\{|[A-Za-z_])")
    for text in _strings(compose):
        stripped = text.replace("$$", "")
        assert not bad.search(stripped), f"invalid interpolation in: {text[:80]!r}"
        assert stripped.count("${") == len(re.findall(r"\$\{[A-Za-z_][A-Za-z0-9_]*(:?[-?+][^}]*)?\}", stripped)), \
            f"malformed ${{...}} in: {text[:80]!r}"


def test_airflow_components_use_the_common_block(services, airflow_services, common):
    expected = {"airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer",
                "airflow-worker", INIT}
    assert expected <= set(airflow_services), sorted(expected - set(airflow_services))
    assert common["build"]["context"] == ".", "the Airflow image must be built from this repo's Dockerfile"
    common_env = env_of(common)
    for name, svc in airflow_services.items():
        assert svc.get("build") == common["build"], name
        env = env_of(svc)
        for key, value in common_env.items():
            assert key in env and env[key] == value, f"{name}: common env {key} missing or changed"
        assert svc.get("volumes") == common.get("volumes"), f"{name}: volumes differ from the common block"
    for name in set(services) - set(airflow_services):
        assert "build" not in services[name], f"{name} builds an image but is not an Airflow service"


def test_common_environment(common):
    env = env_of(common)
    assert env["LITELLM_LOCAL_MODEL_COST_MAP"] == "True"
    assert interpolate(env["AIRFLOW__CORE__EXECUTOR"]) == "LocalExecutor"
    assert interpolate(env["AIRFLOW__CORE__EXECUTOR"], {"AIRFLOW__CORE__EXECUTOR": "CeleryExecutor"}) \
        == "CeleryExecutor", "the executor must be overridable from .env"
    assert str(env["AIRFLOW__CORE__LOAD_EXAMPLES"]).lower() == "false"
    assert "DEEPSCHOLAR_DB_URL" not in env, "DEEPSCHOLAR_DB_URL must stay unset so the Airflow connection is used"
    exec_api = urlsplit(interpolate(env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"]))
    assert exec_api.hostname == "airflow-apiserver" and exec_api.path.rstrip("/") == "/execution"
    assert interpolate(env["AIRFLOW__CELERY__BROKER_URL"]).startswith("redis://redis:") or \
        urlsplit(interpolate(env["AIRFLOW__CELERY__BROKER_URL"])).hostname == "redis"


def _volume_targets(common) -> dict[str, str]:
    targets = {}
    for vol in common["volumes"]:
        parts = vol.split(":")
        targets[parts[1]] = parts[0]
    return targets


def test_code_is_mounted_where_airflow_and_the_library_look(common):
    env = env_of(common)
    targets = _volume_targets(common)
    for folder in ("dags", "plugins", "include", "sql"):
        sources = [src for tgt, src in targets.items() if src.rstrip("/") == f"./{folder}"]
        assert sources, f"./{folder} is not mounted into the Airflow containers"
    assert targets.get(env["AIRFLOW__CORE__DAGS_FOLDER"]) == "./dags"
    assert targets.get(env["AIRFLOW__CORE__PLUGINS_FOLDER"]) == "./plugins"
    assert targets.get(env["DEEPSCHOLAR_SQL_DIR"]) == "./sql"


def test_benchmark_db_is_separate_from_airflow_metadata(compose, services, common):
    env = env_of(common)
    meta = urlsplit(interpolate(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]))
    bench = urlsplit(interpolate(env["AIRFLOW_CONN_DEEPSCHOLAR_DB"]))
    assert meta.hostname == AIRFLOW_METADATA_DB
    assert bench.hostname == BENCHMARK_DB
    assert bench.scheme in {"postgresql", "postgres"}
    assert meta.hostname != bench.hostname, "benchmark data must not live in Airflow's metadata database"
    bench_svc, meta_svc = services[BENCHMARK_DB], services[AIRFLOW_METADATA_DB]
    assert bench_svc["image"].startswith("postgres") and meta_svc["image"].startswith("postgres")
    bench_env = env_of(bench_svc)
    assert (bench_env["POSTGRES_USER"], bench_env["POSTGRES_PASSWORD"], bench_env["POSTGRES_DB"]) == \
        (bench.username, bench.password, bench.path.lstrip("/"))
    meta_env = env_of(meta_svc)
    assert (meta_env["POSTGRES_USER"], meta_env["POSTGRES_DB"]) == (meta.username, meta.path.lstrip("/"))
    bench_data = {v.split(":")[0] for v in bench_svc["volumes"]}
    meta_data = {v.split(":")[0] for v in meta_svc["volumes"]}
    assert not bench_data & meta_data, "the two databases must not share a data volume"
    for vol in bench_data | meta_data:
        if not vol.startswith((".", "/")):
            assert vol in (compose.get("volumes") or {}), f"named volume {vol} is not declared"


def test_every_airflow_service_command_is_a_real_subcommand(airflow_services):
    for name, svc in airflow_services.items():
        if "entrypoint" in svc:  # airflow-init runs its own script, checked below
            continue
        words = command_words(svc)
        assert words, f"{name} has no command"
        head = words[0]
        assert head in AIRFLOW_COMMANDS or head in AIRFLOW_GROUPS, f"{name}: `airflow {head}` does not exist"
        if AIRFLOW_GROUPS.get(head):
            assert len(words) > 1 and words[1] in AIRFLOW_GROUPS[head], \
                f"{name}: `airflow {' '.join(words[:2])}` does not exist"


def test_component_commands(services):
    assert command_words(services["airflow-apiserver"])[0] == "api-server"
    assert command_words(services["airflow-scheduler"])[0] == "scheduler"
    assert command_words(services["airflow-dag-processor"])[0] == "dag-processor"
    assert command_words(services["airflow-triggerer"])[0] == "triggerer"
    assert command_words(services["airflow-worker"])[:2] == ["celery", "worker"]


def test_apiserver_port_and_health(services):
    api = services["airflow-apiserver"]
    assert any(str(p).endswith(":8080") for p in api.get("ports", [])), "api-server must publish 8080"
    assert any("/api/v2/monitor/health" in w for w in healthcheck_words(api))


def test_celery_profile(services):
    for name in CELERY_SERVICES:
        assert "celery" in services[name].get("profiles", []), f"{name} must carry the celery profile"
    for name in ("airflow-apiserver", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer",
                 INIT, AIRFLOW_METADATA_DB, BENCHMARK_DB):
        assert not services[name].get("profiles"), f"{name} must run without any profile"


def test_healthchecks(services):
    for name, svc in services.items():
        if name == INIT or "debug" in svc.get("profiles", []):
            continue  # one-shot / ad-hoc containers
        words = healthcheck_words(svc)
        assert words and words[0] in {"CMD", "CMD-SHELL"}, f"{name} has no healthcheck"


def test_depends_on(services):
    for name, svc in services.items():
        for dep, spec in depends_on(svc).items():
            assert dep in services, f"{name} depends on unknown service {dep}"
            assert dep != name
            condition = spec.get("condition", "service_started")
            assert condition in {"service_started", "service_healthy", "service_completed_successfully"}
            if condition == "service_healthy":
                assert services[dep].get("healthcheck"), f"{name} waits for {dep} to be healthy; it has no check"
            if condition == "service_completed_successfully":
                assert dep == INIT, f"{name} waits for {dep} to complete, but {dep} is long-running"
            # A service must not hard-require a service that only runs under a profile it does not share.
            dep_profiles = set(services[dep].get("profiles", []))
            if dep_profiles and not dep_profiles & set(svc.get("profiles", [])):
                assert spec.get("required") is False, \
                    f"{name} requires {dep} (profiles {sorted(dep_profiles)}) without `required: false`"


def test_airflow_components_wait_for_init_and_databases(services, airflow_services):
    for name, svc in airflow_services.items():
        deps = depends_on(svc)
        for db in (AIRFLOW_METADATA_DB, BENCHMARK_DB):
            assert deps.get(db, {}).get("condition") == "service_healthy", f"{name} must wait for {db}"
        if name not in {INIT, "airflow-cli"}:
            assert deps.get(INIT, {}).get("condition") == "service_completed_successfully", \
                f"{name} must wait for {INIT}"


def test_init_migrates_creates_pools_and_benchmark_schema(services, common):
    init = services[INIT]
    script = "\n".join(command_words(init)) if isinstance(init.get("command"), list) else init["command"]
    assert "airflow db migrate" in script
    assert "airflow pools" in script
    assert "deepscholar db init" in script
    pools = interpolate(env_of(init)["DEEPSCHOLAR_POOLS"])
    names = {spec.split(":")[0].strip() for spec in pools.split(",")}
    # Every pool the benchmark DAG uses in the container exists once init has run.
    from deepscholar.orchestration import GENERATION_LANES, lane_pool

    used = {lane_pool(lane) for lane in GENERATION_LANES} - {"default_pool"}
    used.add(interpolate(env_of(common)["DEEPSCHOLAR_JUDGE_POOL"]))
    assert used <= names, f"pools used but never created: {sorted(used - names)}"
    for spec in pools.split(","):
        assert re.fullmatch(r"[a-z0-9_]+:\d+", spec.strip()), f"bad pool spec {spec!r}"


def test_deepscholar_defaults_match_the_library(common):
    from deepscholar.settings import Settings
    from deepscholar.sources.endpoints import ARXIV_API_URL, ARXIV_EPRINT_URL

    env = env_of(common)
    defaults = Settings()
    assert interpolate(env["DEEPSCHOLAR_ARXIV_API_URL"]) == ARXIV_API_URL == defaults.arxiv_api_url
    assert interpolate(env["DEEPSCHOLAR_ARXIV_EPRINT_URL"]) == ARXIV_EPRINT_URL == defaults.arxiv_eprint_url
    assert float(interpolate(env["DEEPSCHOLAR_ARXIV_DELAY_SECONDS"])) == defaults.arxiv_delay_seconds
    assert float(interpolate(env["DEEPSCHOLAR_OPENALEX_INTERVAL_SECONDS"])) == defaults.openalex_interval_seconds
    assert int(interpolate(env["DEEPSCHOLAR_RELEASE_SHARDS"])) == defaults.release_shards
    assert interpolate(env["DEEPSCHOLAR_JUDGE"]) == defaults.judge
    assert (interpolate(env["DEEPSCHOLAR_REQUIRE_VENUE"]).lower() == "true") == defaults.require_venue
    # An empty value here would override the library default with "nothing": pass through only if set.
    assert env.get("DEEPSCHOLAR_VENUES", "absent") in (None, "absent")


def test_env_example_documents_every_compose_variable(compose):
    assert ENV_EXAMPLE.is_file()
    documented = set(re.findall(r"^#?\s*([A-Z_][A-Z0-9_]*)=", ENV_EXAMPLE.read_text(), flags=re.M))
    used = compose_variables(compose)
    missing = used - documented
    assert not missing, f".env.example does not document: {sorted(missing)}"
    for name in ("DEEPSCHOLAR_ARXIV_API_URL", "DEEPSCHOLAR_ARXIV_EPRINT_URL", "DEEPSCHOLAR_OPENALEX_URL",
                 "DEEPSCHOLAR_OPENALEX_EMAIL", "DEEPSCHOLAR_JUDGE", "DEEPSCHOLAR_CATEGORIES", "OPENAI_API_KEY",
                 "AIRFLOW_UID", "AIRFLOW__CORE__EXECUTOR", "COMPOSE_PROFILES"):
        assert name in documented, f".env.example does not document {name}"


def test_env_example_active_values_equal_the_compose_defaults():
    """An unedited copy of .env.example must change nothing."""
    text = COMPOSE_FILE.read_text()
    defaults = {m.group("name"): m.group("arg") for m in _VAR.finditer(text) if m.group("op") == ":-"}
    for line in ENV_EXAMPLE.read_text().splitlines():
        if line and not line.startswith("#") and "=" in line:
            key, value = line.split("=", 1)
            if key in defaults:
                assert value == defaults[key], f".env.example {key}={value} differs from compose default"


def test_env_example_holds_no_secrets_or_db_url_override():
    text = ENV_EXAMPLE.read_text()
    active = dict(
        line.split("=", 1) for line in text.splitlines() if line and not line.startswith("#") and "=" in line
    )
    assert "DEEPSCHOLAR_DB_URL" not in active
    for key, value in active.items():
        if key.endswith(("_API_KEY", "_SECRET", "SECRET_KEY")):
            assert not value.strip(), f"{key} has a value in .env.example"


# ------------------------------------------------------------------------------------------------
# Dockerfile and .dockerignore
# ------------------------------------------------------------------------------------------------
def test_dockerfile_base_image_and_user():
    instructions = dockerfile_instructions()
    froms = [args for kw, args in instructions if kw == "FROM"]
    assert froms and froms[0].split()[0] in {"python:3.11-slim", "apache/airflow:3.3.2-python3.11"}
    arg_defaults = {a.split("=")[0]: a.partition("=")[2].strip('"') for kw, a in instructions if kw == "ARG"}
    users = [interpolate(args, arg_defaults) for kw, args in instructions if kw == "USER"]
    assert users and users[-1].split(":")[0] not in {"root", "0", ""}, "the image must run as a non-root user"
    entrypoint = [args for kw, args in instructions if kw == "ENTRYPOINT"]
    assert entrypoint and "airflow" in entrypoint[-1], "compose passes airflow subcommands as `command:`"


def test_dockerfile_installs_the_hash_checked_locks_and_the_package():
    runs = " ".join(args for kw, args in dockerfile_instructions() if kw == "RUN")
    assert re.search(r"pip install --require-hashes \$\{locks\}", runs), \
        "dependencies must be installed from the locks with pip install --require-hashes"
    assert re.search(r'locks="-r /tmp/requirements/requirements\.lock"', runs), "the default is requirements.lock"
    copies = " ".join(a for kw, a in dockerfile_instructions() if kw == "COPY")
    for lock in ("requirements.lock", "requirements-models.lock", "requirements-celery.lock"):
        assert f"/tmp/requirements/{lock}" in runs, f"{lock} is never installed"
        assert lock in copies, f"{lock} is not copied into the image"
        assert (ROOT / lock).is_file(), f"{lock} is missing: run `make lock`"
    # Nothing installs an unlocked requirement (no bare `pip install name==x` or -r requirements*.txt).
    for cmd in re.findall(r"pip install [^;&]*", runs):
        assert "requirements.txt" not in cmd and "requirements-models.txt" not in cmd, cmd
        assert "--require-hashes" in cmd or "--no-deps -e ." in cmd, f"unlocked install: {cmd}"
    assert re.search(r"pip install[^;&]*(-e \.|\s\.(\s|$))", runs), "the deepscholar package is not installed"
    celery = re.search(r'WITH_CELERY}" = "true" \]; then ([^;]*);', runs)
    assert celery and "requirements-celery.lock" in celery.group(1)
    for line in (ROOT / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            assert re.fullmatch(r"[A-Za-z0-9_.\[\],-]+==[A-Za-z0-9_.+!-]+", line), f"not pinned: {line}"


def test_dockerfile_local_judge_is_optional_and_cpu_only():
    instructions = dockerfile_instructions()
    args = {a.split("=")[0]: a.partition("=")[2] for kw, a in instructions if kw == "ARG"}
    assert args.get("WITH_LOCAL_JUDGE") == "false"
    runs = [a for kw, a in instructions if kw == "RUN" and "requirements-models.lock" in a]
    assert runs, "requirements-models.lock is never installed"
    assert "WITH_LOCAL_JUDGE" in runs[0]
    torch_index = "https://download.pytorch.org/whl/cpu"
    assert torch_index in DOCKERFILE.read_text()
    assert "--extra-index-url" in runs[0]
    assert "--index-url " not in runs[0].replace("--extra-index-url", ""), "never replace PyPI as the index"


def test_dockerfile_environment():
    env = dockerfile_env()
    assert env.get("LITELLM_LOCAL_MODEL_COST_MAP") == "True"
    assert env.get("AIRFLOW_HOME") == "/opt/airflow"


def test_dockerfile_and_compose_agree_on_paths(common):
    env, cenv = dockerfile_env(), env_of(common)
    for key in ("AIRFLOW__CORE__DAGS_FOLDER", "AIRFLOW__CORE__PLUGINS_FOLDER", "DEEPSCHOLAR_SQL_DIR"):
        assert env.get(key) == cenv.get(key), key
    # The SQL dir must also be where a COPY puts sql/.
    copies = [a for kw, a in dockerfile_instructions() if kw == "COPY"]
    assert any(shlex.split(c)[0].rstrip("/") == "sql" for c in copies)


@pytest.mark.parametrize("source", sorted(set(copy_sources())) if DOCKERFILE.is_file() else [])
def test_dockerfile_copy_sources_exist(source):
    path = ROOT / source.rstrip("/")
    if not path.exists() and source.rstrip("/") in CREATED_ELSEWHERE:
        pytest.skip(f"{source} is created by another part of the project")
    assert path.exists(), f"COPY source {source} does not exist in the repository"


def test_dockerignore_excludes_local_state_but_not_copy_sources():
    patterns = [p.strip() for p in DOCKERIGNORE.read_text().splitlines() if p.strip() and not p.startswith("#")]
    for needed in (".venv", ".deepscholar", ".git"):
        assert needed in patterns, f".dockerignore should exclude {needed}"
    assert any("__pycache__" in p for p in patterns)
    assert any("pytest_cache" in p for p in patterns)
    excludes = [p for p in patterns if not p.startswith("!")]
    for source in copy_sources():
        src = source.rstrip("/")
        hits = [p for p in excludes if fnmatch.fnmatch(src, p.rstrip("/")) or src.startswith(p.rstrip("/") + "/")]
        assert not hits, f".dockerignore pattern(s) {hits} exclude COPY source {source}"


def test_celery_profile_sets_what_the_celery_test_proves(services, common):
    """The settings tests/dags/test_celery_executor.py runs two workers with are the compose profile's."""
    from deepscholar.local_airflow import celery_settings

    env = env_of(common)
    proven = celery_settings("redis://broker:6379/0", "postgresql://u:p@db:5432/airflow")
    missing = sorted(set(proven) - set(env))
    assert not missing, f"docker-compose.yaml's Airflow environment lacks {missing}"
    assert interpolate(env["AIRFLOW__CELERY__RESULT_BACKEND"]).startswith("db+postgresql")
    assert interpolate(env["AIRFLOW__CELERY__BROKER_URL"]).startswith("redis://")
    assert "celery" in services["redis"]["profiles"] and "celery" in services["airflow-worker"]["profiles"]
    assert command_words(services["airflow-worker"])[:2] == ["celery", "worker"]
