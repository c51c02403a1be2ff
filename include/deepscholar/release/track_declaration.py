"""What a track with release-time artefacts declares: `TrackArtefacts`, one per track module.

A module in a track's folder (evaluation/metrics/race/rubrics.py, evaluation/metrics/claims/ground_truth.py)
declares an `ARTEFACTS` of this type, and track_artefacts.py, which builds, checks and records them, finds
those modules (family_packages.py). The type sits here, in release, so a track's module imports it and
the release never imports a track.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from deepscholar.gx import Check

__all__ = ["TrackArtefacts"]


@dataclass(frozen=True)
class TrackArtefacts:
    track: str  # a family of the metric registry
    build: Callable[[Any], dict]  # (ReleaseContext) -> counts; idempotent, only what is missing
    judge_config: Callable[[Any], str]  # (ReleaseContext) -> the judge config the build uses
    prompt_versions: Callable[[Any], dict]  # (ReleaseContext) -> {prompt: version} the build uses
    frames: dict[str, str]  # frame name -> SQL over :r (the release id)
    checks: Callable[[Any], list[Check]]  # (gx.expectations) -> checks over those frames
