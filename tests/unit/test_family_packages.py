"""A track from outside the library, named in DEEPSCHOLAR_FAMILY_PACKAGES: found by a fresh process (as
every Airflow process and the page find it) with its metric and its release-time artefacts; a folder that
declares no family is refused naming what it lacks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import json
from deepscholar.evaluation.metrics import registry
from deepscholar.release.track_artefacts import artefacts
print(json.dumps({"tracks": registry.tracks(), "metrics": registry.metric_names("plugged"),
                  "artefacts": sorted(artefacts()), "core": registry.metric_names(registry.CORE)}))
"""


def _probe(tmp_path: Path, packages: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "DEEPSCHOLAR_FAMILY_PACKAGES": packages, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "include"), os.environ.get("PYTHONPATH", "")])}
    return subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, env=env, timeout=120)


def _write(folder: Path, files: dict[str, str]) -> None:
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text), encoding="utf-8")


def test_a_configured_family_package_is_a_track_with_its_metric_and_artefacts(tmp_path):
    _write(tmp_path / "plugged_track", {
        "__init__.py": '''
            from deepscholar.evaluation.metrics.registry import Dimension, Family
            FAMILY = Family("plugged", "Plugged", 97)
            DIMENSIONS = (Dimension("plugged_dimension", "Plugged", "plugged", 1),)
        ''',
        "plugged_metric.py": '''
            from deepscholar.evaluation.metrics.base import compose_version

            class Plugged:
                name, dimension, position, label = "plugged_metric", "plugged_dimension", 1, "Plugged"
                headline, variants = "score", ("score",)
                version = property(lambda self: compose_version("d1"))
                items = judge_llm = judge_local = score = None

            METRIC = Plugged()
        ''',
        "artefacts.py": '''
            from deepscholar.release.track_declaration import TrackArtefacts
            ARTEFACTS = TrackArtefacts(track="plugged", build=lambda ctx: {}, judge_config=lambda ctx: "none",
                                       prompt_versions=lambda ctx: {}, frames={}, checks=lambda gxe: [])
        ''',
    })
    done = _probe(tmp_path, "plugged_track")
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert found["tracks"][-1] == "plugged" and found["metrics"] == ["plugged_metric"]
    assert found["artefacts"] == ["claims", "plugged", "race"]
    assert len(found["core"]) == 7  # a track never moves the core


def test_a_folder_that_declares_no_family_is_refused_by_name(tmp_path):
    _write(tmp_path / "not_a_track", {"__init__.py": "DIMENSIONS = ()\n"})
    done = _probe(tmp_path, "not_a_track")
    assert done.returncode != 0
    assert "not_a_track: FAMILY must be a registry.Family" in done.stderr
