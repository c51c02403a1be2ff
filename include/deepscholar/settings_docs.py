"""Every setting as people read them: docs/OPERATIONS.md's table (`deepscholar settings --markdown`), grouped
by concern with who changes each one and why, and the effective values of an environment with where each
comes from (`deepscholar settings`)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from deepscholar.setting_kinds import shown
from deepscholar.settings import GROUPS, SETTINGS, Setting, Settings, current_settings

__all__ = ["GROUP_OWNERS", "WHO", "effective_rows", "markdown_table"]

# Who changes a group's settings, in general.
GROUP_OWNERS = {
    "warehouse": "the operator, once per deployment",
    "release": "the benchmark's maintainers, when what a month contains changes (stored with each release)",
    "external services": "the operator, to point at a mirror or replay server or to pace the services",
    "LLM calls": "the operator, per provider or served model",
    "judging": "the benchmark's maintainers (which judge, which tracks) and the operator (throughput)",
    "costs and budgets": "whoever pays for the judge",
    "judge validation": "the maintainers who answer for the judge's quality",
    "generation": "the operator, to spread generation over Airflow",
    "orchestration": "the operator of the Airflow deployment",
    "demo": "a developer running `make demo`",
    "command line": "the operator or analyst running the CLI",
    "web page": "the operator who exposes the page",
}

# Who changes each setting and why: one short line each (docs/OPERATIONS.md's table).
WHO = {
    "DEEPSCHOLAR_DB_URL": "operator: points every process at the deployment's PostgreSQL",
    "DEEPSCHOLAR_HOME": "developer: where local state goes (the tests give each run its own)",
    "DEEPSCHOLAR_BACKUP_DIR": "operator: where the warehouse's automatic backups go (docs/RUNBOOK.md)",
    "DEEPSCHOLAR_SITE_URL": "operator: where readers find the public site (a folder, s3://, any fsspec URL)",
    "DEEPSCHOLAR_SQL_DIR": "image builder: the image installs `sql/` apart from the source tree",
    "DEEPSCHOLAR_DB_POOL_SIZE": "operator: more threads per process need more connections; fit the budget",
    "DEEPSCHOLAR_JUDGE_DB_POOL_SIZE": "operator: raised with DEEPSCHOLAR_JUDGE_CONCURRENCY",
    "DEEPSCHOLAR_DB_POOL_TIMEOUT_SECONDS": "developer chasing a pool leak; nobody in production",
    "DEEPSCHOLAR_POOL_GUARD": "the test suite (on throughout); a developer chasing a pool deadlock",
    "DEEPSCHOLAR_DB_CONNECT_RETRIES": "operator: a warehouse that restarts slowly",
    "DEEPSCHOLAR_DB_CONNECT_BACKOFF_SECONDS": "operator, with the retries; tests shorten it",
    "DEEPSCHOLAR_EMBEDDED_MAX_CONNECTIONS": "developer: a local run with more workers than the budget allows",
    "DEEPSCHOLAR_CATEGORIES": "maintainers: the benchmark's field",
    "DEEPSCHOLAR_REQUIRE_VENUE": "maintainers: whether unreviewed papers may be queries",
    "DEEPSCHOLAR_VENUES": "maintainers: a venue the default list lacks",
    "DEEPSCHOLAR_MAX_QUERIES": "maintainers: a month's size, which bounds its cost",
    "DEEPSCHOLAR_SAMPLE_SEED": "maintainers: a different but reproducible sample",
    "DEEPSCHOLAR_ARXIV_API_URL": "operator or test: a mirror or a replay server",
    "DEEPSCHOLAR_ARXIV_EPRINT_URL": "operator or test: a mirror or a replay server",
    "DEEPSCHOLAR_ARXIV_OAI_URL": "operator or test: a mirror or a replay server",
    "DEEPSCHOLAR_OPENALEX_URL": "operator or test: a mirror or a replay server",
    "DEEPSCHOLAR_OPENALEX_EMAIL": "operator: OpenAlex's polite pool wants a contact",
    "DEEPSCHOLAR_ARXIV_DELAY_SECONDS": "operator: only ever up (arXiv's terms); replay servers set 0",
    "DEEPSCHOLAR_OPENALEX_INTERVAL_SECONDS": "operator: a premium OpenAlex key allows more",
    "DEEPSCHOLAR_HTTP_TIMEOUT_SECONDS": "operator: a slow network or mirror",
    "DEEPSCHOLAR_HTTP_RETRIES": "operator: a flaky network; tests lower it",
    "DEEPSCHOLAR_HTTP_BACKOFF_SECONDS": "operator, with the retries; tests set 0",
    "DEEPSCHOLAR_BREAKER_FAILURES": "operator: how soon a dead service stops a step",
    "DEEPSCHOLAR_BREAKER_SECONDS": "operator, with the failures",
    "DEEPSCHOLAR_LLM_TRANSPORT": "operator: `litellm` when a proxy needs litellm's handling",
    "DEEPSCHOLAR_LLM_TIMEOUT_SECONDS": "operator: a slow provider",
    "DEEPSCHOLAR_LLM_SERVING": "operator of a self-served model: its slots and its speed",
    "DEEPSCHOLAR_LLM_RETRIES": "operator: a flaky provider",
    "DEEPSCHOLAR_LLM_BACKOFF_SECONDS": "operator, with the retries; tests shorten it",
    "DEEPSCHOLAR_BATCH_POLL_SECONDS": "operator: fewer polls of a provider's batch API",
    "DEEPSCHOLAR_BATCH_WAIT_HOURS": "operator: a provider slower than its stated 24 h",
    "DEEPSCHOLAR_JUDGE": "maintainers: the judge the board is published under",
    "DEEPSCHOLAR_RELEASE_JUDGE": "maintainers: a cheaper or stronger model for release artefacts",
    "DEEPSCHOLAR_JUDGE_API_BASE": "operator: a self-served judge or a proxy",
    "DEEPSCHOLAR_JUDGE_CONCURRENCY": "operator: the provider's rate limit",
    "DEEPSCHOLAR_RELEASE_JUDGE_CONCURRENCY": "operator: the release judge's rate limit",
    "DEEPSCHOLAR_TRACKS": "maintainers: which tracks a month is judged on",
    "DEEPSCHOLAR_FAMILY_PACKAGES": "maintainers: a track kept outside this repository",
    "DEEPSCHOLAR_JUDGE_TRANSPORT": "whoever pays: `batch` halves the price, answers within a day",
    "DEEPSCHOLAR_JUDGE_TASKS": "operator: the workers' slots",
    "DEEPSCHOLAR_JUDGE_POOL": "operator: a pool of its own for judging",
    "DEEPSCHOLAR_JUDGE_JOB_REPORTS": "operator: smaller jobs retry less work, more jobs start more processes",
    "DEEPSCHOLAR_JUDGE_CLAIM_LEASE_SECONDS": "operator: slow judges; tests shorten it",
    "DEEPSCHOLAR_CLAIM_COVERAGE_W_MAX": "maintainers: `5` runs the window sweep as its own metric version",
    "DEEPSCHOLAR_RACE_WEIGHT_SAMPLES": "maintainers: steadier RACE weights for more calls",
    "DEEPSCHOLAR_JUDGE_BUDGET_USD": "whoever pays: the month's ceiling",
    "DEEPSCHOLAR_JUDGE_BUDGET_MARGIN": "whoever pays: how much overshoot is tolerable",
    "DEEPSCHOLAR_JUDGE_BUDGET_APPROVAL_HOURS": "operator: how long a month may wait for an answer",
    "DEEPSCHOLAR_JUDGE_BUDGET_APPROVERS": "whoever pays: who may approve spending past the budget",
    "DEEPSCHOLAR_RELEASE_JUDGE_BUDGET_USD": "whoever pays: the ceiling of a release's judging",
    "DEEPSCHOLAR_CALIBRATION_MAX_COST_USD": "whoever pays: the drift check's own ceiling",
    "DEEPSCHOLAR_AGREEMENT_RESAMPLES": "maintainers: steadier intervals for more time",
    "DEEPSCHOLAR_DRIFT_CHECK": "operator: off where the monthly re-judging is not wanted",
    "DEEPSCHOLAR_CALIBRATION_RELEASE": "maintainers: the month whose labels the slice is drawn from",
    "DEEPSCHOLAR_CALIBRATION_ITEMS": "maintainers: a steadier alarm for more calls",
    "DEEPSCHOLAR_DRIFT_MIN_AGREEMENT": "maintainers: how bad a judge may get",
    "DEEPSCHOLAR_DRIFT_MAX_DROP": "maintainers: how fast a judge may get worse",
    "DEEPSCHOLAR_AGREEMENT_ANNOTATORS_PER_ITEM": "maintainers: many annotators per item",
    "DEEPSCHOLAR_SEARCH_BACKEND": "operator: `arxiv` where the corpus is small",
    "DEEPSCHOLAR_SEARCH_INDEX_DIR": "operator: a faster or larger disk for the index",
    "DEEPSCHOLAR_SEARCH_INDEX_CHECK_SECONDS": "operator: corpus changes seen sooner or checked less often",
    "DEEPSCHOLAR_EXTERNAL_MAX_RESPONSE_BYTES": "operator: an external system with long answers",
    "DEEPSCHOLAR_GENERATION_CONCURRENCY": "operator: the workers' slots",
    "DEEPSCHOLAR_OFFLINE_BATCH": "operator: fewer, longer tasks for offline systems",
    "DEEPSCHOLAR_TASK_RETRIES": "operator: flaky infrastructure",
    "DEEPSCHOLAR_RELEASE_SHARDS": "operator: the release's parallel slices",
    "DEEPSCHOLAR_RELEASE_WAIT_HOURS": "operator: a release slower than four days",
    "DEEPSCHOLAR_RELEASE_POKE_SECONDS": "operator: fewer pokes while waiting",
    "DEEPSCHOLAR_SCHEDULE_START": "operator: the first month of a new deployment",
    "DEEPSCHOLAR_SCHEDULE_END": "operator: a deployment that stops",
    "DEEPSCHOLAR_AIRFLOW_API_URL": "operator: lets `systems add --backfill` queue in Airflow",
    "DEEPSCHOLAR_AIRFLOW_USERNAME": "operator: the account that queues backfills",
    "DEEPSCHOLAR_FROZEN_SLICE": "maintainers: the month every system is also compared on",
    "DEEPSCHOLAR_NOTIFY": "operator: who hears of a failed run, a published board, an approval asked",
    "DEEPSCHOLAR_PUBLICATION_DEADLINE_HOURS": "operator: when a late board should raise an alarm",
    "DEEPSCHOLAR_CATCHUP": "operator: a new deployment that should fill past months",
    "DEEPSCHOLAR_WARM_IMPORTS": "operator: less memory per task when workers fork",
    "DEEPSCHOLAR_WORKER_HOSTNAME": "`deepscholar.local_airflow` for its local Celery workers; nobody by hand",
    "DEEPSCHOLAR_DEMO_PORT": "developer: `make demo-ui` sets 8080",
    "DEEPSCHOLAR_DEMO_TIMEOUT": "developer: a slower machine",
    "DEEPSCHOLAR_REDISTRIBUTABLE_LICENCES": "maintainers, with legal advice: what an export may publish",
    "DEEPSCHOLAR_PROGRESS": "whoever runs the CLI: `plain` in logs",
    "DEEPSCHOLAR_IMPORT_MAX_FILE_BYTES": "operator: larger imports from trusted sources",
    "DEEPSCHOLAR_IMPORT_MAX_REPORT_CHARS": "operator: longer imported reports",
    "DEEPSCHOLAR_IMPORT_MAX_CITATIONS": "operator: imported reports citing more",
    "DEEPSCHOLAR_CATEGORY_MIN_QUERIES": "maintainers: how small a category board may be shown",
    "DEEPSCHOLAR_SYSTEM_KEY_VARIABLES": "operator: a provider whose key variable the default lacks",
    "DEEPSCHOLAR_WEB_API_BASES": "operator: servers a page-registered system may be sent to",
    "DEEPSCHOLAR_WEB_DB_WAIT_SECONDS": "operator: a slow warehouse",
    "DEEPSCHOLAR_WEB_MAX_BODY_BYTES": "operator: larger registration forms",
    "DEEPSCHOLAR_WEB_BODY_SECONDS": "operator: slow clients",
    "DEEPSCHOLAR_WEB_SIGNIN_PER_MINUTE": "operator: stricter or looser throttling",
    "DEEPSCHOLAR_WEB_SIGNIN_TIMEOUT_SECONDS": "operator: a slow Airflow API",
    "DEEPSCHOLAR_WEB_SIGNIN_WORKERS": "operator: many concurrent registrations",
    "DEEPSCHOLAR_WEB_ALLOWED_ORIGINS": "operator: a proxy that rewrites Host",
}


def _ordered() -> list[Setting]:
    return sorted(SETTINGS, key=lambda s: GROUPS.index(s.group))


def effective_rows(environ: Mapping[str, str] | None = None) -> list[tuple[str, str, str, str]]:
    """(group, variable, value, source) of every setting of `environ` (default: this process's)."""
    settings = current_settings() if environ is None else Settings.from_env(environ)
    environ = os.environ if environ is None else environ
    rows = []
    for s in _ordered():
        value = getattr(settings, s.name)
        # Unset: what that means (each client's own default, the Airflow connection, ...) when the docs say.
        text = shown(value) if value is not None or not s.shown_default else s.shown_default.replace("`", "")
        rows.append((s.group, s.env, text, s.source(environ)))
    return rows


def markdown_table() -> str:
    """docs/OPERATIONS.md's tables of every setting, one per group (`deepscholar settings --markdown`)."""
    lines: list[str] = []
    for group in GROUPS:
        owners = GROUP_OWNERS.get(group, "not said yet: add it to settings_docs.GROUP_OWNERS")
        lines += ["", f"**{group}** ({owners})", "",
                  "| variable | meaning | accepts | default | who changes it, and why |", "|---|---|---|---|---|"]
        for s in (s for s in SETTINGS if s.group == group):
            tolerant = " (a malformed value is logged and ignored)" if s.tolerant else ""
            lines.append(f"| `{s.env}` | {s.doc} | {s.kind.expected}{tolerant} | {s.default_text()} | "
                         f"{WHO.get(s.env, 'not said yet: add it to settings_docs.WHO')} |")
    return "\n".join(lines[1:])
