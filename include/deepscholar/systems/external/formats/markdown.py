"""markdown: any other .md report; [n] follow its trailing numbered reference list (or arXiv links).

In a folder, a .md file that cites nothing (no [n] markers, arXiv links or reference list) is listed as
skipped, a README rather than a report; given on its own it is taken as a report.
"""

from __future__ import annotations

from deepscholar.systems.base import Report
from deepscholar.systems.external.formats.base import (
    TEXT,
    ExternalOutput,
    ImportFormat,
    Unit,
    body_citations,
    read_text,
    resolve_key,
    trace,
)
from deepscholar.systems.external.formats.sources import has_citations, markdown_sources

NAME = "markdown"
SUFFIXES = (".md", ".markdown")
NO_LIST = "the text has [n] markers but neither arXiv links nor a numbered reference list"


def parse(unit: Unit) -> list[ExternalOutput]:
    """A markdown report on its own: arXiv links, else [n] through its trailing reference list."""
    raw = unit.data if isinstance(unit.data, str) else read_text(unit.path)
    if not raw.strip():
        raise ValueError("the file is empty")
    notes: list[str] = []
    unresolved: list[dict] = []
    text, sources, numbering, _ = markdown_sources(raw, unresolved)
    if numbering is None and body_citations(text):
        notes.append(NO_LIST)
    key, row = resolve_key(unit, None)
    return [ExternalOutput(key=key, row=row, path=str(unit.path), format=NAME,
                           report=Report(text=text, sources=sources,
                                         trace=trace(NAME, unit.path, notes, unresolved,
                                                     numbering=numbering or "none")))]


FORMAT = ImportFormat(
    name=NAME, position=70, parse=parse, description="a markdown report with a numbered reference list",
    suffixes=SUFFIXES, any_case=True, reader=TEXT, recognise=has_citations, lists_unrecognised=True,
    unrecognised="no [n] markers, arXiv links or reference list (give the file itself to import it as a report)")
