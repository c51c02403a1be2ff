"""The datacard (README.md) of an exported month: what each file holds, where the numbers come from, and
what was left out for its licence; it is also the Hugging Face dataset card (export/hub.py). Written from the same declarations as the files (export/tables.py), so
it cannot describe a column that is not there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pandas as pd

from deepscholar.export.hub import card_header, card_sections
from deepscholar.export.tables import TABLES, TEXT_COLUMNS, UNTRUSTED_COLUMNS
from deepscholar.release.licences import PaperLicence
from deepscholar.settings import Settings

__all__ = ["write_datacard"]


def _type(series: pd.Series) -> str:
    """A column's type as a reader meets it (pandas dtype; object columns by the values they hold)."""
    kind = str(series.dtype)
    if kind not in ("object", "str", "string"):
        return kind
    values = series.dropna()
    if values.empty:
        return "text (empty)"
    kinds = {type(v).__name__ for v in values}
    return "boolean" if kinds == {"bool"} else "text" if kinds <= {"str"} else "/".join(sorted(kinds))


def _cell(value: Any) -> str:
    text = "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def write_datacard(path: Path, *, release: dict, frames: dict[str, pd.DataFrame],
                   licences: dict[str, PaperLicence], boards: list[dict], result: Any, settings: Settings,
                   exported_by: str) -> None:
    """README.md beside the files: the dataset card's YAML header (export/hub.py), then the card."""
    rid = release["release_id"]
    lines = card_header(rid, frames, result.formats) + [f"# DeepScholar live benchmark: release {rid}", ""]
    never = sum(not p.fetched for p in licences.values())
    if never:
        lines += [f"> **WARNING: the licences of {never} of {len(licences)} query papers were never fetched.** "
                  "Their related-work texts are withheld below as if their licence forbade it. Run "
                  f"`deepscholar release licences {rid}` and export again.", ""]
    lines += _provenance(release, boards, result, exported_by)
    lines += _reading()
    lines += card_sections(rid, frames, release)
    lines += _judges(frames["judge_configs"])
    lines += _licences(frames["queries"], licences, result, settings)
    lines += _files(frames)
    lines += [
        "## Recomputing the boards", "",
        "Core board, per judge and system: for each metric of family `core` in `metrics.csv`, the mean of "
        "`metric_scores.value` of its `headline_variant` over the system's reports with `report_status` ok "
        "and `is_current` true, at the `metric_version` the board version names (empty values are unscored and "
        "left out; rows with `is_current` false are earlier metric versions, kept as earlier boards counted "
        "them); the geometric mean of those means; the rank by it. A track's board ranks by the mean of the "
        "metric whose `ranks_track` names it. `published_figures` holds the tracks' figures as their authors' "
        "released scorers pool the same scores (not the boards' numbers).", "",
    ]
    path.write_text("\n".join(lines), encoding="utf-8")


def _provenance(release: dict, boards: list[dict], result: Any, exported_by: str) -> list[str]:
    """Where the data comes from: the release and its seal, the code that built and exported it, the board
    version per judge, the formats written. A reader checks these before comparing with another export."""
    rid = release["release_id"]
    manifest = release["manifest_hash"]
    return [
        "## Provenance", "",
        f"- release: `{rid}` (version {release['version']} of `{release['base_id']}`), status "
        f"`{release['status']}`, window {release['window_start']} to {release['window_end']}",
        "- manifest hash: " + (f"`{manifest}` (the release is sealed: its queries, references and nuggets never "
                               "change)" if manifest else
                               "**none: the release is not sealed, so its data may still change**"),
        f"- code version: release built by `{release['code_version'] or 'unknown'}`, exported by `{exported_by}`",
        "- board version (the one readers see, per judge): " + (", ".join(
            f"`{b['judge_config']}` v{b['board_version']} ({b['status']}"
            + (f", published {b['published_at']}" if b["published_at"] else "") + ")" for b in boards)
            or "no board yet"),
        f"- formats: {', '.join(result.formats)}; every file holds the same columns in both "
        "(`pandas.read_csv` is enough; `pandas.read_parquet` keeps the types and needs pyarrow)", "",
    ]


def _reading() -> list[str]:
    """How to load the files, and which columns hold third parties' text with how the CSV files protect
    spreadsheets from it: the same for every release."""
    return [
        "## Loading", "",
        "```python", "import pandas as pd", "",
        "# CSV: ids such as 2506.01010 are text; read as numbers they would lose digits.",
        "TEXT = {" + ", ".join(f'"{c}": str' for c in TEXT_COLUMNS) + "}",
        'queries = pd.read_csv("queries.csv", dtype=TEXT)',
        'queries = pd.read_parquet("queries.parquet")  # the same columns, typed (needs pyarrow)', "```", "",
        "## Untrusted text", "",
        "These columns hold text third parties wrote, as they wrote it: systems (their reports and sources, "
        "reports imported from outside systems too), the papers' authors, OpenAlex and LLM judges. Treat them "
        "as data: never run them as markup, code or formulas.", "",
        *(f"- `{table}.csv`: " + ", ".join(f"`{c}`" for c in columns) for table, columns in UNTRUSTED_COLUMNS.items()),
        "",
        "The CSV files are RFC 4180 with CRLF line ends: a field holding a line break (CR or LF), a comma or a "
        "quote is quoted, so every CSV reader sees one row per record. In the CSV files only, a text cell that "
        "begins with `=`, `+`, `-`, `@`, a tab or a carriage return starts with an added `'`, so a spreadsheet "
        "shows it instead of running it as a formula; strip that one leading `'` from such cells to get the "
        "text back. The Parquet files hold the exact text.", "",
    ]


def _judges(judges: pd.DataFrame) -> list[str]:
    """The judge configs exported, as a table (model and parameters: what a score was judged with)."""
    lines = ["## Judges", ""]
    if judges.empty:
        lines.append("No judge config exported.")
    else:
        lines += ["| judge_config | kind | model | params |", "|---|---|---|---|"]
        lines += [f"| `{_cell(j.judge_config)}` | {_cell(j.kind)} | {_cell(j.model)} | `{_cell(j.params)}` |"
                  for j in judges.itertuples()]
    return lines


def _licences(queries: pd.DataFrame, licences: dict[str, PaperLicence], result: Any,
              settings: Settings) -> list[str]:
    """Which papers' texts were withheld and why, with every query paper's licence: the rule is stated so a
    reader knows what is missing from the files and cannot be asked of us."""
    withheld = queries["text_withheld"].notna()
    reasons = queries.loc[withheld, "text_withheld"].value_counts()
    lines = [
        "", "## Licences", "",
        "Titles and abstracts are arXiv metadata (CC0) and always published. A paper's related-work section "
        "(`section_text`, `section_raw_latex`, and the human exemplar's report) is published only when its "
        "licence (arXiv OAI-PMH) starts with one of: " + ", ".join(f"`{p}`" for p in settings.redistributable_licences)
        + " (scheme and `www.` ignored). arXiv's non-exclusive licence and an unknown licence do not allow it.", "",
        f"**{int(withheld.sum())} of {len(withheld)} papers' texts were left out for their licence** "
        f"({result.withheld_reports} reports withheld with them):", "",
    ]
    lines += [f"- {n}: {_cell(reason)}" for reason, n in reasons.items()] or ["- none"]
    lines += ["", "| arxiv_id | licence | texts |", "|---|---|---|"]
    lines += [f"| {p.arxiv_id} | {_cell(p.license) or ('unknown' if p.fetched else 'never fetched')} | "
              f"{'published' if p.redistributable else 'withheld'} |" for p in licences.values()]
    return lines


def _files(frames: dict[str, pd.DataFrame]) -> list[str]:
    """Every exported table: what a row is, how many there are, and each column's type and meaning (the
    exporter checks that the frames hold exactly these columns, so this cannot drift from the files)."""
    lines = ["", "## Files", ""]
    for table in TABLES:
        frame = frames[table.name]
        lines += [f"### {table.name}.csv / {table.name}.parquet", "", f"{table.meaning[0].upper()}{table.meaning[1:]}; "
                  f"{len(frame)} rows.", "", "| column | type | meaning |", "|---|---|---|"]
        lines += [f"| `{c.name}` | {_type(frame[c.name])} | {c.meaning} |" for c in table.columns]
        lines.append("")
    return lines
