"""The demo month built through the library (no Airflow): release, offline systems' reports, external import.

Shared by the evaluation tests and bench/evaluation.py, so both judge the reports `make demo` judges.
"""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy.engine import Engine

MONTH = "2025-06"


def build_demo_month(engine: Engine, home: Path, month: str = MONTH) -> dict:
    from deepscholar.demo import DEMO_SYSTEMS, register_demo_systems
    from deepscholar.release.spec import ReleaseSpec
    from deepscholar.release.steps import build_release
    from deepscholar.replay.demo_snapshot import write_demo_snapshot
    from deepscholar.replay.server import ReplayServer
    from deepscholar.systems.generation import generate_release
    from support.settings import replay_settings

    snapshot = home / "snapshot"
    write_demo_snapshot(snapshot, month=month)
    categories = json.loads((snapshot / "manifest.json").read_text())["categories"]
    with ReplayServer(snapshot) as server:
        build_release(engine, month, ReleaseSpec(categories=categories), replay_settings(server))
        register_demo_systems(engine, snapshot, home, month)
        generated = generate_release(engine, month, [name for name, _, _ in DEMO_SYSTEMS])
    return {"month": month, "snapshot": snapshot, "generated": generated}


@contextlib.contextmanager
def served_demo_month(db_url: str, prefix: str = "deepscholar_month_") -> Iterator[dict]:
    """The demo month built in the session database (emptied first), with the replay server's OpenAlex
    reachable (DEEPSCHOLAR_OPENALEX_URL) for the cited-by lookups judging makes: {"engine", "month", ...}."""
    import pytest

    from deepscholar import db
    from deepscholar.replay.server import ReplayServer
    from support.warehouse import empty_warehouse

    engine = db.get_engine(db_url)
    empty_warehouse(engine)
    built = build_demo_month(engine, Path(tempfile.mkdtemp(prefix=prefix)))
    with ReplayServer(built["snapshot"]) as server, pytest.MonkeyPatch.context() as mp:
        mp.setenv("DEEPSCHOLAR_OPENALEX_URL", server.openalex_url)
        yield {"engine": engine, **built}


def write_unresolvable_snapshot(snapshot: Path, dest: Path, month: str = MONTH) -> Path:
    """A copy of the demo snapshot whose referenced papers vanished from arXiv and OpenAlex: the month's
    own papers are still there, but no reference resolves, so the release fails its quality gate."""
    import shutil

    shutil.copytree(snapshot, dest)
    month_prefix = month[2:4] + month[5:7] + "."
    entries = (dest / "arxiv" / "entries.jsonl").read_text().splitlines()
    (dest / "arxiv" / "entries.jsonl").write_text(
        "\n".join(e for e in entries if json.loads(e)["id"].startswith(month_prefix)) + "\n")
    (dest / "openalex" / "works.jsonl").write_text("")
    return dest
