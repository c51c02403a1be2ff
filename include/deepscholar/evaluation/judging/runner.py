"""Judging a month: one metric over the reports that lack a current score for it (the roll-up is the caller's
next step: evaluation/pipeline.py, or the DAG's roll_up task).

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.judging.runner`.
"""

from __future__ import annotations

import contextvars
import json
import logging
import resource
import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.evaluation.judge_spec import LOCAL_JUDGE, JudgeSpec, record_judge_config
from deepscholar.evaluation.judging._pending import PENDING_CONDITION, SHARD_OF_QUERY, pending_params
from deepscholar.evaluation.metrics.base import ItemJudgment, Metric, ReportContext, Score
from deepscholar.settings import current_settings

if TYPE_CHECKING:
    from deepscholar.llm.batch_transport import BatchQueue

__all__ = ["pending_reports", "judge_metric", "judge_units", "judge_job", "JudgeRun", "run_summary"]

log = logging.getLogger("deepscholar.evaluation")

CHUNK_REPORTS = 100  # reports judged and stored per transaction: progress survives a killed task
MAX_PARALLEL_TASKS = 32  # (metric, system) units judged side by side in one process with an LLM judge


@dataclass
class JudgeRun:
    metric: str
    system_id: str | None
    judge_config: str
    metric_version: str
    reports: int = 0
    items: int = 0
    unscored_reports: int = 0
    awaiting_reports: int = 0  # batch mode: left unstored, a request they need waits for its batch
    llm_requests: int = 0  # calls that reached the provider (cache hits excluded)
    cached_calls: int = 0  # calls answered from llm_calls: no request, no cost
    llm_attempts: int = 0  # HTTP requests sent, retried failures included
    prompt_tokens: int = 0  # of the provider requests
    completion_tokens: int = 0
    cost_usd: float | None = None  # of the provider requests; None when the provider's prices are unknown
    seconds: float = 0.0
    peak_rss_mb: float | None = None  # of the process that judged (an Airflow judge task's own process)

    def as_dict(self) -> dict:
        return dict(self.__dict__)


def _concurrency() -> int:
    return current_settings().judge_concurrency


def _api_base() -> str | None:
    return current_settings().judge_api_base


def pending_reports(engine: Engine, release_id: str, metric: Metric, judge_config: str,
                    system_id: str | None = None, shard: Sequence[int] | None = None) -> list[int]:
    """Ok reports of the release without a headline score at the current metric_version (of one system,
    of the queries in one shard [k, n] of evaluation.jobs, when given)."""
    k, n = shard if shard else (0, 1)
    with engine.connect() as conn:
        return list(conn.execute(sa.text(f"""
            SELECT r.report_id FROM reports r
            WHERE r.release_id = :r AND r.status = 'ok' AND (CAST(:s AS text) IS NULL OR r.system_id = :s)
              AND {PENDING_CONDITION} AND (:shards = 1 OR {SHARD_OF_QUERY} = :shard)
            ORDER BY r.system_id, r.arxiv_id"""),
            {"r": release_id, "s": system_id, "shards": n, "shard": k,
             **pending_params(metric, judge_config)}).scalars())


def pending_of_units(engine: Engine, release_id: str, units: Sequence[dict], judge_config: str) -> list[list[int]]:
    """pending_reports of every unit (a dict with metric, system_id and optionally shard [k, n], as
    evaluation.jobs plans them), in the units' order, read with one statement per metric instead of one per
    unit: a month's judge task has hundreds of (metric, query shard, system) units, and each statement
    scans the release's reports."""
    from deepscholar.evaluation.metrics import get_metric

    found: dict[tuple, list[int]] = {}
    with engine.connect() as conn:
        for name in dict.fromkeys(u["metric"] for u in units):
            mine = [u for u in units if u["metric"] == name]
            n = {tuple(u["shard"])[1] if u.get("shard") else 1 for u in mine}
            for shards in sorted(n):
                rows = conn.execute(sa.text(f"""
                    SELECT r.report_id, r.system_id, CASE WHEN :shards = 1 THEN 0 ELSE {SHARD_OF_QUERY} END
                    FROM reports r
                    WHERE r.release_id = :r AND r.status = 'ok' AND {PENDING_CONDITION} AND r.system_id = ANY(:s)
                    ORDER BY r.system_id, r.arxiv_id"""),
                    {"r": release_id, "s": sorted({u["system_id"] for u in mine}), "shards": shards,
                     **pending_params(get_metric(name), judge_config)}).all()
                for report_id, system_id, k in rows:
                    found.setdefault((name, system_id, k, shards), []).append(report_id)
    out = []
    for u in units:
        k, n = tuple(u["shard"]) if u.get("shard") else (0, 1)
        out.append(found.get((u["metric"], u["system_id"], k, n), []))
    return out


@dataclass
class JobShare:
    """What the units of one judge task share: the release's query data, read once (a published release
    does not change), and one pool of `concurrency` threads for every unit's questions, instead of a new
    pool per unit and chunk (a month's task started thousands of threads)."""

    queries: dict = field(default_factory=dict)
    pool: ThreadPoolExecutor | None = None
    # (metric, report content) -> the judgments of the first report with that content, for the others.
    judged: dict = field(default_factory=dict)
    judged_lock: threading.Lock = field(default_factory=threading.Lock)


def content_key(ctx: ReportContext) -> tuple:
    """What a report's judgments depend on (METRICS.md: a metric judges the report's text and cited sources
    against its query, and the human exemplar by its kind): two reports equal on it get equal judgments."""
    sources = tuple((s.idx, s.arxiv_id, s.title, s.text, s.cited_by_count) for s in ctx.sources.values())
    return ctx.release_id, ctx.arxiv_id, ctx.system_kind, ctx.text, sources


_AWAITING = object()  # an item whose judgment needs a request that waits for its batch (batch mode)


def _judge_llm(metric: Metric, client, contexts: Sequence[ReportContext], label: str = "judge calls",
               share: JobShare | None = None) -> dict[int, list[ItemJudgment] | None]:
    """Judge the chunk's items; a report whose content another report of the job already had (an oracle
    writes the same report for every system id; a system registered twice) takes that report's judgments
    instead of rendering, hashing and looking up every one of its prompts again.

    With a client in batch mode (llm/batch_transport.py) an item may need a request the cache cannot answer
    yet: the client records it and raises AwaitingBatch, and the item's report gets None instead of
    judgments (nothing of it is stored this round); its other items still run, so their requests are
    recorded for the same batch."""
    from deepscholar.progress import Progress

    share = share or JobShare()
    mine: list[tuple[ReportContext, Future]] = []
    theirs: list[tuple[ReportContext, Future]] = []
    with share.judged_lock:
        for ctx in contexts:
            key = (metric.name, content_key(ctx))
            found = share.judged.get(key)
            if found is None:
                share.judged[key] = found = Future()
                mine.append((ctx, found))
            else:
                theirs.append((ctx, found))
    work = [(ctx, item) for ctx, _ in mine for item in metric.items(ctx)]
    tracker = Progress(label, len(work))

    from deepscholar.llm.client import AwaitingBatch, track_requests

    def one(pair):
        with track_requests() as hashes:  # the audit trail's rows behind this judgment (costs per system)
            try:
                judgment = metric.judge_llm(client, pair[0], pair[1])
            except AwaitingBatch:
                tracker.advance()
                return _AWAITING
        tracker.advance()
        return replace(judgment, request_hashes=tuple(dict.fromkeys(hashes))) if hashes else judgment

    try:
        answers = client.map(one, work, pool=share.pool)
    except BaseException as exc:
        for _, future in mine:  # whoever waits for these reports fails with the same error
            future.set_exception(exc)
        raise
    out: dict[int, list[ItemJudgment] | None] = {ctx.report_id: [] for ctx in contexts}
    awaiting = set()
    for (ctx, _), judgment in zip(work, answers, strict=True):
        if judgment is _AWAITING:
            awaiting.add(ctx.report_id)
        else:
            out[ctx.report_id].append(judgment)  # type: ignore[union-attr]
    for report_id in awaiting:
        out[report_id] = None
    for ctx, future in mine:
        future.set_result(out[ctx.report_id])
    for ctx, future in theirs:  # set before anyone waits (above), so units cannot wait on each other
        found = future.result()
        out[ctx.report_id] = None if found is None else list(found)
    return out


def _judge_local(metric: Metric, contexts: Sequence[ReportContext], tracker=None) -> dict[int, list[ItemJudgment]]:
    out = {}
    for ctx in contexts:
        items = metric.items(ctx)
        out[ctx.report_id] = list(metric.judge_local(ctx, items)) if items else []
        if tracker is not None:
            tracker.advance()
    return out


# Every judgment of a chunk of reports in one statement (a JSON array of rows), not one per report: a
# month stores tens of thousands of report-metrics, and per-report round trips cost more than judging.
_JUDGMENTS_UPSERT = sa.text("""
    INSERT INTO judgments (report_id, metric, judge_config, item_key, metric_version, label, unscored_reason,
                           explanation, n_calls, request_hashes, judged_at)
    SELECT x.report_id, x.metric, x.judge_config, x.item_key, x.metric_version,
           NULLIF(x.label, 'null'::jsonb), x.unscored_reason, x.explanation, x.n_calls, x.request_hashes, now()
    FROM jsonb_to_recordset(CAST(:rows AS jsonb)) AS x(report_id bigint, metric text, judge_config text,
         item_key text, metric_version text, label jsonb, unscored_reason text, explanation text, n_calls int,
         request_hashes text[])
    ON CONFLICT (report_id, metric, judge_config, item_key) DO UPDATE SET
        metric_version = EXCLUDED.metric_version, label = EXCLUDED.label,
        unscored_reason = EXCLUDED.unscored_reason, explanation = EXCLUDED.explanation,
        n_calls = EXCLUDED.n_calls, request_hashes = EXCLUDED.request_hashes, judged_at = now()""")
# Judgments of those reports whose items are gone (the report was judged before with other items). EXCEPT
# is a hash set operation whatever the planner believes; an anti-join against the kept keys was planned as
# a nested loop (judgments looks nearly empty while a month is judged): 300 x 300 comparisons per chunk.
_STALE_JUDGMENTS_DELETE = sa.text("""
    DELETE FROM judgments j
    USING (SELECT report_id, item_key FROM judgments
           WHERE metric = :metric AND judge_config = :judge_config AND report_id = ANY(:report_ids)
           EXCEPT
           SELECT rid, key FROM unnest(CAST(:kept_reports AS bigint[]), CAST(:kept_keys AS text[])) AS k(rid, key)
          ) AS stale
    WHERE j.report_id = stale.report_id AND j.metric = :metric AND j.judge_config = :judge_config
      AND j.item_key = stale.item_key""")


# Before a chunk's rows are replaced, the rows of another metric version move to the superseded tables
# (migration 0036), so a report's score under every version stays readable; a superseded copy of the version
# stored now is dropped (that version is current again). Primary-key reads: report_id comes first.
_VERSIONED = {  # table: (its natural key with metric_version, its other columns)
    "metric_scores": (("report_id", "metric", "judge_config", "variant", "metric_version"),
                      ("value", "unscored_reason", "n_items", "details", "scored_at")),
    "judgments": (("report_id", "metric", "judge_config", "item_key", "metric_version"),
                  ("label", "unscored_reason", "explanation", "n_calls", "request_hashes", "judged_at")),
}


def _supersede_statements(table: str) -> tuple[sa.TextClause, sa.TextClause]:
    key, values = _VERSIONED[table]
    columns = ", ".join((*key, *values))
    keep = sa.text(f"""
        INSERT INTO superseded_{table} ({columns}, superseded_at)
        SELECT {columns}, now() FROM {table}
        WHERE report_id = ANY(:report_ids) AND metric = :metric AND judge_config = :judge_config
          AND metric_version <> :version
        ON CONFLICT ({", ".join(key)}) DO UPDATE SET
            {", ".join(f"{c} = EXCLUDED.{c}" for c in values)}, superseded_at = now()""")
    drop = sa.text(f"""
        DELETE FROM superseded_{table} WHERE report_id = ANY(:report_ids) AND metric = :metric
          AND judge_config = :judge_config AND metric_version = :version""")
    return keep, drop


_SUPERSEDE = [_supersede_statements(table) for table in _VERSIONED]


def _supersede_other_versions(conn: sa.Connection, params: dict) -> None:
    """Keep the rows of every other version of these reports' metric (published numbers are never rewritten)."""
    for keep, drop in _SUPERSEDE:
        conn.execute(keep, params)
        conn.execute(drop, params)


def store_results(conn: sa.Connection, metric: Metric, judge_config: str,
                  results: Sequence[tuple[int, Sequence[ItemJudgment], Sequence[Score]]]) -> None:
    """Replace these reports' judgments and scores for (metric, judge_config) by the new ones: `results` is
    (report_id, judgments, scores) per report; a constant number of statements for the whole chunk. Rows of
    another metric version are kept in the superseded tables first."""
    base = {"metric": metric.name, "judge_config": judge_config}
    judgment_rows, score_rows = [], []
    for report_id, judgments, scores in results:
        keys = [j.key for j in judgments]
        if len(set(keys)) != len(keys):
            raise ValueError(f"{metric.name}: duplicate item keys for report {report_id}")
        variants = [s.variant for s in scores]
        if set(variants) != set(metric.variants) or len(variants) != len(set(variants)):
            raise ValueError(f"{metric.name}: score() returned variants {variants}, expected {list(metric.variants)}")
        # An unscored item's label is SQL NULL (not JSON null), as the table's CHECK requires.
        judgment_rows += [{**base, "report_id": report_id, "item_key": j.key, "metric_version": metric.version,
                           "label": j.label, "unscored_reason": j.unscored_reason, "explanation": j.explanation,
                           "n_calls": j.calls, "request_hashes": list(j.request_hashes) or None} for j in judgments]
        score_rows += [{**base, "report_id": report_id, "variant": sc.variant, "metric_version": metric.version,
                        "value": sc.value, "unscored_reason": sc.unscored_reason, "n_items": sc.n_items,
                        "details": sc.details or {}} for sc in scores]
    if not results:
        return
    report_ids = [r[0] for r in results]
    _supersede_other_versions(conn, {**base, "report_ids": report_ids, "version": metric.version})
    if judgment_rows:
        conn.execute(_JUDGMENTS_UPSERT, {"rows": json.dumps(judgment_rows)})
    conn.execute(_STALE_JUDGMENTS_DELETE, {**base, "report_ids": report_ids,
                                           "kept_reports": [r["report_id"] for r in judgment_rows],
                                           "kept_keys": [r["item_key"] for r in judgment_rows]})
    db.upsert(conn, "metric_scores", score_rows, key=["report_id", "metric", "judge_config", "variant"])
    conn.execute(sa.text("""
        DELETE FROM metric_scores WHERE report_id = ANY(:report_ids) AND metric = :metric
          AND judge_config = :judge_config AND NOT (variant = ANY(:variants))"""),
        {**base, "report_ids": report_ids, "variants": list(metric.variants)})


def judge_metric(
    engine: Engine,
    release_id: str,
    metric_name: str,
    *,
    system_id: str | None = None,
    shard: Sequence[int] | None = None,
    spec: JudgeSpec = LOCAL_JUDGE,
    api_base: str | None = None,
    api_key: str | None = None,
    concurrency: int | None = None,
    client=None,
    prepared: bool = False,
    share: JobShare | None = None,
    pending: Sequence[int] | None = None,
    batch: BatchQueue | None = None,
) -> JudgeRun:
    """Judge every report of the release (optionally one system's, of one query shard) lacking a current
    score for one metric.

    `client` lets several of these share one LLMClient, so one concurrency bound covers them all;
    `prepared` says the caller already ran the metric's release-wide preparation and recorded the judge
    config (judge_units does, once per metric); `share` is what the units of one judge task share
    (JobShare); `pending` is the reports to judge when the caller read them already (pending_of_units);
    `batch`: a client in batch mode (one round of evaluation.judging.batch_rounds: what the cache cannot
    answer is recorded in this queue for a batch and its report-metric left unstored).
    """
    from deepscholar.evaluation.metrics import get_metric
    from deepscholar.llm.client import track_usage

    started = time.perf_counter()
    metric = get_metric(metric_name)
    run = JudgeRun(metric_name, system_id, spec.config_id, metric.version)
    if pending is None:
        pending = pending_reports(engine, release_id, metric, spec.config_id, system_id, shard)
    if not pending:
        run.seconds = time.perf_counter() - started
        return run
    if client is None and not spec.is_local:
        client = spec.client_for(
            engine, metric_name, api_base=api_base or _api_base(),
            api_key=api_key, concurrency=concurrency or _concurrency(), batch=batch)
    if not prepared:
        prepare_metric(engine, release_id, metric)
        record_judge_config(engine, spec, metric, client)
    label = f"{metric_name} on {release_id} ({system_id or 'all systems'}, {spec.config_id})"
    with track_usage() as usage:
        _judge_pending(engine, metric, spec, client, pending, label, run, share or JobShare())
    _account(run, usage, started)
    log.info("%s on %s (%s, %s): %d reports, %d items, %d unscored, %d LLM requests (%d cached calls), %.1f s, "
             "peak RSS %.0f MB", metric_name, release_id, system_id or "all systems", spec.config_id, run.reports,
             run.items, run.unscored_reports, run.llm_requests, run.cached_calls, run.seconds, run.peak_rss_mb)
    if run.awaiting_reports:
        log.info("%s on %s (%s): %d reports wait for a batch", metric_name, release_id, system_id or "all systems",
                 run.awaiting_reports)
    return run


def prepare_metric(engine: Engine, release_id: str, metric: Metric) -> None:
    """A metric that needs data fixed for the whole release first (document importance: the cited-by counts
    of the papers reports cite, frozen once) prepares it here. Run once per metric before any thread
    judges it: the preparation holds a connection for its lock while it works, and threads queueing for it
    would each hold one more."""
    prepare = getattr(metric, "prepare", None)
    if prepare is not None:
        prepare(engine, release_id)


def _judge_pending(engine: Engine, metric: Metric, spec: JudgeSpec, client, pending: Sequence[int], label: str,
                   run: JudgeRun, share: JobShare) -> None:
    """Judge, score and store the pending reports a chunk at a time (a chunk's writes are one transaction).

    Every chunk is leased first (judging/_leases.py; the local judge too): reports another process is
    judging are skipped, then waited for at the end and judged here if their holder dies or gives them up."""
    from deepscholar.evaluation.judging._leases import Leases
    from deepscholar.evaluation.judging.report_contexts import load_reports
    from deepscholar.progress import Progress

    reports_done = Progress(f"{label}: reports", len(pending)) if client is None else None
    start = 0
    with Leases(engine, metric, spec.config_id, label) as leases:
        for ids in leases.chunks(pending, CHUNK_REPORTS):
            contexts = load_reports(engine, ids, share.queries)
            judged: Mapping[int, list[ItemJudgment] | None]
            if client is None:
                judged = _judge_local(metric, contexts, reports_done)
            else:
                chunk = (f", reports {start + 1}-{start + len(contexts)} of {len(pending)}"
                         if len(pending) > CHUNK_REPORTS else "")
                judged = _judge_llm(metric, client, contexts, f"{label}: judge calls{chunk}", share)
            start += len(contexts)
            results = []
            for ctx in contexts:
                found = judged[ctx.report_id]
                if found is None:  # batch mode: a request it needs waits for its batch; stored next round
                    run.awaiting_reports += 1
                else:
                    results.append(_score(metric, ctx, found, run))
            with engine.begin() as conn:
                store_results(conn, metric, spec.config_id, results)


def _score(metric: Metric, ctx: ReportContext, judgments: Sequence[ItemJudgment],
           run: JudgeRun) -> tuple[int, Sequence[ItemJudgment], Sequence[Score]]:
    scores = metric.score(ctx, judgments)
    run.reports += 1
    run.items += len(judgments)
    headline = next((s for s in scores if s.variant == metric.headline), None)  # none: store_results says so
    if headline is not None and headline.value is None:
        run.unscored_reports += 1
        log.warning("%s unscored for report %s (%s / %s): %s", metric.name, ctx.report_id,
                    ctx.system_id, ctx.arxiv_id, headline.unscored_reason)
    return ctx.report_id, judgments, scores


def _account(run: JudgeRun, usage, started: float) -> None:
    """What the provider served this run (requests, tokens, cost), its time and its process's peak RSS."""
    run.llm_requests, run.cached_calls, run.llm_attempts = usage.requests, usage.cached_calls, usage.attempts
    run.prompt_tokens, run.completion_tokens = usage.request_prompt_tokens, usage.request_completion_tokens
    run.cost_usd = usage.request_cost_usd if usage.requests else 0.0
    run.seconds = time.perf_counter() - started
    run.peak_rss_mb = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def _check_judge_credentials(spec: JudgeSpec, units: Sequence[dict], pending: Sequence[Sequence[int]],
                             clients: dict) -> None:
    """A missing API key is named before anything runs, if any judge model has work (a re-run answered
    entirely from llm_calls needs no key)."""
    from deepscholar.evaluation.metrics import get_metric
    from deepscholar.evaluation.metrics.base import JudgeFreeMetric

    checked: set[str] = set()
    for unit, ids in zip(units, pending, strict=True):
        model = spec.model_for(unit["metric"])
        if ids and model not in checked and not isinstance(get_metric(unit["metric"]), JudgeFreeMetric):
            clients[model].check_credentials()
            checked.add(model)


def judge_units(engine: Engine, release_id: str, units: Sequence[dict], spec: JudgeSpec, *,
                api_base: str | None = None, concurrency: int | None = None, batch: BatchQueue | None = None,
                timeout: float | None = None) -> list[JudgeRun]:
    """Judge (metric, system) units: one after another with the local judge (CPU-bound embeddings), all at
    once through one client per model with an LLM judge, so `concurrency` requests stay in flight for the
    whole set instead of draining at the end of every small unit.

    What is the same for every unit of a metric is done once per metric, not per unit: its release-wide
    preparation, recording the judge config, and reading which reports are pending (pending_of_units).
    `batch`: one collect pass of judging through a batch API, recording in this queue
    (evaluation.judging.batch_rounds)."""
    from deepscholar.evaluation.metrics import get_metric

    clients: dict[str, object] = {}
    if not spec.is_local:
        concurrency = concurrency or _concurrency()
        clients = spec.clients_for(engine, [u["metric"] for u in units], api_base=api_base or _api_base(),
                                   concurrency=concurrency, batch=batch, timeout=timeout)
    pending = pending_of_units(engine, release_id, units, spec.config_id)
    if clients:
        _check_judge_credentials(spec, units, pending, clients)
    for name in dict.fromkeys(u["metric"] for u, ids in zip(units, pending, strict=True) if ids):
        metric = get_metric(name)
        prepare_metric(engine, release_id, metric)
        record_judge_config(engine, spec, metric, clients.get(spec.model_for(name)))

    def unit_run(u: dict, ids: list[int], share: JobShare) -> JudgeRun:
        return judge_metric(engine, release_id, u["metric"], system_id=u["system_id"], shard=u.get("shard"),
                            spec=spec, client=clients.get(spec.model_for(u["metric"])), prepared=True,
                            share=share, pending=ids)

    if spec.is_local:
        share = JobShare()
        return [unit_run(u, ids, share) for u, ids in zip(units, pending, strict=True)]
    # Each unit runs in a copy of this thread's context, so a caller's track_usage() sees its calls.
    contexts = [contextvars.copy_context() for _ in units]
    with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="judge") as questions, \
            ThreadPoolExecutor(max_workers=max(1, min(len(units), MAX_PARALLEL_TASKS))) as pool:
        share = JobShare(pool=questions)
        return list(pool.map(lambda ctx, u, ids: ctx.run(unit_run, u, ids, share), contexts, units, pending))


def judge_job(engine: Engine, job: dict, spec: JudgeSpec = LOCAL_JUDGE, *, budget_usd: float | None = None,
              approved_usd: float | None = None) -> dict:
    """What one mapped Airflow judge task runs: the units of one job planned by evaluation.jobs.

    `budget_usd` (DEEPSCHOLAR_JUDGE_BUDGET_USD, which it may lower, never raise: budget.run_budget) and
    `approved_usd` (the month's total an operator approved over it) bound the month's spend while the job
    runs (evaluation/money/budget.py `limit_for`).

    Its log line and summary say where the task's life went: the process's age when the job started
    (interpreter, Airflow and DAG imports), the first request and the last answer counted from the job's
    start, and the job's own seconds; a small job must not spend most of its life starting."""
    from deepscholar.evaluation.money.budget import judging_scope, limit_for, run_budget
    from deepscholar.llm.client import track_usage
    from deepscholar.llm.spend import billing, spend_limit

    started = time.monotonic()
    age = _process_age()
    budget = run_budget(budget_usd)  # the operator's ceiling holds whatever the caller asks
    limit = limit_for(engine, job["release_id"], spec, budget, approved_usd=approved_usd)
    # A warehouse failure mid-job re-runs the job after a pause: only what is still pending is judged again
    # and answers already received come from the llm_calls cache, so nothing is paid twice. Past the month's
    # budget (and its margin) the job stops before its next request (llm/spend.py), its chunk unstored. Every
    # answer paid for is billed to the month's judging, whether or not its chunk is stored.
    with track_usage() as usage, billing(judging_scope(job["release_id"], spec)), spend_limit(limit):
        runs = db.with_outage_retries(lambda: judge_units(engine, job["release_id"], job["units"], spec),
                                      f"judge job of {job['release_id']}")
    summary = run_summary(job["release_id"], spec, runs)
    summary["timings"] = timings = {
        "process_age_at_start_s": None if age is None else round(age, 2),
        "first_request_s": _since(started, usage.first_attempt_at),
        "last_answer_s": _since(started, usage.last_answer_at),
        "job_s": round(time.monotonic() - started, 2)}
    log.info("judge job of %s: %d reports judged, %d requests; process %s s old at the job's start, first "
             "request at %s s, last answer at %s s, job done at %s s", job["release_id"],
             summary["reports_judged"], summary["llm_requests"], timings["process_age_at_start_s"],
             timings["first_request_s"], timings["last_answer_s"], timings["job_s"])
    return summary


def _since(started: float, moment: float | None) -> float | None:
    return None if moment is None else round(moment - started, 2)


def _process_age() -> float | None:
    """Seconds since this process started (psutil, which Airflow installs; None without it)."""
    try:
        import psutil  # type: ignore[import-untyped]
    except ImportError:
        return None
    return max(0.0, time.time() - psutil.Process().create_time())


def run_summary(release_id: str, spec: JudgeSpec, runs: Sequence[JudgeRun]) -> dict:
    costs = [r.cost_usd for r in runs if r.cost_usd is not None]
    return {"release_id": release_id, "judge_config": spec.config_id, "runs": [r.as_dict() for r in runs],
            "reports_judged": sum(r.reports for r in runs), "llm_requests": sum(r.llm_requests for r in runs),
            "cached_calls": sum(r.cached_calls for r in runs), "llm_attempts": sum(r.llm_attempts for r in runs),
            "prompt_tokens": sum(r.prompt_tokens for r in runs),
            "completion_tokens": sum(r.completion_tokens for r in runs),
            "cost_usd": sum(costs) if costs else None,
            "unscored_reports": sum(r.unscored_reports for r in runs),
            "awaiting_reports": sum(r.awaiting_reports for r in runs),
            "peak_rss_mb": max((r.peak_rss_mb for r in runs if r.peak_rss_mb), default=None)}
