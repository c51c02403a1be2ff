"""Finding the outputs under a PATH and reading them: `--format auto` asks every registered format.

A PATH is one output or a folder of them; folders named by a number are rows of the dataset the
outputs were made for, folders or files named by an arXiv id are that paper. What a file or folder is
is decided by the formats' declarations (formats/base.py, ImportFormat), never by a list here.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from deepscholar.systems.external.formats import registry
from deepscholar.systems.external.formats.base import (
    SKIPPED,
    UNREADABLE,
    ExternalOutput,
    ImportFormat,
    Reader,
    Unit,
    name_key,
)

__all__ = ["detect_format", "find_units", "forced_format", "read_outputs", "read_unit"]

log = logging.getLogger(__name__)

MAX_DEPTH = 3  # folders below PATH looked into


def leaf_format(d: Path) -> str | None:
    """A folder that is one output whatever else it holds (its subfolders are the system's state)."""
    return next((f.name for f in registry.formats() if f.folder is not None and f.folder(d)), None)


def _unrecognised(fmt: ImportFormat, path: Path, key: Any, content: Any, explicit: bool) -> Unit | None:
    """A file of `fmt`'s suffix that no format recognised: skipped or ignored in a folder; given on its
    own, taken anyway or refused (ImportFormat.lists_unrecognised)."""
    if fmt.lists_unrecognised:
        return Unit(fmt.name, path, key, content) if explicit else Unit(SKIPPED, path, key, why=fmt.unrecognised)
    return Unit(UNREADABLE, path, key, why=fmt.unrecognised) if explicit else None


def file_unit(p: Path, explicit: bool) -> Unit | None:
    """One file as an output; unreadable files become units that report why, never silent skips."""
    candidates = sorted((f for f in registry.formats() if f.reads(p)), key=lambda f: (f.fallback, f.position))
    if not candidates:
        return None
    key = name_key(p.stem)
    contents: dict[Reader, Any] = {}
    for fmt in candidates:
        if fmt.reader is None:
            return Unit(fmt.name, p, key)
        if fmt.reader not in contents:
            try:
                contents[fmt.reader] = fmt.reader.load(p)
            except (OSError, ValueError) as exc:
                return Unit(UNREADABLE, p, key, why=f"not readable as {fmt.reader.what}: {exc}")
            except RecursionError:  # JSON nested deeper than the parser follows: hostile or broken, never ours
                return Unit(UNREADABLE, p, key, why=f"not readable as {fmt.reader.what}: nested too deeply")
        if fmt.recognise is None or fmt.recognise(contents[fmt.reader]):
            return Unit(fmt.name, p, key, contents[fmt.reader])
    last = candidates[-1]
    # Every candidate has a reader here (one without returns above); the check narrows the type.
    return _unrecognised(last, p, key, contents.get(last.reader) if last.reader is not None else None, explicit)


def _is_companion(p: Path, fmts: list[ImportFormat]) -> bool:
    return any(p.suffix.lower() in f.companions for f in fmts)


def dir_units(d: Path) -> list[Unit]:
    """Outputs lying directly in folder d."""
    if leaf := leaf_format(d):
        return [Unit(leaf, d)]
    fmts = registry.formats()
    files = sorted(p for p in d.iterdir() if p.is_file() and not p.name.startswith("."))
    units = [u for p in files if not _is_companion(p, fmts) and (u := file_unit(p, False))]
    # A companion file (a .md beside a JSON output, even an unreadable one) is part of that output.
    claimed = {s for u in units for f in fmts if f.reads(u.path) for s in f.companions}
    units += [u for p in files if _is_companion(p, fmts) and p.suffix.lower() not in claimed
              and (u := file_unit(p, False))]
    return units


def _natural(p: Path) -> tuple:
    return (0, int(p.name), "") if p.name.isdigit() else (1, 0, p.name)


def _given_file(path: Path, depth: int) -> list[Unit]:
    if any(path.name in f.folder_files for f in registry.formats()) and leaf_format(path.parent):
        return find_units(path.parent, depth)
    unit = file_unit(path, True)
    if unit is None:
        suffixes = sorted({s for f in registry.formats() for s in f.suffixes})
        raise ValueError(f"{path}: unsupported file type (give the output's folder or a file ending in "
                         f"{', '.join(suffixes)})")
    return [unit]


def find_units(path: Path, depth: int = 0) -> list[Unit]:
    """Every output under PATH, as units (a folder named by a row or an id holding one output keys it)."""
    if path.is_file():
        return _given_file(path, depth)
    if not path.is_dir():
        raise FileNotFoundError(path)
    units = dir_units(path)
    if leaf_format(path) or depth >= MAX_DEPTH:
        return units
    for child in sorted((c for c in path.iterdir() if c.is_dir() and not c.name.startswith(".")), key=_natural):
        found = find_units(child, depth + 1)
        key = name_key(child.name)
        outputs = [u for u in found if u.fmt != SKIPPED]
        if key is not None and len(outputs) == 1 and outputs[0].key is None:
            outputs[0].key = key
        units.extend(found)
    return units


def detect_format(path: Path | str) -> str:
    """The format of one output or of a folder of outputs (all of one format)."""
    units = find_units(Path(path))
    kinds = sorted({u.fmt for u in units} - {UNREADABLE, SKIPPED})
    if not kinds:
        raise ValueError(f"no system outputs recognised under {path}")
    if len(kinds) > 1:
        raise ValueError(f"{path} mixes formats {kinds}; import each format separately")
    return kinds[0]


def _not_an_output(unit: Unit) -> ExternalOutput:
    error, skipped = (unit.why, None) if unit.fmt == UNREADABLE else (None, unit.why)
    return ExternalOutput(key=unit.key, report=None, path=str(unit.path), format=unit.fmt, error=error,
                          skipped=skipped)


def read_unit(unit: Unit, forced: ImportFormat | None) -> Iterator[ExternalOutput]:
    """The outputs of one unit, read as its own format or as `forced` (--format) when of its shape, one at a
    time: a JSONL file of a million lines is never held whole (issue 46 §14). An error while reading ends the
    unit with one more output that says why; what came before it stands."""
    if unit.fmt in (UNREADABLE, SKIPPED):
        yield _not_an_output(unit)
        return
    fmt = registry.get(unit.fmt)
    if forced is not None and forced is not fmt and not forced.same_shape(fmt):
        yield ExternalOutput(key=unit.key, report=None, path=str(unit.path), format=unit.fmt,
                             error=f"a {unit.fmt} output, not {forced.name} (--format auto reads it)")
        return
    use = forced or fmt
    from deepscholar.settings import current_settings

    cap = current_settings().import_max_report_chars
    if isinstance(unit.data, str) and len(unit.data) > cap:  # refused before parsing: parsing is the cost
        yield ExternalOutput(key=unit.key, report=None, path=str(unit.path), format=use.name,
                             error=f"a text of {len(unit.data)} characters, more than "
                                   f"DEEPSCHOLAR_IMPORT_MAX_REPORT_CHARS ({cap}); not read")
        return
    try:
        yield from use.parse(unit)
    except Exception as exc:  # a broken output is reported with its path, the others still import
        log.warning("cannot read %s output %s: %s", use.name, unit.path, exc)
        yield ExternalOutput(key=unit.key, report=None, path=str(unit.path), format=use.name,
                             error=f"{type(exc).__name__}: {exc}")


def forced_format(fmt: str) -> ImportFormat | None:
    """The format `--format` names (InvalidInput for an unknown one, naming the known), or None for auto."""
    return None if fmt == registry.AUTO else registry.get(fmt)


def read_outputs(path: Path | str, fmt: str = registry.AUTO) -> list[ExternalOutput]:
    """Every output under PATH; an output that cannot be read comes back with `error` set.

    `fmt`: "auto" (each output recognised by its files and content) or a registered format's name; an
    unknown name is refused (InvalidInput) with the known ones listed. (The importer reads unit by unit,
    read_unit, so that a large import is never held whole.)
    """
    forced = forced_format(fmt)
    return [output for unit in find_units(Path(path)) for output in read_unit(unit, forced)]
