"""The export folder as a Hugging Face dataset repository: the dataset card's YAML header at the top of
README.md, and the card's sections on loading with `datasets` or DuckDB, publishing, and citing.

Design notes: docs/MODULE_NOTES.md, `deepscholar.export.hub`.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd

from deepscholar.export.tables import TABLES

__all__ = ["CITATION_KEY", "DUCKDB_EXAMPLE", "PAPER_BIBTEX", "card_header", "card_sections", "configs"]

CITATION_KEY = "patel2025deepscholarbench"
PAPER_BIBTEX = (
    "@article{" + CITATION_KEY + ",\n"
    "  title   = {DeepScholar-Bench: A Live Benchmark and Automated Evaluation for Generative Research Synthesis},\n"
    "  author  = {Patel, Liana and Arabzadeh, Negar and Gupta, Harshit and Sundar, Ankita and Stoica, Ion and\n"
    "             Zaharia, Matei and Guestrin, Carlos},\n"
    "  journal = {arXiv preprint arXiv:2508.20033},\n"
    "  year    = {2025}\n}")
# A DuckDB query the card shows (run by tests/integration/test_export_dataset.py): one metric's board column.
DUCKDB_EXAMPLE = """-- DuckDB: the files as they are, typed. One core metric's mean per system, as the board computes it:
SELECT s.judge_config, s.system_id, avg(s.value) AS mean
  FROM read_parquet('metric_scores.parquet') s
  JOIN read_parquet('metrics.parquet') m ON m.metric = s.metric AND m.headline_variant = s.variant
 WHERE s.metric = 'nugget_coverage' AND s.is_current AND s.report_status = 'ok'
 GROUP BY s.judge_config, s.system_id ORDER BY mean DESC;"""
# Size categories as the Hub names them, by the largest table's rows.
_SIZES = ((1_000, "n<1K"), (10_000, "1K<n<10K"), (100_000, "10K<n<100K"), (1_000_000, "100K<n<1M"),
          (10_000_000, "1M<n<10M"))


def configs(frames: dict[str, pd.DataFrame]) -> list[str]:
    """The tables a dataset config is declared for: those with rows, in the datacard's order."""
    return [t.name for t in TABLES if len(frames[t.name])]


def _size(frames: dict[str, pd.DataFrame]) -> str:
    largest = max((len(f) for f in frames.values()), default=0)
    return next((label for limit, label in _SIZES if largest < limit), "n>10M")


def card_header(release_id: str, frames: dict[str, pd.DataFrame], formats: tuple[str, ...]) -> list[str]:
    """The YAML front matter (every value written as a JSON string, which YAML reads as the same string)."""
    ext = "parquet" if "parquet" in formats else "csv"
    q = json.dumps
    lines = ["---", "license: other", f"license_name: {q('per-paper-and-per-system')}",
             f"license_details: {q('Mixed: see the Licences section. Titles and abstracts are arXiv metadata (CC0); each related-work text is under its paper licence and published only when that licence allows it; a report belongs to the system that wrote it.')}",
             f"pretty_name: {q(f'DeepScholar live benchmark, release {release_id}')}",
             "language:", "- en", f"size_categories:\n- {q(_size(frames))}",
             "task_categories:", "- text-generation", "tags:", "- benchmark", "- research-synthesis",
             "- related-work-generation", "- leaderboard", "configs:"]
    for name in configs(frames):
        lines += [f"- config_name: {name}", "  data_files:", "  - split: train", f"    path: {name}.{ext}"]
    return lines + ["---", ""]


def card_sections(release_id: str, frames: dict[str, pd.DataFrame], release: dict[str, Any]) -> list[str]:
    """Loading with `datasets` and DuckDB, publishing on the Hub, and citing: after the provenance."""
    empty = [t.name for t in TABLES if not len(frames[t.name])]
    repo = f"OWNER/deepscholar-live-{release_id}"
    manifest = release.get("manifest_hash") or "not sealed"
    return [
        "## Loading as a dataset", "",
        "This folder is also a Hugging Face dataset repository: each table is a config of one `train` split "
        "(its Parquet file), read with the file's column types.", "",
        "```python", "import datasets", "",
        'reports = datasets.load_dataset("PATH_OR_REPO", "reports", split="train")',
        'scores = datasets.load_dataset("PATH_OR_REPO", "metric_scores", split="train").to_pandas()', "```", "",
        "```sql", DUCKDB_EXAMPLE, "```", "",
        ("Tables with no row in this release, so not a config (`datasets` cannot load an empty split; the files "
         "are there, with their types, for pandas and DuckDB): " + ", ".join(f"`{n}`" for n in empty) + "."
         if empty else "Every table has rows, so every table is a config."), "",
        "## Publishing on the Hugging Face Hub", "",
        "The operator uploads the folder as it is (nothing here uploads); `--delete \"*\"` removes the files of "
        "an earlier upload that this export no longer has:", "",
        "```sh", f"hf upload {repo} DIR . --repo-type dataset --delete \"*\" \\",
        f"    --commit-message \"release {release_id}, manifest {manifest}\"", "```", "",
        "`huggingface-cli upload` takes the same arguments on older `huggingface_hub` versions. Texts withheld "
        "for their licence (see Licences) are not in the files, so they are not uploaded either.", "",
        "## Citation", "",
        "Cite the benchmark these tasks and metrics follow, and name the release and its manifest hash "
        "(Provenance) so others can load the same data:", "",
        "```bibtex", PAPER_BIBTEX, "", "@misc{deepscholar_live_" + release_id.replace(".", "_").replace("-", "_")
        + ",", f"  title = {{DeepScholar live benchmark, release {release_id}}},",
        f"  note  = {{manifest hash {manifest}}},", "  year  = {" + str(release.get("window_start") or "")[:4]
        + "}", "}", "```", "",
    ]
