"""Human labels for judge validation: blind samples of a metric's judged units out, annotators' labels in.

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.judge_validation.annotation`.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import tempfile
import unicodedata
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import InvalidInput, NotFound
from deepscholar.evaluation.judge_spec import JudgeSpec
from deepscholar.evaluation.judge_validation.annotation_units import (
    JudgedUnit,
    annotatable_metric,
    judged_units,
)
from deepscholar.settings import current_settings

__all__ = ["ExportResult", "ImportSummary", "FILE_COLUMNS", "output_paths", "allocate",
           "export_sample", "import_labels"]

# Columns every annotation file starts with, before the unit's content fields; `label` is last.
FILE_COLUMNS = ("item_id", "metric", "question", "allowed_labels", "query_title", "query_abstract")
LABEL_COLUMN = "label"
ANNOTATOR_COLUMN = "annotator"
MAX_ANNOTATOR_LENGTH = 200
_IMPORT_LOCK = "deepscholar_human_labels"


# --- export --------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class ExportResult:
    sample_id: int
    release_id: str
    metric: str
    judge_config: str
    n_requested: int
    n_items: int
    n_candidates: int  # scored units the sample was drawn from
    n_strata: int  # non-empty (system, judge label) strata among them
    files: tuple[Path, ...]
    reused: bool = False  # an identical earlier sample (same draw) was recorded already


def output_paths(out: str | os.PathLike) -> tuple[Path, Path]:
    """(x.jsonl, x.csv) for --out x.jsonl, x.csv or x: both files are always written."""
    path = Path(out)
    base = path.with_suffix("") if path.suffix.lower() in (".jsonl", ".csv") else path
    if not base.name:
        raise InvalidInput(f"--out {str(out)!r} names no file")
    return base.with_name(base.name + ".jsonl"), base.with_name(base.name + ".csv")


def allocate(sizes: dict[Any, int], n: int, rng: random.Random) -> dict[Any, int]:
    """How many units each stratum gives to a sample of n: at least one per non-empty stratum when n allows
    (else n strata drawn at random give one each), the rest proportional to the strata's remaining sizes
    (largest remainders, ties in key order), never more than a stratum holds."""
    keys = sorted(k for k, s in sizes.items() if s > 0)
    total = sum(sizes[k] for k in keys)
    if n >= total:
        return {k: sizes[k] for k in keys}
    if n < len(keys):
        return dict.fromkeys(sorted(rng.sample(keys, n)), 1)
    spare = {k: sizes[k] - 1 for k in keys}
    rest, capacity = n - len(keys), sum(spare.values())
    quota = {k: rest * spare[k] / capacity for k in keys}
    out = {k: 1 + int(quota[k]) for k in keys}
    left = n - sum(out.values())
    for k in sorted(keys, key=lambda k: (-(quota[k] - int(quota[k])), keys.index(k)))[:left]:
        out[k] += 1
    return out


def _release_exists(engine: Engine, release_id: str) -> bool:
    with engine.connect() as conn:
        return conn.execute(sa.text("SELECT 1 FROM releases WHERE release_id = :r"), {"r": release_id}).first() \
            is not None


def _judge_configs_with_judgments(engine: Engine, release_id: str, metric: str) -> list[tuple[str, int]]:
    with engine.connect() as conn:
        return [(r.judge_config, r.n) for r in conn.execute(sa.text("""
            SELECT j.judge_config, count(*) AS n FROM judgments j JOIN reports r USING (report_id)
            WHERE r.release_id = :r AND j.metric = :m AND r.status = 'ok'
            GROUP BY j.judge_config ORDER BY j.judge_config"""), {"r": release_id, "m": metric})]


def _draw(units: Sequence[JudgedUnit], n: int, seed: int) -> tuple[list[JudgedUnit], int]:
    """The sample: stratified over (system, judge label), then shuffled so the file's order tells nothing
    about either; deterministic given the seed and the candidates (drawn from a list sorted by item id)."""
    rng = random.Random(seed)
    strata: dict[tuple[str, str], list[JudgedUnit]] = {}
    for u in sorted(units, key=lambda u: u.item_id):
        strata.setdefault((u.system_id, u.judge_label or ""), []).append(u)
    quota = allocate({k: len(v) for k, v in strata.items()}, n, rng)
    picked = [u for k in sorted(quota) for u in rng.sample(strata[k], quota[k])]
    rng.shuffle(picked)
    return picked, len(strata)


def _query_fields(unit: JudgedUnit) -> dict[str, str]:
    query = unit.report.query
    return {"query_title": " ".join((query.title or "").split()), "query_abstract": " ".join((query.abstract or "").split())}


def _content(unit: JudgedUnit) -> dict[str, str]:
    reserved = set(FILE_COLUMNS) | {LABEL_COLUMN, ANNOTATOR_COLUMN}
    clash = reserved & set(unit.unit.content)
    if clash:  # a metric's content field would overwrite a column of the file: a bug in that metric
        raise ValueError(f"{unit.metric}: annotation content uses reserved column names {sorted(clash)}")
    return {**_query_fields(unit), **unit.unit.content}


def _rows(metric: Any, units: Sequence[JudgedUnit]) -> list[dict[str, Any]]:
    return [{"item_id": u.item_id, "metric": u.metric, "question": metric.annotation_question,
             "allowed_labels": list(metric.annotation_labels), **_content(u), LABEL_COLUMN: ""} for u in units]


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _write_files(rows: Sequence[dict[str, Any]], jsonl: Path, csv_path: Path) -> None:
    columns = list(dict.fromkeys(k for row in rows for k in row if k != LABEL_COLUMN)) + [LABEL_COLUMN]
    if not rows:
        columns = [*FILE_COLUMNS, LABEL_COLUMN]
    _write_atomically(jsonl, "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows))
    from deepscholar.text.spreadsheet import csv_cell

    buf = io.StringIO()
    # CRLF (RFC 4180): a CR or LF inside a report's sentence is quoted; formula leads get a `'` (csv_cell).
    writer = csv.DictWriter(buf, fieldnames=columns, lineterminator="\r\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: json.dumps(row[c], ensure_ascii=False) if isinstance(row.get(c), list)
                         else csv_cell(row.get(c, "")) for c in columns})
    _write_atomically(csv_path, buf.getvalue())


def _store_sample(conn: sa.Connection, release_id: str, metric: Any, judge_config: str, n: int, seed: int,
                  picked: Sequence[JudgedUnit], files: Sequence[Path]) -> tuple[int, bool]:
    """Upsert the annotation items and record the sample; an identical earlier sample (same release,
    metric, judge, n, seed and drawn items in the same order) is reused, its file list extended."""
    items = [{"item_id": u.item_id, "release_id": u.release_id, "report_id": u.report_id, "metric": u.metric,
              "item_key": u.item_key, "sub_key": u.unit.sub_key, "question": metric.annotation_question,
              "allowed": list(metric.annotation_labels), "content": json.dumps(_content(u), sort_keys=True,
                                                                                  ensure_ascii=False)}
             for u in picked]
    if items:
        conn.execute(sa.text("""
            INSERT INTO annotation_items (item_id, release_id, report_id, metric, item_key, sub_key, question,
                                          allowed_labels, content)
            VALUES (:item_id, :release_id, :report_id, :metric, :item_key, :sub_key, :question, :allowed,
                    CAST(:content AS jsonb))
            ON CONFLICT (item_id) DO UPDATE SET question = excluded.question,
                allowed_labels = excluded.allowed_labels, content = excluded.content
            WHERE (annotation_items.question, annotation_items.allowed_labels, annotation_items.content)
                IS DISTINCT FROM (excluded.question, excluded.allowed_labels, excluded.content)"""), items)
    drawn = [(u.item_id, u.judge_label) for u in picked]
    names = [str(f) for f in files]
    for row in conn.execute(sa.text("""
            SELECT sample_id FROM annotation_samples
            WHERE release_id = :r AND metric = :m AND judge_config = :j AND n_requested = :n AND seed = :s
              AND n_items = :k ORDER BY sample_id"""),
            {"r": release_id, "m": metric.name, "j": judge_config, "n": n, "s": seed, "k": len(picked)}).all():
        earlier = [tuple(r) for r in conn.execute(sa.text(
            "SELECT item_id, judge_label FROM annotation_sample_items WHERE sample_id = :id ORDER BY position"),
            {"id": row.sample_id})]
        if earlier == drawn:
            conn.execute(sa.text("""
                UPDATE annotation_samples SET out_files = ARRAY(SELECT DISTINCT unnest(out_files || CAST(:f AS text[]))
                                                                ORDER BY 1)
                WHERE sample_id = :id AND NOT out_files @> CAST(:f AS text[])"""), {"id": row.sample_id, "f": names})
            return row.sample_id, True
    sample_id = conn.execute(sa.text("""
        INSERT INTO annotation_samples (release_id, metric, judge_config, n_requested, seed, n_items, out_files)
        VALUES (:r, :m, :j, :n, :s, :k, CAST(:f AS text[])) RETURNING sample_id"""),
        {"r": release_id, "m": metric.name, "j": judge_config, "n": n, "s": seed, "k": len(picked),
         "f": names}).scalar_one()
    if drawn:
        conn.execute(sa.text("""
            INSERT INTO annotation_sample_items (sample_id, item_id, position, judge_label)
            VALUES (:id, :item, :pos, :label)"""),
            [{"id": sample_id, "item": item, "pos": pos, "label": label} for pos, (item, label) in enumerate(drawn, 1)])
    return sample_id, False


def export_sample(engine: Engine, release_id: str, metric: str, judge_config: str | None, n: int, seed: int,
                  out_path: str | os.PathLike) -> ExportResult:
    """Draw a blind, stratified sample of n scored units of `metric` judged under `judge_config` (default:
    the settings' judge) on the release, record it, and write OUT.jsonl and OUT.csv for annotators."""
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise InvalidInput(f"the sample size must be a positive integer, got {n!r}")
    m = annotatable_metric(metric)
    judge_config = JudgeSpec.parse(judge_config or current_settings().judge).config_id
    if not _release_exists(engine, release_id):
        raise NotFound(f"no release {release_id!r}: `deepscholar release list` lists them")
    jsonl, csv_path = output_paths(out_path)
    configs = _judge_configs_with_judgments(engine, release_id, m.name)
    if judge_config not in {c for c, _ in configs}:
        have = "; ".join(f"{c} ({k} judged items)" for c, k in configs)
        raise NotFound(f"no {m.name} judgments under judge config {judge_config!r} in release {release_id}: "
                       + (f"judge configs with some: {have} (pass one with --judge)" if configs else
                          f"nothing is judged yet; run `deepscholar evaluate --release {release_id} --metrics {m.name}`"))
    candidates = [u for u in judged_units(engine, release_id, m.name, judge_config) if u.judge_label is not None]
    if not candidates:
        raise NotFound(f"every {m.name} judgment under {judge_config} in release {release_id} is unscored or asks "
                       "nothing a human can check: there is nothing to sample")
    picked, n_strata = _draw(candidates, n, seed)
    rows = _rows(m, picked)
    with engine.begin() as conn:
        sample_id, reused = _store_sample(conn, release_id, m, judge_config, n, seed, picked, (jsonl, csv_path))
        _write_files(rows, jsonl, csv_path)  # inside the transaction: a failed write records nothing
    return ExportResult(sample_id, release_id, m.name, judge_config, n, len(picked), len(candidates), n_strata,
                        (jsonl, csv_path), reused)


# --- import --------------------------------------------------------------------------------------------

@dataclass
class ImportSummary:
    path: str
    rows: int = 0
    stored: int = 0  # new (item, annotator) labels
    replaced: int = 0  # an annotator's earlier label on the item, now another one (kept in the history)
    unchanged: int = 0  # the same label as the annotator's current one (nothing written)
    skipped_empty: int = 0  # rows without a label yet
    annotators: list[str] = field(default_factory=list)
    agreement_rows: int = 0  # stored judge-vs-humans entries (human_agreement_stats) this import changed

    def as_dict(self) -> dict:
        return {"path": self.path, "rows": self.rows, "stored": self.stored, "replaced": self.replaced,
                "unchanged": self.unchanged, "skipped_empty": self.skipped_empty, "annotators": self.annotators,
                "agreement_rows": self.agreement_rows}


@dataclass(frozen=True)
class _Row:
    where: str  # "line 4", or "row 3 (lines 5-9)" in a CSV with multi-line cells
    item_id: str
    label: str
    annotator: str


def _refuse(path: Path, where: str, why: str) -> InvalidInput:
    return InvalidInput(f"{path}: {where}: {why}; nothing was imported")


def _cell(value: Any) -> str:
    """A cell as text, trimmed: JSON numbers (a grade written as 2) compare as their text, null as empty."""
    if value is None:
        return ""
    return (value if isinstance(value, str) else json.dumps(value) if isinstance(value, bool) else str(value)).strip()


def _read_jsonl(path: Path, text: str) -> Iterator[tuple[str, dict]]:
    for n, raw in enumerate(text.splitlines(), 1):
        if not raw.strip():
            continue
        line = f"line {n}"
        try:
            obj = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise _refuse(path, line, f"not valid JSON ({exc.msg}); a JSONL file holds one JSON object per line") from None
        if not isinstance(obj, dict):
            raise _refuse(path, line, f"expected a JSON object with the keys 'item_id' and 'label' (and optionally "
                                      f"'annotator'), got {type(obj).__name__}")
        missing = [c for c in ("item_id", LABEL_COLUMN) if c not in obj]
        if missing:
            raise _refuse(path, line, f"missing key(s) {', '.join(map(repr, missing))} (each row needs 'item_id' and "
                                      "'label'; an empty label means not labelled yet)")
        yield line, obj


def _read_csv(path: Path, text: str) -> Iterator[tuple[str, dict]]:
    """(where, row) per data row; `where` is its line, or its spreadsheet row and lines when a quoted cell
    spans several lines (the exported content does)."""
    reader = csv.reader(io.StringIO(text, newline=""))
    try:
        header = [h.strip() for h in next(reader, [])]
    except csv.Error as exc:
        raise _refuse(path, "line 1", f"not a readable CSV header ({exc})") from None
    missing = [c for c in ("item_id", LABEL_COLUMN) if c not in header]
    if missing:
        raise _refuse(path, "line 1", f"the header lacks column(s) {', '.join(map(repr, missing))} (it has: "
                                      f"{', '.join(map(repr, header)) or 'nothing'}); an annotation CSV needs "
                                      "'item_id' and 'label'")
    row_number = 1  # the header is a spreadsheet's row 1
    while True:
        first = reader.line_num + 1
        try:
            cells = next(reader, None)
        except csv.Error as exc:
            raise _refuse(path, f"line {first}", f"not readable as CSV ({exc})") from None
        if cells is None:
            return
        if not cells:  # a blank line
            continue
        row_number += 1
        last = reader.line_num
        where = f"line {first}" if last == first and row_number == first else (
            f"row {row_number} (line {first})" if last == first else f"row {row_number} (lines {first}-{last})")
        if len(cells) != len(header):
            raise _refuse(path, where, f"{len(cells)} fields where the header has {len(header)} columns")
        row = dict(zip(header, cells, strict=True))
        if any(v.strip() for v in row.values()):
            yield where, row


# Scripts that are written together in one name: Japanese mixes kanji and kana, Korean hangul and hanja.
_SCRIPTS_WRITTEN_TOGETHER = ({"CJK", "HIRAGANA", "KATAKANA"}, {"CJK", "HANGUL"})


def _script(ch: str) -> str:
    """The script of a letter, as the first word of its Unicode name (LATIN, CYRILLIC, GREEK, CJK, ...)."""
    return unicodedata.name(ch, "UNKNOWN").split(" ", 1)[0]


def annotator_name(raw: str) -> str:
    """The annotator's name as stored: NFKC, trimmed. ValueError (saying why) for a name whose letters come
    from several scripts, except the ones written together (Japanese, Korean)."""
    name = unicodedata.normalize("NFKC", raw).strip()
    scripts = {_script(ch) for ch in name if unicodedata.category(ch).startswith("L")}
    if len(scripts) > 1 and not any(scripts <= together for together in _SCRIPTS_WRITTEN_TOGETHER):
        raise ValueError(f"annotator {name[:40]!r} mixes letters of several scripts ({', '.join(sorted(scripts))}); "
                         "a look-alike name would count as another person: write it in one script")
    return name


def _read_rows(path: Path, annotator: str | None) -> list[_Row]:
    from deepscholar.settings import current_settings

    cap = current_settings().import_max_file_bytes
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        raise NotFound(f"no annotation file {str(path)!r}") from None
    except OSError as exc:
        raise InvalidInput(f"cannot read {path}: {exc}") from None
    if size > cap:
        raise InvalidInput(f"{path}: {size} bytes, more than DEEPSCHOLAR_IMPORT_MAX_FILE_BYTES ({cap}); "
                           "nothing was imported (split the file)")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise NotFound(f"no annotation file {str(path)!r}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(f"cannot read {path} as UTF-8 text: {exc}") from None
    suffix = path.suffix.lower()
    as_json = suffix in (".jsonl", ".json", ".ndjson") or (suffix != ".csv" and text.lstrip().startswith("{"))
    default = (annotator or "").strip()
    rows = []
    for line, obj in (_read_jsonl if as_json else _read_csv)(path, text):
        item_id, label = _cell(obj.get("item_id")), _cell(obj.get(LABEL_COLUMN))
        who = _cell(obj.get(ANNOTATOR_COLUMN)) or default
        try:
            who = annotator_name(who)
        except ValueError as exc:
            raise _refuse(path, line, str(exc)) from None
        if not item_id:
            raise _refuse(path, line, "empty item_id")
        if label and not who:
            raise _refuse(path, line, "no annotator: pass --annotator NAME or fill the row's 'annotator' column")
        if len(who) > MAX_ANNOTATOR_LENGTH or any(not ch.isprintable() for ch in who):
            raise _refuse(path, line, f"annotator {who[:40]!r} must be printable text of at most "
                                      f"{MAX_ANNOTATOR_LENGTH} characters")
        rows.append(_Row(line, item_id, label, who))
    if not rows:
        raise InvalidInput(f"{path}: no rows: an annotation file has one row per item (`deepscholar annotate export`)")
    return rows


def _check_rows(conn: sa.Connection, path: Path, rows: Sequence[_Row]) -> None:
    allowed = {r.item_id: list(r.allowed_labels) for r in conn.execute(sa.text(
        "SELECT item_id, allowed_labels FROM annotation_items WHERE item_id = ANY(:ids)"),
        {"ids": sorted({r.item_id for r in rows})})}
    seen: dict[tuple[str, str], str] = {}
    for row in rows:
        if row.item_id not in allowed:
            raise _refuse(path, row.where, f"unknown item_id {row.item_id!r}: no exported annotation item has it "
                                          "(was the file exported from this warehouse?)")
        labels = [x.strip() for x in allowed[row.item_id]]
        if row.label and row.label not in labels:
            raise _refuse(path, row.where, f"label {row.label!r} is not allowed for item {row.item_id}; allowed: "
                                          f"{', '.join(labels)}")
        key = (row.item_id, row.annotator)
        if key in seen:
            who = f" by annotator {row.annotator!r}" if row.annotator else ""
            raise _refuse(path, row.where, f"item {row.item_id}{who} appears twice (first at {seen[key]}); "
                                          "keep one row per item and annotator")
        seen[key] = row.where


def import_labels(engine: Engine, path: str | os.PathLike, annotator: str | None) -> ImportSummary:
    """Store the labels of an annotation file (JSONL or CSV) as `annotator`'s (a row's own `annotator`
    column wins); all rows or none, in one transaction."""
    path = Path(path)
    rows = _read_rows(path, annotator)
    summary = ImportSummary(str(path), rows=len(rows))
    labelled = [r for r in rows if r.label]
    summary.skipped_empty = len(rows) - len(labelled)
    summary.annotators = sorted({r.annotator for r in labelled})
    with engine.begin() as conn:
        conn.execute(sa.text("SELECT pg_advisory_xact_lock(hashtext(:k))"), {"k": _IMPORT_LOCK})
        _check_rows(conn, path, rows)
        current = {(r.item_id, r.annotator): r.label for r in conn.execute(sa.text(
            "SELECT item_id, annotator, label FROM human_labels WHERE item_id = ANY(:ids)"),
            {"ids": sorted({r.item_id for r in labelled})})}
        new: list[dict[str, str]] = []
        changed: list[dict[str, str]] = []
        for row in labelled:
            before = current.get((row.item_id, row.annotator))
            if before == row.label:
                summary.unchanged += 1
            else:
                (new if before is None else changed).append(
                    {"item": row.item_id, "who": row.annotator, "label": row.label, "file": str(path)})
        summary.stored, summary.replaced = len(new), len(changed)
        # One statement per table whatever the number of rows (arrays unnested server-side).
        if changed:
            conn.execute(sa.text("""
                UPDATE human_label_history h SET replaced_at = now()
                FROM unnest(CAST(:items AS text[]), CAST(:whos AS text[])) AS c(item_id, annotator)
                WHERE h.item_id = c.item_id AND h.annotator = c.annotator AND h.replaced_at IS NULL"""),
                {"items": [r["item"] for r in changed], "whos": [r["who"] for r in changed]})
        if new or changed:
            written = [*new, *changed]
            arrays = {"items": [r["item"] for r in written], "whos": [r["who"] for r in written],
                      "labels": [r["label"] for r in written], "file": str(path)}
            conn.execute(sa.text("""
                INSERT INTO human_labels (item_id, annotator, label, source_file)
                SELECT item_id, annotator, label, :file
                FROM unnest(CAST(:items AS text[]), CAST(:whos AS text[]), CAST(:labels AS text[]))
                     AS x(item_id, annotator, label)
                ON CONFLICT (item_id, annotator) DO UPDATE SET label = excluded.label,
                    source_file = excluded.source_file, labelled_at = now()"""), arrays)
            conn.execute(sa.text("""
                INSERT INTO human_label_history (item_id, annotator, label, source_file)
                SELECT item_id, annotator, label, :file
                FROM unnest(CAST(:items AS text[]), CAST(:whos AS text[]), CAST(:labels AS text[]))
                     AS x(item_id, annotator, label)"""), arrays)
            months = conn.execute(sa.text(
                "SELECT DISTINCT release_id FROM annotation_items WHERE item_id = ANY(:ids) ORDER BY 1"),
                {"ids": sorted({r["item"] for r in [*new, *changed]})}).scalars().all()
    if new or changed:
        from deepscholar.evaluation.judge_validation.judge_vs_humans import store_agreement

        # After the labels' transaction, never inside it: computing reads judgments and reports on connections
        # of its own, and the pool rule forbids taking those while this one is held. Until it has run, the
        # stored agreement is the previous labels' (`deepscholar judges agreement` recomputes it).
        for month in months:
            summary.agreement_rows += store_agreement(engine, month)
    return summary

