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
    `size`. (Written here: functools.lru_cache neither keys by a stamp read per call nor makes concurrent
    misses of one key wait for one computation.)"""

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._values: OrderedDict[tuple, Any] = OrderedDict()
        self._computing: dict[tuple, threading.Lock] = {}

    def get(self, key: tuple, compute: Callable[[], Any]) -> Any:
        with self._lock:
            if key in self._values:
                self._values.move_to_end(key)
                return self._values[key]
            flight = self._computing.setdefault(key, threading.Lock())
        with flight:
            with self._lock:
                if key in self._values:
                    return self._values[key]
            try:
                value = compute()
            except BaseException:  # an error (a window with no scores: NotFound) is raised, not kept
                with self._lock:
                    self._computing.pop(key, None)
                raise
            with self._lock:
                self._values[key] = value
                while len(self._values) > self._size:
                    self._values.popitem(last=False)
                self._computing.pop(key, None)
            return value
