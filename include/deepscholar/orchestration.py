"""Names shared between the DAG files and the library (kept free of Airflow imports)."""

from __future__ import annotations

from collections.abc import Mapping

from deepscholar.settings import Settings, current_settings

RELEASE_DAG_ID = "deepscholar_release"
RELEASE_ASSET_NAME = "deepscholar_release"
# The published release lives in the warehouse table deepscholar.releases.
RELEASE_ASSET_URI = "postgres://warehouse:5432/deepscholar/deepscholar/releases"
MONTHLY_CRON = "0 0 1 * *"
BENCHMARK_DAG_ID = "deepscholar_benchmark"
BENCHMARK_MAX_ACTIVE_RUNS = 2  # months judged at once (each run keeps DEEPSCHOLAR_JUDGE_TASKS judge tasks)
# Airflow's default max_map_length is 1024: stay under it by batching pairs beyond this many tasks.
MAX_MAPPED_TASKS = 1000

# Generation runs in lanes: one mapped task per lane, each in its own Airflow pool, so a provider's pool
# bounds the requests to that provider however many systems use it. Systems without an LLM run offline.
GENERATION_LANES = ("offline", "openai", "anthropic", "gemini", "local", "other")
_PROVIDER_LANES = {
    "openai": "openai", "azure": "openai", "text-completion-openai": "openai",
    "anthropic": "anthropic", "bedrock": "anthropic",
    "gemini": "gemini", "vertex_ai": "gemini",
    "ollama": "local", "ollama_chat": "local", "hosted_vllm": "local", "vllm": "local", "lm_studio": "local",
    "llamafile": "local", "openai_like": "local",
}


def provider_lane(model: str | None) -> str:
    """The lane of a litellm model string: its provider prefix, else the provider litellm infers by name."""
    if not model:
        return "offline"
    prefix, sep, name = model.partition("/")
    if sep:
        return _PROVIDER_LANES.get(prefix.lower(), "other")
    lowered = model.lower()
    if lowered.startswith(("gpt-", "o1", "o3", "o4", "chatgpt")):
        return "openai"
    if lowered.startswith("claude"):
        return "anthropic"
    if lowered.startswith("gemini"):
        return "gemini"
    return "other"


DEFAULT_OFFLINE_BATCH = Settings.offline_batch


def _settings(environ: Mapping[str, str] | None) -> Settings:
    """This process's settings, or those of `environ` when given."""
    return current_settings() if environ is None else Settings.from_env(environ)


def lane_batch_size(lane: str, environ: Mapping[str, str] | None = None) -> int:
    """(system, query) pairs per mapped generation task. An offline system writes a report in a fraction of a
    second to a few seconds while a task costs seconds of start-up, so offline pairs go
    DEEPSCHOLAR_OFFLINE_BATCH to a task: 4,000 reports would otherwise be 1,000 tasks. An LLM report takes tens of
    seconds of provider time: one per task, so a retry redoes one report and pools meter each call."""
    return _settings(environ).offline_batch if lane == "offline" else 1


def lane_pool(lane: str) -> str:
    """The Airflow pool of a generation lane: llm_<lane> for LLM lanes, default_pool for the offline one.
    Fixed names: an operator sizes the pools in Airflow (DEEPSCHOLAR_POOLS in docker-compose) rather than
    renaming them."""
    return "default_pool" if lane == "offline" else f"llm_{lane}"


# How a benchmark run waits for its month's release (see deepscholar.scheduling).
DEFAULT_RELEASE_WAIT_HOURS = Settings.release_wait_hours  # a real month at arXiv's rate limits takes hours
DEFAULT_RELEASE_POKE_SECONDS = Settings.release_poke_seconds


def release_wait_seconds(environ: Mapping[str, str] | None = None) -> float:
    """How long a benchmark run waits for its release before giving up (DEEPSCHOLAR_RELEASE_WAIT_HOURS)."""
    return _settings(environ).release_wait_hours * 3600.0


def release_poke_seconds(environ: Mapping[str, str] | None = None) -> float:
    """How often a waiting benchmark run looks at its release (DEEPSCHOLAR_RELEASE_POKE_SECONDS)."""
    return _settings(environ).release_poke_seconds


LEADERBOARD_ASSET_NAME = "deepscholar_leaderboard"
LEADERBOARD_ASSET_URI = "postgres://warehouse:5432/deepscholar/deepscholar/leaderboard"


def schedule_window(environ: Mapping[str, str] | None = None) -> dict:
    """start_date, end_date and catchup of both monthly DAGs, from the deployment's environment.

    DEEPSCHOLAR_SCHEDULE_START (YYYY-MM, default 2025-01) is the first month the deployment covers;
    DEEPSCHOLAR_SCHEDULE_END (YYYY-MM, optional) the last month the scheduler may start by itself;
    DEEPSCHOLAR_CATCHUP (default false) lets the scheduler start every month in between. The demo and the
    end-to-end tests use START = END = the demo month with catchup, so the real scheduler fires exactly
    that month's runs for both DAGs, as the cron tick on the 1st does.
    """
    import pendulum

    settings = _settings(environ)

    def month_start(value: str) -> pendulum.DateTime:
        year, month = value.strip().split("-")
        return pendulum.datetime(int(year), int(month), 1, tz="UTC")

    return {
        "start_date": month_start(settings.schedule_start),
        # A monthly run's logical date is the first of its month: ending there admits that month, no later.
        "end_date": month_start(settings.schedule_end) if settings.schedule_end else None,
        "catchup": settings.catchup,
    }
