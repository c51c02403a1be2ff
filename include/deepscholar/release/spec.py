"""The spec of a month's dataset: what a release is built from, stored as JSON on its release row.

Design notes: docs/MODULE_NOTES.md, `deepscholar.release.spec`.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any

from deepscholar.errors import InvalidInput
from deepscholar.settings import Settings, current_settings

__all__ = ["ReleaseSpec"]

_DEFAULTS = Settings()  # a new month's defaults are the settings' defaults


@dataclass(frozen=True)
class ReleaseSpec:
    """What a monthly release is built from; stored as JSON on the release row."""

    categories: list[str] = field(default_factory=lambda: list(_DEFAULTS.categories))
    require_venue: bool = _DEFAULTS.require_venue
    venues: list[str] | None = None  # None: the default venue list of sources.venues
    max_words: int = 1000
    min_references: int = 5
    title_match_threshold: float = 0.9
    min_resolution_rate: float = 0.5
    # At most this many queries, a seeded sample stratified by primary category (release/sampling.py);
    # None keeps every paper that passes. The paper's Nov-2025 slice has 200.
    max_queries: int | None = _DEFAULTS.max_queries
    sample_seed: int = _DEFAULTS.sample_seed
    judge: str = _DEFAULTS.judge  # "local" or a litellm model string
    # Evaluation tracks the month is built for: those with release-time artefacts (RACE's rubrics, the
    # claims track's ground truth) get them after the nuggets, gated with the release.
    tracks: list[str] = field(default_factory=lambda: list(_DEFAULTS.tracks))

    @classmethod
    def from_env(cls, **overrides: Any) -> ReleaseSpec:
        """Defaults, then the DEEPSCHOLAR_* settings of this environment, then explicit overrides (None: not
        given; max_queries=0: no cap)."""
        return cls.from_settings(current_settings(), **overrides)

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: Any) -> ReleaseSpec:
        """A new month's spec from `settings`, then explicit overrides as in `from_env`."""
        cap = overrides.pop("max_queries", None)
        values: dict[str, Any] = {
            "categories": list(settings.categories), "require_venue": settings.require_venue,
            "max_queries": settings.max_queries, "sample_seed": settings.sample_seed,
            "judge": settings.release_judge or settings.judge, "tracks": list(settings.tracks),
        }
        if settings.venues is not None:
            values["venues"] = list(settings.venues)
        values.update({k: v for k, v in overrides.items() if v is not None})
        if cap is not None:
            values["max_queries"] = cap or None
        return cls(**values)

    def __post_init__(self) -> None:
        if self.max_queries is not None and self.max_queries < 1:
            raise InvalidInput(f"max_queries must be a positive number of queries or None (no cap), "
                               f"not {self.max_queries}")

    @classmethod
    def from_dict(cls, data: dict) -> ReleaseSpec:
        """The stored spec; keys it does not know are ignored (releases stored before the endpoints became
        settings carry arxiv_api_url, openalex_url, judge_api_base, ...)."""
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        # A release stored before the cap existed was built from every paper that passed: keep it so.
        values.setdefault("max_queries", None)
        values.setdefault("tracks", [])  # stored before tracks existed: built for the core alone
        return cls(**values)

    def to_dict(self) -> dict:
        return asdict(self)
