"""One registry shape for everything a contributor adds as a single file: metrics, search backends,
import formats and system kinds.

Design notes: docs/MODULE_NOTES.md, `deepscholar.registry`.
"""

from __future__ import annotations

import importlib
import itertools
import pkgutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from deepscholar.errors import InvalidInput

__all__ = ["Registry", "package_modules", "note_change", "last_change"]

T = TypeVar("T")

# Every registration or removal, in any registry, takes a new number: a registry's sorted listing is kept until
# the number changes (an order key may read another registry, e.g. a metric's family's position).
_CHANGES = itertools.count(1)
_last_change = 0


def last_change() -> int:
    """The number of the latest registration or removal (a listing kept with it is still the listing)."""
    return _last_change


def note_change() -> None:
    """Something an order key reads was declared or removed: every registry sorts its listing again."""
    global _last_change
    _last_change = next(_CHANGES)


def package_modules(package_name: str, recursive: bool = False) -> Iterator[str]:
    """The modules of a package (names starting with "_" left out), and of its subpackages if `recursive`."""
    package = importlib.import_module(package_name)
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        name = f"{package_name}.{info.name}"
        if not info.ispkg:
            yield name
        elif recursive:
            yield name
            yield from package_modules(name, recursive)


class Registry(Generic[T]):
    """Declarations of one kind, by name.

    `what` names the kind in messages ("metric", "search backend"); `package` and `attribute` say where
    declarations live; `check` raises InvalidInput for a malformed one; `order` sorts the listing;
    `known_prefix` goes before the known names in the unknown-name message (e.g. a pseudo-name like "auto").
    """

    def __init__(self, what: str, package: str, attribute: str, check: Callable[[T], None],
                 order: Callable[[T], Any] | None = None, known_prefix: tuple[str, ...] = (), *,
                 name: Callable[[T], str] | None = None, collect: Callable[[Any], list[T]] | None = None,
                 recursive: bool = False, unknown_error: type[Exception] = InvalidInput) -> None:
        self.what, self.package, self.attribute = what, package, attribute
        self._check = check
        self._name = name or (lambda item: item.name)  # type: ignore[attr-defined]  # `check` makes sure
        self._order = order or self._name
        self._known_prefix = known_prefix
        # What a module declares: by default its `attribute`; system kinds are the classes it defines.
        self._collect = collect or self._declared_attribute
        self._recursive = recursive  # look into subpackages too
        self._unknown_error = unknown_error
        self._items: dict[str, T] = {}
        self._lock = threading.RLock()
        self._discovered = False
        self._listing: tuple[int, list[T]] | None = None  # (the change it was sorted at, the sorted items)

    def name_of(self, item: T) -> str:
        return self._name(item)

    def _declared_attribute(self, module: Any) -> list[T]:
        item = getattr(module, self.attribute, None)
        return [] if item is None else [item]

    def _describe(self, item: T) -> str:
        where = item if isinstance(item, type) else type(item)  # a class declaration names itself
        return f"{where.__module__}.{where.__qualname__}"

    def register(self, item: T) -> T:
        """Add a declaration; another one under a taken name is refused (the same object again is a no-op)."""
        with self._lock:
            self._discover()
            return self.add(item)

    def add(self, item: T) -> T:
        """`register` without discovering the package first: for a module of the package declaring itself
        while it is being imported (discovery finds it again, as the same object)."""
        self._check(item)
        with self._lock:
            current = self._items.get(self.name_of(item))
            if current is not None and current is not item:
                raise InvalidInput(f"{self.what} {self.name_of(item)!r} is already registered by "
                                   f"{self._describe(current)}")
            self._items[self.name_of(item)] = item
            note_change()
        return item

    def unregister(self, name: str) -> None:
        with self._lock:
            self._items.pop(name, None)
            note_change()

    @contextmanager
    def registered(self, item: T) -> Iterator[T]:
        """The declaration is registered inside the block only (tests, trial runs)."""
        self.register(item)
        try:
            yield item
        finally:
            self.unregister(self.name_of(item))

    def _discover(self) -> None:
        """Import every module of the package once and register what it declares."""
        with self._lock:
            if self._discovered:
                return
            self._discovered = True  # before importing: a module may ask the registry while it loads
            for module_name in package_modules(self.package, self._recursive):
                for item in self._collect(importlib.import_module(module_name)):
                    self._check(item)
                    name = self.name_of(item)
                    if name in self._items and self._items[name] is not item:
                        raise InvalidInput(f"two {self.what} modules declare {name!r}: "
                                           f"{self._describe(self._items[name])} and {self._describe(item)}")
                    self._items[name] = item
            note_change()

    def items(self) -> list[T]:
        """Every registered declaration, in listing order (sorted once per change: pages ask thousands of times)."""
        with self._lock:
            self._discover()
            listing = self._listing
            if listing is not None and listing[0] == _last_change:
                return list(listing[1])
            change, found = _last_change, list(self._items.values())
        ordered = sorted(found, key=self._order)
        with self._lock:
            self._listing = (change, ordered)
        return list(ordered)

    def names(self) -> tuple[str, ...]:
        return tuple(self.name_of(item) for item in self.items())

    def find(self, name: str) -> T | None:
        with self._lock:
            self._discover()
            return self._items.get(name)

    def get(self, name: str) -> T:
        """The declaration called `name`; an unknown name is refused with the known ones listed."""
        item = self.find(name)
        if item is None:
            known = ", ".join((*self._known_prefix, *self.names()))
            raise self._unknown_error(f"unknown {self.what} {name!r}; known: {known}")
        return item
