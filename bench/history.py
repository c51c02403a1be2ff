"""A year of a live benchmark (issue 34): N real-size months in a scratch warehouse, then every reader and the
next month's jobs timed against it.

Usage: .venv/bin/python bench/history.py [--months 12] [--queries 200] [--systems 20] [--scale 1.0]
  [--requests 200] [--concurrency 20] [--load-readers 50] [--readers-seconds 60]
Database: a new database on the local server (tests/support/warehouse.py's SERVER_ADMIN_URL) when it
answers, else the embedded PostgreSQL under a throwaway DEEPSCHOLAR_HOME; dropped / stopped afterwards.
Prints one JSON line per measurement ({"measure": ..., ...}) and a last {"measure": "summary", "goals": ...}.

Why a scratch database of its own rather than throwaway_warehouse: the upgrade is measured from the previous
migration head (revisions only go forward), so the warehouse is created at that revision, the big tables
are filled there (the head revision does not touch them), the upgrade to head is timed, and the board
tables are then written by the project's own roll-up at head.

The fill. Written by the project's own code: every board (roll_up, publish_board: board_versions, core
and track boards, agreement; every --rejudge-every-th month re-judged, i.e. a second published version)
and the judge-vs-humans agreement (store_agreement). Written by bulk INSERT ... SELECT generate_series (the
judge would take days): releases (published), queries with their papers, exemplar references, nuggets, RACE
rubrics, ground-truth claims, track artefacts, systems, reports (1 % system_error), report sources,
judgments, metric scores, LLM-call audit rows, annotation samples / items / human labels, drift checks,
benchmark runs and the corpus. These rows keep every constraint (keys, checks, foreign keys) and what the
pipeline guarantees: scores and judgments only for ok reports; every stored variant of every registered
metric (2 % of headline scores unscored, with a reason); judgments only for metrics that ask a judge, at
their metric_version; every judgment's request_hashes name an llm_calls row (one batched call per report
and metric); one system build per system and month; labelled items are judged items; RACE rubrics of the
four dimensions, weights summing to 1, 3 criteria each; ground-truth claims for exactly the important
references. Statistics are refreshed (ANALYZE) after the fill, as the judge job does before judging. The
GX suites the DAGs run then check every month: reports, track artefacts, board (line "fill").
"""

from __future__ import annotations

import argparse
import compileall
import contextlib
import json
import math
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

import sqlalchemy as sa  # noqa: E402
from support.warehouse import environment, throwaway_warehouse  # noqa: E402

JUDGE = "llm:openai/gpt-4o"
YEAR = 2090  # far from any real month
CATEGORIES = ("cs.CL", "cs.LG", "cs.AI", "cs.IR")
# Judged items per report and metric (~45 a report, as a real month's judge run stores).
ITEMS = {"organization": 1, "nugget_coverage": 10, "relevance_rate": 5, "citation_precision": 8, "claim_coverage": 5,
         "race_overall": 1, "race_comprehensiveness": 1, "race_insight": 1, "race_instruction_following": 1,
         "race_readability": 1, "citation_accuracy": 4, "cited_statement_match": 3, "uncited_claim_support": 2,
         "claims_precision": 2}
GOALS = {"page_p95_1_ms": 150, "page_p95_20_ms": 1000, "load_errors": 0, "cli_cold_s": 1.5, "month13_ratio": 1.2,
         "export_one_s": 60}
BIG = ("judgments", "metric_scores")


def emit(measure: str, **fields) -> dict:
    line = {"measure": measure, **fields}
    print(json.dumps(line, default=str), flush=True)
    return line


def say(text: str) -> None:
    print(f"# {time.strftime('%H:%M:%S')} {text}", file=sys.stderr, flush=True)


@contextlib.contextmanager
def scratch_warehouse(revision: str) -> Iterator[tuple[sa.Engine, Path]]:
    """An empty warehouse at `revision` (engine, home), on the local server when it answers; gone afterwards.
    DEEPSCHOLAR_DB_URL points at it inside the block, so the CLI processes find it."""
    with throwaway_warehouse("deepscholar_bench_history_", database="auto", revision=revision) as (engine, home), \
            environment(DEEPSCHOLAR_DB_URL=engine.url.render_as_string(hide_password=False)):
        yield engine, home


# ------------------------------------------------------------------------------------------------ the fill

def metric_plan() -> list[dict]:
    from deepscholar.evaluation.metrics import registry

    return [{"name": m.name, "variants": list(m.variants), "headline": registry.headline_variant(m.name),
             "version": m.version, "items": ITEMS.get(m.name, 0)} for m in registry.metrics()]


def fill_static(conn, n_systems: int, corpus: int) -> None:
    conn.execute(sa.text("INSERT INTO judge_configs (judge_config, kind, model) VALUES (:j, 'llm', 'openai/gpt-4o') "
                         "ON CONFLICT DO NOTHING"), {"j": JUDGE})
    conn.execute(sa.text("""
        INSERT INTO systems (system_id, kind, version, config)
        SELECT format('hist_sys_%s', lpad(i::text, 2, '0')), 'external', '1', jsonb_build_object('seed', i)
        FROM generate_series(0, :n - 1) i"""), {"n": n_systems})
    # The corpus the search track reads: papers of the years before the months, titles and abstracts of
    # realistic length (its tsvector and GIN index are what cost).
    conn.execute(sa.text("""
        INSERT INTO corpus (arxiv_id, title, abstract, authors, published, categories, source)
        SELECT format('89%s.%s', lpad((i / 99999 % 100)::text, 2, '0'), lpad((i % 99999)::text, 5, '0')),
               format('A study of retrieval model %s for scientific question %s', i, i % 977),
               repeat(format('We study method %s on benchmark %s and report gains in recall and precision. ', i,
                             i % 313), 8),
               '["A. Author", "B. Author"]'::jsonb, TIMESTAMPTZ '2080-01-01' + i * INTERVAL '15 minutes',
               jsonb_build_array((ARRAY['cs.CL','cs.LG','cs.AI','cs.IR'])[1 + i % 4]), 'arxiv'
        FROM generate_series(0, :n - 1) i"""), {"n": corpus})


def fill_month(conn, month: str, n_queries: int, n_systems: int, scale: float, plan: list[dict]) -> None:
    """One published month at real size, every table the pipeline writes for it except the boards."""
    p = {"r": month, "nq": n_queries, "ns": n_systems, "w": f"{month}-01T00:00:00+00:00", "j": JUDGE,
         "pfx": f"{month[2:4]}{month[5:7]}", "nrefs": max(2, round(20 * scale)), "nsrc": max(1, round(8 * scale)),
         "cats": list(CATEGORIES)}
    x = lambda sql, **extra: conn.execute(sa.text(sql), p | extra)  # noqa: E731
    x("""INSERT INTO releases (release_id, source, window_start, window_end, status, counts, gx_success,
                               published_at, base_id, version, code_version)
         VALUES (:r, 'pipeline', CAST(:w AS timestamptz), CAST(:w AS timestamptz) + INTERVAL '1 month', 'published',
                 jsonb_build_object('queries', :nq), true, now(), :r, 1, 'bench')""")
    x("""INSERT INTO papers (arxiv_id, version, title, abstract, categories, primary_category, published)
         SELECT format('%s.%s', :pfx, lpad(q::text, 5, '0')), 1, format('Query paper %s of %s', q, :r), 'abstract',
                jsonb_build_array((CAST(:cats AS text[]))[1 + q % 4]), (CAST(:cats AS text[]))[1 + q % 4],
                CAST(:w AS timestamptz) + q * INTERVAL '3 hours'
         FROM generate_series(0, :nq - 1) q""")
    x("""INSERT INTO release_queries (release_id, arxiv_id, row_index, title, abstract, published, venue,
                                      section_title, section_raw_latex, section_text, word_count, n_cite_keys)
         SELECT :r, format('%s.%s', :pfx, lpad(q::text, 5, '0')), q, format('Query paper %s of %s', q, :r),
                repeat('An abstract sentence about the paper. ', 6), CAST(:w AS timestamptz) + q * INTERVAL '3 hours',
                'ACL', 'Related Work', repeat('Prior work \\cite{k1} studies this. ', 40),
                repeat('Prior work [1] studies this. ', 40), 200, :nrefs
         FROM generate_series(0, :nq - 1) q""")
    x("""INSERT INTO exemplar_references (release_id, arxiv_id, cite_key, bib_title, bib_year, resolved_arxiv_id,
                                          resolved_title, resolution_method, cited_by_count, is_important)
         SELECT :r, q.arxiv_id, 'k' || k, format('Reference %s', k), '2089',
                format('89%s.%s', lpad(((q.row_index * 37 + k) / 99999 % 100)::text, 2, '0'),
                       lpad(((q.row_index * 37 + k) % 99999)::text, 5, '0')),
                format('Reference %s', k), 'arxiv', k * 3, k % 3 = 0
         FROM release_queries q CROSS JOIN generate_series(1, :nrefs) k WHERE q.release_id = :r""")
    x("""INSERT INTO nuggets (release_id, arxiv_id, nugget_idx, text, importance, judge_config)
         SELECT :r, q.arxiv_id, n, format('Nugget %s: a fact the section states.', n),
                CASE WHEN n < 4 THEN 'vital' ELSE 'okay' END, :j
         FROM release_queries q CROSS JOIN generate_series(0, 9) n WHERE q.release_id = :r""")
    x("""INSERT INTO race_rubrics (release_id, arxiv_id, dimension, weight, criteria, judge_config, prompt_version)
         SELECT :r, q.arxiv_id, d, 0.25,
                jsonb_build_array(jsonb_build_object('criterion', 'covers ' || d, 'explanation', 'why', 'weight', 0.5),
                                  jsonb_build_object('criterion', 'explains ' || d, 'explanation', 'why', 'weight', 0.25),
                                  jsonb_build_object('criterion', 'cites for ' || d, 'explanation', 'why', 'weight', 0.25)),
                :j, 'race_rubric_v1'
         FROM release_queries q CROSS JOIN unnest(ARRAY['comprehensiveness','insight','instruction_following',
                                                        'readability']) d WHERE q.release_id = :r""")
    x("""INSERT INTO gt_claims (release_id, arxiv_id, cite_key, work_title, connection, evidence, judge_config,
                                prompt_version)
         SELECT :r, e.arxiv_id, e.cite_key, e.bib_title, 'builds on the cited method', 'the section says so', :j,
                'claims_gt_v1'
         FROM exemplar_references e WHERE e.release_id = :r AND e.is_important""")
    x("""INSERT INTO release_track_artefacts (release_id, track, judge_config, counts, gx_success, checked_at)
         SELECT :r, t, :j, '{}'::jsonb, true, now() FROM unnest(ARRAY['race', 'claims']) t""")
    x("""INSERT INTO reports (release_id, system_id, arxiv_id, status, error, text, system_version, system_build,
                              search_backend, search_cutoff, latency_ms, n_llm_calls, prompt_tokens,
                              completion_tokens, cost_usd, n_citations, trace)
         SELECT :r, s.system_id, q.arxiv_id, CASE WHEN hashtext(s.system_id || q.arxiv_id) % 100 = 0
                                                 THEN 'system_error' ELSE 'ok' END,
                CASE WHEN hashtext(s.system_id || q.arxiv_id) % 100 = 0 THEN 'timeout' END,
                repeat(format('Systems like %s retrieve and cite prior work [1][2]. ', s.system_id), 30),
                '1', s.system_id || '@1', 'local', CAST(:w AS timestamptz), 20000 + q.row_index, 6, 12000, 1500, 0.02,
                8, jsonb_build_object('steps', 6)
         FROM systems s CROSS JOIN release_queries q
         WHERE q.release_id = :r AND s.system_id LIKE 'hist_sys_%'""")
    x("""UPDATE reports SET text = NULL WHERE release_id = :r AND status = 'system_error'""")
    x("""INSERT INTO report_sources (report_id, source_idx, arxiv_id, title, snippet, published, date_basis, cited)
         SELECT r.report_id, i, format('89%s.%s', lpad(((r.report_id * 7 + i) / 99999 % 100)::text, 2, '0'),
                                      lpad(((r.report_id * 7 + i) % 99999)::text, 5, '0')),
                format('Source %s', i), 'a snippet of the source', TIMESTAMPTZ '2089-06-01', 'published', i < 4
         FROM reports r CROSS JOIN generate_series(0, :nsrc - 1) i WHERE r.release_id = :r AND r.status = 'ok'""")
    judged = [m for m in plan if m["items"]]
    names, items = [m["name"] for m in judged], [max(1, round(m["items"] * scale)) for m in judged]
    versions = [m["version"] for m in judged]
    # One batched judge call per report and metric, in the audit trail; the judgments name it.
    x("""INSERT INTO llm_calls (request_hash, model, purpose, request, response_text, provider_model, prompt_tokens,
                                completion_tokens, cost_usd, latency_ms, created_at)
         SELECT md5(r.report_id::text || m.name), 'openai/gpt-4o', m.name,
                jsonb_build_object('messages', jsonb_build_array(jsonb_build_object('role', 'user',
                                   'content', 'Judge the report ' || r.report_id || ' on ' || m.name))),
                '{"label": 1}', 'gpt-4o-2024-08-06', 900, 60, 0.0028, 800, CAST(:w AS timestamptz) + INTERVAL '5 days'
         FROM reports r CROSS JOIN unnest(CAST(:names AS text[])) m(name)
         WHERE r.release_id = :r AND r.status = 'ok'""", names=names)
    x("""INSERT INTO judgments (report_id, metric, judge_config, item_key, metric_version, label, unscored_reason,
                                explanation, n_calls, judged_at, request_hashes)
         SELECT r.report_id, m.name, :j, format('item_%s', i), m.version,
                CASE WHEN (r.report_id + i) % 50 = 0 THEN NULL ELSE to_jsonb((r.report_id + i) % 2) END,
                CASE WHEN (r.report_id + i) % 50 = 0 THEN 'judge answer unparseable' END,
                'The judge found the statement supported by the cited source.', 1,
                CAST(:w AS timestamptz) + INTERVAL '5 days', ARRAY[md5(r.report_id::text || m.name)]
         FROM reports r
         CROSS JOIN unnest(CAST(:names AS text[]), CAST(:items AS int[]), CAST(:versions AS text[])) m(name, n, version)
         CROSS JOIN LATERAL generate_series(1, m.n) i
         WHERE r.release_id = :r AND r.status = 'ok'""", names=names, items=items, versions=versions)
    variants = [(m["name"], v, m["version"], v == m["headline"]) for m in plan for v in m["variants"]]
    # Scores: a system's quality plus noise, per query; 2 % of headline scores unscored.
    x("""INSERT INTO metric_scores (report_id, metric, judge_config, variant, metric_version, value, unscored_reason,
                                    n_items, details, scored_at)
         SELECT r.report_id, v.metric, :j, v.variant, v.version,
                CASE WHEN v.headline AND abs(hashtext(r.report_id::text || v.metric)) % 50 = 0 THEN NULL
                     ELSE round(least(1.0, greatest(0.0, 0.25 + 0.5 * substr(r.system_id, 10)::int / :ns
                                + (abs(hashtext(r.report_id::text || v.metric || v.variant)) % 1000) / 3000.0
                                - 0.166))::numeric, 4)::float8 END,
                CASE WHEN v.headline AND abs(hashtext(r.report_id::text || v.metric)) % 50 = 0
                     THEN 'judge answer unparseable' END,
                5, '{}'::jsonb, CAST(:w AS timestamptz) + INTERVAL '5 days'
         FROM reports r
         CROSS JOIN unnest(CAST(:ms AS text[]), CAST(:vs AS text[]), CAST(:vers AS text[]), CAST(:hs AS boolean[]))
              v(metric, variant, version, headline)
         WHERE r.release_id = :r AND r.status = 'ok'""",
      ms=[v[0] for v in variants], vs=[v[1] for v in variants], vers=[v[2] for v in variants],
      hs=[v[3] for v in variants])
    # Human labels: a blind sample of 50 judged items per labelled metric, two annotators each.
    labelled = [m for m in judged if m["name"] in ("citation_precision", "nugget_coverage", "claim_coverage")]
    n_items = max(2, round(50 * scale))
    for m in labelled:
        sample_id = conn.execute(sa.text("""
            INSERT INTO annotation_samples (release_id, metric, judge_config, n_requested, seed, n_items)
            VALUES (:r, :m, :j, :n, 7, :n) RETURNING sample_id"""), p | {"m": m["name"], "n": n_items}).scalar()
        x("""INSERT INTO annotation_items (item_id, release_id, report_id, metric, item_key, question, allowed_labels,
                                           content)
             SELECT format('%s-%s-%s', :r, :m, j.report_id) || '-' || j.item_key, :r, j.report_id, :m, j.item_key,
                    'Is the statement supported?', ARRAY['0', '1'], jsonb_build_object('statement', 'a statement')
             FROM judgments j JOIN reports r ON r.report_id = j.report_id
             WHERE r.release_id = :r AND j.metric = :m AND j.judge_config = :j AND j.item_key = 'item_1'
             ORDER BY j.report_id LIMIT :n""", m=m["name"], n=n_items)
        x("""INSERT INTO annotation_sample_items (sample_id, item_id, position, judge_label)
             SELECT :sid, item_id, row_number() OVER (ORDER BY item_id), '1'
             FROM annotation_items WHERE release_id = :r AND metric = :m""", sid=sample_id, m=m["name"])
        x("""INSERT INTO human_labels (item_id, annotator, label, source_file)
             SELECT item_id, a, (abs(hashtext(item_id || a)) % 2)::text, 'labels.csv'
             FROM annotation_items CROSS JOIN unnest(ARRAY['ann_a', 'ann_b']) a
             WHERE release_id = :r AND metric = :m""", m=m["name"])
    # Drift slices: the judge re-asked on a calibration slice, per judged metric.
    x("""INSERT INTO judge_drift_checks (release_id, judge_config, metric, status, reference_kind, n_items, n_agree,
                                         agreement, min_agreement, message, calls, requests, cost_usd)
         SELECT :r, :j, m, 'checked', 'first_judgment', 40, 37, 0.925, 0.8, 'within bounds', 40, 40, 0.11
         FROM unnest(CAST(:names AS text[])) m""", names=names)
    x("""INSERT INTO benchmark_runs (release_id, run_id, run_type, triggered_by, judge_config, state, finished_at)
         VALUES (:r, 'scheduled__' || :r, 'scheduled', 'scheduler', :j, 'published', now())""")


def boards_of_month(engine, month: str, n_boot: int, rejudge: bool) -> None:
    """The month's boards by the project's roll-up, published; a re-judge adds a second published version."""
    from deepscholar.evaluation.boards.board_versions import publish_board
    from deepscholar.evaluation.boards.rollup import roll_up
    from deepscholar.evaluation.judge_validation.judge_vs_humans import store_agreement

    store_agreement(engine, month, JUDGE)  # judge against the human labels, as `annotate import` stores it
    roll_up(engine, month, JUDGE, n_boot=n_boot)
    publish_board(engine, month, JUDGE)
    if rejudge:  # one system's citation precision re-judged (a metric fix): version 2 of the board
        with engine.begin() as conn:
            conn.execute(sa.text("""
                UPDATE metric_scores m SET value = round((m.value * 0.9)::numeric, 4)::float8
                FROM reports r WHERE r.report_id = m.report_id AND r.release_id = :r AND r.system_id = 'hist_sys_00'
                  AND m.metric = 'citation_precision' AND m.value IS NOT NULL"""), {"r": month})
        roll_up(engine, month, JUDGE, n_boot=n_boot)
        publish_board(engine, month, JUDGE)


def gx_checks(engine, months: list[str]) -> dict:
    from deepscholar.evaluation.boards.leaderboard_quality import check_leaderboard
    from deepscholar.release.track_artefacts import check_track_artefacts
    from deepscholar.systems.quality import run_reports_check

    out: dict[str, dict] = {}
    for month in months:
        results = {"reports": run_reports_check(engine, month), "boards": check_leaderboard(engine, month, JUDGE),
                   "track_artefacts": check_track_artefacts(engine, month, ["race", "claims"])}
        out[month] = {k: {"success": bool(v.success), "summary": v.summary} for k, v in results.items()}
    return out


# ----------------------------------------------------------------------------------------------- measuring

def spread(times: list[float]) -> dict:
    """n, p50, p95 (nearest rank: with few requests it is the slowest, never below the median) and max."""
    ms = sorted(t * 1000 for t in times)
    return {"n": len(ms), "p50_ms": round(statistics.median(ms), 1), "p95_ms": round(ms[math.ceil(0.95 * len(ms)) - 1], 1),
            "max_ms": round(ms[-1], 1)}


def page_routes(engine, months: list[str]) -> dict[str, str]:
    """Every page route of deepscholar/web/app.py that a reader GETs, with parameters from the warehouse."""
    with engine.connect() as conn:
        report_id = conn.execute(sa.text("SELECT min(report_id) FROM reports WHERE release_id = :r AND status = 'ok'"),
                                 {"r": months[-1]}).scalar()
    first, last = months[0], months[-1]
    # The window board last: its requests outlive the client's timeout in the server's threads (pure Python,
    # invisible to drained()) and would slow the routes measured after it.
    return {"board": "/", "board_month": f"/?release={first}", "board_version": f"/?release={first}&version=1",
            "history": "/history", "versions": f"/versions?release={last}&judge_config={JUDGE}",
            "system": "/system/hist_sys_00", "system_month": f"/system/hist_sys_00?release={first}",
            "report": f"/report/{report_id}", "register_form": "/systems/new", "api_leaderboard": "/api/leaderboard",
            "api_versions": f"/api/versions?release={last}&judge_config={JUDGE}", "api_history": "/api/history",
            "board_window": f"/?from={first}&to={last}"}


def measure_pages(engine, months: list[str], args) -> dict:
    import httpx
    from support.chromium import serve

    from deepscholar.web import create_app

    results: dict = {}
    with serve(create_app(lambda: engine)) as base:
        routes = page_routes(engine, months)
        # Idle connections are dropped after 2 s, before the server's keep-alive timeout (uvicorn's 5 s):
        # httpx's default expiry is also 5 s, so a pooled connection could be reused at the moment the server
        # closes it, a ReadError that a browser retries and this client would count as a failed read.
        limits = httpx.Limits(max_connections=args.load_readers + 5, keepalive_expiry=2.0)
        with httpx.Client(base_url=base, timeout=60, limits=limits) as client:
            def get(path: str, errors: dict[str, int]) -> float:
                t = time.perf_counter()
                try:
                    status = client.get(path).status_code
                    err = None if status == 200 else str(status)
                except httpx.HTTPError as exc:
                    err = type(exc).__name__
                if err:
                    errors[err] = errors.get(err, 0) + 1
                return time.perf_counter() - t

            for name, path in routes.items():
                drained(engine)
                warm: dict[str, int] = {}
                get(path, warm)  # the first request builds the engine and imports the renderer
                if warm:
                    raise RuntimeError(f"{path} answers {warm} to a single reader")
                err1: dict[str, int] = {}
                errn: dict[str, int] = {}
                stop = time.monotonic() + args.route_seconds
                one: list[float] = []
                while len(one) < args.requests and time.monotonic() < stop:
                    one.append(get(path, err1))
                stop = time.monotonic() + args.route_seconds

                def capped(_, p=path, e=errn, stop=stop) -> float | None:
                    return get(p, e) if time.monotonic() < stop else None

                with ThreadPoolExecutor(args.concurrency) as pool:
                    many = [t for t in pool.map(capped, range(args.requests)) if t is not None]
                results[name] = {"path": path, "one_reader": spread(one), "concurrent": spread(many),
                                 "errors_one": err1, "errors_concurrent": errn}
                emit("page", route=name, readers=args.concurrency, **results[name])
            drained(engine)
            results["load"] = load_test(client, list(routes.values()), args.load_readers, args.readers_seconds)
            emit("page_load", **results["load"])
    return results


def drained(engine, timeout: float = 180) -> None:
    """Wait until the warehouse runs no query of the app: a request the client gave up on (ReadTimeout) still
    runs in the server and would otherwise be counted against the next route."""
    deadline = time.monotonic() + timeout
    with engine.connect() as conn:
        while time.monotonic() < deadline and conn.execute(sa.text(
                "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND state = 'active' "
                "AND pid <> pg_backend_pid()")).scalar():
            conn.rollback()
            time.sleep(0.5)


def load_test(client, paths: list[str], readers: int, seconds: float) -> dict:
    """`readers` threads, each GETting the routes in turn for `seconds`: requests, errors (not 200, or raised)."""
    stop = time.monotonic() + seconds
    lock = threading.Lock()
    times: list[float] = []
    errors: dict[str, int] = {}

    def reader(i: int) -> None:
        k = i
        while time.monotonic() < stop:
            path = paths[k % len(paths)]
            k += 1
            t = time.perf_counter()
            try:
                status = client.get(path).status_code
                err = None if status == 200 else f"{path} {status}"
            except Exception as exc:  # a timeout or refused connection is an error the goal counts
                err = f"{path} {type(exc).__name__}"
            with lock:
                times.append(time.perf_counter() - t)
                if err:
                    errors[err] = errors.get(err, 0) + 1

    with ThreadPoolExecutor(readers) as pool:
        list(pool.map(reader, range(readers)))
    return {"readers": readers, "seconds": seconds, "requests": len(times), "errors": sum(errors.values()),
            "error_kinds": errors, **spread(times)}


def cli(*argv: str) -> tuple[float, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "include"), os.environ.get("PYTHONPATH", "")])}
    t = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "deepscholar.cli", *argv], env=env, capture_output=True, text=True,
                          timeout=600)
    secs = time.perf_counter() - t
    if done.returncode != 0:
        raise RuntimeError(f"deepscholar {' '.join(argv)} exited {done.returncode}: {done.stderr[-1500:]}")
    return secs, done.stdout


def measure_cli(engine, months: list[str], repeat: int) -> dict:
    """Each board command as a cold process, median of `repeat`. A pooled board (window, category) is timed
    twice: computed (the store emptied before each run: a selection's first request, or one after its
    inputs changed) and kept (read back: every later request), the goal judged on the kept."""
    first, last = months[0], months[-1]
    commands = {"leaderboard": ["leaderboard"], "leaderboard_month": ["leaderboard", "--release", first],
                "leaderboard_track_race": ["leaderboard", "--track", "race"],
                "leaderboard_agreement": ["leaderboard", "--agreement"],
                "leaderboard_versions": ["leaderboard", "--versions", "--release", last],
                "leaderboard_window": ["leaderboard", "--from", first, "--to", last],
                "leaderboard_category": ["leaderboard", "--category", "cs.CL"],
                "cost": ["cost", "--release", last, "--judge", JUDGE], "release_list": ["release", "list"],
                "db_status": ["db", "status"]}
    pooled = {"leaderboard_window", "leaderboard_category"}
    # An installed package carries its bytecode (pip compiles it; the Dockerfile's image has it). A source
    # checkout run with PYTHONDONTWRITEBYTECODE (as this workplace's shells are) would compile every module
    # of ours in every process, about 0.3 s a command that no deployment pays: compile once, as pip does.
    compileall.compile_dir(str(ROOT / "include" / "deepscholar"), quiet=1)
    out = {}
    for name, argv in commands.items():
        computed = []
        if name in pooled:
            for _ in range(repeat):
                with engine.begin() as conn:
                    conn.execute(sa.text("DELETE FROM deepscholar.pooled_boards"))
                computed.append(cli(*argv)[0])
        times = [cli(*argv)[0] for _ in range(repeat)]
        out[name] = {"argv": argv, "median_s": round(statistics.median(times), 2), "max_s": round(max(times), 2)}
        if computed:
            out[name] |= {"kept": True, "computed_median_s": round(statistics.median(computed), 2),
                          "computed_max_s": round(max(computed), 2)}
        emit("cli", command=name, **out[name])
    return out


def explain_top(conn, sql: str, params: dict) -> dict:
    """The plan's top node and whether any node scans judgments / metric_scores sequentially."""
    plan = conn.execute(sa.text("EXPLAIN (FORMAT JSON) " + sql), params).scalar()
    root = plan[0]["Plan"]
    seq: list[str] = []

    def walk(node: dict) -> None:
        if node.get("Node Type") == "Seq Scan" and node.get("Relation Name") in (*BIG, "reports", "llm_calls"):
            seq.append(node["Relation Name"])
        for child in node.get("Plans", []):
            walk(child)

    walk(root)
    return {"top": root["Node Type"], "cost": root.get("Total Cost"), "seq_scans": sorted(set(seq))}


def measure_views(engine, months: list[str]) -> dict:
    """SELECT * of every view in the schema for one month (where it has release_id), with its plan."""
    out = {}
    with engine.connect() as conn:
        views = conn.execute(sa.text("""
            SELECT v.table_name, bool_or(c.column_name = 'release_id')
            FROM information_schema.views v JOIN information_schema.columns c
              ON c.table_schema = v.table_schema AND c.table_name = v.table_name
            WHERE v.table_schema = 'deepscholar' GROUP BY 1 ORDER BY 1""")).all()
        for view, by_month in views:
            sql = f"SELECT * FROM deepscholar.{view}" + (" WHERE release_id = :r" if by_month else "")
            params = {"r": months[-1]} if by_month else {}
            times, n = [], 0
            for _ in range(3):
                t = time.perf_counter()
                n = len(conn.execute(sa.text(sql), params).all())
                times.append(time.perf_counter() - t)
            out[view] = {"rows": n, "median_ms": round(statistics.median(times) * 1000, 1),
                         "plan": explain_top(conn, sql, params)}
            emit("view", view=view, one_month=by_month, **out[view])
    return out


def measure_readers_plans(engine, months: list[str]) -> None:
    """The library's own reader queries the page and the CLI run, timed alone with their plans."""
    from deepscholar.evaluation.boards.leaderboard import load_leaderboard
    from deepscholar.web import queries as q

    with engine.connect() as conn:
        for name, fn in {"history_rows": lambda: q.history_rows(conn, JUDGE),
                         "board_months": lambda: q.board_months(conn, JUDGE),
                         "system_reports": lambda: q.system_reports(conn, "hist_sys_00", months[-1], JUDGE)}.items():
            t = time.perf_counter()
            fn()
            emit("reader", reader=name, ms=round((time.perf_counter() - t) * 1000, 1))
    t = time.perf_counter()
    load_leaderboard(engine, months[-1], JUDGE)
    emit("reader", reader="load_leaderboard", ms=round((time.perf_counter() - t) * 1000, 1))


def measure_export(engine, months: list[str], home: Path) -> dict:
    from deepscholar.export.writer import export_release

    out = {}
    t = time.perf_counter()
    export_release(engine, months[-1], home / "export_one")
    out["one_month_s"] = round(time.perf_counter() - t, 2)
    emit("export", scope="one month", release=months[-1], seconds=out["one_month_s"])
    t = time.perf_counter()
    for month in months:
        export_release(engine, month, home / "export_all" / month)
    out["all_months_s"] = round(time.perf_counter() - t, 2)
    emit("export", scope="all months", months=len(months), seconds=out["all_months_s"])
    return out


def month13(engine, month: str, args, plan) -> dict:
    """The 13th month's monthly jobs (roll-up with its track boards and agreement; the board gate; publish)."""
    from deepscholar.evaluation.boards.board_versions import publish_board
    from deepscholar.evaluation.boards.leaderboard_quality import check_leaderboard
    from deepscholar.evaluation.boards.rank_agreement import load_agreement
    from deepscholar.evaluation.boards.rollup import roll_up
    from deepscholar.gx import import_gx

    with engine.begin() as conn:
        fill_month(conn, month, args.queries, args.systems, args.scale, plan)
        conn.execute(sa.text("ANALYZE"))
    import_gx()  # the gate's first call would otherwise count GX's import (seconds) on the empty warehouse
    import scipy.stats  # noqa: F401  the same for the agreement's Kendall tau, imported when first needed
    times = {}
    for step, fn in (("roll_up", lambda: roll_up(engine, month, JUDGE, n_boot=args.n_boot)),
                     ("agreement_read", lambda: load_agreement(engine, month, JUDGE)),
                     ("board_gate", lambda: check_leaderboard(engine, month, JUDGE)),
                     ("publish", lambda: publish_board(engine, month, JUDGE))):
        t = time.perf_counter()
        fn()
        times[step] = time.perf_counter() - t
    return times


def table_sizes(engine, months: list[str]) -> dict:
    with engine.connect() as conn:
        tables = {n: int(b) for n, b in conn.execute(sa.text("""
            SELECT c.relname, pg_total_relation_size(c.oid) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'deepscholar' AND c.relkind = 'r' ORDER BY 2 DESC"""))}
        total = int(conn.execute(sa.text("SELECT pg_database_size(current_database())")).scalar())
    mb = lambda b: round(b / 2**20, 1)  # noqa: E731
    return {"database_mb": mb(total), "per_month_mb": mb(sum(tables.values()) / len(months)),
            "tables_mb": {k: mb(v) for k, v in tables.items() if v > 64 * 1024}}


def relfilenodes(engine) -> dict[str, int]:
    with engine.connect() as conn:
        return {t: int(conn.execute(sa.text(f"SELECT pg_relation_filenode('deepscholar.{t}')")).scalar())
                for t in (*BIG, "reports")}


# -------------------------------------------------------------------------------------------------- main

def size_arguments(parser: argparse.ArgumentParser, n_boot: int = 1000) -> None:
    """The warehouse's size, as every bench over this fill takes it (history, site, backup)."""
    parser.add_argument("--months", type=int, default=12)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--systems", type=int, default=20)
    parser.add_argument("--scale", type=float, default=1.0,
                        help="judged items, references, sources, labels and corpus size x this (1: real size)")
    parser.add_argument("--n-boot", type=int, default=n_boot)
    parser.add_argument("--rejudge-every", type=int, default=4, help="every k-th month gets a re-judged board")


def fill_months(engine, args, plan: list[dict]) -> list[str]:
    """args.months months at the warehouse's head: bulk rows, then each month's boards by the project's own
    roll-up, then ANALYZE; the months filled."""
    months = [f"{YEAR}-{m:02d}" for m in range(1, args.months + 1)]
    with engine.begin() as conn:
        fill_static(conn, args.systems, max(100, round(25_000 * args.months * args.scale)))
    for i, month in enumerate(months):
        with engine.begin() as conn:
            fill_month(conn, month, args.queries, args.systems, args.scale, plan)
        boards_of_month(engine, month, args.n_boot, rejudge=(i + 1) % args.rejudge_every == 0)
        say(f"filled and rolled up {month}")
    with engine.begin() as conn:
        conn.execute(sa.text("ANALYZE"))
    return months


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    size_arguments(parser)
    parser.add_argument("--requests", type=int, default=200, help="requests per page route and reader setting")
    parser.add_argument("--route-seconds", type=float, default=float("inf"),
                        help="stop a route's requests (per reader setting) after this long; the lines give n")
    parser.add_argument("--concurrency", type=int, default=20)
    parser.add_argument("--load-readers", type=int, default=50)
    parser.add_argument("--readers-seconds", type=float, default=60)
    parser.add_argument("--cli-repeat", type=int, default=3)
    args = parser.parse_args(argv)
    if args.months < 1 or args.queries < 1 or args.systems < 2:
        parser.error("at least 1 month, 1 query and 2 systems")

    from deepscholar import migrations

    months = [f"{YEAR}-{m:02d}" for m in range(1, args.months + 1)]
    extra = f"{YEAR}-{args.months + 1:02d}" if args.months < 12 else f"{YEAR + 1}-01"
    previous = migrations.revision_ids()[-2]
    plan = metric_plan()
    corpus = max(100, round(25_000 * args.months * args.scale))
    summary: dict = {"months": args.months, "queries": args.queries, "systems": args.systems, "scale": args.scale}

    with scratch_warehouse(previous) as (engine, home):
        t0 = time.perf_counter()
        with engine.begin() as conn:
            fill_static(conn, args.systems, corpus)
        for month in months:
            with engine.begin() as conn:
                fill_month(conn, month, args.queries, args.systems, args.scale, plan)
            say(f"filled {month}")
        with engine.begin() as conn:
            conn.execute(sa.text("ANALYZE"))
        bulk_s = time.perf_counter() - t0
        nodes = relfilenodes(engine)
        t = time.perf_counter()
        applied = migrations.upgrade(engine)
        upgrade_s = time.perf_counter() - t
        rewritten = [k for k, v in relfilenodes(engine).items() if nodes[k] != v]
        emit("upgrade", from_revision=previous, applied=applied, seconds=round(upgrade_s, 2), rewritten=rewritten)
        t = time.perf_counter()
        for i, month in enumerate(months):
            boards_of_month(engine, month, args.n_boot, rejudge=(i + 1) % args.rejudge_every == 0)
        boards_s = time.perf_counter() - t
        with engine.begin() as conn:
            conn.execute(sa.text("ANALYZE"))
            counts = {tb: conn.execute(sa.text(f"SELECT count(*) FROM deepscholar.{tb}")).scalar() for tb in (
                "reports", "judgments", "metric_scores", "llm_calls", "corpus", "board_versions", "leaderboard_systems",
                "track_boards", "human_labels", "judge_drift_checks")}
        t = time.perf_counter()
        checks = gx_checks(engine, months)
        gx_s = time.perf_counter() - t
        gx_ok = all(c["success"] for m in checks.values() for c in m.values())
        failed = {m: {k: c["summary"] for k, c in v.items() if not c["success"]} for m, v in checks.items()}
        emit("fill", bulk_seconds=round(bulk_s, 1), boards_seconds=round(boards_s, 1), gx_seconds=round(gx_s, 1),
             fill_seconds=round(bulk_s + boards_s, 1), rows=counts, gx_success=gx_ok,
             gx_failed={m: f for m, f in failed.items() if f})
        sizes = table_sizes(engine, months)
        emit("size", **sizes)

        pages = measure_pages(engine, months, args)
        cli_times = measure_cli(engine, months, args.cli_repeat)
        views = measure_views(engine, months)
        measure_readers_plans(engine, months)
        export = measure_export(engine, months, home)
        full = month13(engine, extra, args, plan)
        emit("month13_full", release=extra, **{k: round(v, 3) for k, v in full.items()})
    # The same month on an empty warehouse, after the full one (both in a warm process: imports not counted).
    with scratch_warehouse("head") as (engine, _):
        with engine.begin() as conn:
            fill_static(conn, args.systems, 0)
        empty = month13(engine, extra, args, plan)
    ratios = {k: round(full[k] / empty[k], 2) if empty[k] > 0 else None for k in full}
    ratios["total"] = round(sum(full.values()) / sum(empty.values()), 2)
    emit("month13_empty", release=extra, **{k: round(v, 3) for k, v in empty.items()}, full_to_empty=ratios)

    routes = {k: v for k, v in pages.items() if k != "load"}
    conc = "concurrent"
    worst1 = max(routes, key=lambda k: routes[k]["one_reader"]["p95_ms"])
    worst20 = max(routes, key=lambda k: routes[k][conc]["p95_ms"])
    worst_cli = max(cli_times, key=lambda k: cli_times[k]["median_s"])
    slow_views = sorted(views, key=lambda v: -views[v]["median_ms"])[:3]
    goals = {
        "page_p95_1_reader": {"pass": routes[worst1]["one_reader"]["p95_ms"] <= GOALS["page_p95_1_ms"],
                              "worst": worst1, "p95_ms": routes[worst1]["one_reader"]["p95_ms"],
                              "failing": sorted(k for k in routes if routes[k]["one_reader"]["p95_ms"]
                                                > GOALS["page_p95_1_ms"])},
        "page_errors": {"pass": not any(r["errors_one"] or r["errors_concurrent"] for r in routes.values()),
                        "routes": {k: {"one": r["errors_one"], "concurrent": r["errors_concurrent"]}
                                   for k, r in routes.items() if r["errors_one"] or r["errors_concurrent"]}},
        "page_p95_concurrent": {"pass": routes[worst20][conc]["p95_ms"] <= GOALS["page_p95_20_ms"], "worst": worst20,
                                "p95_ms": routes[worst20][conc]["p95_ms"], "readers": args.concurrency,
                                "failing": sorted(k for k in routes if routes[k][conc]["p95_ms"] > GOALS["page_p95_20_ms"])},
        "load_errors": {"pass": pages["load"]["errors"] == GOALS["load_errors"], "errors": pages["load"]["errors"],
                        "readers": args.load_readers, "seconds": args.readers_seconds},
        "cli_cold": {"pass": cli_times[worst_cli]["median_s"] <= GOALS["cli_cold_s"], "worst": worst_cli,
                     "median_s": cli_times[worst_cli]["median_s"],
                     "failing": sorted(k for k in cli_times if cli_times[k]["median_s"] > GOALS["cli_cold_s"]),
                     "computed_pooled_s": {k: v["computed_median_s"] for k, v in cli_times.items() if v.get("kept")}},
        "month13_vs_empty": {"pass": (ratios["total"] or 0) <= GOALS["month13_ratio"], "ratios": ratios},
        "export_one_month": {"pass": export["one_month_s"] <= GOALS["export_one_s"], "seconds": export["one_month_s"]},
        "upgrade": {"seconds": round(upgrade_s, 2), "judgments_rewritten": "judgments" in rewritten},
    }
    emit("summary", **summary, fill_seconds=round(bulk_s + boards_s, 1), gx_success=gx_ok,
         database_mb=sizes["database_mb"], per_month_mb=sizes["per_month_mb"],
         slowest_views={v: {"median_ms": views[v]["median_ms"], "plan": views[v]["plan"]} for v in slow_views},
         goals=goals, passed=sorted(k for k, g in goals.items() if g.get("pass")),
         failed=sorted(k for k, g in goals.items() if g.get("pass") is False))
    return 0 if gx_ok else 1


if __name__ == "__main__":
    sys.exit(main())
