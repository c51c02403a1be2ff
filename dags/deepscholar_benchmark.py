"""Monthly benchmark: every active system writes a report for every query of month M, every report is
judged on the seven metrics, and the month's leaderboard is rolled up, checked and published.

**Scheduling.** The DAG keeps a time-based schedule (the same monthly cron data interval as the release
DAG) so past months can be backfilled from the UI, CLI or REST API with the usual params. At the cron
tick both DAGs start for month M; a real release takes hours, so the first task, `wait_for_release`, is
a sensor in *reschedule* mode: it holds no worker slot while it waits (bounded by
DEEPSCHOLAR_RELEASE_WAIT_HOURS, default 96 h; poked every DEEPSCHOLAR_RELEASE_POKE_SECONDS, default
300 s) and lets the run go on as soon as release M is published. We chose this over scheduling on the
release Asset because an asset-triggered DAG cannot be backfilled by date, and a cron-plus-asset
schedule would start two runs for the same month. If release M fails its quality gate the sensor ends
the run at once (state `blocked`, the gate's message in the log and in `benchmark_runs`); when M is
re-built and published, the release DAG starts a new benchmark run for M by itself
(`start_benchmark`), because no run for M is waiting any more.

**Backfill or manual run of a month never built.** Only a scheduled run waits for a release that has
not been started (its release run of the same tick opens it moments later). A backfill or manual run
for a month with no release row, while no release DAG run is queued or running, fails at once in
`wait_for_release` with one line saying how to build the month (`deepscholar release build M`, or the
release DAG with {"month": M}); a release that is started but not published keeps every run waiting
(`scheduling.decide_wait`). We chose not to let a backfill trigger the release DAG itself: a release
takes hours at arXiv's rate limits, fixes the month's queries and labels for good and has its own
choices (judge, sample size, seed), so building one stays an explicit step, not a side effect of a
date range picked to fill in a new system; and once that release publishes, the release DAG starts
the month's benchmark run anyway.

**Honest final state.** `finish` runs last whatever happened (trigger rule all_done) and fails the run
unless this run published the leaderboard of M; its log says why (release blocked, which task failed).
So a run that did nothing never shows green.

Generation maps one task per (system, query) pair still missing an ok report, in one lane per LLM
provider so each provider's Airflow pool bounds its requests. Judging maps one task per job: the
(metric, system) units with reports lacking a current score, spread over tasks of equal work (about
DEEPSCHOLAR_JUDGE_JOB_REPORTS report-metric judgments each, a multiple of DEEPSCHOLAR_JUDGE_TASKS of them;
evaluation/judging/jobs.py), each judging only what is missing. So a scheduled run, a retry and a
backfill for a newly registered system (params.systems = ["name"]) all do only the missing work.
**Budget.** With a budget (DEEPSCHOLAR_JUDGE_BUDGET_USD, which the run's `budget_usd` param may lower but
never raise or remove), `estimate_budget` prices the planned judge jobs and the drift check
(evaluation/money/budget.py) and keeps the estimate as the run's. Within it, `approve_budget` goes on without
asking; over it, or with an unpriced judge model, it asks the approvers (DEEPSCHOLAR_JUDGE_BUDGET_APPROVERS)
in the UI or the REST API and waits in the `awaiting_input` state, holding no worker slot
(deepscholar/budget_approval.py). Rejected or unanswered, the run ends failed with one line saying what the
month would have cost; nothing was sent. While judging, each judge task and the drift check stop once the
month's spend passes the budget (or the approved total, read from the warehouse) by the margin.
**Judge drift.** After the roll-up, `check_judge_drift` has the run's judge answer its fixed calibration
slice again with the cache bypassed (evaluation/judge_validation/drift.py); a tripped alarm fails `check_leaderboard`'s
`no_judge_drift` (naming the metric and the drop), so the board is not published and the run's final
state says why. DEEPSCHOLAR_DRIFT_CHECK=false skips the task, saying so.

Wiring only: every task calls one function of the deepscholar library.
"""

from __future__ import annotations

from datetime import timedelta
from typing import TYPE_CHECKING

from airflow.sdk import (
    Asset,
    CronDataIntervalTimetable,
    Metadata,
    Param,
    PokeReturnValue,
    dag,
    get_current_context,
    task,
)

from deepscholar.budget_approval import REFUSAL_KEY, BudgetApproval
from deepscholar.orchestration import (
    BENCHMARK_DAG_ID,
    BENCHMARK_MAX_ACTIVE_RUNS,
    GENERATION_LANES,
    LEADERBOARD_ASSET_NAME,
    LEADERBOARD_ASSET_URI,
    MAX_MAPPED_TASKS,
    MONTHLY_CRON,
    lane_pool,
    release_poke_seconds,
    release_wait_seconds,
    schedule_window,
)
from deepscholar.settings import current_settings

if TYPE_CHECKING:
    from deepscholar.evaluation.judge_spec import JudgeSpec

SETTINGS = current_settings()  # read when the DAG file is parsed: task bounds, pools, retries, defaults
LEADERBOARD_PUBLISHED = Asset(name=LEADERBOARD_ASSET_NAME, uri=LEADERBOARD_ASSET_URI)


WAIT_TASK_ID = "wait_for_release"
MIN_BATCH_POKE_SECONDS = 10.0
# The publication deadline's callback, run by the triggerer (imported there by its path).
DEADLINE_CALLBACK = "deepscholar.notifications.callbacks.publication_deadline_missed"


def _notify_task_failed(context) -> None:
    """on_failure_callback of every task but `wait_for_release` (a blocked release is the release DAG's news)
    and `finish` (the consequence of a failure already told): `run_failed`, once per failed task."""
    from deepscholar.notifications.callbacks import task_failed

    task_failed(context)


def _notify_board_published(context) -> None:
    """on_success_callback of publish_leaderboard. A callback has no current context (get_current_context
    raises there): the run's judge is read from the context Airflow passes it."""
    from deepscholar.evaluation.judge_spec import JudgeSpec
    from deepscholar.notifications.callbacks import board_published

    board_published(lambda: JudgeSpec.parse(context["params"].get("judge") or "local").config_id)(context)


def _publication_deadline() -> dict:
    """With DEEPSCHOLAR_PUBLICATION_DEADLINE_HOURS: a deadline alert N hours after the run is queued (a
    scheduled run is queued when month M's data interval ends), whose callback says what the run waits on."""
    hours = SETTINGS.publication_deadline_hours
    if hours is None:
        return {}
    from airflow.sdk.definitions.callback import AsyncCallback
    from airflow.sdk.definitions.deadline import DeadlineAlert, DeadlineReference

    return {"deadline": DeadlineAlert(reference=DeadlineReference.DAGRUN_QUEUED_AT, interval=timedelta(hours=hours),
                                      callback=AsyncCallback(DEADLINE_CALLBACK, kwargs={"hours": hours}),
                                      name="board_published")}


def _month() -> str:
    """The release this run works on: the version `wait_for_release` found published (its XCom), so a
    correction published mid-run (M.v2) never splits one run over two versions; before that (the sensor
    itself, or a run whose sensor failed) the month's current version, the latest published one (while none
    is, the latest one, which the sensor waits for)."""
    from deepscholar.db import get_engine
    from deepscholar.release.window import release_id_for
    from deepscholar.scheduling import current_release

    ctx = get_current_context()
    if ctx["ti"].task_id != WAIT_TASK_ID:
        pinned = ctx["ti"].xcom_pull(task_ids=WAIT_TASK_ID)
        if pinned:
            return pinned
    return current_release(get_engine(), ctx["params"].get("month") or release_id_for(ctx["data_interval_start"]))


def _judge() -> JudgeSpec:
    """The run's judge: its `judge` param, parsed here (each task's one parse of the text)."""
    from deepscholar.evaluation.judge_spec import JudgeSpec

    return JudgeSpec.parse(get_current_context()["params"].get("judge") or "local")


def _budget() -> float | None:
    """The most this month's judging may cost: the operator's DEEPSCHOLAR_JUDGE_BUDGET_USD, lowered by the
    run's `budget_usd` param, never raised or removed by it (None: neither sets one). Every task of the run
    reads it here, so the estimate and the judge tasks hold the same bound."""
    from deepscholar.evaluation.money.budget import run_budget

    value = get_current_context()["params"].get("budget_usd")
    return run_budget(None if value is None else float(value))


def _approved(judge: JudgeSpec) -> float | None:
    """The month's total an approver approved for this run, read from the warehouse (never an XCom)."""
    from deepscholar.db import get_engine
    from deepscholar.evaluation.money.budget import approved_total

    return approved_total(get_engine(), _month(), judge.config_id, get_current_context()["run_id"])


def _judge_config() -> str:
    """The judge config id this run's judgments, boards and checks are keyed by: derived from the run's
    judge here only, so every task names the same board."""
    return _judge().config_id


def _run():
    """This Airflow run as the warehouse records it in benchmark_runs."""
    from deepscholar.scheduling import BenchmarkRun, run_type_name

    dag_run = get_current_context()["dag_run"]
    # The SDK's enums print as "DagRunType.BACKFILL" on Python 3.11: stored by value ("backfill").
    triggered_by = getattr(dag_run, "triggered_by", None)
    return BenchmarkRun(release_id=_month(), run_id=dag_run.run_id, run_type=run_type_name(dag_run.run_type),
                        triggered_by=run_type_name(triggered_by) if triggered_by else None,
                        judge_config=_judge_config())


@dag(
    dag_id=BENCHMARK_DAG_ID,
    # Time-based (not asset-triggered) so months can be backfilled from the UI, CLI or REST API.
    schedule=CronDataIntervalTimetable(MONTHLY_CRON, timezone="UTC"),
    **schedule_window(),  # start/end/catchup from DEEPSCHOLAR_SCHEDULE_START/_END, DEEPSCHOLAR_CATCHUP
    max_active_runs=BENCHMARK_MAX_ACTIVE_RUNS,
    tags=["deepscholar", "benchmark"],
    default_args={
        "retries": SETTINGS.task_retries,
        "retry_delay": timedelta(minutes=2),
        "retry_exponential_backoff": True,
        "on_failure_callback": _notify_task_failed,
    },
    **_publication_deadline(),
    params={
        # ASCII digits, months 01-12 and exactly 7 characters: Python's \d takes '２０２５-０６' and `$` a
        # trailing newline, and the run would fail later on them.
        "month": Param(None, type=["null", "string"], pattern=r"^[0-9]{4}-(0[1-9]|1[0-2])$", maxLength=7,
                       description="Run this month instead of the run's data interval (YYYY-MM)."),
        "systems": Param([], type="array", items={"type": "string"},
                         description="Only these systems (e.g. a newly registered one); empty = all active."),
        "judge": Param(SETTINGS.judge, type="string",
                       description="'local' (offline embedding judge) or a litellm model string."),
        "metrics": Param([], type="array", items={"type": "string"},
                         description="Only these metrics; empty = the core seven and the tracks below."),
        "tracks": Param(list(SETTINGS.tracks), type="array", items={"type": "string"},
                        description="Evaluation tracks judged besides the core seven (metric registry families, "
                                    "e.g. reportbench); default DEEPSCHOLAR_TRACKS."),
        "judge_transport": Param(SETTINGS.judge_transport, type="string", enum=["direct", "batch"],
                                 description="How judge requests reach the provider: 'direct' (one by one) or "
                                             "'batch' (its batch API: about half the price, within 24 h; "
                                             "openai/<model> judges). Default DEEPSCHOLAR_JUDGE_TRANSPORT."),
        "budget_usd": Param(SETTINGS.judge_budget_usd, type=["null", "number"], minimum=0,
                            description="The most this month's judging may cost in USD: predicted over it (or "
                                        "unpriced), an approver approves first. It can lower "
                                        "DEEPSCHOLAR_JUDGE_BUDGET_USD, never raise or remove it; empty = that."),
    },
    doc_md=__doc__,
)
def deepscholar_benchmark():
    # -- wait for release M (same cron tick as the release DAG) --

    @task.sensor(task_id=WAIT_TASK_ID, mode="reschedule", poke_interval=release_poke_seconds(),
                 timeout=release_wait_seconds(), on_failure_callback=None)
    def wait_for_release() -> PokeReturnValue:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import get_engine, init_db
        from deepscholar.orchestration import RELEASE_DAG_ID
        from deepscholar.scheduling import ReleaseBlocked, poke_release

        engine = get_engine()
        init_db(engine)
        # A queued or running release run may be about to open M: then even a backfill or manual run waits.
        building = get_current_context()["ti"].get_dr_count(dag_id=RELEASE_DAG_ID, states=["queued", "running"]) > 0
        run = _run()
        try:
            # Done: the version waited for becomes the run's release (XCom), read by every later task.
            done = poke_release(engine, run, release_run_active=building)
            return PokeReturnValue(is_done=done, xcom_value=run.release_id if done else None)
        except ReleaseBlocked as exc:  # gate failed, or never started (backfill/manual): end now, no retries
            raise AirflowFailException(str(exc)) from exc

    # -- generation --

    @task
    def plan() -> dict[str, list[list[dict]]]:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import get_engine
        from deepscholar.release.context import ReleaseNotPublished
        from deepscholar.systems.generation import pairs_by_lane, plan_pairs

        release_id = _month()
        try:
            pairs = plan_pairs(get_engine(), release_id, get_current_context()["params"].get("systems") or None)
        except ReleaseNotPublished as exc:
            raise AirflowFailException(str(exc)) from exc
        lanes = pairs_by_lane(pairs, MAX_MAPPED_TASKS)
        print(f"release {release_id}: {len(pairs)} (system, query) pairs without an ok report; by lane: "
              + ", ".join(f"{lane}={sum(map(len, b))}" for lane, b in lanes.items()))
        return lanes

    @task
    def lane_batches(lanes: dict[str, list[list[dict]]], lane: str) -> list[list[dict]]:
        # Airflow maps only over a task's whole return value, so each lane gets its list from its own task.
        return lanes[lane]

    @task(max_active_tis_per_dagrun=SETTINGS.generation_concurrency)
    def generate_report(pairs: list[dict]) -> list[dict]:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import get_engine
        from deepscholar.errors import UserError
        from deepscholar.systems.generation import generate_batch

        try:
            return generate_batch(get_engine(), pairs)
        except UserError as exc:  # e.g. a provider's API key is not set: a retry cannot fix it
            raise AirflowFailException(str(exc)) from exc

    # none_failed: a lane with nothing to do is skipped (fine); a lane that failed stops the month.
    @task(retries=0, trigger_rule="none_failed")
    def check_reports() -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import get_engine
        from deepscholar.systems.quality import run_reports_check

        release_id = _month()
        result = run_reports_check(get_engine(), release_id)
        if not result.success:
            raise AirflowFailException(f"reports of {release_id} failed their check: {result.summary}")
        return {"summary": result.summary}

    # -- evaluation --

    @task
    def plan_judging() -> list[dict]:
        from deepscholar.connection_budget import log_budget
        from deepscholar.db import get_engine
        from deepscholar.evaluation.judging.jobs import plan_judging as plan_jobs

        params = get_current_context()["params"]
        log_budget(get_engine())  # the deployment's worst case against the server's max_connections
        jobs = plan_jobs(get_engine(), _month(), params.get("systems") or None, params.get("metrics") or None,
                         _judge(), current_settings().judge_job_reports, SETTINGS.judge_tasks,
                         tracks=params.get("tracks"))
        print(f"{len(jobs)} judge tasks for {sum(len(j['units']) for j in jobs)} (metric, system) units with "
              f"{sum(j['reports'] for j in jobs)} report-metric judgments to do")
        return jobs

    @task
    def estimate_budget() -> dict:
        from deepscholar.db import get_engine
        from deepscholar.evaluation.judging.evaluate import estimate_for_month

        params = get_current_context()["params"]
        estimate = estimate_for_month(get_engine(), _month(), _judge(), _budget(), systems=params.get("systems"),
                                      metrics=params.get("metrics"), tracks=params.get("tracks"),
                                      batch=params.get("judge_transport") == "batch",
                                      run_id=get_current_context()["run_id"], drift_check=current_settings().drift_check)
        print(estimate["line"])
        if estimate["table"]:
            print(estimate["table"])
        return estimate

    # What it asks, and of whom, comes from the run's estimate in the warehouse when it asks.
    approve_budget = BudgetApproval(
        task_id="approve_budget", retries=0, subject="Approve judging over its budget?",
        response_timeout=timedelta(hours=SETTINGS.judge_budget_approval_hours))

    @task(max_active_tis_per_dagrun=SETTINGS.judge_tasks, pool=SETTINGS.judge_pool)
    def judge(job: dict) -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import judge_engine
        from deepscholar.errors import UserError
        from deepscholar.evaluation.judging.runner import judge_job

        try:
            judge = _judge()
            return judge_job(judge_engine(), job, judge, budget_usd=_budget(), approved_usd=_approved(judge))
        except UserError as exc:  # a judge misconfigured (missing API key, unknown metric): no retries
            raise AirflowFailException(str(exc)) from exc

    @task.branch
    def choose_transport() -> str:
        """The judge tasks of the run's transport: `judge` (mapped, direct) or `judge_batches`."""
        transport = get_current_context()["params"].get("judge_transport") or "direct"
        print(f"judging {_month()} under {_judge_config()}: {transport} transport")
        return "judge_batches" if transport == "batch" else "judge"

    # Reschedule mode: each poke is one short step (look at the batches; once they ended, collect, judge from
    # the cache, submit what is still missing); between pokes the task holds no worker slot. At least
    # MIN_BATCH_POKE_SECONDS apart: a poke queued again before the scheduler has taken in the previous poke's
    # end (same try number) is marked failed by Airflow 3.3 ("state changed externally"), which a loaded
    # 2-core machine showed at 2 s.
    @task.sensor(mode="reschedule", poke_interval=max(SETTINGS.batch_poll_seconds, MIN_BATCH_POKE_SECONDS),
                 timeout=SETTINGS.batch_wait_hours * 3600, pool=SETTINGS.judge_pool)
    def judge_batches(jobs: list[dict]) -> PokeReturnValue:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import judge_engine
        from deepscholar.errors import UserError
        from deepscholar.evaluation.judging.batch_rounds import batch_job_step

        try:
            judge = _judge()
            summary = batch_job_step(judge_engine(), jobs, judge, run_id=get_current_context()["run_id"],
                                     budget_usd=_budget(), approved_usd=_approved(judge))
        except UserError as exc:  # misconfigured, or over the budget: a retry cannot fix it
            raise AirflowFailException(str(exc)) from exc
        return PokeReturnValue(is_done=summary is not None, xcom_value=summary)

    @task(trigger_rule="none_failed")  # judge tasks with nothing left to judge are skipped
    def roll_up() -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import get_engine
        from deepscholar.evaluation.boards.rollup import roll_up as roll

        release_id = _month()
        rows = roll(get_engine(), release_id, _judge_config())
        if not rows:
            raise AirflowFailException(f"no system has judged reports for {release_id}: nothing to put on a "
                                       "leaderboard (are any systems registered and active?)")
        return {"systems": len(rows)}

    @task
    def compare_judges() -> dict:
        """Judge vs judge on M, when another judge config has a board on M too (else skipped: optional,
        nothing downstream but `finish`, so it never holds back publication)."""
        from airflow.sdk.exceptions import AirflowSkipException

        from deepscholar.db import get_engine
        from deepscholar.evaluation.judge_validation.judge_comparison import (
            compare_with_other_judges,
            summary_line,
        )

        release_id, judge_config = _month(), _judge_config()
        results = compare_with_other_judges(get_engine(), release_id, judge_config)
        if not results:
            raise AirflowSkipException(f"{release_id} has boards under {judge_config} only: no other judge to compare")
        for result in results:
            print(summary_line(result))
        return {"compared": [r["judge_b"] for r in results]}

    @task
    def check_judge_drift() -> dict:
        """The judge's calibration slice re-judged for this month (evaluation/judge_validation/drift.py); a tripped alarm is
        stored, and check_leaderboard's `no_judge_drift` then refuses the board."""
        from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

        from deepscholar.db import get_engine
        from deepscholar.errors import UserError
        from deepscholar.evaluation.judge_validation.drift import check_month

        if not current_settings().drift_check:
            raise AirflowSkipException("the judge drift check is off (DEEPSCHOLAR_DRIFT_CHECK=false)")
        try:
            judge = _judge()
            check = check_month(get_engine(), _month(), judge, get_current_context()["params"].get("metrics"),
                                say=print, budget_usd=_budget(), approved_usd=_approved(judge))
        except UserError as exc:  # e.g. the judge's API key is not set: a retry cannot fix it
            raise AirflowFailException(str(exc)) from exc
        print(check.summary)
        return {"summary": check.summary, "tripped": [d.metric for d in check.tripped], "cost_usd": check.cost_usd}

    # none_failed: a drift check that is switched off (skipped) must not skip the board's check.
    @task(retries=0, trigger_rule="none_failed")
    def check_leaderboard() -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import get_engine
        from deepscholar.evaluation.boards.leaderboard_quality import check_leaderboard as check

        release_id = _month()
        result = check(get_engine(), release_id, _judge_config())
        if not result.success:
            raise AirflowFailException(f"leaderboard of {release_id} failed its check: {result.summary}")
        return {"summary": result.summary}

    @task(outlets=[LEADERBOARD_PUBLISHED], on_success_callback=_notify_board_published)
    def publish_leaderboard():
        from deepscholar.db import get_engine
        from deepscholar.evaluation.boards.board_versions import publish_board
        from deepscholar.evaluation.boards.leaderboard import format_leaderboard, load_leaderboard

        release_id, judge_config = _month(), _judge_config()
        version = publish_board(get_engine(), release_id, judge_config)  # the version check_leaderboard passed
        rows = load_leaderboard(get_engine(), release_id, judge_config)
        print(format_leaderboard(rows, "table"))
        top = rows[0]["system_id"] if rows else None
        from deepscholar.scheduling import record_run

        changes = f"; {version['changes']}" if version["changes"] else ""
        record_run(get_engine(), _run(), "published",
                   f"leaderboard of {release_id} published as board version {version['board_version']} "
                   f"({len(rows)} systems, judge {judge_config}{changes})")
        yield Metadata(LEADERBOARD_PUBLISHED, {"release_id": release_id, "judge_config": judge_config,
                                               "board_version": version["board_version"],
                                               "systems": len(rows), "top_system": top})

    @task
    def back_up_warehouse() -> dict:
        """After publication, with DEEPSCHOLAR_BACKUP_DIR set: the whole warehouse to that folder, newest 3 kept."""
        from deepscholar.db import get_engine
        from deepscholar.warehouse_backup import scheduled_backup

        folder = current_settings().backup_dir
        if folder is None:
            print("DEEPSCHOLAR_BACKUP_DIR is unset: no backup")
            return {}
        result = scheduled_backup(get_engine(), folder, _month())
        print(f"backed up to {result.path} ({result.bytes / 2**20:.1f} MiB in {result.seconds:.1f} s)")
        return {"path": str(result.path), "bytes": result.bytes, "seconds": round(result.seconds, 1)}

    @task
    def publish_site() -> dict:
        """The static site rebuilt from the warehouse and published to DEEPSCHOLAR_SITE_URL through Airflow's
        object storage (deepscholar/site/, docs/SITE.md). Built in site-build/ under DEEPSCHOLAR_HOME, so the
        months that did not change are reused from the last run's build. After the board, never before: a
        failure here leaves the board published, says so, and `finish` names this task."""
        from airflow.sdk import ObjectStoragePath

        from deepscholar.db import get_engine
        from deepscholar.site.publish import build_folder, refresh_site, site_url

        url = site_url()
        try:
            build, done = refresh_site(get_engine(), ObjectStoragePath(url), build_folder())
        except Exception as exc:
            print(f"the site was not published to {url}: {type(exc).__name__}: {exc}; the leaderboard of "
                  f"{_month()} stays published (the site still shows the previous build)")
            raise
        print(f"site: {len(build.files)} files built in {build.out} in {build.seconds:.1f} s ({build.parts_text()}); "
              f"published build {done.build_id} to {url}: {done.uploaded} uploaded, {done.reused} kept"
              + (" (unchanged)" if done.unchanged else ""))
        return {"url": url, "build_id": done.build_id, "uploaded": done.uploaded, "reused": done.reused,
                "parts_reused": build.reused, "parts_rendered": build.rendered}

    @task(trigger_rule="all_done", retries=0, on_failure_callback=None)
    def finish() -> dict:
        """Fails the run unless it published M's leaderboard, saying why in the log and benchmark_runs."""
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.db import get_engine
        from deepscholar.scheduling import finish_run, run_state

        ctx = get_current_context()
        states = ctx["ti"].get_task_states(dag_id=ctx["dag"].dag_id, run_ids=[ctx["run_id"]])
        failed = sorted({task_id for task_id, state in (states.get(ctx["run_id"]) or {}).items()
                         if state == "failed"})
        refusal = None
        if "approve_budget" in failed:  # its one line: the XCom, else the message it left on the run's row
            refusal = ctx["ti"].xcom_pull(task_ids="approve_budget", key=REFUSAL_KEY) or (
                run_state(get_engine(), _month(), ctx["run_id"]) or (None, None))[1]
        ok, message = finish_run(get_engine(), _run(), failed, reason=refusal)
        print(message)
        if not ok:
            raise AirflowFailException(message)
        return {"message": message}

    waited = wait_for_release()
    planned = plan()
    waited >> planned
    generated = [
        generate_report.override(task_id=f"generate_{lane}", pool=lane_pool(lane)).expand(
            pairs=lane_batches.override(task_id=f"plan_{lane}")(planned, lane))
        for lane in GENERATION_LANES
    ]
    checked = check_reports()
    generated >> checked
    jobs = plan_judging()
    checked >> jobs
    jobs >> estimate_budget() >> approve_budget
    judged = judge.expand(job=jobs)
    batch_judged = judge_batches(jobs)
    approve_budget >> choose_transport() >> [judged, batch_judged]
    published = publish_leaderboard()
    rolled = roll_up()
    [judged, batch_judged] >> rolled
    rolled >> check_judge_drift() >> check_leaderboard() >> published
    compared = compare_judges()  # optional: beside the checks and publication, never before them
    rolled >> compared
    site = publish_site()  # after the board: a failed site build never holds back or undoes publication
    published >> site
    finished = finish()
    [published, compared, site] >> finished
    published >> back_up_warehouse() >> finished  # a failed backup fails the run, its board stays published


deepscholar_benchmark()
