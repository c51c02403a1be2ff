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


def lane_pool(lane: str, environ=None) -> str:
    """DEEPSCHOLAR_POOL_<LANE> if set; else llm_<lane> for LLM lanes and default_pool for the offline one."""
    import os

    env = os.environ if environ is None else environ
    override = env.get(f"DEEPSCHOLAR_POOL_{lane.upper()}")
    if override:
        return override
    return "default_pool" if lane == "offline" else f"llm_{lane}"

LEADERBOARD_ASSET_NAME = "deepscholar_leaderboard"
LEADERBOARD_ASSET_URI = "postgres://warehouse:5432/deepscholar/deepscholar/leaderboard"
