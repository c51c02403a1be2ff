"""The static site of a year of the benchmark (issue 48 §4): built, published, and month 13 published again.

Usage: .venv/bin/python bench/site.py [--months 12] [--queries 200] [--systems 20] [--scale 1.0] [--n-boot 1000]
  [--record]
The warehouse is bench/history.py's (its fill: real-size months written by bulk SQL and the project's own
roll-up, every k-th month re-judged into a second board version), in a scratch database dropped afterwards.
Then: `site build` of the board pages alone; of every route (report pages and each month's export
included), published to a local folder; month 13 filled, rolled up and published; the site built again
from the first build (the incremental build: unchanged months are reused) and published (only the changed
files are sent). Prints one JSON line per measurement ({"measure": ...}) and a last "summary" with the
goals: full build <= 10 min, month 13 built and published <= 60 s, one month's board pages <= 2 MB without
report pages, the index <= 200 KB. --record keeps the lines in bench/results/site.json (write_figures.py).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import history  # noqa: E402  bench/history.py: its warehouse fill
import sqlalchemy as sa  # noqa: E402

GOALS = {"build_s": 600, "month13_publish_s": 60, "month_board_pages_mb": 2.0, "index_kb": 200}


def month_sizes(engine, build, months: list[str]) -> dict[str, dict]:
    """Bytes per month: its board pages (boards, versions, JSON), its system pages, report pages and export."""
    from deepscholar.site.routes import file_name

    with engine.connect() as conn:
        month_of = dict(conn.execute(sa.text("SELECT report_id, release_id FROM deepscholar.reports")).all())
    out = {}
    for month in months:
        seg = file_name(month)
        parts = {"board": 0, "system": 0, "report": 0, "downloads": 0}
        for path, size in build.sizes.items():
            top = path.split("/")
            if top[0] in ("board", "api") and seg in top[1:3]:
                parts["board"] += size
            elif top[0] == "system" and top[-1] == f"{seg}.html":
                parts["system"] += size
            elif top[0] == "report" and month_of.get(int(top[1].removesuffix(".html"))) == month:
                parts["report"] += size
            elif top[0] == "downloads" and top[1] == seg:
                parts["downloads"] += size
        mb = {k: round(v / 1e6, 3) for k, v in parts.items()}
        out[month] = {**mb, "without_reports_mb": round(mb["board"] + mb["system"], 3),
                      "with_reports_mb": round(mb["board"] + mb["system"] + mb["report"], 3)}
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    history.size_arguments(parser)
    parser.add_argument("--record", action="store_true",
                        help="keep the figures in bench/results/site.json and render docs/BENCHMARKS.md")
    args = parser.parse_args(argv)
    lines = measure(args)
    if args.record:
        import write_figures

        command = "python bench/site.py " + " ".join(a for a in (argv if argv is not None else sys.argv[1:])
                                                     if a != "--record")
        write_figures.record("site", "\n".join(json.dumps(line, default=str) for line in lines), command.strip())
        write_figures.PAGE.write_text(write_figures.render(), encoding="utf-8")
    return 0


def measure(args) -> list[dict]:
    """Every measurement, printed as it is made; the lines."""
    from deepscholar.site.build import build_site
    from deepscholar.site.publish import publish_site

    extra = f"{history.YEAR}-{args.months + 1:02d}" if args.months < 12 else f"{history.YEAR + 1}-01"
    plan = history.metric_plan()
    goals: dict = {}
    lines: list[dict] = []
    with history.scratch_warehouse("head") as (engine, _home), tempfile.TemporaryDirectory() as work:
        t = time.perf_counter()
        months = history.fill_months(engine, args, plan)
        lines.append(history.emit("fill", months=len(months), seconds=round(time.perf_counter() - t, 1)))
        target = Path(work) / "published"
        bare = build_site(engine, Path(work) / "bare", with_reports=False, with_downloads=False)
        lines.append(history.emit("build", scope="board pages only", files=len(bare.files),
                                  seconds=round(bare.seconds, 1), mb=round(sum(bare.sizes.values()) / 1e6, 2)))
        site = Path(work) / "site"
        full = build_site(engine, site)
        first = publish_site(full, str(target))
        sizes = month_sizes(engine, full, months)
        lines.append(history.emit(
            "build", scope="every route", files=len(full.files), seconds=round(full.seconds, 1),
            mb=round(sum(full.sizes.values()) / 1e6, 2), index_kb=round(full.sizes["index.html"] / 1e3, 1),
            publish_seconds=round(first.seconds, 2), per_month=sizes))
        t = time.perf_counter()
        with engine.begin() as conn:
            history.fill_month(conn, extra, args.queries, args.systems, args.scale, plan)
        history.boards_of_month(engine, extra, args.n_boot, rejudge=False)
        rolled = time.perf_counter() - t
        t = time.perf_counter()
        again = build_site(engine, site, previous=site)  # what `site build --out DIR` and the DAG do
        second = publish_site(again, str(target))
        month13_s = time.perf_counter() - t
        lines.append(history.emit(
            "month13", release=extra, roll_up_seconds=round(rolled, 1), build_seconds=round(again.seconds, 1),
            publish_seconds=round(second.seconds, 2), build_and_publish_seconds=round(month13_s, 1),
            uploaded=second.uploaded, reused=second.reused, files=len(again.files), parts_reused=again.reused,
            parts_rendered=again.rendered))
        worst = max(s["without_reports_mb"] for s in sizes.values())
        goals = {
            "build_s": {"value": round(full.seconds, 1), "goal": GOALS["build_s"]},
            "month13_publish_s": {"value": round(month13_s, 1), "goal": GOALS["month13_publish_s"]},
            "month_board_pages_mb": {"value": worst, "goal": GOALS["month_board_pages_mb"]},
            "index_kb": {"value": round(again.sizes["index.html"] / 1e3, 1), "goal": GOALS["index_kb"]},
        }
        for g in goals.values():
            g["pass"] = g["value"] <= g["goal"]
    lines.append(history.emit("summary", months=args.months, queries=args.queries, systems=args.systems,
                              scale=args.scale, goals=goals, passed=[k for k, g in goals.items() if g["pass"]],
                              failed=[k for k, g in goals.items() if not g["pass"]]))
    return lines


if __name__ == "__main__":
    sys.exit(main())
