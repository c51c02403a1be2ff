"""search-ai: an {output, ctxs} JSON file whose text has its own numbered reference list.

That list, not the position in `ctxs`, says what [n] is (its [2] is ctxs[29] in the published output);
ctxs give the snippets, matched by id. The {output, ctxs} file no other format claims is search-ai's.
"""

from __future__ import annotations

from deepscholar.systems.external.formats.base import ExternalOutput, ImportFormat, Unit
from deepscholar.systems.external.formats.ctx_json import (
    COMPANIONS,
    NOT_AN_OUTPUT,
    READER,
    SUFFIXES,
    is_ctx_output,
    parse_ctx_json,
)

NAME = "search-ai"


def parse(unit: Unit) -> list[ExternalOutput]:
    return parse_ctx_json(unit, NAME)


FORMAT = ImportFormat(
    name=NAME, position=30, parse=parse, description="{output, ctxs} JSON with its own reference list",
    suffixes=SUFFIXES, reader=READER, recognise=is_ctx_output, fallback=True, unrecognised=NOT_AN_OUTPUT,
    companions=COMPANIONS)
