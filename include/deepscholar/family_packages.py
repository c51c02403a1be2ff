"""Where metric families live, for the two places that discover them: the metric registry (a family's
dimensions, metrics and per-query data) and the release (a track's release-time artefacts).

Design notes: docs/MODULE_NOTES.md, `deepscholar.family_packages`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator
from contextlib import contextmanager

from deepscholar.registry import package_modules
from deepscholar.settings import current_settings

__all__ = ["LIBRARY_FAMILIES", "family_packages", "declarations", "added"]

LIBRARY_FAMILIES = "deepscholar.evaluation.metrics"
_ADDED: list[str] = []


def family_packages() -> list[str]:
    """Every family package, the library's first (in name order), then the configured and the added ones."""
    library = importlib.import_module(LIBRARY_FAMILIES)
    found = [f"{LIBRARY_FAMILIES}.{info.name}" for info in sorted(pkgutil.iter_modules(library.__path__),
                                                                   key=lambda i: i.name)
             if info.ispkg and not info.name.startswith("_")]
    return list(dict.fromkeys([*found, *current_settings().family_packages, *_ADDED]))


def declarations(attribute: str, packages: list[str] | None = None) -> Iterator[tuple[str, object]]:
    """(module name, value) of every module of the family packages that declares `attribute`."""
    for package in family_packages() if packages is None else packages:
        for name in [package, *package_modules(package)]:
            value = getattr(importlib.import_module(name), attribute, None)
            if value is not None:
                yield name, value


@contextmanager
def added(package: str) -> Iterator[str]:
    """`package` is a family package inside the block (the metric registry's `added_family` uses this)."""
    _ADDED.append(package)
    try:
        yield package
    finally:
        _ADDED.remove(package)
