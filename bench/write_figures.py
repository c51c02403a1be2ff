"""Keep the benches' latest figures in one place: bench/results/<bench>.json, rendered to docs/BENCHMARKS.md.

A bench prints JSON lines; `record` keeps them with the command, date, commit and core count, replacing
that bench's earlier figures, and renders the page again. Prose links to the page instead of quoting it.

    python bench/real_month.py --max-queries 200 | python bench/write_figures.py record real_month \\
        --command "python bench/real_month.py --max-queries 200"
    python bench/write_figures.py render          # docs/BENCHMARKS.md from bench/results/*.json
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
PAGE = ROOT / "docs" / "BENCHMARKS.md"
HEADER = """# Benchmarks

The latest figures of each bench in `bench/`, as `bench/write_figures.py` recorded them in
`bench/results/<bench>.json`. Generated: edit the results through a bench run, never by hand
(`tests/unit/test_benchmark_figures.py` keeps this page equal to the recorded figures). A bench marked
*transcribed* holds figures copied from earlier prose; its next run replaces them.

To record a run: `python bench/<bench>.py ARGS | python bench/write_figures.py record <bench> --command
"python bench/<bench>.py ARGS"`.
"""


def json_lines(text: str) -> list[dict[str, Any]]:
    """The JSON objects among a bench's output lines (other lines, e.g. progress, are skipped)."""
    found = []
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict):
                found.append(value)
    return found


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def record(bench: str, output: str, command: str, results: Path = RESULTS) -> Path:
    """Store a bench's JSON lines as its latest figures; the file written."""
    lines = json_lines(output)
    if not lines:
        raise SystemExit(f"write_figures: no JSON lines in the output of {bench}: nothing recorded")
    entry = {"bench": bench, "command": command, "recorded": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d"),
             "commit": _commit(), "machine": f"{os.cpu_count()} cores", "lines": lines}
    results.mkdir(parents=True, exist_ok=True)
    path = results / f"{bench}.json"
    path.write_text(json.dumps(entry, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    return path


def _cell(value: Any) -> str:
    if isinstance(value, float):
        text = f"{value:,.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    elif isinstance(value, int) and not isinstance(value, bool):
        text = f"{value:,}"
    elif isinstance(value, dict | list):
        text = json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    else:
        text = str(value)
    return text.replace("|", "\\|").replace("\n", " ")


def _section(entry: dict[str, Any]) -> list[str]:
    how = "transcribed from earlier docs" if entry.get("transcribed") else "recorded"
    out = [f"## {entry['bench']}", "", f"`{entry['command']}`: {how} {entry['recorded']} at {entry['commit']}, "
           f"{entry['machine']}."]
    if entry.get("note"):
        out += ["", entry["note"]]
    if any(isinstance(value, dict) for line in entry["lines"] for value in line.values()):
        for line in entry["lines"]:  # nested figures: one row per leaf, named by its path
            out += ["", "| figure | value |", "|---|---|"]
            out += [f"| {_cell(path)} | {_cell(value)} |" for path, value in _leaves(line)]
        return out
    columns: list[str] = []
    for line in entry["lines"]:
        columns += [key for key in line if key not in columns]
    out += ["", "| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    out += ["| " + " | ".join(_cell(line.get(key, "")) for key in columns) + " |" for line in entry["lines"]]
    return out


def _leaves(value: dict[str, Any], prefix: str = "") -> list[tuple[str, Any]]:
    found: list[tuple[str, Any]] = []
    for key, item in value.items():
        path = f"{prefix}{key}"
        found += _leaves(item, f"{path} / ") if isinstance(item, dict) else [(path, item)]
    return found


def render(results: Path = RESULTS) -> str:
    """docs/BENCHMARKS.md's text from every recorded bench, in name order."""
    entries = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(results.glob("*.json"))]
    lines = HEADER.rstrip("\n").splitlines()
    for entry in entries:
        lines += [""] + _section(entry)
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="folder of the recorded figures")
    parser.add_argument("--page", type=Path, default=PAGE, help="the page rendered from them")
    sub = parser.add_subparsers(dest="action", required=True)
    rec = sub.add_parser("record", help="store a bench's JSON lines (stdin) and render the page")
    rec.add_argument("bench")
    rec.add_argument("--command", required=True, help="the command that produced the output")
    sub.add_parser("render", help="write docs/BENCHMARKS.md from bench/results/")
    args = parser.parse_args(argv)
    if args.action == "record":
        if not (ROOT / "bench" / f"{args.bench}.py").is_file():
            raise SystemExit(f"write_figures: no bench named {args.bench!r} in bench/")
        print(record(args.bench, sys.stdin.read(), args.command, args.results))
    args.page.write_text(render(args.results), encoding="utf-8")
    print(args.page)
    return 0


if __name__ == "__main__":
    sys.exit(main())
