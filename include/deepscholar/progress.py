"""Progress lines for long steps: "LABEL: n of N (p%), r/s, ETA m:ss", as plain log records.

A step that loops over hundreds of items (cited-by lookups, reference resolution, judge calls, imports)
logs a line when it starts, when it ends, and in between when `seconds` (default 15) have passed since
the last line or, if the caller asks, every `every` items: a slow or stuck step is visible as it runs,
and a quick one costs two lines.
Records go to the `deepscholar.progress` logger at INFO: Airflow's task log shows INFO, and the CLI
shows this logger even without --verbose.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import TypeVar

__all__ = ["Progress", "progress", "LOGGER_NAME"]

LOGGER_NAME = "deepscholar.progress"
T = TypeVar("T")


def _clock_text(seconds: float) -> str:
    seconds = int(round(seconds))
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


class Progress:
    """Counts done items of `total` (thread-safe) and logs a line now and then."""

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
        if self.total:
            self.log.info("%s: 0 of %d", label, self.total)

    def line(self) -> str:
        """The current progress line (also what is logged)."""
        elapsed = self._clock() - self._started
        text = f"{self.label}: {self.done} of {self.total}"
        if self.total:
            text += f" ({100 * self.done // self.total}%)"
        if self.done and elapsed > 0:
            rate = self.done / elapsed
            text += f", {rate:.1f}/s" if rate >= 1 else f", {elapsed / self.done:.1f} s each"
            if self.done < self.total:
                text += f", ETA {_clock_text((self.total - self.done) / rate)}"
            else:
                text += f", {_clock_text(elapsed)} in all"
        return text

    def advance(self, n: int = 1, note: str | None = None) -> None:
        """`n` more items done; logs when due (at the end, after `seconds`, every `every` items)."""
        with self._lock:
            self.done += n
            now = self._clock()
            due = (self.done >= self.total or now - self._last_line >= self.seconds
                   or (self.every is not None and self.done - self._last_logged >= self.every))
            if not due or self.done == self._last_logged:
                return
            self._last_logged, self._last_line = self.done, now
            text = self.line()
        self.log.info("%s%s", text, f" ({note})" if note else "")


def progress(items: Iterable[T], label: str, total: int | None = None, **kwargs) -> Iterator[T]:
    """Yield the items, counting one done each time the loop asks for the next one (or ends)."""
    if total is None:
        items = list(items)
        total = len(items)
    tracker = Progress(label, total, **kwargs)
    for item in items:
        yield item
        tracker.advance()
