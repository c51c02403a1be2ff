"""deepresearcher: an {output, ctxs} JSON file of an agent transcript with its own reference list.

Its `output` can hold agent markup and a second, truncated answer, so the complete answer is
extracted first; [n] then follow its reference list like search-ai's.
"""

from __future__ import annotations

import re
from typing import Any

from deepscholar.systems.external.formats.base import ExternalOutput, ImportFormat, Unit
from deepscholar.systems.external.formats.ctx_json import (
    COMPANIONS,
    NOT_AN_OUTPUT,
    READER,
    SUFFIXES,
    ctx_dicts,
    is_ctx_output,
    parse_ctx_json,
)
from deepscholar.text.citations import parse_reference_list

NAME = "deepresearcher"
MARKER_KEYS = {"messages", "tool_response", "tool_calls"}


def recognise(data: Any) -> bool:
    """Agent transcript keys, or ctxs that record the search query that found them."""
    return is_ctx_output(data) and bool(MARKER_KEYS & set(data) or any("search_query" in c for c in ctx_dicts(data)))


def answer_text(output: str) -> tuple[str, str | None]:
    """The report inside an agent transcript: a closed <answer> block, else the fullest prose segment."""
    closed = re.findall(r"<answer>(.*?)</answer>", output, flags=re.S)
    if closed and closed[-1].strip():
        return closed[-1].strip(), "text from the closed <answer> block"
    pieces = re.split(r"</?(?:think|answer|tool_calls?|tool_response|tool_call)>", output)
    prose = [p.strip() for p in pieces if p.strip() and not p.strip().startswith(("[{", "{"))]
    if len(prose) <= 1:
        return (prose[0] if prose else output.strip()), None
    best = max(prose, key=lambda p: (bool(parse_reference_list(p)), len(p)))
    return best, f"text is the fullest of {len(prose)} answer segments (agent markup and a truncated repeat dropped)"


def parse(unit: Unit) -> list[ExternalOutput]:
    return parse_ctx_json(unit, NAME, answer=answer_text)


FORMAT = ImportFormat(
    name=NAME, position=50, parse=parse, description="an agent's {output, ctxs} JSON transcript",
    suffixes=SUFFIXES, reader=READER, recognise=recognise, unrecognised=NOT_AN_OUTPUT, companions=COMPANIONS)
