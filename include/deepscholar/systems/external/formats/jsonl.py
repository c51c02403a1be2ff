"""jsonl: one report a line, {text, sources:[{idx, arxiv_id|url, title, snippet}], arxiv_id | row}.

Without sources, arXiv links in the text are numbered, else its own reference list is used
(sources.report_from_json). One bad line is reported; the others still import.
"""

from __future__ import annotations

import json

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


def parse(unit: Unit) -> list[ExternalOutput]:
    with unit.path.open(encoding="utf-8") as fh:
        return [_line_output(line, f"{unit.path}:{lineno}")
                for lineno, line in enumerate(fh, start=1) if line.strip()]


FORMAT = ImportFormat(name=NAME, position=10, parse=parse, suffixes=(".jsonl",),
                      description="one report a line with explicit sources")
