"""External systems: reports made elsewhere, imported from files or fetched from an HTTP endpoint.

Importing this package registers the `external` kind (the HTTP client); file outputs are read by
`formats` and stored by `importer` (`deepscholar import-reports`).
"""

from deepscholar.systems.external.formats import (
    FORMATS,
    ExternalOutput,
    detect_format,
    read_deepresearcher,
    read_deepscholar_base,
    read_jsonl,
    read_markdown,
    read_openscholar,
    read_outputs,
    read_search_ai,
    read_storm,
)
from deepscholar.systems.external.http_system import ExternalHTTPSystem
from deepscholar.systems.external.importer import ImportSummary, import_reports

__all__ = [
    "FORMATS",
    "ExternalHTTPSystem",
    "ExternalOutput",
    "ImportSummary",
    "detect_format",
    "import_reports",
    "read_deepresearcher",
    "read_deepscholar_base",
    "read_jsonl",
    "read_markdown",
    "read_openscholar",
    "read_outputs",
    "read_search_ai",
    "read_storm",
]
