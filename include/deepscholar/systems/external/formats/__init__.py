"""Readers for the output formats of systems run elsewhere, each turning one output into a Report.

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.external.formats`.
"""

from deepscholar.systems.external.formats.base import (
    ExternalOutput,
    ImportFormat,
    Reader,
    Unit,
    body_citations,
    unresolved_entry,
)
from deepscholar.systems.external.formats.discovery import (
    detect_format,
    find_units,
    forced_format,
    read_outputs,
    read_unit,
)
from deepscholar.systems.external.formats.registry import (
    AUTO,
    format_names,
    formats,
    get,
    register,
    registered,
    unregister,
)
from deepscholar.systems.external.formats.sources import cap_sources, report_from_json

__all__ = [
    "AUTO",
    "ExternalOutput",
    "ImportFormat",
    "Reader",
    "Unit",
    "body_citations",
    "cap_sources",
    "detect_format",
    "find_units",
    "forced_format",
    "format_names",
    "formats",
    "get",
    "read_outputs",
    "read_unit",
    "register",
    "registered",
    "report_from_json",
    "unregister",
    "unresolved_entry",
]
