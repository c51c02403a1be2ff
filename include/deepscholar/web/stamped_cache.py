"""A per-process cache of what the page computes from the warehouse, keyed by the board stamp it depends on."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

__all__ = ["StampedCache"]


class StampedCache:
    """Values computed from the warehouse, kept per (key, board stamp) in this process, computed once per
    key at a time (a reader arriving while another computes the same key waits for its value instead of
    computing it again, holding no connection). A changed stamp is a new key; the oldest entries go past
    `size` entries, or past `max_bytes` as `weigh` counts them (a value heavier than `max_bytes` / 4 is
    returned but not kept: one huge page never pushes out every other). (Written here: functools.lru_cache
    neither keys by a stamp read per call, nor makes concurrent misses of one key wait for one computation,
    nor bounds by bytes.)"""

    def __init__(self, size: int = 64, *, max_bytes: int | None = None,
                 weigh: Callable[[Any], int] | None = None) -> None:
        self._size = size
        self._max_bytes = max_bytes
        self._weigh = weigh or (lambda _: 0)
        self._lock = threading.Lock()
        self._values: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self._computing: dict[tuple, threading.Lock] = {}
        self.kept_bytes = 0  # what the kept values weigh together

    @property
    def n_kept(self) -> int:
        """How many values are kept (a count, not __len__: an empty cache must not read as false)."""
        return len(self._values)

    def get(self, key: tuple, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key][0]
            flight = self._computing.setdefault(key, threading.Lock())
        with flight:
            with self._lock:
                if key in self._values:
                    return self._values[key][0]
            try:
                value = compute()
            except BaseException:  # an error (a window with no scores: NotFound) is raised, not kept
                with self._lock:
                    self._computing.pop(key, None)
                raise
            with self._lock:
                self._keep(key, value)
                self._computing.pop(key, None)
            return value

    def _keep(self, key: tuple, value: Any) -> None:
        """Keep `value` under `key` (its lock held), dropping the oldest entries past either bound."""
        weight = self._weigh(value)
        if self._max_bytes is not None and weight > self._max_bytes // 4:
            return
        self._values[key] = (value, weight)
        self.kept_bytes += weight
        while len(self._values) > self._size or (self._max_bytes is not None and self.kept_bytes > self._max_bytes):
            _, (_, dropped) = self._values.popitem(last=False)
            self.kept_bytes -= dropped
