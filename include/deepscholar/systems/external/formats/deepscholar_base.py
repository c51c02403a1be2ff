"""deepscholar-base: a folder with intro.md (or final_report.md) and paper.csv.

The text cites with arXiv links, numbered here in order of first appearance and matched to paper.csv
for titles and the snippets the system saw; a text with no arXiv links but [n] markers and a numbered
reference list is read through that list, like any markdown report (decided by content). paper.csv is
what the system retrieved: rows the text does not cite are kept with `cited` false.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from deepscholar.systems.base import Report, Source
from deepscholar.systems.external.formats.base import (
    ExternalOutput,
    ImportFormat,
    Unit,
    arxiv_id,
    body_citations,
    published,
    read_text,
    trace,
)
from deepscholar.systems.external.formats.markdown import NO_LIST
from deepscholar.systems.external.formats.sources import markdown_sources, retrieved_only
from deepscholar.text.citations import parse_reference_list

NAME = "deepscholar-base"
TEXTS = ("intro.md", "final_report.md")
RETRIEVED = "paper.csv"


def is_output_folder(d: Path) -> bool:
    return (d / RETRIEVED).is_file() and any((d / t).is_file() for t in TEXTS)


def _csv_rows(path: Path) -> list[dict[str, str]]:
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))  # snippets and LLM notes are long cells
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def _retrieved(path: Path) -> list[Source]:
    """paper.csv's rows as sources, in its order."""
    out: list[Source] = []
    for row in _csv_rows(path):
        aid = arxiv_id(row.get("id")) or arxiv_id(row.get("url"))
        url = (row.get("url") or "").strip() or (f"https://arxiv.org/abs/{aid}" if aid else None)
        out.append(Source(idx=len(out) + 1, title=(row.get("title") or "").strip(), snippet=row.get("snippet") or "",
                          arxiv_id=aid, url=url, published=published(row.get("date"))))
    return out


def _check_links(text: str, sources: list[Source], retrieved: list[Source], notes: list[str]) -> None:
    """Linked papers missing from paper.csv have no snippet (noted) and take their title from the list."""
    known = {r.arxiv_id for r in retrieved if r.arxiv_id}
    missing = [s.arxiv_id for s in sources if s.arxiv_id and s.arxiv_id not in known]  # linked: all have one
    if missing:
        notes.append(f"not in paper.csv (no snippet): {', '.join(missing)}")
    if not all(s.title for s in sources):
        refs = parse_reference_list(text)
        for s in sources:
            s.title = s.title or (refs[s.idx].title if s.idx in refs else "")


def parse(unit: Unit) -> list[ExternalOutput]:
    d = unit.path
    text_file = next(d / t for t in TEXTS if (d / t).is_file())
    raw = read_text(text_file)
    notes: list[str] = []
    unresolved: list[dict] = []
    retrieved = _retrieved(d / RETRIEVED)
    text, sources, numbering, used = markdown_sources(raw, unresolved, retrieved)
    if numbering == "arxiv_links":
        _check_links(text, sources, retrieved, notes)
    elif numbering is None and body_citations(text):
        notes.append(NO_LIST)
    uncited = retrieved_only(text, sources, retrieved, used)
    info = trace(NAME, text_file, notes, unresolved, numbering=numbering or "none",
                 n_retrieved_uncited=len(uncited) or None)
    return [ExternalOutput(key=unit.key, path=str(text_file), format=NAME,
                           report=Report(text=text, sources=sources + uncited, trace=info))]


FORMAT = ImportFormat(name=NAME, position=20, parse=parse, folder=is_output_folder,
                      folder_files=TEXTS, description="intro.md and paper.csv, cited with arXiv links")
