"""Throughput of related-work extraction + bibliography parsing on the real-paper fixtures.

Each monthly release runs this per candidate paper, so papers/s bounds how many e-prints a run can
process. Usage: .venv/bin/python bench/extraction_throughput.py [--repeat N] [--fixtures DIR]
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "include"))

from deepscholar.sources.bibliography import parse_bibliography  # noqa: E402
from deepscholar.sources.latex import find_related_work  # noqa: E402

DEFAULT_FIXTURES = ROOT.parent / "shared" / "fixtures" / "latex_real"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=20, help="passes over every paper (default 20)")
    parser.add_argument("--fixtures", type=Path, default=DEFAULT_FIXTURES)
    args = parser.parse_args(argv)

    papers = sorted(p for p in args.fixtures.iterdir() if p.is_dir()) if args.fixtures.is_dir() else []
    if not papers:
        print(f"no paper folders under {args.fixtures}", file=sys.stderr)
        return 1
    # bibtexparser logs every malformed block it meets; the bench measures time, not warnings.
    logging.getLogger("bibtexparser").setLevel(logging.CRITICAL)

    for paper in papers:  # warm-up: imports, pylatexenc context tables
        section = find_related_work(paper)
        parse_bibliography(paper, section.main_tex if section else None)

    per_paper: dict[str, list[float]] = {p.name: [] for p in papers}
    start = time.perf_counter()
    for _ in range(args.repeat):
        for paper in papers:
            t0 = time.perf_counter()
            section = find_related_work(paper)
            parse_bibliography(paper, section.main_tex if section else None)
            per_paper[paper.name].append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    n = args.repeat * len(papers)

    print(f"{'paper':<36} {'mean ms':>9} {'p50 ms':>9}")
    for name, times in per_paper.items():
        print(f"{name:<36} {1000 * statistics.mean(times):9.1f} {1000 * statistics.median(times):9.1f}")
    print(f"\n{n} extractions of {len(papers)} papers x {args.repeat} in {elapsed:.2f} s")
    print(f"throughput: {n / elapsed:.2f} papers/s")
    print(f"mean: {1000 * elapsed / n:.1f} ms per paper (find_related_work + parse_bibliography)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
