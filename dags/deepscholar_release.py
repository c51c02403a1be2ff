"""Monthly dataset release: month M (the data interval) becomes a gated, published benchmark release.

Wiring only: every task calls one function of deepscholar.release.steps.

After `publish`, `benchmark_start_needed` looks at `benchmark_runs`: at the cron tick the benchmark run
for M is already waiting for this release, so nothing is started; if no benchmark run for M is waiting
or running (the earlier one stopped because the gate failed, or M was built by hand),
`start_benchmark` triggers one, so every published month gets its leaderboard with no human step.
"""

from __future__ import annotations

from datetime import timedelta

from airflow.providers.standard.operators.trigger_dagrun import TriggerDagRunOperator
from airflow.sdk import Asset, CronDataIntervalTimetable, Metadata, Param, dag, get_current_context, task

from deepscholar.orchestration import (
    BENCHMARK_DAG_ID,
    MONTHLY_CRON,
    RELEASE_ASSET_NAME,
    RELEASE_ASSET_URI,
    RELEASE_DAG_ID,
    schedule_window,
)
from deepscholar.settings import current_settings

RELEASE_PUBLISHED = Asset(name=RELEASE_ASSET_NAME, uri=RELEASE_ASSET_URI)


def _context(release_id: str):
    from deepscholar.db import get_engine
    from deepscholar.release.steps import ReleaseContext

    return ReleaseContext.load(get_engine(), release_id)


def _judged(step, release_id: str, *args):
    """A step that asks the release judge: past the release's budget (DEEPSCHOLAR_RELEASE_JUDGE_BUDGET_USD) it
    fails with the amounts and no retry, which would only stop again."""
    from airflow.sdk.exceptions import AirflowFailException

    from deepscholar.errors import OverBudget

    try:
        return step(_context(release_id), *args)
    except OverBudget as exc:
        raise AirflowFailException(str(exc)) from exc


def _notify_gate_failed(context) -> None:
    """`release_failed`: the month, its failing checks and the command that rebuilds it."""
    from deepscholar.notifications.callbacks import release_gate_failed

    release_gate_failed(context)


@dag(
    dag_id=RELEASE_DAG_ID,
    schedule=CronDataIntervalTimetable(MONTHLY_CRON, timezone="UTC"),
    **schedule_window(),  # start/end/catchup from DEEPSCHOLAR_SCHEDULE_START/_END, DEEPSCHOLAR_CATCHUP
    max_active_runs=1,
    tags=["deepscholar", "release"],
    default_args={
        "retries": current_settings().task_retries,
        "retry_delay": timedelta(minutes=2),
        "retry_exponential_backoff": True,
    },
    params={
        # ASCII digits, months 01-12 and exactly 7 characters: Python's \d takes '２０２５-０６' and `$` a
        # trailing newline, and the run would fail later on them.
        "month": Param(None, type=["null", "string"], pattern=r"^[0-9]{4}-(0[1-9]|1[0-2])$", maxLength=7,
                       description="Build this month instead of the run's data interval (YYYY-MM)."),
        "categories": Param(None, type=["null", "array"], description="arXiv categories; default from env."),
        "require_venue": Param(None, type=["null", "boolean"], description="Keep only accepted papers."),
        "judge": Param(None, type=["null", "string"], description="'local' or a litellm model string."),
        "max_queries": Param(None, type=["null", "integer"], minimum=0,
                             description="At most this many queries, a seeded sample stratified by primary "
                                         "category; 0 = every paper that passes. Default: "
                                         "DEEPSCHOLAR_MAX_QUERIES, else 200."),
        "sample_seed": Param(None, type=["null", "integer"],
                             description="Seed of the sample (stored with the release). Default: "
                                         "DEEPSCHOLAR_SAMPLE_SEED, else 0."),
        "reason": Param(None, type=["null", "string"], maxLength=500,
                        description="Why the month is built again. A published month never changes in place: "
                                    "this run builds its next version (M.v2, ...) with this reason in its "
                                    "changelog (default: 'rebuild requested')."),
        "tracks": Param(None, type=["null", "array"],
                        description="Evaluation tracks the month is built for (stored with the release): RACE's "
                                    "rubrics and the claims track's ground truth are made after the nuggets for "
                                    "race and claims. Default: DEEPSCHOLAR_TRACKS (none: the core alone)."),
    },
    doc_md=__doc__,
)
def deepscholar_release():
    @task
    def open_release() -> str:
        """The version this run builds (M, or M.v2 when M is published): every task below gets its id."""
        from deepscholar.db import get_engine
        from deepscholar.release.spec import ReleaseSpec
        from deepscholar.release.steps import open_release as open_step
        from deepscholar.release.window import release_id_for

        ctx = get_current_context()
        params = ctx["params"]
        month = params.get("month") or release_id_for(ctx["data_interval_start"])
        spec = ReleaseSpec.from_env(categories=params.get("categories"), require_venue=params.get("require_venue"),
                                    judge=params.get("judge"), max_queries=params.get("max_queries"),
                                    sample_seed=params.get("sample_seed"), tracks=params.get("tracks"))
        # The month itself for start_benchmark's conf: the benchmark resolves it to the current version.
        ctx["ti"].xcom_push(key="month", value=month)
        return open_step(get_engine(), month, spec, reason=params.get("reason")).release_id

    @task
    def search(release_id: str) -> dict:
        from deepscholar.release.steps import search_candidates

        return search_candidates(_context(release_id))

    @task
    def filter_papers(release_id: str) -> dict:
        from deepscholar.release.steps import filter_candidates

        return filter_candidates(_context(release_id))

    @task
    def shards() -> list[list[int]]:
        from deepscholar.release.shards import release_shards

        n = release_shards()
        return [[k, n] for k in range(n)]

    @task(map_index_template="{{ shard_label }}")
    def extract(release_id: str, shard: list[int]) -> dict:
        from deepscholar.release.shards import shard_label
        from deepscholar.release.steps import extract_exemplars

        get_current_context()["shard_label"] = shard_label(tuple(shard))
        # Each slice also resolves the references of the papers it keeps as it goes (the e-print host and
        # the arXiv API/OpenAlex are then busy at once); `resolve` finishes what is left.
        return extract_exemplars(_context(release_id), tuple(shard), resolve=True)

    @task
    def finish_extract(release_id: str) -> dict:
        from deepscholar.release.steps import finish_extraction

        return finish_extraction(_context(release_id))

    @task(map_index_template="{{ shard_label }}")
    def resolve(release_id: str, shard: list[int]) -> dict:
        from deepscholar.release.shards import shard_label
        from deepscholar.release.steps import resolve_references

        get_current_context()["shard_label"] = shard_label(tuple(shard))
        return resolve_references(_context(release_id), tuple(shard))

    @task
    def licences(release_id: str) -> dict:
        """Each kept paper's licence from arXiv's OAI-PMH (release/licences.py); an outage fails the task."""
        from deepscholar.release.steps import fetch_licences

        return fetch_licences(_context(release_id))

    @task
    def importance(release_id: str) -> dict:
        from deepscholar.release.steps import label_importance

        return _judged(label_importance, release_id)

    @task
    def nuggets(release_id: str) -> dict:
        from deepscholar.release.steps import nuggetize_exemplars

        return _judged(nuggetize_exemplars, release_id)

    @task
    def artefact_tracks(release_id: str) -> list[str]:
        """The tracks the month is built for (its spec's tracks) that have release-time artefacts, found in
        their folders (evaluation/metrics/<track>/): one mapped task each, none when the month has none."""
        from deepscholar.release.track_artefacts import artefact_tracks as with_artefacts

        tracks = with_artefacts(_context(release_id).spec.tracks)
        print(f"release {release_id}: release-time artefacts of {', '.join(tracks) or 'no track'}")
        return tracks

    @task(map_index_template="{{ track }}")
    def track_artefacts(release_id: str, track: str) -> dict:
        """One track's release-time artefacts (RACE's rubrics, the claims track's ground truth, ...)."""
        from airflow.sdk import get_current_context

        from deepscholar.release.steps import build_track_artefacts

        get_current_context()["track"] = track  # type: ignore[typeddict-unknown-key]  # the map index's label
        return _judged(build_track_artefacts, release_id, track)

    # With no artefact track the mapped task is skipped; the gate still runs (and checks what was built).
    @task(retries=0, trigger_rule="none_failed", on_failure_callback=_notify_gate_failed)
    def quality_gate(release_id: str) -> dict:
        from airflow.sdk.exceptions import AirflowFailException

        from deepscholar.release.steps import gate_release

        result = gate_release(_context(release_id))
        if not result.success:
            raise AirflowFailException(f"release {release_id} failed its quality gate: {result.summary}")
        return {"gx_success": True, "summary": result.summary}

    @task(outlets=[RELEASE_PUBLISHED])
    def publish(release_id: str):
        from deepscholar.release.steps import publish as publish_step

        counts = publish_step(_context(release_id))
        yield Metadata(RELEASE_PUBLISHED, {"release_id": release_id, **{k: v for k, v in counts.items()
                                                                          if isinstance(v, int)}})

    @task.short_circuit
    def benchmark_start_needed(release_id: str) -> bool:
        from deepscholar.db import get_engine
        from deepscholar.scheduling import benchmark_start_needed as needed

        start, reason = needed(get_engine(), release_id)
        print(reason)
        return start

    release_id = open_release()
    gate = quality_gate(release_id)
    published = publish(release_id)
    # Extraction and resolution run as mapped tasks over slices of the month (DEEPSCHOLAR_RELEASE_SHARDS):
    # a retried slice redoes only what it has not stored, and every slice's requests share each host's
    # rate limit through the warehouse (deepscholar.rate_limit), so more slices never mean faster requests.
    slices = shards()
    tracks = artefact_tracks(release_id)
    extracted = finish_extract(release_id)
    (search(release_id) >> filter_papers(release_id) >> slices
     >> extract.partial(release_id=release_id).expand(shard=slices) >> extracted
     >> resolve.partial(release_id=release_id).expand(shard=slices)
     >> importance(release_id) >> nuggets(release_id) >> tracks
     >> track_artefacts.partial(release_id=release_id).expand(track=tracks) >> gate >> published)
    # The kept papers' licences (for what the published data may carry), beside resolution: the gate waits.
    extracted >> licences(release_id) >> gate
    start_benchmark = TriggerDagRunOperator(
        task_id="start_benchmark",
        trigger_dag_id=BENCHMARK_DAG_ID,
        trigger_run_id="release_published__{{ ti.xcom_pull(task_ids='open_release') }}__{{ run_id }}",
        conf={"month": "{{ ti.xcom_pull(task_ids='open_release', key='month') }}"},
        # The month travels in conf; no logical date, so the run is never dropped as lying past the DAG's
        # end_date (Airflow creates no task instances for such a run and marks it success).
        logical_date=None,
        skip_when_already_exists=True,  # a retried task must not start a second run
    )
    published >> benchmark_start_needed(release_id) >> start_benchmark


deepscholar_release()
