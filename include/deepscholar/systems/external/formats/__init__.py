"""Readers for the output formats of systems run elsewhere, each turning one output into a Report.

One module per format exports `FORMAT` (an `ImportFormat`: its name, how `--format auto` recognises
its files or folders, and its parser); `registry` finds them, so adding a format is one file here and
nothing else (tests: tests/unit/test_import_format_registry.py for the declaration, and the format's
real outputs in tests/integration/test_import_faithful.py). The shared pieces:
- base: ExternalOutput, the ImportFormat declaration, readers and small helpers;
- sources: which source each [n] is (reference lists, arXiv links, retrieved passages), and
  `report_from_json` (JSONL lines, the HTTP system's answers);
- ctx_json: what the {output, ctxs} JSON formats share;
- discovery: finding the outputs under a PATH (`find_units`, `detect_format`) and reading them
  (`read_outputs`).

Every format says which source each [n] refers to and keeps the snippets the system saw. Sources with
`cited` true are the report's bibliography: what its text cites or lists. What the system says it
retrieved but does not list (paper.csv rows, ctxs) is kept with `cited` false, numbered after every
number the text uses, for the leakage check only. A reference entry names an arXiv id, a URL or DOI,
or only a title (resolved later against the corpus by the importer); an entry naming a placeholder
(`arXiv:2301.XXXXX`) is unresolved and listed in the trace (`import.unresolved`), never dropped
silently.
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
