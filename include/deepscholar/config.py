"""Settings read from the environment, and the release configuration (the spec of a month's dataset).

Spec apart from state: a release stores the ReleaseConfig it was built with, so every row can be traced
back to the filters and endpoints that produced it.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from deepscholar.errors import InvalidInput
from deepscholar.sources.endpoints import (
    ARXIV_API_URL,
    ARXIV_EPRINT_URL,
    arxiv_api_url_from_env,
    arxiv_delay_seconds_from_env,
    arxiv_eprint_url_from_env,
    openalex_url_from_env,
)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")



def deepscholar_home() -> Path:
    """Where the embedded Postgres, the demo snapshot and other local state live."""
    return Path(os.environ.get("DEEPSCHOLAR_HOME", ".deepscholar")).resolve()


def _env_list(name: str, default: list[str]) -> list[str]:
    raw = os.environ.get(name)
    return [x.strip() for x in raw.split(",") if x.strip()] if raw else list(default)


def _env_cap(name: str) -> int | None:
    """A positive count, or none/all/0 for no cap."""
    raw = os.environ[name].strip().lower()
    if raw in {"", "none", "all", "0"}:
        return None
    try:
        return int(raw)
    except ValueError:
        raise InvalidInput(f"{name}={raw!r}: expected a number of queries, or 'none' for no cap") from None


def _env_bool(name: str, default: bool) -> bool:
    raw = os.environ.get(name)
    return default if raw is None else raw.strip().lower() in {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class ReleaseConfig:
    """What a monthly release is built from; stored as JSON on the release row."""

    categories: list[str] = field(default_factory=lambda: ["cs.CL", "cs.LG", "cs.IR", "cs.AI"])
    require_venue: bool = True
    venues: list[str] | None = None  # None: the default venue list of sources.venues
    max_words: int = 1000
    min_references: int = 5
    title_match_threshold: float = 0.9
    min_resolution_rate: float = 0.5
    # At most this many queries, a seeded sample stratified by primary category (release/sampling.py);
    # None keeps every paper that passes. The paper's Nov-2025 slice has 200.
    max_queries: int | None = 200
    sample_seed: int = 0
    arxiv_api_url: str = ARXIV_API_URL
    arxiv_eprint_url: str = ARXIV_EPRINT_URL
    openalex_url: str | None = None  # None: the public OpenAlex host
    openalex_email: str | None = None
    arxiv_delay_seconds: float = 3.0
    judge: str = "local"  # "local" or a litellm model string
    judge_api_base: str | None = None
    judge_concurrency: int = 8

    @classmethod
    def from_env(cls, **overrides) -> ReleaseConfig:
        """Defaults, then DEEPSCHOLAR_* environment variables, then explicit overrides (None: not given;
        max_queries=0: no cap)."""
        cap = overrides.pop("max_queries", None)
        env: dict[str, Any] = {
            "categories": _env_list("DEEPSCHOLAR_CATEGORIES", cls().categories),
            "require_venue": _env_bool("DEEPSCHOLAR_REQUIRE_VENUE", True),
            "arxiv_api_url": arxiv_api_url_from_env(),
            "arxiv_eprint_url": arxiv_eprint_url_from_env(),
            "openalex_url": openalex_url_from_env(),
            "openalex_email": os.environ.get("DEEPSCHOLAR_OPENALEX_EMAIL") or None,
            "arxiv_delay_seconds": arxiv_delay_seconds_from_env(),
            "judge": os.environ.get("DEEPSCHOLAR_JUDGE", "local"),
            "judge_api_base": os.environ.get("DEEPSCHOLAR_JUDGE_API_BASE") or None,
        }
        if "DEEPSCHOLAR_MAX_QUERIES" in os.environ:
            env["max_queries"] = _env_cap("DEEPSCHOLAR_MAX_QUERIES")
        if os.environ.get("DEEPSCHOLAR_SAMPLE_SEED", "").strip():
            env["sample_seed"] = int(os.environ["DEEPSCHOLAR_SAMPLE_SEED"])
        if "DEEPSCHOLAR_VENUES" in os.environ:
            env["venues"] = _env_list("DEEPSCHOLAR_VENUES", [])
        env.update({k: v for k, v in overrides.items() if v is not None})
        if cap is not None:
            env["max_queries"] = cap or None
        return cls(**env)

    def __post_init__(self) -> None:
        if self.max_queries is not None and self.max_queries < 1:
            raise InvalidInput(f"max_queries must be a positive number of queries or None (no cap), "
                               f"not {self.max_queries}")

    @classmethod
    def from_dict(cls, data: dict) -> ReleaseConfig:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        # A release stored before the cap existed was built from every paper that passed: keep it so.
        values.setdefault("max_queries", None)
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)

    def with_runtime_endpoints(self, current: ReleaseConfig) -> ReleaseConfig:
        """Where services are reached is a property of this run, not of the release: take it from `current`."""
        return replace(self, **{name: getattr(current, name) for name in RUNTIME_FIELDS})


# Fields that say how to reach services from this machine; they never change what a release contains.
RUNTIME_FIELDS = ("arxiv_api_url", "arxiv_eprint_url", "openalex_url", "openalex_email", "arxiv_delay_seconds",
                  "judge_api_base", "judge_concurrency")
