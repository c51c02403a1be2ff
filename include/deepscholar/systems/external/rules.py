"""The rules an outside system's outputs are held to, defined once: `reports import` applies them and stores
what passes; `reports check` applies the same functions and stores nothing (systems/external/check.py).

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.external.rules`.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.errors import InvalidInput, NotFound
from deepscholar.systems.base import Source
from deepscholar.systems.external.formats import AUTO, ExternalOutput, Unit, find_units, format_names
from deepscholar.systems.external.formats import get as get_format
from deepscholar.systems.external.formats.base import SKIPPED, UNREADABLE
from deepscholar.systems.external.resolve import TITLE_SEARCH

__all__ = ["Caps", "ReleaseKeys", "Refused", "admit", "check_arguments", "check_sizes", "find_outputs",
           "query_for", "query_paper_citations", "release_keys", "too_big"]


class Refused(ValueError):
    """An output that is not imported, with the one-line reason the import and the check print."""


@dataclass(frozen=True)
class Caps:
    """The settings' bounds on what a third party writes (DEEPSCHOLAR_IMPORT_MAX_*)."""

    max_file_bytes: int
    max_chars: int
    max_citations: int

    @classmethod
    def from_settings(cls) -> Caps:
        from deepscholar.settings import current_settings

        s = current_settings()
        return cls(s.import_max_file_bytes, s.import_max_report_chars, s.import_max_citations)


@dataclass(frozen=True)
class ReleaseKeys:
    """A release's queries: arXiv ids, dataset rows (official imports) and each query's cutoff (its paper's
    first submission: a source on or after it is a leak)."""

    ids: set[str]
    rows: dict[int, str]
    cutoffs: dict[str, datetime | None]


def release_keys(engine: Engine, release_id: str) -> ReleaseKeys:
    with engine.connect() as conn:
        if conn.execute(sa.text(f"SELECT 1 FROM {db.SCHEMA}.releases WHERE release_id = :r"),
                        {"r": release_id}).first() is None:
            raise NotFound(f"release {release_id!r} does not exist; `deepscholar release list` lists the releases")
        rows = conn.execute(sa.text(f"SELECT arxiv_id, row_index, published FROM {db.SCHEMA}.release_queries "
                                    "WHERE release_id = :r"), {"r": release_id}).all()
    return ReleaseKeys({r.arxiv_id for r in rows}, {r.row_index: r.arxiv_id for r in rows if r.row_index is not None},
                       {r.arxiv_id: r.published for r in rows})


def query_for(output: ExternalOutput, keys: ReleaseKeys, release_id: str) -> str:
    """The release query an output is for; raises Refused with the reason when there is none."""
    if output.key is None:
        raise Refused("the output names no arXiv id and sits in no folder named by a dataset row or "
                      "arXiv id; put it under <row>/ or <arxiv_id>/")
    if isinstance(output.key, int):
        if output.key not in keys.rows:
            raise Refused(f"row {output.key} is not a row of the dataset imported as release {release_id} "
                          "(only official imports record rows)")
        return keys.rows[output.key]
    if output.key not in keys.ids:
        raise Refused(f"arXiv id {output.key} is not a query of release {release_id}")
    if output.row is not None and keys.rows.get(output.row) != output.key:
        raise Refused(f"folder row {output.row} is {keys.rows.get(output.row)} in release {release_id}, "
                      f"but the output is for {output.key}")
    return output.key


def check_arguments(release_id: str, fmt: str, title_search: str, max_unresolved_share: float, path: Path,
                    system_id: str | None = None) -> None:
    """Refuse, before anything is read, what the user mistyped (each with the valid choices)."""
    from deepscholar.release.window import validate_release_id
    from deepscholar.systems.registry import validate_name

    if system_id is not None:
        validate_name(system_id)
    validate_release_id(release_id)
    if fmt != AUTO:
        get_format(fmt)  # InvalidInput naming the known formats
    if title_search not in TITLE_SEARCH:
        raise InvalidInput(f"title search must be one of {', '.join(TITLE_SEARCH)}, not {title_search!r}")
    if not 0.0 <= max_unresolved_share <= 1.0:
        raise InvalidInput(f"the unresolved-citation threshold is a share in [0, 1], not {max_unresolved_share}")
    if not path.exists():
        raise NotFound(f"{path} does not exist")


def check_sizes(path: Path, max_bytes: int) -> None:
    """Refuse, before anything is read, a PATH holding a file larger than the cap (one line)."""
    from deepscholar.systems.external.formats.discovery import MAX_DEPTH

    if path.is_file():
        files = [path]
    else:
        files = []
        base = len(path.parts)
        for folder, dirs, names in os.walk(path):
            dirs[:] = [d for d in dirs if not d.startswith(".") and len(Path(folder, d).parts) - base <= MAX_DEPTH + 1]
            files += [Path(folder, n) for n in names if not n.startswith(".")]
    for f in files:
        try:
            size = f.stat().st_size
        except OSError:
            continue  # unreadable: the reader reports it
        if size > max_bytes:
            raise InvalidInput(f"{f}: {size} bytes, more than DEEPSCHOLAR_IMPORT_MAX_FILE_BYTES ({max_bytes}); "
                               "nothing was imported")


# Every number inside a citation bracket, however many digits: [1], [2, 1000], [3-12], \[4\].
_BRACKET = re.compile(r"\[([\d\s,;\u2010-\u2014\u2212-]*\d[\d\s,;\u2010-\u2014\u2212-]*)\]")


def too_big(report: Any, caps: Caps) -> str | None:
    """Why an output's report is over a cap, or None."""
    if len(report.text) > caps.max_chars:
        return (f"report text of {len(report.text)} characters, more than DEEPSCHOLAR_IMPORT_MAX_REPORT_CHARS "
                f"({caps.max_chars})")
    if len(report.sources) > caps.max_citations:
        return f"{len(report.sources)} sources, more than DEEPSCHOLAR_IMPORT_MAX_CITATIONS ({caps.max_citations})"
    highest = max((s.idx for s in report.sources), default=0)
    for match in _BRACKET.finditer(report.text):
        highest = max(highest, *(int(n) for n in re.findall(r"\d+", match.group(1))))
    if highest > caps.max_citations:
        return (f"citation number {highest}, higher than DEEPSCHOLAR_IMPORT_MAX_CITATIONS ({caps.max_citations}; "
                "numbers above 999 are never read)")
    return None


def find_outputs(path: Path, fmt: str) -> tuple[list[Unit], str]:
    """The outputs' units under PATH (files and folders, not yet parsed) and the format(s) they are read as;
    refused when nothing is recognised."""
    try:
        units = find_units(path)
    except (OSError, ValueError) as exc:  # unreadable, or nothing in it we know: the user's file, not a bug
        raise InvalidInput(f"{path}: {exc}") from exc
    readable = [u for u in units if u.fmt not in (UNREADABLE, SKIPPED)]
    formats = sorted({fmt} if fmt != AUTO and readable else {u.fmt for u in readable})
    if not formats and not any(u.fmt == UNREADABLE for u in units):
        skipped = "; ".join(f"{u.path}: {u.why}" for u in units if u.fmt == SKIPPED)[:500]
        raise InvalidInput(f"{path}: no system outputs recognised (formats: {', '.join(format_names())})"
                           + (f"; skipped {skipped}" if skipped else ""))
    return units, formats[0] if len(formats) == 1 else ("+".join(formats) if formats else fmt)


def admit(output: ExternalOutput, keys: ReleaseKeys, release_id: str, claimed: dict[str, str], caps: Caps) -> str:
    """The query an output is imported for, claimed for it; Refused (the reason) for an unreadable output, one
    for no query of the release, a second output for a query, or one over the caps."""
    if output.error or output.report is None:
        raise Refused(output.error or "no report")
    arxiv_id = query_for(output, keys, release_id)
    if arxiv_id in claimed:
        raise Refused(f"a second output for {arxiv_id} (first: {claimed[arxiv_id]}); not stored")
    why = too_big(output.report, caps)
    if why:
        raise Refused(f"{why}; not stored")
    claimed[arxiv_id] = output.path
    return arxiv_id


def query_paper_citations(sources: list[Source], arxiv_id: str) -> list[int]:
    """Numbers of the cited sources that are the query paper itself (the paper whose section is asked for)."""
    return [s.idx for s in sources if s.cited and s.arxiv_id == arxiv_id]
