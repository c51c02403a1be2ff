"""The search-backend registry: every backend declared once, by its own module.

Every module of the `deepscholar.search` package that exports `BACKEND` (a `Backend`, search/base.py)
is a backend; the registry finds them itself, so adding a backend is one file here. A backend outside
the library (a test's, a plugin's) joins with `register()` or, for a while, `registered()`. An unknown
name is refused with the known ones listed.
"""

from __future__ import annotations

import re

from deepscholar.errors import InvalidInput
from deepscholar.registry import Registry
from deepscholar.search.base import Backend

__all__ = ["DEFAULT", "backend_names", "backends", "get", "register", "registered", "unregister"]

SEARCH_PACKAGE = "deepscholar.search"
DEFAULT = "local"  # a system whose config names no backend
_NAME_RE = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")

def _check(backend: Backend) -> None:
    name = getattr(backend, "name", None)
    where = f"search backend {name!r}"
    if not isinstance(backend, Backend):
        raise InvalidInput(f"{where}: BACKEND must be a deepscholar.search.base.Backend, "
                           f"not {type(backend).__name__}")
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise InvalidInput(f"{where}: a backend name is lower-case letters, digits, '_' and '-', at most 63 "
                           "characters")
    if not callable(backend.make):
        raise InvalidInput(f"{where}: `make` must be callable")


_BACKENDS: Registry[Backend] = Registry("search backend", SEARCH_PACKAGE, "BACKEND", _check)
register = _BACKENDS.register
unregister = _BACKENDS.unregister
registered = _BACKENDS.registered
get = _BACKENDS.get
backends = _BACKENDS.items  # by name
backend_names = _BACKENDS.names
