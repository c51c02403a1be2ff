"""`deepscholar export`: one month's published data as plain files a reader loads with pandas alone.

Design notes: docs/MODULE_NOTES.md, `deepscholar.export.writer`.
"""

from __future__ import annotations

import csv
import logging
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import InvalidInput, NotFound
from deepscholar.evaluation.metrics import registry
from deepscholar.export.datacard import write_datacard
from deepscholar.export.parquet import arrow_types, write_parquet
from deepscholar.export.tables import TABLES, WITHHELD_QUERY_COLUMNS, Table
from deepscholar.release.context import code_version
from deepscholar.release.licences import PaperLicence, query_licences
from deepscholar.settings import Settings, current_settings
from deepscholar.text.spreadsheet import FORMULA_LEADS, csv_cell

__all__ = ["ExportResult", "export_release", "metrics_frame", "csv_cell", "FORMULA_LEADS"]

log = logging.getLogger(__name__)

HUMAN_EXEMPLAR_KIND = "human_exemplar"  # its report is the exemplar section itself
DATACARD_TITLE = "# DeepScholar live benchmark: release "  # the first line of every export's README.md after its
_MAX_HEADER_LINES = 200  # YAML header (an export written before the header had none: the title came first)


def _csv_safe(frame: pd.DataFrame) -> pd.DataFrame:
    out = frame.copy()
    for column in out.columns:
        if out[column].dtype == object or str(out[column].dtype) in ("str", "string"):
            out[column] = out[column].map(csv_cell, na_action="ignore")
    return out


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    """RFC 4180 (CRLF line ends: every CR and LF inside a field is quoted), formula leads neutralised."""
    _csv_safe(frame).to_csv(path, index=False, quoting=csv.QUOTE_MINIMAL, lineterminator="\r\n")


def _is_export(folder: Path) -> bool:
    """An earlier export's folder (its datacard says so), or an empty one: the only folders replaced."""
    if not any(folder.iterdir()):
        return True
    card = folder / "README.md"
    try:
        with card.open(encoding="utf-8") as f:
            lines = [f.readline() for _ in range(_MAX_HEADER_LINES)]
    except (OSError, UnicodeDecodeError):
        return False
    if lines[0].rstrip("\r\n") == "---":  # the dataset card's YAML header (export/hub.py), then the title
        ends = [i for i, line in enumerate(lines[1:], start=1) if line.rstrip("\r\n") == "---"]
        lines = lines[ends[0] + 1:] if ends else []
    return next((line for line in lines if line.strip()), "").startswith(DATACARD_TITLE)


def _check_out(out: Path) -> None:
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        raise InvalidInput(f"--out {out} exists and is not a folder: name a new folder or an earlier export's")
    if out.is_dir() and not _is_export(out):
        raise InvalidInput(f"--out {out} is a folder holding something other than an export (no datacard "
                           "README.md): name a new folder or an earlier export's, which is replaced whole")


def replace_folder(staged: Path, out: Path) -> None:
    """Put the staged folder at `out`, replacing an earlier one whole (two renames on one file system, so a
    reader sees the old folder or the new one); the old folder is removed last. The export's and the site's."""
    old = None
    if out.exists():
        old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old-", dir=out.parent))
        out.rename(old / out.name)
    staged.rename(out)
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


@dataclass
class ExportResult:
    """What was written: rows per file, the formats, how many texts were withheld, and warnings to show."""

    release_id: str
    out: Path
    rows: dict[str, int]
    formats: tuple[str, ...]
    judge_configs: list[str]
    withheld_papers: int
    withheld_reports: int
    warnings: list[str] = field(default_factory=list)


def metrics_frame() -> pd.DataFrame:
    """Every registered metric and what the boards read of it, from the metric registry (never a list here)."""
    rows: list[dict] = []
    for family in (registry.CORE, *registry.tracks()):
        ranking = registry.ranking_metric(family)
        for m in registry.metrics(family):
            rows.append({"metric": m.name, "family": family, "dimension": m.dimension, "position": len(rows) + 1,
                         "label": m.label, "headline_variant": m.headline, "variants": ",".join(m.variants),
                         "bounded": registry.is_bounded(m.name), "in_geometric_mean": family == registry.CORE,
                         "ranks_track": family if m.name == ranking else None})
    return pd.DataFrame(rows, columns=next(t for t in TABLES if t.name == "metrics").names)


def _judges(conn: sa.Connection, release_id: str, judge: str | None) -> list[str]:
    """The judge configs exported: the one asked for (a config id or a judge spec such as `local`), else
    every judge with a board of the release, else every judge that scored its reports."""
    if judge:
        from deepscholar.evaluation.judge_spec import JudgeSpec

        known = set(conn.execute(sa.text("SELECT judge_config FROM judge_configs")).scalars())
        config = judge if judge in known else JudgeSpec.parse(judge).config_id
        return [config]
    boards = conn.execute(sa.text("SELECT judge_config FROM board_current WHERE release_id = :r ORDER BY 1"),
                          {"r": release_id}).scalars().all()
    if boards:
        return list(boards)
    return list(conn.execute(sa.text("""
        SELECT DISTINCT m.judge_config FROM metric_scores m JOIN reports r USING (report_id)
         WHERE r.release_id = :r ORDER BY 1"""), {"r": release_id}).scalars())


def _read(conn: sa.Connection, table: Table, params: dict, types: dict[str, dict[str, str]]) -> pd.DataFrame:
    """The table's rows; its columns' warehouse types go into `types[table.name]` (for the Parquet file)."""
    if table.sql is None:
        raise ValueError(f"table {table.name} is not read from the warehouse")
    result = conn.execute(sa.text(table.sql), params)
    types[table.name] = arrow_types(result.cursor.description if result.cursor is not None else None)
    return pd.DataFrame([tuple(r) for r in result], columns=list(result.keys()))


def _withhold_queries(frame: pd.DataFrame, licences: dict[str, PaperLicence]) -> pd.DataFrame:
    got = [licences.get(a) for a in frame["arxiv_id"]]
    frame["license"] = [p.license if p else None for p in got]
    frame["redistributable"] = [bool(p and p.redistributable) for p in got]
    frame["text_withheld"] = [p.withheld_reason if p else "licence never fetched" for p in got]
    withheld = frame["text_withheld"].notna()
    for column in WITHHELD_QUERY_COLUMNS:
        frame[column] = frame[column].astype(object).where(~withheld, None)
    return frame


def _withhold_reports(frame: pd.DataFrame, licences: dict[str, PaperLicence]) -> pd.DataFrame:
    reasons = []
    for kind, arxiv_id in zip(frame["system_kind"], frame["arxiv_id"], strict=True):
        paper = licences.get(arxiv_id)
        reason = paper.withheld_reason if paper else "licence never fetched"
        reasons.append(f"the human exemplar's report is the section: {reason}"
                       if kind == HUMAN_EXEMPLAR_KIND and reason else None)
    frame["text_withheld"] = reasons
    frame["text"] = frame["text"].astype(object).where(frame["text_withheld"].isna(), None)
    return frame


def _parquet_available() -> bool:
    try:
        import pyarrow  # type: ignore[import-untyped]  # noqa: F401
    except ImportError:
        return False
    return True


def export_release(engine: Engine, release_id: str, out: Path, *, judge: str | None = None,
                   settings: Settings | None = None) -> ExportResult:
    """Write release `release_id`'s data, reports, judgments, scores and boards into the folder `out` as CSV
    and Parquet, with README.md; an earlier export there is replaced whole (InvalidInput for a file, or a
    folder holding anything else). Withholds what the licences forbid."""
    settings = settings or current_settings()
    with engine.connect() as conn:
        release = conn.execute(sa.text("""
            SELECT release_id, status, version, base_id, manifest_hash, code_version, window_start, window_end,
                   published_at FROM releases WHERE release_id = :r"""), {"r": release_id}).mappings().first()
        if release is None:
            raise NotFound(f"release {release_id} does not exist (`deepscholar release list` lists them)")
        judges = _judges(conn, release_id, judge)
        licences = query_licences(conn, release_id, settings.redistributable_licences)
        params = {"r": release_id, "judges": judges}
        frames: dict[str, pd.DataFrame] = {}
        types: dict[str, dict[str, str]] = {}
        for table in TABLES:
            frames[table.name] = metrics_frame() if table.sql is None else _read(conn, table, params, types)
        current = conn.execute(sa.text("""
            SELECT judge_config, board_version, status, published_at FROM board_current
             WHERE release_id = :r AND judge_config = ANY(:judges) ORDER BY 1"""), params).mappings().all()
    if judge and not (frames["metric_scores"].shape[0] or current):
        raise InvalidInput(f"no scores of release {release_id} under judge {judges[0]}; judged: "
                           f"{', '.join(_judges_of(engine, release_id)) or 'none yet'}")
    frames["queries"] = _withhold_queries(frames["queries"], licences)
    frames["reports"] = _withhold_reports(frames["reports"], licences)
    for table in TABLES:
        if list(frames[table.name].columns) != table.names:  # the datacard must describe exactly these
            raise AssertionError(f"{table.name}: columns {list(frames[table.name].columns)} != {table.names}")

    out = Path(out)
    _check_out(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        result = _write(release, frames, types, licences, current, judges, staged, out, settings)
        _check_out(out)  # still ours to replace
        replace_folder(staged, out)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    for line in result.warnings:
        log.warning("%s", line)
    return result


def _write(release, frames: dict[str, pd.DataFrame], types: dict[str, dict[str, str]],
           licences: dict[str, PaperLicence], current, judges: list[str], folder: Path, out: Path,
           settings: Settings) -> ExportResult:
    release_id = release["release_id"]
    parquet = _parquet_available()
    warnings = []
    if not parquet:
        warnings.append("pyarrow is not installed: wrote CSV only, no Parquet files (pip install pyarrow)")
    for table in TABLES:
        frame = frames[table.name]
        write_csv(frame, folder / f"{table.name}.csv")
        if parquet:
            write_parquet(frame, folder / f"{table.name}.parquet", types.get(table.name, {}))
    never = sum(not p.fetched for p in licences.values())
    if never:
        warnings.append(f"the licences of {never} of {len(licences)} query papers of {release_id} were never "
                        f"fetched: their section texts are withheld; run `deepscholar release licences "
                        f"{release_id}` and export again")
    if release["manifest_hash"] is None:
        warnings.append(f"release {release_id} is not sealed (no manifest hash): its data may still change")
    result = ExportResult(release_id=release_id, out=out, rows={t.name: len(frames[t.name]) for t in TABLES},
                          formats=("csv", "parquet") if parquet else ("csv",), judge_configs=judges,
                          withheld_papers=int(frames["queries"]["text_withheld"].notna().sum()),
                          withheld_reports=int(frames["reports"]["text_withheld"].notna().sum()),
                          warnings=warnings)
    write_datacard(folder / "README.md", release=dict(release), frames=frames, licences=licences,
                   boards=[dict(b) for b in current], result=result, settings=settings,
                   exported_by=code_version())
    return result


def _judges_of(engine: Engine, release_id: str) -> Sequence[str]:
    with engine.connect() as conn:
        return _judges(conn, release_id, None)
