"""What every import format shares: the output and unit types, the format declaration, file readers and
small helpers for ids, dates, text and traces. Format modules import from here; nothing here knows a
particular format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from deepscholar.clock import assume_utc
from deepscholar.systems.base import Report
from deepscholar.text.paper_ids import arxiv_id_named
from deepscholar.text.sentences import split_report_sentences

__all__ = [
    "ExternalOutput",
    "ImportFormat",
    "JSON",
    "Reader",
    "TEXT",
    "Unit",
    "arxiv_id",
    "body_citations",
    "load_json",
    "name_key",
    "published",
    "read_text",
    "resolve_key",
    "text_of",
    "trace",
    "unresolved_entry",
]

# A unit that is not an output of any format: why is in `Unit.why`.
UNREADABLE = "unreadable"
SKIPPED = "skipped"


@dataclass
class ExternalOutput:
    """One system output: its key (version-less arXiv id, else a dataset row from a folder name) and report."""

    key: str | int | None
    report: Report | None
    path: str = ""
    format: str = ""
    row: int | None = None  # the folder's row number when the key came from the output itself
    error: str | None = None  # why this output could not be read (it is reported, never stored)
    latency_ms: float | None = None
    cost_usd: float | None = None
    skipped: str | None = None  # a file looked at and not taken as an output, and why (listed, never stored)


@dataclass
class Unit:
    """A file or folder found under PATH: one output of `fmt`, or UNREADABLE / SKIPPED (with `why`)."""

    fmt: str
    path: Path
    key: str | int | None = None
    data: Any = field(default=None, repr=False)  # the content read while recognising it, if any
    why: str | None = None


@dataclass(frozen=True)
class Reader:
    """How a file's content is read to recognise it; `what` names the failure ("not readable as JSON")."""

    what: str
    load: Callable[[Path], Any]


@dataclass(frozen=True)
class ImportFormat:
    """One import format, declared once by its module as `FORMAT`.

    Recognition for `--format auto` (formats/discovery.py asks every registered format):
    - a folder that is one output whatever else it holds: `folder(d)` is true; `folder_files` are its
      files that, given on their own, mean the folder;
    - a file: its suffix is one of `suffixes`; when `reader` is set, the content is read once and
      `recognise(content)` decides. Formats of one suffix are asked in position order, `fallback` ones
      last. A file no format recognises is ignored in a folder (`lists_unrecognised` false: a system's
      config or usage file) and refused given on its own, or listed as skipped in a folder and taken
      anyway given on its own (`lists_unrecognised` true), with `unrecognised` as the reason;
    - `companions`: suffixes of files beside one of its files that are part of that output (read by
      its parser), so they are not taken as outputs of their own.
    Formats that read the same suffixes with the same reader share a file shape: `--format` may force
    one onto the other's files. `parse(unit)` returns the outputs of one unit (a JSONL file holds many; it
yields them one by one, so an import never holds a large file's outputs at once).
    `version` is part of every imported report's build (systems/build.py): bump it ("2", ...) when the
    parser reads the same output differently (other sources, other numbering, other text); not for a
    fix that only turns a refused output into a read one.
    """

    name: str
    position: int  # order in listings (and among formats of one suffix)
    parse: Callable[[Unit], Iterable[ExternalOutput]]
    description: str = ""
    folder: Callable[[Path], bool] | None = None
    folder_files: tuple[str, ...] = ()
    suffixes: tuple[str, ...] = ()
    any_case: bool = False  # suffixes match in any letter case
    reader: Reader | None = None
    recognise: Callable[[Any], bool] | None = None
    fallback: bool = False
    lists_unrecognised: bool = False
    unrecognised: str = ""
    companions: tuple[str, ...] = ()
    version: str = "1"

    def reads(self, path: Path) -> bool:
        """A file this format reads, by its suffix."""
        suffix = path.suffix.lower() if self.any_case else path.suffix
        return suffix in self.suffixes

    def same_shape(self, other: ImportFormat) -> bool:
        return (self.name != other.name and bool(self.suffixes) and self.suffixes == other.suffixes
                and self.reader is not None and self.reader == other.reader)


# ------------------------------------------------------------------------------------ helpers


def arxiv_id(value: Any) -> str | None:
    """A version-less arXiv id from an id, 'arXiv:…', an arXiv URL or DOI (text/paper_ids.arxiv_id_named:
    every form the metrics' resolver reads); None otherwise."""
    return arxiv_id_named(str(value or ""))


def name_key(name: str) -> str | int | None:
    """Key named by a folder or file: a dataset row ('0') or an arXiv id ('2506.02838v1')."""
    if re.fullmatch(r"\d+", name):
        return int(name)
    return arxiv_id(name)


def published(value: Any) -> datetime | None:
    text = str(value or "").strip()
    if not text:
        return None
    try:
        ts = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return assume_utc(ts)


def text_of(value: Any) -> str:
    return value if isinstance(value, str) else ("" if value is None else str(value))


def load_json(path: Path) -> Any:
    with path.open(encoding="utf-8") as fh:
        return json.load(fh)


def read_text(path: Path) -> str:
    return path.read_text(encoding="utf-8")


JSON = Reader("JSON", load_json)
TEXT = Reader("UTF-8 text", read_text)


def trace(fmt: str, path: Path, notes: list[str], unresolved: list[dict] | None = None, **extra: Any) -> dict:
    info = {"format": fmt, "file": str(path), **{k: v for k, v in extra.items() if v not in (None, [], {})}}
    if notes:
        info["notes"] = notes
    info["unresolved"] = list(unresolved or [])
    return {"import": info}


def unresolved_entry(n: int, entry: str, reason: str, in_text: bool = True) -> dict:
    """One unresolved citation as listed in a report's trace (`import.unresolved`)."""
    return {"n": n, "entry": entry, "reason": reason, "in_text": in_text}


def body_citations(text: str) -> list[int]:
    """Numbers the report body cites (its reference list excluded), first appearance first."""
    return list(dict.fromkeys(n for s in split_report_sentences(text) for n in s.citations))


def resolve_key(unit: Unit, content_id: str | None) -> tuple[str | int | None, int | None]:
    """(key, row): an arXiv id the output names wins; the folder's row is then kept for a cross-check."""
    if content_id is None:
        return unit.key, None
    if isinstance(unit.key, str) and unit.key != content_id:
        raise ValueError(f"named {unit.key} by its path but the output is for {content_id}")
    return content_id, unit.key if isinstance(unit.key, int) else None
