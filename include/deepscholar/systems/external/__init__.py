"""External systems: reports made elsewhere, imported from files or fetched from an HTTP endpoint.

The `external` kind (the HTTP client) is found by the system-kind discovery like every kind; file
outputs are read by the `formats` package (one module per format, found by its registry) and stored
by `importer` (`deepscholar reports import`).
"""

from deepscholar.systems.external.formats import (
    ExternalOutput,
    detect_format,
    format_names,
    read_outputs,
)
from deepscholar.systems.external.http_system import ExternalHTTPSystem
from deepscholar.systems.external.importer import ImportSummary, import_reports

__all__ = [
    "ExternalHTTPSystem",
    "ExternalOutput",
    "ImportSummary",
    "detect_format",
    "format_names",
    "import_reports",
    "read_outputs",
]
