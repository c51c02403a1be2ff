"""Generation half of the demo: wall time per offline system, and deepscholar_base's LLM calls per report.

Usage: .venv/bin/python bench/generation.py [--max-queries N]   (default: all 8 of the demo month)
Builds the demo release (library path, embedded Postgres in a throwaway DEEPSCHOLAR_HOME), times
`generate_release` for the offline systems, then runs deepscholar_base against a local
OpenAI-compatible server (the test suite's stub, real HTTP through litellm) with a cooperative scripted
model and compares its calls per stage with the paper's design: N query-writing calls, one filter call
per batch of ≤10 new candidates, one ranking call, one aggregation call.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

import logging  # noqa: E402

logging.getLogger("werkzeug").setLevel(logging.WARNING)
LISTED = re.compile(r"^\[(\d+)\] Title:", re.MULTILINE)


def cooperative_model(body: dict) -> str:
    prompt = next(m["content"] for m in body["messages"] if m["role"] == "user")
    numbers = [int(n) for n in LISTED.findall(prompt)]
    if "search queries for an academic search engine" in prompt:
        return '["retrieval augmented generation", "evaluation of language models"]'
    if "Search results (title and abstract of each)" in prompt:
        return json.dumps(numbers)
    if "Candidate papers (title and abstract of each)" in prompt:
        k = int(re.search(r"Return the (\d+) most important", prompt).group(1))
        return json.dumps(numbers[:k])
    cites = " ".join(f"Work [{n}] is related." for n in numbers)
    return "## Related Work\n\n" + cites


def main() -> int:
    import argparse

    from support.warehouse import throwaway_warehouse

    parser = argparse.ArgumentParser()
    parser.add_argument("--max-queries", type=int, default=None, help="cap the demo month's queries (tests)")
    args = parser.parse_args()
    with throwaway_warehouse("deepscholar_bench_gen_") as (engine, home):
        return _run(engine, home, args.max_queries)


def _run(engine, home: Path, max_queries: int | None = None) -> int:
    from support.openai_stub import OpenAIStub
    from support.settings import replay_settings

    from deepscholar.release.spec import ReleaseSpec
    from deepscholar.release.steps import build_release
    from deepscholar.replay.demo_snapshot import write_demo_snapshot
    from deepscholar.replay.server import ReplayServer
    from deepscholar.systems.generation import generate_release
    from deepscholar.systems.registry import add_system

    month = "2025-06"
    snapshot = home / "snapshot"
    write_demo_snapshot(snapshot, month=month)
    categories = json.loads((snapshot / "manifest.json").read_text())["categories"]
    with ReplayServer(snapshot) as server:
        spec = ReleaseSpec(categories=categories, **({"max_queries": max_queries} if max_queries else {}))
        build_release(engine, month, spec, replay_settings(server))
    print(f"offline systems (library path, {max_queries or 8} queries each):")
    for kind in ("human_exemplar", "oracle", "extractive"):
        add_system(engine, kind, kind)
        t0 = time.monotonic()
        summary = generate_release(engine, month, [kind])
        print(f"  {kind:<15} {time.monotonic() - t0:6.2f} s  {summary}")

    with OpenAIStub() as stub:
        stub.default = cooperative_model
        config = {"model": "openai/bench-model", "api_base": stub.url, "api_key_env": "BENCH_KEY"}
        os.environ["BENCH_KEY"] = "test"
        # A key variable must be on the allow-list (systems/config_schema.py): this bench's own, for its stub.
        os.environ["DEEPSCHOLAR_SYSTEM_KEY_VARIABLES"] = "BENCH_KEY"
        add_system(engine, "deepscholar_base", "deepscholar_base", config)
        t0 = time.monotonic()
        summary = generate_release(engine, month, ["deepscholar_base"])
        elapsed = time.monotonic() - t0
        requests_first = stub.requests
        generate_release(engine, month, ["deepscholar_base"])  # nothing missing: no new requests
    with engine.connect() as conn:
        traces = [r[0] for r in conn.exec_driver_sql(
            "SELECT trace FROM reports WHERE system_id = 'deepscholar_base' AND status = 'ok'")]
    print(f"\ndeepscholar_base against a local OpenAI-compatible server: {summary}, {elapsed:.2f} s")
    print(f"  HTTP requests: {requests_first} for {len(traces)} reports "
          f"({requests_first / max(len(traces), 1):.1f} per report); re-run added {stub.requests - requests_first}")
    for trace in traces[:3]:
        print(f"  calls per stage {trace.get('calls')}; stage counts {trace.get('counts')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
