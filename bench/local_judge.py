"""An open model as the judge, served on this machine (issue 36): the demo month judged through
llama-cpp-python's OpenAI-compatible server on SmolLM2-135M-Instruct (`make localjudge`), with the project's
real client, free and with constrained output, against the local judge.

In a throwaway warehouse (the local PostgreSQL server when it answers, else the embedded one) the demo
month is built, its `--metrics` are judged for `--system` by the local judge (the reference), then the
server is started and the same questions are asked twice: unconstrained (`openai/smollm2`) and with each
question's schema (`openai/smollm2;output=json_object`, the shape this server turns into a grammar). One
JSON line per mode:
  reports, items, scored / unscored items (and the unscored reasons, by their first words), answers (every
  complete() behind the items, re-asks included), parse_failures = answers that could not be used
  (answers - scored items) and their rate, requests (distinct provider requests), output tokens per
  request (median, max) against the budgets (over_budget: more tokens than the request's max_tokens;
  cut: finish reason "length"), wall seconds and seconds per report, and agreement with the local judge per
  metric (percent agreement and Cohen's kappa from `judges compare`).
Then one line `busy_server` (when a core metric is left that no mode asked): `deepscholar evaluate` on it with
a 0.3 s timeout against the one-slot server (exit code, seconds, the message it ends with: "answers, but too
slowly ... busy, not down ...").

Usage: .venv/bin/python bench/local_judge.py [--system extractive] [--metrics relevance_rate,nugget_coverage]
  [--modes free,json_object] [--query-shard 0/1] [--timeout 300] [--concurrency 1] [--threads 2]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import sqlalchemy as sa  # noqa: E402

MODEL = "openai/smollm2"
# The busy-server line asks the first of these that no mode asked. Short prompts first, so the line ends
# sooner: organization's two whole reports keep the one-slot server generating for minutes on 2 cores. (Its
# probe of GET /models, which llama-cpp-python answers only between generations, then stays silent: the
# client reads a taken, silent connection as busy, openai_compatible.probe.)
CORE_JUDGED = ("citation_precision", "relevance_rate", "claim_coverage", "nugget_coverage", "organization")


def judge_config_of(output: str | None) -> str:
    return MODEL + (f";output={output}" if output else "")


def judge_mode(engine, month: str, api_base: str, system: str, metrics: list[str], output: str | None, *,
               timeout: float, concurrency: int, query_shard: tuple[int, int] = (0, 1)) -> dict:
    """Judge `metrics` of `system`'s reports through the server under one output mode; its figures.
    `query_shard` (k, n): only query shard k of n (the judge jobs' own split of a month, by a hash of the id)."""
    from deepscholar.evaluation.boards.rollup import roll_up
    from deepscholar.evaluation.judge_spec import JudgeSpec
    from deepscholar.evaluation.judging.jobs import plan_units
    from deepscholar.evaluation.judging.runner import judge_units

    spec = JudgeSpec.parse(judge_config_of(output))
    config = spec.config_id
    k, n = query_shard
    units = [u for u in plan_units(engine, month, [system], metrics, spec, shards=n) if n == 1 or u["shard"][0] == k]
    started = time.perf_counter()
    judge_units(engine, month, units, spec, api_base=api_base, concurrency=concurrency, timeout=timeout)
    roll_up(engine, month, config)
    wall = time.perf_counter() - started
    figures = mode_figures(engine, month, config, system, wall)
    compared = compare_cli(engine, month, config)
    figures["agreement_with_local"] = {
        m["metric"]: {"n_items": m["n_items"], "percent_agreement": _round(m["percent_agreement"]),
                      "cohen_kappa": _round(m["cohen_kappa"])} for m in compared["metrics"]}
    return {"measure": "local_judge", "output": output or "free", **figures}


def cli(engine, *argv: str) -> subprocess.CompletedProcess:
    """`deepscholar ARGV` as a user runs it: a new process on this warehouse."""
    env = {**os.environ, "DEEPSCHOLAR_DB_URL": engine.url.render_as_string(hide_password=False)}
    return subprocess.run([sys.executable, "-m", "deepscholar.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=600)


def compare_cli(engine, month: str, judge_config: str) -> dict:
    """`deepscholar judges compare --a local --b <judge_config> --format json`: its JSON."""
    done = cli(engine, "judges", "compare", "--release", month, "--a", "local", "--b", judge_config, "--format", "json")
    if done.returncode != 0:
        raise RuntimeError(f"deepscholar judges compare exited {done.returncode}: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout)


def busy_server(engine, month: str, api_base: str, system: str, metric: str) -> dict:
    """`deepscholar evaluate` with a timeout far below one answer's time (0.3 s), as a user with the wrong
    setting would run it: the run must stop saying the server is busy, not down, naming the settings."""
    started = time.perf_counter()
    done = cli(engine, "evaluate", "--release", month, "--judge", MODEL, "--metrics", metric, "--system", system,
               "--api-base", api_base, "--concurrency", "2", "--timeout", "0.3")
    lines = [line for line in done.stderr.splitlines() if line.startswith("deepscholar:")]
    return {"measure": "busy_server", "metric": metric, "exit_code": done.returncode,
            "seconds": round(time.perf_counter() - started, 1), "message": lines[-1] if lines else done.stderr[-500:]}


def mode_figures(engine, month: str, judge_config: str, system: str, wall: float) -> dict:
    """What the stored judgments and their audited requests say about one judge config's run."""
    with engine.connect() as conn:
        items = conn.execute(sa.text("""
            SELECT j.report_id, j.unscored_reason, j.n_calls FROM judgments j JOIN reports r USING (report_id)
            WHERE r.release_id = :m AND r.system_id = :s AND j.judge_config = :j"""),
            {"m": month, "s": system, "j": judge_config}).all()
        calls = conn.execute(sa.text("""
            SELECT DISTINCT c.request_hash, c.completion_tokens, c.response -> 'choices' -> 0 ->> 'finish_reason',
                   (c.request -> 'params' ->> 'max_tokens')::int, c.latency_ms
            FROM judgments j JOIN reports r USING (report_id)
            CROSS JOIN LATERAL unnest(j.request_hashes) AS h (request_hash)
            JOIN llm_calls c ON c.request_hash = h.request_hash
            WHERE r.release_id = :m AND r.system_id = :s AND j.judge_config = :j"""),
            {"m": month, "s": system, "j": judge_config}).all()
    scored = sum(reason is None for _, reason, _ in items)
    answers = sum(n for _, _, n in items)
    tokens = [c[1] for c in calls if c[1] is not None]
    reports = len({report for report, _, _ in items})
    reasons = Counter(" ".join(reason.split()[:6]) for _, reason, _ in items if reason is not None)
    return {
        "judge_config": judge_config, "reports": reports, "items": len(items), "scored": scored,
        "unscored": len(items) - scored, "unscored_reasons": dict(reasons.most_common(5)),
        "answers": answers, "parse_failures": answers - scored,
        "parse_failure_rate": _round((answers - scored) / answers) if answers else None,
        "requests": len(calls),
        "output_tokens_median": statistics.median(tokens) if tokens else None,
        "output_tokens_max": max(tokens) if tokens else None,
        "over_budget": sum(1 for c in calls if c[3] is not None and (c[1] or 0) > c[3]),
        "cut_at_budget": sum(1 for c in calls if c[2] == "length"),
        "request_seconds_median": _round(statistics.median(c[4] for c in calls) / 1000) if calls else None,
        "wall_seconds": round(wall, 1), "seconds_per_report": round(wall / reports, 1) if reports else None,
    }


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def run(engine, month: str, api_base: str, system: str, metrics: list[str], modes: list[str | None], *,
        timeout: float, concurrency: int, query_shard: tuple[int, int] = (0, 1)) -> list[dict]:
    """The modes one after the other, on a month whose `metrics` the local judge already judged."""
    return [judge_mode(engine, month, api_base, system, metrics, output, timeout=timeout, concurrency=concurrency,
                       query_shard=query_shard) for output in modes]


@contextlib.contextmanager
def _demo_month(template_url: str | None) -> Iterator[dict]:
    """The demo month in a throwaway warehouse: built, or cloned from a template database when one is given."""
    from support.demo_month import build_demo_month, cloned_demo_month
    from support.warehouse import throwaway_warehouse

    if template_url:
        with cloned_demo_month(template_url, "deepscholar_localjudge_") as built:
            yield built
        return
    with throwaway_warehouse("deepscholar_localjudge_", database="auto") as (engine, home):
        yield {"engine": engine, **build_demo_month(engine, home)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", default="extractive")
    parser.add_argument("--metrics", default="relevance_rate,nugget_coverage")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per request (one slot: queueing counts)")
    parser.add_argument("--concurrency", type=int, default=1)
    parser.add_argument("--threads", type=int, default=2, help="the server's CPU threads")
    parser.add_argument("--modes", default="free,json_object", help="free and/or constrained output modes")
    parser.add_argument("--query-shard", default="0/1", metavar="K/N",
                        help="judge only query shard K of N (the judge jobs' split of a month by a hash of the arXiv "
                             "id; the tests' size), e.g. 3/8: one of the demo month's queries")
    parser.add_argument("--demo-template", metavar="URL",
                        help="clone the demo month from this template database (tests/support/demo_month.py: "
                             "the test suite's) instead of building it")
    args = parser.parse_args()
    metrics = [m.strip() for m in args.metrics.split(",") if m.strip()]
    modes = [None if m.strip() == "free" else m.strip() for m in args.modes.split(",") if m.strip()]
    k, _, n = args.query_shard.partition("/")
    query_shard = (int(k), int(n or 1))

    from support.llama_server import local_judge_server
    from support.warehouse import environment

    from deepscholar.evaluation.pipeline import evaluate_release
    from deepscholar.replay.server import ReplayServer

    with _demo_month(args.demo_template) as built:
        engine, month = built["engine"], built["month"]
        with ReplayServer(built["snapshot"]) as replay, environment(
                DEEPSCHOLAR_OPENALEX_URL=replay.openalex_url, OPENAI_API_KEY=os.environ.get("OPENAI_API_KEY", "local")):
            evaluate_release(engine, month, judge="local", metrics=metrics, systems=[args.system])
            with local_judge_server(n_threads=args.threads) as api_base:
                for line in run(engine, month, api_base, args.system, metrics, modes, timeout=args.timeout,
                                concurrency=args.concurrency, query_shard=query_shard):
                    print(json.dumps(line), flush=True)
                unjudged = [m for m in CORE_JUDGED if m not in metrics]  # a question no mode asked yet
                if unjudged:
                    print(json.dumps(busy_server(engine, month, api_base, args.system, unjudged[0])), flush=True)


if __name__ == "__main__":
    main()
