"""Terminal bars vs plain progress lines (deepscholar.progress): plain lines off a TTY, a rich bar on one
(a real child process in a pseudo-terminal), DEEPSCHOLAR_PROGRESS to force either, and no bar left over."""

from __future__ import annotations

import io
import logging
import os
import re
import select
import subprocess
import sys
import time

import pytest

from deepscholar import progress as progress_module
from deepscholar.progress import ENV_MODE, LOGGER_NAME, Progress, progress, terminal_bars

# What cli.main does, then 50 items (every=5 would log "5 of 50", "10 of 50", ... as plain lines).
SCRIPT = """
import logging, sys, time
from deepscholar.progress import LOGGER_NAME, progress, terminal_bars
logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
logging.getLogger(LOGGER_NAME).setLevel(logging.INFO)
with terminal_bars(sys.stderr):
    for _ in progress(range(50), "demo items", every=5):
        time.sleep(0.01)
print("done", flush=True)
"""


def _lines(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == LOGGER_NAME]


def _run_in_pty(mode: str | None) -> str:
    """Run SCRIPT with stdin/stdout/stderr on a pseudo-terminal; everything it wrote to the terminal."""
    env = {k: v for k, v in os.environ.items() if k != ENV_MODE} | {"TERM": "xterm-256color", "COLUMNS": "120"}
    if mode:
        env[ENV_MODE] = mode
    master, slave = os.openpty()
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdin=slave, stdout=slave, stderr=slave, env=env)
    os.close(slave)
    chunks, deadline = [], time.monotonic() + 20
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 0.5)[0]:
                if proc.poll() is not None:
                    break
                continue
            try:
                data = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
        proc.wait(timeout=10)
    assert proc.returncode == 0, b"".join(chunks).decode(errors="replace")
    return b"".join(chunks).decode(errors="replace")


@pytest.fixture(autouse=True)
def _no_env_mode(monkeypatch):
    monkeypatch.delenv(ENV_MODE, raising=False)


def test_off_a_tty_the_plain_lines_are_logged_as_before(caplog):
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    stream = io.StringIO()  # not a TTY: what Airflow, CI and pipes give
    with terminal_bars(stream) as bars:
        assert list(progress(range(4), "import", every=2, seconds=1e9)) == [0, 1, 2, 3]
    assert not bars and stream.getvalue() == ""
    assert [re.sub(r",.*", "", m) for m in _lines(caplog)] == ["import: 0 of 4", "import: 2 of 4 (50%)",
                                                               "import: 4 of 4 (100%)"]


def test_on_a_tty_a_rich_bar_replaces_the_plain_lines():
    out = _run_in_pty(None)
    assert "demo items" in out and "50/50" in out and "━" in out  # the bar, drawn to its end
    assert re.findall(r"(\d+) of 50", out) == ["50"]  # no start or "5 of 50" lines: only the end line
    assert re.search(r"demo items: 50 of 50 \(100%\), .* in all", out)
    assert "done" in out


def test_plain_forces_the_lines_on_a_tty():
    out = _run_in_pty("plain")
    assert "50/50" not in out and "━" not in out
    assert re.findall(r"(\d+) of 50", out) == [str(n) for n in range(0, 51, 5)]


def test_wants_bars_follows_the_tty_unless_the_env_says(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self):
            return True

    assert progress_module.wants_bars(Tty()) and not progress_module.wants_bars(io.StringIO())
    monkeypatch.setenv(ENV_MODE, "plain")
    assert not progress_module.wants_bars(Tty())
    monkeypatch.setenv(ENV_MODE, "bar")
    assert progress_module.wants_bars(io.StringIO())


def test_bars_are_gone_after_an_exception_and_none_for_zero_items(monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger=LOGGER_NAME)
    monkeypatch.setenv(ENV_MODE, "bar")
    stderr = sys.stderr
    with pytest.raises(RuntimeError), terminal_bars(io.StringIO()):
        assert Progress("nothing", 0)._bar is None and progress_module._bars is None  # no bar for 0 items
        tracker = Progress("judge calls", 10)
        assert tracker._bar is not None and progress_module._bars is not None
        tracker.advance(3)
        raise RuntimeError("stopped half way")
    assert progress_module._bars is None and progress_module._stream is None and sys.stderr is stderr
    assert _lines(caplog) == []  # the bar stood for the start and in-between lines


def test_concurrent_trackers_share_one_display_until_the_last_ends(monkeypatch):
    monkeypatch.setenv(ENV_MODE, "bar")
    with terminal_bars(io.StringIO()):
        first, second = Progress("a", 2), Progress("b", 1)
        display = progress_module._bars
        assert first._bar[0] is display and second._bar[0] is display and len(display.task_ids) == 2
        second.advance()
        assert progress_module._bars is display and len(display.task_ids) == 1
        first.advance(2)
        assert progress_module._bars is None  # the last bar gone: the live display stopped
        for _ in progress(range(3), "c"):
            break  # a loop left early removes its bar too
        assert progress_module._bars is None
