"""jsonl: one report a line, {text, sources:[{idx, arxiv_id|url, title, snippet}], arxiv_id | row}.

Without sources, arXiv links in the text are numbered, else its own reference list is used
(sources.report_from_json). One bad line is reported; the others still import.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

from deepscholar.systems.external.formats.base import ExternalOutput, ImportFormat, Unit, arxiv_id
from deepscholar.systems.external.formats.sources import report_from_json

NAME = "jsonl"


def _line_output(line: str, where: str) -> ExternalOutput:
    key: str | int | None = None
    try:
        obj = json.loads(line)
        if isinstance(obj, dict):
            key = arxiv_id(obj.get("arxiv_id"))
            if key is None and isinstance(obj.get("row"), int):
                key = obj["row"]
        report = report_from_json(obj, NAME, where)
    except Exception as exc:  # one bad line is reported, the others still import
        return ExternalOutput(key=key, report=None, path=where, format=NAME, error=str(exc))
    return ExternalOutput(key=key, report=report, path=where, format=NAME)


def parse(unit: Unit) -> Iterator[ExternalOutput]:
    """One output a line, as the file is read (never the whole file's outputs at once); a line that is not
    UTF-8 is that line's error."""
    with unit.path.open("rb") as fh:
        for lineno, raw in enumerate(fh, start=1):
            where = f"{unit.path}:{lineno}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                yield ExternalOutput(key=None, report=None, path=where, format=NAME, error=f"not UTF-8 ({exc.reason})")
                continue
            if line.strip():
                yield _line_output(line, where)


FORMAT = ImportFormat(name=NAME, position=10, parse=parse, suffixes=(".jsonl",),
                      description="one report a line with explicit sources")
