"""Benchmark figures live in one place: bench/results/<bench>.json as a bench run recorded them, and
docs/BENCHMARKS.md rendered from them by bench/write_figures.py (never edited by hand)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _write_figures():
    spec = importlib.util.spec_from_file_location("write_figures", ROOT / "bench" / "write_figures.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_page_is_the_rendered_results():
    page = (ROOT / "docs" / "BENCHMARKS.md").read_text(encoding="utf-8")
    assert page == _write_figures().render(), (
        "docs/BENCHMARKS.md differs from bench/results/: run `python bench/write_figures.py render`")


def test_every_result_is_a_bench_run_with_its_command_and_provenance():
    results = sorted((ROOT / "bench" / "results").glob("*.json"))
    assert results
    for path in results:
        entry = json.loads(path.read_text(encoding="utf-8"))
        assert entry["bench"] == path.stem and (ROOT / "bench" / f"{path.stem}.py").is_file(), path
        assert entry["command"].startswith(f"python bench/{path.stem}.py"), path
        assert entry["recorded"] and entry["commit"] and entry["machine"] and entry["lines"], path


def test_record_keeps_only_the_json_lines_and_replaces_the_benchs_earlier_figures(tmp_path):
    figures = _write_figures()
    figures.record("search", 'building...\n{"corpus": 300, "p95_ms": 4.5}\nnot json {\n', "python bench/search.py",
                   tmp_path)
    figures.record("search", '{"corpus": 1000, "p95_ms": 7.25}\n', "python bench/search.py --sizes 1000", tmp_path)
    entry = json.loads((tmp_path / "search.json").read_text())
    assert entry["lines"] == [{"corpus": 1000, "p95_ms": 7.25}] and entry["command"].endswith("--sizes 1000")
    page = figures.render(tmp_path)
    assert "| corpus | p95_ms |" in page and "| 1,000 | 7.25 |" in page and "300" not in page.split("## search")[1]
