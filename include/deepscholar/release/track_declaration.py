"""What a track with release-time artefacts declares: `TrackArtefacts`, one per track module.

The track modules (race_rubrics.py, claims_truth.py) each declare an `ARTEFACTS` of this type, and
track_artefacts.py, which builds, checks and records them, lists those modules. The type sits below both so
a track module never imports the module that lists it.
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
