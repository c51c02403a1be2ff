"""openscholar: an {output, ctxs} JSON file citing passages 0-based, in the order of `ctxs`.

Its `final_passages` starts at [0]; the text is shifted to 1-based so [n] means sources idx n
everywhere. The reference list it appends is the model's own echo (partly copied from its prompt's
examples): only its numbers are used, and only when ctxs exist.
"""

from __future__ import annotations

import re
from typing import Any

from deepscholar.systems.external.formats.base import (
    ExternalOutput,
    ImportFormat,
    Unit,
    body_citations,
    text_of,
    unresolved_entry,
)
from deepscholar.systems.external.formats.ctx_json import (
    COMPANIONS,
    NOT_AN_OUTPUT,
    READER,
    SUFFIXES,
    CtxReading,
    ctx_dicts,
    is_ctx_output,
    number_by_reference_list,
    parse_ctx_json,
)
from deepscholar.text.citations import parse_reference_list, remap_citation_numbers

NAME = "openscholar"
MARKER_KEYS = {"final_passages", "id_mapping", "feedbacks"}


def recognise(data: Any) -> bool:
    """Its own keys, or passages from peS2o."""
    return is_ctx_output(data) and bool(MARKER_KEYS & set(data) or any(
        "pes2o" in text_of(c.get("source")).lower() for c in ctx_dicts(data)))


def _citation_base(data: dict) -> int:
    """The number of the first passage (`final_passages` starts with "[0]" or "[1]")."""
    passages = data.get("final_passages")
    if isinstance(passages, str) and (m := re.match(r"\s*\[(\d+)\]", passages)):
        return int(m.group(1))
    return 0


def number_passages(r: CtxReading) -> None:
    """[n] (1-based after the shift) is ctxs[n-1]; the reference list contributes only its numbers."""
    if not r.ctxs:
        number_by_reference_list(r)
        return
    base = _citation_base(r.data)
    if base == 0:
        r.text = remap_citation_numbers(r.text, lambda n: n + 1)
        r.notes.append("0-based passage citations shifted to 1-based")
    r.extra["citation_base"] = base
    cited = body_citations(r.text)
    for n in sorted(set(cited) | set(parse_reference_list(r.text))):
        if 1 <= n <= len(r.ctx_sources):
            r.sources.append(r.ctx_sources[n - 1])
            r.used.add(n - 1)
        elif n in cited:
            r.unresolved.append(unresolved_entry(n, "", f"no passage {n - 1 + base} among the {len(r.ctxs)} ctxs"))


def parse(unit: Unit) -> list[ExternalOutput]:
    return parse_ctx_json(unit, NAME, numbering=number_passages)


FORMAT = ImportFormat(
    name=NAME, position=40, parse=parse, description="OpenScholar's {output, ctxs} JSON, 0-based passages",
    suffixes=SUFFIXES, reader=READER, recognise=recognise, unrecognised=NOT_AN_OUTPUT, companions=COMPANIONS)
