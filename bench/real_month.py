"""A real month's release against services that keep their real rate limits, scaled in time.

Generates a synthetic month at real scale (replay/scale_snapshot.py: by default 10,000 submissions, ~15%
passing the filters, ~25 references each), serves it from a replay server in its own process that keeps
each host's rate limit (arXiv API and e-prints one request per 3 s, OpenAlex 10 per s) multiplied by
--time-scale, plus --latency-ms per answer, and runs the release steps that talk to those hosts (search,
filters, extraction and resolution, the latter two in DEEPSCHOLAR_RELEASE_SHARDS slices) twice: with
max_queries 200 and with no cap, each into a fresh schema. Prints one JSON object per run:

  {"run", "candidates", "queries", "requests": {host: n}, "floor_seconds", "wall_seconds", "floor_ratio",
   "peak_rss_mb", "throttled", "early", "unscaled_floor_hours", ...}

floor_seconds is the time the rate limits alone force: per host, requests x interval; hosts run in
parallel, so the largest. floor_ratio = wall_seconds / floor_seconds (goal: <= 1.2 with the cap).
"early" counts requests the server saw less than 0.9 interval after the previous one, "throttled" those it
refused (429) because more than 6 had come within 5 intervals.

Usage: .venv/bin/python bench/real_month.py [--candidates 10000] [--time-scale 0.05] [--no-uncapped]
(embedded PostgreSQL in a throwaway DEEPSCHOLAR_HOME unless --db-url is given).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import resource
import sys
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.warehouse import throwaway_warehouse  # noqa: E402

# Real intervals (seconds between request starts) per host, as path prefixes of the replay server.
HOSTS = {"arxiv_api": ("/api/query", 3.0), "arxiv_eprint": ("/e-print/", 3.0), "openalex": ("/works", 0.1)}


def _serve(snapshot: str, intervals: dict, latency: float, port_pipe) -> None:
    """The replay server in its own process, as a remote host would be (its CPU is not the client's)."""
    from deepscholar.replay.server import ReplayServer

    server = ReplayServer(Path(snapshot))
    server.app.min_intervals = intervals
    server.app.latency = latency
    port_pipe.send(server.port)
    server.serve_forever()


def _release(db_url: str, env: dict, month: str, cap: int | None, out) -> None:
    """The host-bound release steps in a fresh process (its peak RSS is the release's own)."""
    os.environ.update(env)
    from deepscholar import db
    from deepscholar.release import steps
    from deepscholar.release.spec import ReleaseSpec

    engine = db.get_engine(db_url)
    timings = {}
    t0 = time.monotonic()
    ctx = steps.open_release(engine, month, ReleaseSpec.from_env(max_queries=cap or 0, judge="local"))
    for name, run in (("search", steps.search_candidates), ("filter", steps.filter_candidates),
                      ("extract", lambda c: steps.run_sharded(c, steps.extract_exemplars, resolve=True)),
                      ("finish_extract", steps.finish_extraction),
                      ("resolve", lambda c: steps.run_sharded(c, steps.resolve_references))):
        t = time.monotonic()
        run(ctx)
        timings[name] = round(time.monotonic() - t, 2)
    wall = time.monotonic() - t0
    with engine.connect() as conn:
        counts = steps.release_counts(conn, month)
    out.send({"wall_seconds": wall, "step_seconds": timings, "counts": counts,
              "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
              "client_cpu_seconds": round(sum(resource.getrusage(resource.RUSAGE_SELF)[:2]), 2)})


def _pacing(url: str) -> dict:
    with urllib.request.urlopen(f"{url}/_replay/pacing", timeout=30) as resp:
        return json.load(resp)["pacing"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--candidates", type=int, default=10_000)
    parser.add_argument("--refs-per-paper", type=int, default=25)
    # 0.05: 3 s -> 150 ms. The release spends ~25 ms of CPU per request on 2 cores (Atom and LaTeX parsing,
    # upserts); at 0.01 (30 ms) the bench would measure that CPU, which at arXiv's real 3 s is ~1%.
    parser.add_argument("--time-scale", type=float, default=0.05, help="3 s -> 150 ms at 0.05")
    parser.add_argument("--latency-ms", type=float, default=20.0, help="per answer (0.4 s real at 0.05)")
    parser.add_argument("--max-queries", type=int, default=200)
    parser.add_argument("--shards", type=int, default=None, help="default: DEEPSCHOLAR_RELEASE_SHARDS or 4")
    parser.add_argument("--no-uncapped", action="store_true", help="skip the run without a cap")
    parser.add_argument("--snapshot", type=Path, help="reuse (or write) the generated month here")
    parser.add_argument("--db-url", help="a Postgres URL (default: embedded PostgreSQL, throwaway)")
    args = parser.parse_args(argv)
    database = args.db_url or os.environ.get("DEEPSCHOLAR_DB_URL") or "embedded"
    with throwaway_warehouse("deepscholar_real_month_", database=database) as (engine, home):
        return _run(args, engine, home)


def _run(args, engine, home: Path) -> int:
    from deepscholar import db
    from deepscholar.replay.scale_snapshot import ScaleSpec, write_scale_snapshot

    spec = ScaleSpec(candidates=args.candidates, refs_per_paper=args.refs_per_paper)
    snapshot = args.snapshot or home / "snapshot"
    manifest_path = snapshot / "manifest.json"
    if not (manifest_path.exists() and json.loads(manifest_path.read_text()).get("spec") == spec.__dict__):
        t = time.monotonic()
        ctx = mp.get_context("spawn")  # the generator's memory stays out of this process
        proc = ctx.Process(target=write_scale_snapshot, args=(snapshot, spec))
        proc.start()
        proc.join()
        print(f"# generated {snapshot} in {time.monotonic() - t:.1f} s", file=sys.stderr)
    manifest = json.loads(manifest_path.read_text())

    intervals = {prefix: real * args.time_scale for prefix, real in HOSTS.values()}
    ctx = mp.get_context("spawn")
    parent_end, child_end = ctx.Pipe()
    server = ctx.Process(target=_serve, args=(str(snapshot), intervals, args.latency_ms / 1000, child_end),
                         daemon=True)
    server.start()
    url = f"http://127.0.0.1:{parent_end.recv()}"
    db_url = engine.url.render_as_string(hide_password=False)
    env = {"DEEPSCHOLAR_ARXIV_API_URL": f"{url}/api/query", "DEEPSCHOLAR_ARXIV_EPRINT_URL": f"{url}/e-print",
           "DEEPSCHOLAR_ARXIV_OAI_URL": f"{url}/oai2",
           "DEEPSCHOLAR_OPENALEX_URL": url, "DEEPSCHOLAR_CATEGORIES": ",".join(manifest["categories"]),
           "DEEPSCHOLAR_ARXIV_DELAY_SECONDS": str(HOSTS["arxiv_api"][1] * args.time_scale),
           "DEEPSCHOLAR_OPENALEX_INTERVAL_SECONDS": str(HOSTS["openalex"][1] * args.time_scale)}
    if args.shards:
        env["DEEPSCHOLAR_RELEASE_SHARDS"] = str(args.shards)
    runs = [("capped", args.max_queries)] + ([] if args.no_uncapped else [("uncapped", None)])
    try:
        for name, cap in runs:
            with engine.begin() as conn:
                conn.exec_driver_sql("DROP SCHEMA IF EXISTS deepscholar CASCADE")
            db.init_db(engine)
            before = _pacing(url)
            parent, child = ctx.Pipe()
            proc = ctx.Process(target=_release, args=(db_url, env, manifest["month"], cap, child))
            proc.start()
            result = parent.recv()
            proc.join()
            after = _pacing(url)
            requests, floor_by_host, early, throttled, busy = {}, {}, 0, 0, {}
            for host, (prefix, real) in HOSTS.items():
                a, b = after.get(prefix, {}), before.get(prefix, {})
                n = a.get("requests", 0) - b.get("requests", 0)
                requests[host] = n
                floor_by_host[host] = n * real * args.time_scale
                early += a.get("early", 0) - b.get("early", 0)
                throttled += a.get("throttled", 0) - b.get("throttled", 0)
                busy[host] = round(a.get("busy_seconds", 0) - b.get("busy_seconds", 0), 2)
            floor = max(floor_by_host.values())
            counts = result["counts"]
            print(json.dumps({
                "run": name, "max_queries": cap, "candidates": counts["papers_seen"], "queries": counts["queries"],
                "references": counts["references"], "resolved": counts["resolved"],
                "requests": requests, "floor_seconds": round(floor, 2), "wall_seconds": round(result["wall_seconds"], 2),
                "floor_ratio": round(result["wall_seconds"] / floor, 3) if floor else None,
                "peak_rss_mb": result["peak_rss_mb"], "early": early, "throttled": throttled,
                "server_busy_seconds": busy, "client_cpu_seconds": result["client_cpu_seconds"],
                "step_seconds": result["step_seconds"], "time_scale": args.time_scale,
                "latency_ms": args.latency_ms, "shards": int(env.get("DEEPSCHOLAR_RELEASE_SHARDS", "4")),
                "unscaled_floor_hours": round(floor / args.time_scale / 3600, 2),
                "floor_host": max(floor_by_host, key=floor_by_host.get), "dropped": counts["dropped"],
            }), flush=True)
    finally:
        server.terminate()
    return 0


if __name__ == "__main__":
    sys.exit(main())
