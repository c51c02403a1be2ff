"""Built-in system kinds register themselves on import (see base.register_system)."""

import importlib

for _module in ("extractive", "oracle", "exemplar", "deepscholar_base", "search_agent", "external"):
    try:
        importlib.import_module(f"{__name__}.{_module}")
    except ModuleNotFoundError as exc:  # a kind still being written must not break the others
        if exc.name != f"{__name__}.{_module}":
            raise
