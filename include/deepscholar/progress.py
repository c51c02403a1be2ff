"""Progress of long steps: plain "LABEL: n of N (p%), r/s, ETA m:ss" log lines, or live bars on a terminal.

Design notes: docs/MODULE_NOTES.md, `deepscholar.progress`.
"""

from __future__ import annotations

import logging
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, TextIO, TypeVar

from deepscholar.settings import current_settings

if TYPE_CHECKING:
    from rich.progress import Progress as Bars
    from rich.progress import TaskID

__all__ = ["Progress", "progress", "terminal_bars", "wants_bars", "LOGGER_NAME", "ENV_MODE"]

LOGGER_NAME = "deepscholar.progress"
ENV_MODE = "DEEPSCHOLAR_PROGRESS"
T = TypeVar("T")

# Terminal mode: the stream bars go to (None: plain lines), and the live display, running only while at
# least one bar is shown, so stdout/stderr are redirected only then.
_state_lock = threading.RLock()
_stream: TextIO | None = None
_bars: Bars | None = None
_handlers: list[tuple[logging.StreamHandler, object]] = []


def _clock_text(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _isatty(stream) -> bool:
    with suppress(Exception):
        return bool(stream.isatty())
    return False


def wants_bars(stream) -> bool:
    """Bars when DEEPSCHOLAR_PROGRESS says `bar`, lines when it says `plain`, else bars only on a TTY."""
    mode = current_settings().progress
    return mode == "bar" or (mode != "plain" and _isatty(stream))


@contextmanager
def terminal_bars(stream=None):
    """Show trackers as live bars on `stream` (default stderr) inside the block when `wants_bars` says so;
    every bar is gone when the block ends, also on an exception. Yields whether bars are on."""
    global _stream
    stream = stream if stream is not None else sys.stderr
    if _stream is not None or not wants_bars(stream):  # already on, or plain lines
        yield _stream is not None
        return
    _stream = stream
    try:
        yield True
    finally:
        with _state_lock:
            _stream = None
            _stop_display()


def _start_display(stream: TextIO) -> Bars:
    """The shared rich display; log handlers writing to the stream print above it instead of through it."""
    global _bars
    from rich.console import Console
    from rich.file_proxy import FileProxy
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeRemainingColumn
    from rich.progress import Progress as Bars

    console = Console(file=stream, force_terminal=True)
    _bars = Bars(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                 TextColumn("{task.fields[rate]}"), TextColumn("ETA"), TimeRemainingColumn(),
                 console=console, transient=True,
                 redirect_stdout=_isatty(sys.stdout), redirect_stderr=True)  # stdout to a pipe: untouched
    proxy = FileProxy(console, stream)
    for handler in logging.getLogger().handlers + logging.getLogger(LOGGER_NAME).handlers:
        if isinstance(handler, logging.StreamHandler) and handler.stream is stream:
            _handlers.append((handler, handler.setStream(proxy)))
    _bars.start()
    return _bars


def _stop_display() -> None:
    global _bars
    if _bars is not None:
        bars, _bars = _bars, None
        try:
            bars.stop()
        finally:
            while _handlers:
                handler, stream = _handlers.pop()
                handler.setStream(stream)


class Progress:
    """Counts done items of `total` (thread-safe) and logs a line now and then, or moves a bar."""

    def __init__(self, label: str, total: int, *, every: int | None = None, seconds: float = 15.0,
                 logger: logging.Logger | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.label, self.total = label, max(0, int(total))
        self.every = every
        self.seconds = seconds
        self.log = logger or logging.getLogger(LOGGER_NAME)
        self._clock = clock
        self._lock = threading.Lock()
        self.done = 0
        self._started = self._last_line = clock()
        self._last_logged = 0
        self._bar: tuple[Bars, TaskID] | None = None  # (display, task id) while this tracker shows a bar
        with _state_lock:
            if _stream is not None and self.total:
                bars = _bars if _bars is not None else _start_display(_stream)
                self._bar = (bars, bars.add_task(label, total=self.total, rate=""))
        if self.total and self._bar is None:
            self.log.info("%s: 0 of %d", label, self.total)

    def _rate_text(self, elapsed: float) -> str:
        rate = self.done / elapsed
        return f"{rate:.1f}/s" if rate >= 1 else f"{elapsed / self.done:.1f} s each"

    def line(self) -> str:
        """The current progress line (also what is logged)."""
        elapsed = self._clock() - self._started
        text = f"{self.label}: {self.done} of {self.total}"
        if self.total:
            text += f" ({100 * self.done // self.total}%)"
        if self.done and elapsed > 0:
            rate = self.done / elapsed
            text += f", {self._rate_text(elapsed)}"
            if self.done < self.total:
                text += f", ETA {_clock_text((self.total - self.done) / rate)}"
            else:
                text += f", {_clock_text(elapsed)} in all"
        return text

    def advance(self, n: int = 1, note: str | None = None) -> None:
        """`n` more items done; logs when due (at the end, after `seconds`, every `every` items). With a bar
        it only moves the bar, and logs the end line once the bar is gone."""
        with self._lock:
            self.done += n
            now = self._clock()
            if self._bar is not None:
                bars, task = self._bar
                elapsed = now - self._started
                with suppress(KeyError):  # already removed: the CLI command ended
                    bars.update(task, completed=self.done, rate=self._rate_text(elapsed) if elapsed > 0 else "")
                if self.done < self.total:
                    return
                self._close_bar()
            due = (self.done >= self.total or now - self._last_line >= self.seconds
                   or (self.every is not None and self.done - self._last_logged >= self.every))
            if not due or self.done == self._last_logged:
                return
            self._last_logged, self._last_line = self.done, now
            text = self.line()
        self.log.info("%s%s", text, f" ({note})" if note else "")

    def close(self) -> None:
        """Remove the bar of a step that stopped early (an exception, a loop left with break)."""
        with self._lock:
            self._close_bar()

    def _close_bar(self) -> None:
        if self._bar is None:
            return
        (bars, task), self._bar = self._bar, None
        with _state_lock:
            if bars is not _bars:  # the CLI command ended: that display is gone already
                return
            with suppress(KeyError):
                bars.refresh()  # the final n/N is drawn once before the bar goes
                bars.remove_task(task)
            if not bars.task_ids:
                _stop_display()


def progress(items: Iterable[T], label: str, total: int | None = None, **kwargs) -> Iterator[T]:
    """Yield the items, counting one done each time the loop asks for the next one (or ends)."""
    if total is None:
        items = list(items)
        total = len(items)
    tracker = Progress(label, total, **kwargs)
    try:
        for item in items:
            yield item
            tracker.advance()
    finally:
        tracker.close()
