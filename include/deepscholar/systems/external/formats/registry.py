"""The import-format registry: every format declared once, by its own module.

Every module of this package that exports `FORMAT` (an `ImportFormat`, formats/base.py) is a format;
the registry finds them itself, so adding a format is one file here. Modules without `FORMAT` are the
shared helpers. A format outside the library (a test's, a plugin's) joins with `register()` or, for
a while, `registered()`. An unknown name is refused with the known ones listed.
"""

from __future__ import annotations

import re

from deepscholar.errors import InvalidInput
from deepscholar.registry import Registry
from deepscholar.systems.external.formats.base import SKIPPED, UNREADABLE, ImportFormat

__all__ = ["AUTO", "format_names", "formats", "get", "register", "registered", "unregister"]

FORMATS_PACKAGE = "deepscholar.systems.external.formats"
AUTO = "auto"  # not a format: recognise each output by its files and content
_NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,62}$")
_RESERVED = {AUTO, UNREADABLE, SKIPPED}

def _check(fmt: ImportFormat) -> None:
    name = getattr(fmt, "name", None)
    where = f"import format {name!r}"
    if not isinstance(fmt, ImportFormat):
        raise InvalidInput(f"{where}: FORMAT must be an ImportFormat (formats/base.py), not {type(fmt).__name__}")
    if not isinstance(name, str) or not _NAME_RE.match(name) or name in _RESERVED:
        raise InvalidInput(f"{where}: a format name is lower-case letters, digits and '-', at most 63 "
                           f"characters, and not one of {', '.join(sorted(_RESERVED))}")
    if not callable(fmt.parse):
        raise InvalidInput(f"{where}: `parse` must be callable")
    if not isinstance(fmt.version, str) or not re.fullmatch(r"[A-Za-z0-9._-]{1,32}", fmt.version):
        raise InvalidInput(f"{where}: `version` is a short string of letters, digits, '.', '_' and '-' ('1')")
    if not isinstance(fmt.position, int):
        raise InvalidInput(f"{where}: `position` (its place in listings) must be an int")
    if fmt.folder is None and not fmt.suffixes:
        raise InvalidInput(f"{where}: declares neither a folder rule nor file suffixes, so --format auto "
                           "could never recognise it")
    if fmt.recognise is not None and fmt.reader is None:
        raise InvalidInput(f"{where}: `recognise` needs a `reader` for the content it looks at")


_FORMATS: Registry[ImportFormat] = Registry("format", FORMATS_PACKAGE, "FORMAT", _check,
                                           order=lambda f: (f.position, f.name), known_prefix=(AUTO,))
register = _FORMATS.register
unregister = _FORMATS.unregister
registered = _FORMATS.registered
get = _FORMATS.get
formats = _FORMATS.items  # in listing order: position, then name
format_names = _FORMATS.names
