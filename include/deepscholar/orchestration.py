"""Names shared between the DAG files and the library (kept free of Airflow imports)."""

RELEASE_DAG_ID = "deepscholar_release"
RELEASE_ASSET_NAME = "deepscholar_release"
# The published release lives in the warehouse table deepscholar.releases.
RELEASE_ASSET_URI = "postgres://warehouse:5432/deepscholar/deepscholar/releases"
MONTHLY_CRON = "0 0 1 * *"
BENCHMARK_DAG_ID = "deepscholar_benchmark"
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


DEFAULT_OFFLINE_BATCH = 25


def lane_batch_size(lane: str, environ=None) -> int:
    """(system, query) pairs per mapped generation task. An offline system writes a report in a fraction of a
    second to a few seconds while a task costs seconds of start-up, so offline pairs go
    DEEPSCHOLAR_OFFLINE_BATCH to a task: 4,000 reports would otherwise be 1,000 tasks. An LLM report takes tens of
    seconds of provider time: one per task, so a retry redoes one report and pools meter each call."""
    import os

    if lane != "offline":
        return 1
    environ = os.environ if environ is None else environ
    raw = environ.get("DEEPSCHOLAR_OFFLINE_BATCH", "").strip()
    if raw.isdigit() and int(raw) > 0:
        return int(raw)
    if raw:
        raise ValueError(f"DEEPSCHOLAR_OFFLINE_BATCH must be a positive number of reports, not {raw!r}")
    return DEFAULT_OFFLINE_BATCH


def lane_pool(lane: str, environ=None) -> str:
    """DEEPSCHOLAR_POOL_<LANE> if set; else llm_<lane> for LLM lanes and default_pool for the offline one."""
    import os

    env = os.environ if environ is None else environ
    override = env.get(f"DEEPSCHOLAR_POOL_{lane.upper()}")
    if override:
        return override
    return "default_pool" if lane == "offline" else f"llm_{lane}"

# How a benchmark run waits for its month's release (see deepscholar.scheduling).
DEFAULT_RELEASE_WAIT_HOURS = 96.0  # a real month at arXiv's rate limits takes hours; allow several days
DEFAULT_RELEASE_POKE_SECONDS = 300.0


def release_wait_seconds(environ=None) -> float:
    """How long a benchmark run waits for its release before giving up (DEEPSCHOLAR_RELEASE_WAIT_HOURS)."""
    import os

    env = os.environ if environ is None else environ
    return float(env.get("DEEPSCHOLAR_RELEASE_WAIT_HOURS", DEFAULT_RELEASE_WAIT_HOURS)) * 3600.0


def release_poke_seconds(environ=None) -> float:
    """How often a waiting benchmark run looks at its release (DEEPSCHOLAR_RELEASE_POKE_SECONDS)."""
    import os

    env = os.environ if environ is None else environ
    return float(env.get("DEEPSCHOLAR_RELEASE_POKE_SECONDS", DEFAULT_RELEASE_POKE_SECONDS))


LEADERBOARD_ASSET_NAME = "deepscholar_leaderboard"
LEADERBOARD_ASSET_URI = "postgres://warehouse:5432/deepscholar/deepscholar/leaderboard"


def schedule_window(environ=None) -> dict:
    """start_date, end_date and catchup of both monthly DAGs, from the deployment's environment.

    DEEPSCHOLAR_SCHEDULE_START (YYYY-MM, default 2025-01) is the first month the deployment covers;
    DEEPSCHOLAR_SCHEDULE_END (YYYY-MM, optional) the last month the scheduler may start by itself;
    DEEPSCHOLAR_CATCHUP (default false) lets the scheduler start every month in between. The demo and the
    end-to-end tests use START = END = the demo month with catchup, so the real scheduler fires exactly
    that month's runs for both DAGs, as the cron tick on the 1st does.
    """
    import os

    import pendulum

    env = os.environ if environ is None else environ

    def month_start(value: str) -> pendulum.DateTime:
        year, month = value.strip().split("-")
        return pendulum.datetime(int(year), int(month), 1, tz="UTC")

    end = env.get("DEEPSCHOLAR_SCHEDULE_END")
    return {
        "start_date": month_start(env.get("DEEPSCHOLAR_SCHEDULE_START") or "2025-01"),
        # A monthly run's logical date is the first of its month: ending there admits that month, no later.
        "end_date": month_start(end) if end else None,
        "catchup": (env.get("DEEPSCHOLAR_CATCHUP") or "false").strip().lower() in ("1", "true", "yes"),
    }
