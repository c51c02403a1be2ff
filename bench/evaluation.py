"""Evaluation of a month: judge calls per report vs METRICS.md's floor, concurrency efficiency, re-run cost.

Usage: .venv/bin/python bench/evaluation.py [--reports demo|real] [--latency 0.2] [--concurrency 16]
       [--full-concurrency 16 64] [--tracks all | TRACK ...]
--reports demo (default) builds the demo month through the library (embedded Postgres in a throwaway DEEPSCHOLAR_HOME), times the
local judge over it, then judges it again with an LLM judge served by a local OpenAI-compatible server
(the test suite's stub, real HTTP through litellm) that takes `latency` seconds per request and answers
every prompt with a well-formed, prompt-dependent verdict. Per metric it prints requests, requests per
report against the floor, wall time and efficiency = (requests x latency / concurrency) / wall time.
A second full evaluation must make 0 requests.

Then the whole month as `deepscholar evaluate` runs it, at each --full-concurrency, under a fresh judge
name (nothing cached), and one JSON object as the last line: calls per report per metric, and per
concurrency the wall time per report against its floor (calls x latency / concurrency; goal <= 1.25x),
the process CPU per call (an upper bound of the client's: it includes the evaluation's own work), the
roll-up's seconds (timed apart: a fixed cost per month, not per call), and the speed-up over the DeepScholar authors' evaluation code measured under the same conditions (15.3 s per
report, 88 calls per report, 200 ms stub).

--reports real judges the published outputs of six real systems instead (../shared/fixtures: the official
dataset slice imported as release `official`, each system's output imported as an external system; read in
place, copied only to a temporary folder): the same work the authors' 15.3 s per report was measured on.
Judge-free metrics need OpenAlex and are left out; every family's LLM-judged metrics run, after the
tracks' release-time artefacts (RACE rubrics, the claims track's ground truth) are added to the release
as `deepscholar release enrich` would. The claims track stays unscored there with its reason: the slice's
exemplars carry no importance labels, so no query has a ground-truth claim. Besides the in-process
runs it times one cold `deepscholar evaluate` in a fresh process (start-up, imports, first request and
roll-up included: what an operator waits for; --cold-trials times, the median reported beside every trial)
and says whether litellm was imported by the direct path.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
logging.getLogger("werkzeug").setLevel(logging.WARNING)


# The DeepScholar authors' own evaluation code on the same reports against the same 200 ms stub (issue 10).
AUTHORS_SECONDS_PER_REPORT = 15.3


def serve_stub(latency: float, conn) -> None:
    """The judge server in its own process, as a real provider would be: its CPU is not ours."""
    from support.judge_stub import scripted_judge
    from support.openai_stub import OpenAIStub

    with OpenAIStub() as stub:
        stub.default = scripted_judge
        stub.delay = latency
        conn.send(stub.url)
        while conn.recv() != "stop":
            conn.send((stub.requests, stub.max_in_flight, [repr(e) for e in stub.errors]))


def serve_batch_stub(delay: float, conn) -> None:
    """The judge's batch API (and its one-by-one endpoint) in its own process: a batch ends `delay` s after
    its creation. Reports (one-by-one requests, batch lines answered, batches created, errors)."""
    from support.judge_stub import scripted_judge

    from deepscholar.replay.openai_batches import BatchStub

    with BatchStub(answer=scripted_judge, delay=delay) as stub:
        conn.send(stub.url)
        while conn.recv() != "stop":
            conn.send((stub.chat_requests, len(stub.lines_answered), stub.creates, [repr(e) for e in stub.errors]))


class RemoteStub:
    def __init__(self, latency: float, *, batch_delay: float | None = None) -> None:
        """The scripted judge in a process of its own: one by one at `latency` s a request, or (`batch_delay`
        given) its batch API too, answering a batch that long after its creation."""
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")
        self._conn, child = ctx.Pipe()
        target, arg = (serve_stub, latency) if batch_delay is None else (serve_batch_stub, batch_delay)
        self._process = ctx.Process(target=target, args=(arg, child), daemon=True)
        self._process.start()
        self.url = self._conn.recv()

    def stats(self) -> tuple:
        self._conn.send("count")
        return self._conn.recv()

    @property
    def requests(self) -> int:
        return self.stats()[0]

    def close(self) -> None:
        self._conn.send("stop")
        self._process.join(10)


def floors(contexts) -> dict[str, tuple[float, float]]:
    """Per metric: (floor, ceiling) of requests per report by METRICS.md (the tracks' by docs/METRICS.md
    "Tracks"), averaged over the reports. Metrics that share one question (RACE's five, FACT's two, the
    claims track's three) are judged in registry order: the first pays, the others read the cache."""
    from deepscholar.evaluation.metrics.core.claim_coverage import METRIC as CLAIM_COVERAGE
    from deepscholar.evaluation.metrics.reportbench.uncited_claim_support import uncited_sentences

    n = max(len(contexts), 1)
    relevance_per_query: dict[str, set] = {}
    for c in contexts:
        relevance_per_query.setdefault(c.arxiv_id, set()).update(c.cited_arxiv_ids)
    pairs = sum(len({(s.index, k) for s in c.sentences for k in s.citations if k in c.sources}) for c in contexts)
    nuggets = sum(0 if c.is_human_exemplar else math.ceil(len(c.query.nuggets) / 10) for c in contexts)
    organization = sum(0 if c.is_human_exemplar else 2 for c in contexts)
    sentences = sum(len(c.sentences) for c in contexts)
    relevance = sum(len(v) for v in relevance_per_query.values())
    competing = sum(0 if c.is_human_exemplar else 1 for c in contexts)
    sources_with_text = sum(len({s.idx for s in c.cited_sources if s.text.strip()}) for c in contexts)
    # Uncited claim support: one extraction per report with uncited sentences, at most one verdict per sentence.
    uncited = [len(uncited_sentences(c)) for c in contexts]
    return {
        "race_overall": (competing / n, competing / n),
        **dict.fromkeys(("race_comprehensiveness", "race_insight", "race_instruction_following", "race_readability",
                         "effective_citations", "claims_recall", "claims_f1", "reference_recall",
                         "reference_precision"), (0, 0)),
        "citation_accuracy": (0, sources_with_text / n),
        "cited_statement_match": (pairs / n, pairs / n),
        "uncited_claim_support": (sum(1 for u in uncited if u) / n, sum(1 + u for u in uncited if u) / n),
        "claims_precision": (0, 1),
        "organization": (organization / n, organization / n),
        "nugget_coverage": (nuggets / n, nuggets / n),
        "relevance_rate": (relevance / n, relevance / n),
        "reference_coverage": (0, 0),
        "document_importance": (0, 0),
        "citation_precision": (pairs / n, pairs / n),
        "claim_coverage": (sentences / n, sentences * (CLAIM_COVERAGE.w_max + 1) / n),
    }


def stored_bytes_per_report(engine, judge_config: str, n_reports: int) -> dict:
    """What judging one report leaves in the warehouse under one judge config, table by table (rows as stored:
    TOASTed values compressed, no index): its judgments, its scores, and the llm_calls rows those judgments
    name (the audit trail keeps each request and answer). The figure behind a month's disk growth
    (docs/ARCHITECTURE.md). The scratch warehouse holds this one month; the latest run's judgments name
    its own calls."""
    import sqlalchemy as sa

    with engine.connect() as conn:
        calls = conn.execute(sa.text("""
            SELECT count(*), coalesce(sum(pg_column_size(c.*)), 0) FROM deepscholar.llm_calls c
            WHERE c.request_hash IN (SELECT unnest(j.request_hashes) FROM deepscholar.judgments j
                                     WHERE j.judge_config = :j)"""), {"j": judge_config}).one()
        sizes = {t: conn.execute(sa.text(f"SELECT coalesce(sum(pg_column_size(t.*)), 0) FROM deepscholar.{t} t "
                                         "WHERE t.judge_config = :j"), {"j": judge_config}).scalar()
                 for t in ("judgments", "metric_scores")}
    out = {"llm_calls": round(calls[1] / max(n_reports, 1)),
           **{t: round(b / max(n_reports, 1)) for t, b in sizes.items()}}
    out["llm_call_mean_bytes"] = round(calls[1] / max(calls[0], 1))
    return out


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.2)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--full-concurrency", type=int, nargs="+", default=[16, 64])
    parser.add_argument("--cold-trials", type=int, default=3,
                        help="cold `deepscholar evaluate` runs with --reports real (the median is reported)")
    parser.add_argument("--reports", choices=["demo", "real"], default="demo",
                        help="the demo month's synthetic reports, or the fixtures' published real ones")
    parser.add_argument("--tracks", nargs="*", default=[], metavar="TRACK",
                        help="evaluation tracks judged besides the core (demo month; 'all' = every track): their "
                             "release artefacts are built first, and the JSON gives calls per report per track")
    parser.add_argument("--demo-template", metavar="URL",
                        help="clone the demo month from this template database (tests/support/demo_month.py: "
                             "the test suite's) instead of building it (--reports demo)")
    args = parser.parse_args()
    from support.warehouse import throwaway_warehouse

    if args.demo_template and args.reports == "demo":
        from support.demo_month import cloned_demo_month

        with cloned_demo_month(args.demo_template, "deepscholar_bench_eval_") as built:
            return _run(args, built["engine"], built["home"], built)
    with throwaway_warehouse("deepscholar_bench_eval_") as (engine, home):
        return _run(args, engine, home)


REAL_RELEASE = "official"


def build_real_month(engine, home: Path, systems: int | None = None) -> str:
    """The official slice as release `official` and the six published outputs (the first `systems` of them in
    name order, when given) as external systems' reports. Progress lines go to stderr."""
    import shutil

    from support.shared_data import shared_root

    from deepscholar.release.official_import import import_official
    from deepscholar.systems.external import import_reports

    fixtures = shared_root() / "deepscholar_official"
    if not (fixtures / "system_outputs_paper0").is_dir():
        raise SystemExit(f"--reports real needs the shared fixtures: {fixtures} is missing")
    summary = import_official(engine, fixtures, REAL_RELEASE)
    if summary.n_errors:
        raise SystemExit(f"the official import failed: {summary.errors[:3]}")
    for src in sorted((fixtures / "system_outputs_paper0").iterdir())[:systems]:
        system_id = "real_" + src.name.replace("-", "_").replace(".", "")
        root = home / "outputs" / src.name
        shutil.copytree(src, root / "0")  # folder 0: row 0 of the dataset, as the authors ran them
        imported = import_reports(engine, system_id, root, REAL_RELEASE, title_search="corpus")
        print(f"{system_id}: {imported.n_stored} report(s), {imported.n_errors} error(s)", file=sys.stderr)
    return REAL_RELEASE


def _llm_metric_names() -> list[str]:
    from deepscholar.evaluation.metrics import registry
    from deepscholar.evaluation.metrics.base import JudgeFreeMetric

    return [m.name for m in registry.metrics() if not isinstance(m, JudgeFreeMetric)]


def cold_cli_evaluation(month: str, metrics: list[str], api_base: str, concurrency: int, trial: int = 1) -> dict:
    """One `deepscholar evaluate` in a fresh process, timed from its start: fixed costs included. Each trial
    judges under its own judge name, so nothing is answered from the cache."""
    import subprocess

    code = ("import json, sys; from deepscholar.cli import main; code = main(sys.argv[1:]); "
            "print(json.dumps({'litellm_imported': 'litellm' in sys.modules}), file=sys.stderr); sys.exit(code)")
    argv = [sys.executable, "-c", code, "evaluate", "--release", month, "--judge", f"openai/bench-judge-cold-c{concurrency}-t{trial}",
            "--api-base", api_base, "--concurrency", str(concurrency), "--json", "--metrics", *metrics]
    t0 = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "OPENAI_API_KEY": "bench"})
    wall = time.monotonic() - t0
    if done.returncode != 0:
        raise RuntimeError(f"deepscholar evaluate failed: {done.stderr[-2000:]}")
    result = json.loads(done.stdout)
    return {"wall_s": wall, "requests": result["llm_requests"], "unscored_reports": result["unscored_reports"],
            "litellm_imported": json.loads(done.stderr.strip().splitlines()[-1])["litellm_imported"]}


def _run(args, engine, home: Path, built: dict | None = None) -> int:
    import contextlib

    from support.demo_month import build_demo_month

    from deepscholar.evaluation.boards.rollup import roll_up
    from deepscholar.evaluation.judge_spec import JudgeSpec
    from deepscholar.evaluation.judging.report_contexts import load_reports
    from deepscholar.evaluation.judging.runner import judge_metric
    from deepscholar.evaluation.metrics import registry
    from deepscholar.evaluation.pipeline import evaluate_release
    from deepscholar.replay.server import ReplayServer

    t0 = time.monotonic()
    real = args.reports == "real"
    if real:
        month, metric_names, replay = build_real_month(engine, home), _llm_metric_names(), contextlib.nullcontext()
        tracks = list(registry.tracks())  # every family's LLM-judged metrics
        print(f"release {month} imported with the published outputs in {time.monotonic() - t0:.1f} s")
    else:
        how = "cloned from its template" if built else "built"
        built = built or build_demo_month(engine, home)
        tracks = list(registry.tracks()) if "all" in args.tracks else list(args.tracks)
        month, metric_names, replay = (built["month"], list(registry.judged_metric_names(tracks)),
                                       ReplayServer(built["snapshot"]))
        print(f"demo month {month} {how} in {time.monotonic() - t0:.1f} s: {built['generated']}")
    if tracks:  # RACE's rubrics and the claims track's ground truth are release-time artefacts: without them
        # those metrics leave every report unscored and the bench would time nothing for them.
        from deepscholar.release.context import ReleaseContext
        from deepscholar.release.track_artefacts import artefact_tracks, enrich_release

        t0 = time.monotonic()
        enriched = enrich_release(ReleaseContext.load(engine, month), artefact_tracks(tracks))
        print(f"tracks {', '.join(tracks)}: release artefacts in {time.monotonic() - t0:.1f} s: {enriched['summary']}")
    with engine.connect() as conn:
        ids = [r[0] for r in conn.exec_driver_sql(
            "SELECT report_id FROM reports WHERE status = 'ok' ORDER BY report_id")]
    contexts = load_reports(engine, ids)
    print(f"{len(contexts)} ok reports, {sum(len(c.sentences) for c in contexts)} sentences")

    with replay as server:
        if server is not None:
            os.environ["DEEPSCHOLAR_OPENALEX_URL"] = server.openalex_url
            t0 = time.monotonic()
            local = evaluate_release(engine, month, judge="local", metrics=metric_names)
            print(f"\nlocal judge, all metrics + roll-up: {time.monotonic() - t0:.1f} s "
                  f"({local['reports_judged']} report scores, {local['llm_requests']} LLM requests)")

        os.environ.setdefault("OPENAI_API_KEY", "bench")  # the stub accepts any key
        spec = JudgeSpec.parse("openai/bench-judge")
        bounds = floors(contexts)
        print(f"\nLLM judge at {args.latency * 1000:.0f} ms per request, concurrency {args.concurrency}:")
        print(f"{'metric':<22}{'requests':>9}{'per report':>12}{'floor':>8}{'ceiling':>9}"
              f"{'wall s':>9}{'ideal s':>9}{'efficiency':>12}")
        total_requests, total_wall, per_metric = 0, 0.0, {}
        if not real:
            from deepscholar.llm.client import _litellm

            _litellm()  # the demo's figures have always left litellm's ~4 s import out of the first metric
        stub = RemoteStub(args.latency)
        try:
            colds = [cold_cli_evaluation(month, metric_names, stub.url, args.concurrency, trial)
                     for trial in range(1, args.cold_trials + 1)] if real else []
            cold = sorted(colds, key=lambda c: c["wall_s"])[len(colds) // 2] if colds else None
            for metric in metric_names:
                before = stub.requests
                t0 = time.monotonic()
                run = judge_metric(engine, month, metric, spec=spec, api_base=stub.url,
                                   concurrency=args.concurrency)
                wall = time.monotonic() - t0
                requests = stub.requests - before
                ideal = requests * args.latency / args.concurrency
                total_requests += requests
                total_wall += wall
                low, high = bounds.get(metric, (math.nan, math.nan))
                eff = f"{ideal / wall:.2f}" if requests else "-"
                per_metric[metric] = round(requests / len(contexts), 2)
                print(f"{metric:<22}{requests:>9}{requests / len(contexts):>12.2f}{low:>8.2f}{high:>9.2f}"
                      f"{wall:>9.2f}{ideal:>9.2f}{eff:>12}  unscored={run.unscored_reports}")
            ideal_all = total_requests * args.latency / args.concurrency
            print(f"{'all':<22}{total_requests:>9}{total_requests / len(contexts):>12.2f}{'':>17}"
                  f"{total_wall:>9.2f}{ideal_all:>9.2f}{ideal_all / total_wall:>12.2f}")
            errors = stub.stats()[2]
            if errors:
                raise RuntimeError(f"the scripted judge failed: {errors[0]}")
            print("(one metric at a time: each drains its last wave alone)")

            # The whole month as `deepscholar evaluate` runs it: every (metric, system) task at once
            # through one client, under a fresh judge model per concurrency so nothing is cached yet.
            import resource

            per_track: dict[str, float] = {}
            for metric, calls in per_metric.items():
                family = registry.family_of(metric)
                per_track[family] = round(per_track.get(family, 0.0) + calls, 2)
            summary = {"report_set": args.reports, "reports": len(contexts), "latency_ms": args.latency * 1000,
                       "calls_per_report": per_metric, "calls_per_report_per_family": per_track,
                       "tracks": sorted({registry.family_of(m) for m in metric_names} - {registry.CORE}),
                       "authors_seconds_per_report": AUTHORS_SECONDS_PER_REPORT, "runs": []}
            for concurrency in args.full_concurrency:
                judge_name = f"openai/bench-judge-full-c{concurrency}"
                first = stub.requests
                cpu0 = sum(resource.getrusage(resource.RUSAGE_SELF)[:2])
                t0 = time.monotonic()
                full = evaluate_release(engine, month, judge=judge_name, api_base=stub.url,
                                        concurrency=concurrency, roll_up=False, metrics=metric_names)
                wall = time.monotonic() - t0
                cpu = sum(resource.getrusage(resource.RUSAGE_SELF)[:2]) - cpu0
                # The roll-up (bootstrap CIs, paired tests) is a fixed cost per month, not per call.
                t0 = time.monotonic()
                roll_up(engine, month, full["judge_config"])
                rollup_s = time.monotonic() - t0
                requests = stub.requests - first
                ideal = requests * args.latency / concurrency
                print(f"\nfull evaluation at concurrency {concurrency} (all tasks together; roll-up {rollup_s:.2f} s "
                      "after it, not counted): "
                      f"{requests} requests ({requests / len(contexts):.1f} per report), {wall:.2f} s vs ideal "
                      f"{ideal:.2f} s: efficiency {ideal / wall:.2f}; peak in flight {stub.stats()[1]}; "
                      f"{full['unscored_reports']} unscored; {1000 * cpu / max(requests, 1):.1f} ms CPU per call")
                per_report = wall / len(contexts)
                summary["runs"].append({
                    "concurrency": concurrency, "requests": requests,
                    "calls_per_report": round(requests / len(contexts), 1),
                    "wall_per_report_s": round(per_report, 3),
                    "floor_per_report_s": round(ideal / len(contexts), 3),
                    # issue 22's goal: 1.25 x the floor plus 0.25 s per report
                    "goal_per_report_s": round(1.25 * ideal / len(contexts) + 0.25, 3),
                    "wall_vs_floor": round(wall / ideal, 3) if ideal else None,
                    "process_cpu_ms_per_call": round(1000 * cpu / max(requests, 1), 2),
                    "rollup_s": round(rollup_s, 2),
                    "speedup_vs_authors": round(AUTHORS_SECONDS_PER_REPORT / per_report, 1),
                    "unscored_reports": full["unscored_reports"]})
            if cold is not None:
                ideal = cold["requests"] * args.latency / args.concurrency
                summary["cold_cli"] = {
                    "concurrency": args.concurrency, "requests": cold["requests"],
                    "wall_per_report_s": round(cold["wall_s"] / len(contexts), 3),
                    "trials_wall_per_report_s": [round(c["wall_s"] / len(contexts), 3) for c in colds],
                    "floor_per_report_s": round(ideal / len(contexts), 3),
                    "goal_per_report_s": round(1.25 * ideal / len(contexts) + 0.25, 3),
                    "speedup_vs_authors": round(AUTHORS_SECONDS_PER_REPORT * len(contexts) / cold["wall_s"], 1),
                    "unscored_reports": cold["unscored_reports"], "litellm_imported": cold["litellm_imported"]}
                print(f"\ncold `deepscholar evaluate` at concurrency {args.concurrency} in a fresh process "
                      f"(start-up and roll-up included): {cold['wall_s']:.2f} s, {cold['requests']} requests, "
                      f"litellm imported: {cold['litellm_imported']}")
            summary["litellm_imported_in_process"] = "litellm" in sys.modules
            summary["stored_bytes_per_report"] = stored_bytes_per_report(engine, full["judge_config"], len(contexts))
            first = stub.requests
            t0 = time.monotonic()
            again = evaluate_release(engine, month, judge=judge_name, api_base=stub.url,
                                     concurrency=args.full_concurrency[-1], metrics=metric_names)
            summary["rerun_requests"] = stub.requests - first
            print(f"second full evaluation: {stub.requests - first} requests, "
                  f"{again['reports_judged']} reports re-judged, {time.monotonic() - t0:.2f} s")
        finally:
            stub.close()
    from deepscholar.evaluation.boards.leaderboard import format_leaderboard, load_leaderboard

    print()
    print(format_leaderboard(load_leaderboard(engine, month, full["judge_config"]), "table"))
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
