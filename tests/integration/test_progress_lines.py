"""Progress lines of long steps (deepscholar.progress): when they are written, what they say, and that the
CLI shows them without --verbose (a real subprocess against the session database)."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
import threading

import pytest

from deepscholar.progress import LOGGER_NAME, Progress, progress

pytestmark = pytest.mark.slow  # CLI subprocesses


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER_NAME]


def test_start_end_and_time_based_lines_with_rate_and_eta(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    now = [0.0]
    tracker = Progress("cited-by lookups", 60, seconds=15, clock=lambda: now[0])
    for _ in range(10):  # 10 items in 10 s: under 15 s since the start line, nothing more yet
        now[0] += 1.0
        tracker.advance()
    now[0] += 10.0  # a slow item: 20 s since the last line
    tracker.advance()
    for _ in range(49):
        tracker.advance()
    assert _lines(caplog) == [
        "cited-by lookups: 0 of 60",
        "cited-by lookups: 11 of 60 (18%), 1.8 s each, ETA 1:29",
        "cited-by lookups: 60 of 60 (100%), 3.0/s, 0:20 in all",
    ]


def test_every_k_items_and_a_note(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    now = [0.0]
    tracker = Progress("resolve", 5, every=2, seconds=1e9, clock=lambda: now[0])
    for i in range(5):
        now[0] += 2.0
        tracker.advance(note=f"arxiv {i + 1}")
    assert _lines(caplog) == ["resolve: 0 of 5", "resolve: 2 of 5 (40%), 2.0 s each, ETA 0:06 (arxiv 2)",
                              "resolve: 4 of 5 (80%), 2.0 s each, ETA 0:02 (arxiv 4)",
                              "resolve: 5 of 5 (100%), 2.0 s each, 0:10 in all (arxiv 5)"]


def test_threads_count_every_item_once(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    tracker = Progress("judge calls", 800, seconds=1e9)
    threads = [threading.Thread(target=lambda: [tracker.advance() for _ in range(100)]) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert tracker.done == 800 and _lines(caplog)[-1].startswith("judge calls: 800 of 800 (100%)")
    assert [m for m in _lines(caplog) if "800 of 800" in m] == [_lines(caplog)[-1]]  # the end line once


def test_the_iterator_counts_items_the_loop_finished(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    seen = [x for x in progress(iter(range(3)), "import", total=3)]
    assert seen == [0, 1, 2] and _lines(caplog)[0] == "import: 0 of 3" and "3 of 3" in _lines(caplog)[-1]
    assert list(progress([], "nothing")) == []


def test_the_cli_shows_progress_lines_without_verbose(engine, db_url, shared_fixtures):
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True", DEEPSCHOLAR_DB_URL=db_url)
    out = subprocess.run([sys.executable, "-m", "deepscholar.cli", "import-official",
                          str(shared_fixtures / "deepscholar_official"), "--release", "official-progress"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "official import official-progress: queries written: 0 of 5" in out.stderr
    assert "official import official-progress: queries written: 5 of 5 (100%)" in out.stderr
    assert " INFO deepscholar.release" not in out.stderr  # other INFO logs still need --verbose
