"""Client CPU per LLM call: what our process spends on one judge request when the provider costs nothing.

Usage: .venv/bin/python bench/llm_client_cpu.py [--calls 300] [--concurrency 1 16 64] [--transports direct litellm]
       [--profile]
The OpenAI-compatible stub (tests/support/openai_stub.py) answers at 0 ms in its own process, so the
process CPU time measured here (user + system, all threads) is the client's alone: request building,
litellm's per-call work, the HTTP exchange, response parsing, cost and usage accounting, and the
llm_calls cache write in PostgreSQL (embedded, throwaway). Every call is a distinct prompt (no cache hit).
Prints one JSON object: per transport (the direct OpenAI-compatible path, litellm) and concurrency, CPU ms
per call (median of 3 rounds) and wall ms per call, and litellm's CPU per call over the direct path's.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from evaluation import RemoteStub  # noqa: E402  (bench/evaluation.py: the stub in its own process)
from support.warehouse import throwaway_warehouse  # noqa: E402


def _round(client, calls: int, concurrency: int, tag: str) -> tuple[float, float]:
    prompts = [[{"role": "user", "content": f"{tag} question {i}: is it supported? Answer as JSON."}]
               for i in range(calls)]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    if concurrency == 1:
        for messages in prompts:
            client.complete(messages, purpose="bench")
    else:
        with ThreadPoolExecutor(concurrency) as pool:
            list(pool.map(lambda m: client.complete(m, purpose="bench"), prompts))
    return (time.process_time() - cpu0) * 1000 / calls, (time.perf_counter() - wall0) * 1000 / calls


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 16, 64])
    parser.add_argument("--transports", nargs="+", default=["direct", "litellm"],
                        help="DEEPSCHOLAR_LLM_TRANSPORT values to measure side by side")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="print the top of a cProfile of one round")
    parser.add_argument("--sort", default="cumulative", help="cProfile sort key (cumulative, tottime)")
    args = parser.parse_args()

    os.environ.setdefault("OPENAI_API_KEY", "bench")
    with throwaway_warehouse("deepscholar_bench_cpu_") as (engine, _home):
        out = _measure(args, engine)
    print(json.dumps(out))
    return 0


def _measure(args, engine) -> dict:
    from deepscholar.llm.client import LLMClient

    stub = RemoteStub(0.0)
    out: dict = {"calls": args.calls, "rounds": args.rounds, "by_transport": {}}
    try:
        for transport in args.transports:  # side by side in one run: the ratio is what the noise spares
            os.environ["DEEPSCHOLAR_LLM_TRANSPORT"] = transport
            by_concurrency = out["by_transport"].setdefault(transport, {})
            for concurrency in args.concurrency:
                client = LLMClient(engine, "openai/bench-cpu", api_base=stub.url, concurrency=concurrency)
                _round(client, 20, concurrency, f"{transport}-warm-{concurrency}")  # imports, connections
                rounds = [_round(client, args.calls, concurrency, f"{transport}-c{concurrency}-r{r}")
                          for r in range(args.rounds)]
                by_concurrency[str(concurrency)] = {
                    "cpu_ms_per_call": round(statistics.median(c for c, _ in rounds), 2),
                    "wall_ms_per_call": round(statistics.median(w for _, w in rounds), 2),
                    "cpu_ms_per_call_rounds": [round(c, 2) for c, _ in rounds],
                }
        if {"direct", "litellm"} <= set(args.transports):
            out["litellm_over_direct_cpu"] = {
                c: round(out["by_transport"]["litellm"][c]["cpu_ms_per_call"]
                         / out["by_transport"]["direct"][c]["cpu_ms_per_call"], 2)
                for c in out["by_transport"]["direct"]}
        if args.profile:
            import cProfile
            import pstats

            client = LLMClient(engine, "openai/bench-cpu", api_base=stub.url, concurrency=1)
            profiler = cProfile.Profile()
            profiler.enable()
            _round(client, 100, 1, "profile")
            profiler.disable()
            pstats.Stats(profiler, stream=sys.stderr).sort_stats(args.sort).print_stats(40)
    finally:
        stub.close()
    return out


if __name__ == "__main__":
    sys.exit(main())
