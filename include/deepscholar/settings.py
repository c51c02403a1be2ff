"""Every setting the library and the DAGs read from the environment, declared once.

A *setting* says how this machine runs the benchmark: where the warehouse and the outside services are,
how hard clients retry and how fast they go, how Airflow spreads the work, and the defaults a new month's
spec starts from. It never decides what an opened release contains: that is the release's stored spec
(`release.spec.ReleaseSpec`). Each setting is one field of `Settings`, declared with `_setting(...)`: its
environment variable, its default, what a valid value looks like, its group and one line for the docs
(README.md "Configuration" is `deepscholar settings --markdown`; a unit test keeps the two equal).

Code calls `current_settings()`: the environment parsed once per distinct set of values of the declared
variables, so a changed variable (a test's monkeypatch.setenv) is seen at the next call.
`Settings.from_env(environ)` parses a given mapping. A malformed value raises InvalidInput naming the
variable and what was expected, except for the *tolerant* settings (the retry, timeout and pacing knobs,
the shard count, claim coverage's window cap), whose bad values were always logged and ignored.

Not settings, and read where they are used: secrets (API keys, and the key-variable names systems are
configured with) and third-party variables (LITELLM_LOCAL_MODEL_COST_MAP, HF_HUB_OFFLINE, AIRFLOW_*).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import threading
from collections import OrderedDict
from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from deepscholar.errors import InvalidInput
from deepscholar.setting_kinds import (
    BOOL,
    CAP,
    CATEGORIES,
    COUNT,
    DATABASE_URL,
    ENDPOINT_PREFIXES,
    FRACTION,
    HOURS,
    MONTH,
    NAMES,
    NOTIFY_ROUTES,
    PATH,
    PORT,
    POSITIVE_INT,
    POSITIVE_SECONDS,
    SECONDS,
    SERVING,
    TEXT,
    URL,
    URL_PREFIXES,
    USD,
    Kind,
    choice,
    masked,
    number,
    or_none,
    shown,
)

__all__ = ["GROUPS", "SETTINGS", "Kind", "Setting", "Settings", "current_settings", "shown", "DEFAULT_CATEGORIES", "ARXIV_API_URL", "ARXIV_EPRINT_URL",
           "ARXIV_OAI_URL", "OPENALEX_URL"]

log = logging.getLogger(__name__)

GROUPS = ("warehouse", "release", "external services", "LLM calls", "judging", "generation", "orchestration",
          "demo", "command line", "web page")
DEFAULT_CATEGORIES = ("cs.CL", "cs.LG", "cs.IR", "cs.AI")
# Where the outside services live by default: the defaults of the settings that point a run elsewhere
# (a replay server, a mirror). Here rather than in sources/ because the sources' clients read the settings.
ARXIV_API_URL = "https://export.arxiv.org/api/query"
ARXIV_EPRINT_URL = "https://arxiv.org/e-print"
# OAI-PMH: the only arXiv interface that says under which licence a paper is distributed.
ARXIV_OAI_URL = "https://export.arxiv.org/oai2"
OPENALEX_URL = "https://api.openalex.org"  # what the OpenAlex client calls without DEEPSCHOLAR_OPENALEX_URL
# Licences under which a paper's text may be published again (URL prefixes, scheme and "www." ignored): the
# Creative Commons licences and CC0 / public domain. arXiv's own non-exclusive licence only lets arXiv
# distribute the paper, and an unknown licence allows nothing.
REDISTRIBUTABLE_LICENCES = tuple(
    [f"http://creativecommons.org/licenses/{kind}/" for kind in ("by", "by-sa", "by-nc", "by-nc-sa", "by-nd",
                                                                  "by-nc-nd")]
    + ["http://creativecommons.org/publicdomain/zero/", "http://creativecommons.org/licenses/publicdomain/",
       "http://creativecommons.org/publicdomain/mark/"])
# The variables a system's `api_key_env` may name by default (DEEPSCHOLAR_SYSTEM_KEY_VARIABLES): LLM providers'
# keys, never the warehouse URL, Airflow's secrets or anything else of the workers' environment.
PROVIDER_KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "MISTRAL_API_KEY",
                          "GROQ_API_KEY", "TOGETHER_API_KEY", "OPENROUTER_API_KEY", "DEEPSEEK_API_KEY")
# --- the declarations ---------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Setting:
    """One environment variable: which field of Settings it sets, how it is parsed and documented."""

    name: str  # the field of Settings
    env: str
    kind: Kind
    group: str
    doc: str
    default: Any
    shown_default: str | None = None  # how the docs show the default (else from the value)
    tolerant: bool = False  # malformed: logged and the default used, instead of InvalidInput
    blank_is_unset: bool = True  # an empty value means the default; False: the kind parses "" too

    def read(self, environ: Mapping[str, str]) -> Any:
        """This setting's value in `environ`."""
        raw = environ.get(self.env)
        if raw is None or (self.blank_is_unset and not raw.strip()):
            return self.default
        try:
            return self.kind.parse(raw.strip())
        except ValueError:
            problem = f"{self.env}={masked(raw)!r}: expected {self.kind.expected}"
            if not self.tolerant:
                raise InvalidInput(problem) from None
            log.warning("%s; using the default, %s", problem, self.default_text())
            return self.default

    def source(self, environ: Mapping[str, str]) -> str:
        """Where the value comes from: env, default, or default because the variable's value is unusable."""
        raw = environ.get(self.env)
        if raw is None or (self.blank_is_unset and not raw.strip()):
            return "default"
        try:
            self.kind.parse(raw.strip())
        except ValueError:
            return "default (the variable's value is unusable)"
        return "env"

    def default_text(self) -> str:
        return self.shown_default or ("unset" if self.default is None else f"`{shown(self.default)}`")


def _setting(env: str, default: Any, kind: Kind, group: str, doc: str, **options: Any) -> Any:
    """A field of Settings read from `env` (options: those of Setting)."""
    if group not in GROUPS:
        raise ValueError(f"{env}: unknown group {group!r}")
    return field(default=default, metadata={"setting": {"env": env, "kind": kind, "group": group, "doc": doc, **options}})


@dataclass(frozen=True)
class Settings:
    """The effective settings of this process; `current_settings()` gives the environment's."""

    # warehouse
    db_url: str | None = _setting(
        "DEEPSCHOLAR_DB_URL", None, DATABASE_URL, "warehouse", "the warehouse (PostgreSQL) URL",
        shown_default="the Airflow connection `deepscholar_db`, else the embedded PostgreSQL")
    home: Path = _setting(
        "DEEPSCHOLAR_HOME", Path(".deepscholar"), PATH, "warehouse",
        "local state: the embedded PostgreSQL, the demo snapshot, the demo's Airflow home")
    sql_dir: Path | None = _setting(
        "DEEPSCHOLAR_SQL_DIR", None, PATH, "warehouse", "folder of the analyst queries (`queries/*.sql`)",
        shown_default="`sql/` of the source tree")
    backup_dir: Path | None = _setting("DEEPSCHOLAR_BACKUP_DIR", None, PATH, "warehouse", "folder the benchmark DAG "
                                       "backs the warehouse up to after each publication, newest 3 kept; unset: none")
    db_pool_size: int = _setting(
        "DEEPSCHOLAR_DB_POOL_SIZE", 4, POSITIVE_INT, "warehouse",
        "warehouse connections one process opens at most (a task, the CLI, the page); its threads take turns, "
        "each holding one for a statement or a transaction, never while waiting for a provider")
    judge_db_pool_size: int = _setting(
        "DEEPSCHOLAR_JUDGE_DB_POOL_SIZE", 6, POSITIVE_INT, "warehouse",
        "the same for a judge task, whose requests in flight each read and write the `llm_calls` cache")
    db_pool_timeout_seconds: float = _setting(
        "DEEPSCHOLAR_DB_POOL_TIMEOUT_SECONDS", 10.0, POSITIVE_SECONDS, "warehouse",
        "how long a thread waits for one of its process's connections before failing with an error naming the "
        "pool's settings (connections are held for a statement or a transaction, so a longer wait is a leak or "
        "a deadlock, not load)")
    pool_guard: bool = _setting(
        "DEEPSCHOLAR_POOL_GUARD", False, BOOL, "warehouse",
        "a test and diagnostic switch: a thread that takes a second connection from its process's pool while "
        "it holds one, or waits for a guarded lock while it holds one, fails at once naming both places "
        "(the test suites turn it on)")
    db_connect_retries: int = _setting(
        "DEEPSCHOLAR_DB_CONNECT_RETRIES", 6, COUNT, "warehouse",
        "retries of a refused warehouse connection (too many clients, starting up, reset), with exponential "
        "backoff, before the task fails as an outage for Airflow to retry", tolerant=True)
    db_connect_backoff_seconds: float = _setting(
        "DEEPSCHOLAR_DB_CONNECT_BACKOFF_SECONDS", 1.0, SECONDS, "warehouse",
        "base of those retries' backoff (doubling, capped at 30 s, with jitter)", tolerant=True)
    embedded_max_connections: int = _setting(
        "DEEPSCHOLAR_EMBEDDED_MAX_CONNECTIONS", 300, number(int, "an integer >= 10", 10), "warehouse",
        "`max_connections` of the embedded PostgreSQL (applied when it starts; `deepscholar db stop` first to "
        "change it): the connection budget of `deepscholar settings` must fit under it")
    # release: the defaults of a new month's spec, stored with the release
    categories: tuple[str, ...] = _setting(
        "DEEPSCHOLAR_CATEGORIES", DEFAULT_CATEGORIES, CATEGORIES, "release", "arXiv categories searched")
    require_venue: bool = _setting(
        "DEEPSCHOLAR_REQUIRE_VENUE", True, BOOL, "release", "keep only papers accepted or published at a venue")
    venues: tuple[str, ...] | None = _setting(
        "DEEPSCHOLAR_VENUES", None, NAMES, "release", "venues a paper must name (empty: the default list)",
        shown_default="the list of `sources/venues.py`", blank_is_unset=False)
    max_queries: int | None = _setting(
        "DEEPSCHOLAR_MAX_QUERIES", 200, CAP, "release",
        "at most this many queries, a seeded sample stratified by primary category (`none`: every paper that "
        "passes; DAG param `max_queries`, `release build --max-queries`)", blank_is_unset=False)
    sample_seed: int = _setting(
        "DEEPSCHOLAR_SAMPLE_SEED", 0, number(int, "an integer", -math.inf), "release",
        "seed of the sample (DAG param `sample_seed`, `release build --seed`)")
    # external services
    arxiv_api_url: str = _setting("DEEPSCHOLAR_ARXIV_API_URL", ARXIV_API_URL, URL, "external services",
                                  "arXiv API endpoint (a replay server, a mirror)")
    arxiv_eprint_url: str = _setting("DEEPSCHOLAR_ARXIV_EPRINT_URL", ARXIV_EPRINT_URL, URL, "external services",
                                     "arXiv e-print endpoint")
    arxiv_oai_url: str = _setting(
        "DEEPSCHOLAR_ARXIV_OAI_URL", ARXIV_OAI_URL, URL, "external services",
        "arXiv OAI-PMH endpoint, where each query paper's licence is looked up (paced as the arXiv API when on "
        "its host)")
    openalex_url: str | None = _setting("DEEPSCHOLAR_OPENALEX_URL", None, URL, "external services",
                                        "OpenAlex endpoint", shown_default="the public OpenAlex API")
    openalex_email: str | None = _setting("DEEPSCHOLAR_OPENALEX_EMAIL", None, TEXT, "external services",
                                          "e-mail address sent to OpenAlex (its polite pool)")
    arxiv_delay_seconds: float = _setting(
        "DEEPSCHOLAR_ARXIV_DELAY_SECONDS", 3.0, SECONDS, "external services",
        "seconds between the starts of arXiv requests, API and e-prints each (arXiv asks for >= 3), kept "
        "across every worker process through the warehouse (`rate_limit.py`)")
    openalex_interval_seconds: float = _setting(
        "DEEPSCHOLAR_OPENALEX_INTERVAL_SECONDS", 0.1, SECONDS, "external services",
        "seconds between the starts of OpenAlex requests, across every worker process (the polite pool "
        "allows 10 per second)", tolerant=True)
    http_timeout_seconds: float | None = _setting(
        "DEEPSCHOLAR_HTTP_TIMEOUT_SECONDS", None, POSITIVE_SECONDS, "external services",
        "per-request timeout of the arXiv API, e-print and OpenAlex clients", tolerant=True,
        shown_default="each client's own: arXiv 30, e-prints 60, OpenAlex 30")
    http_retries: int | None = _setting(
        "DEEPSCHOLAR_HTTP_RETRIES", None, COUNT, "external services",
        "retries of a 429/5xx/timeout by the same clients", tolerant=True,
        shown_default="each client's own: arXiv 4, e-prints 4, OpenAlex 5")
    http_backoff_seconds: float | None = _setting(
        "DEEPSCHOLAR_HTTP_BACKOFF_SECONDS", None, SECONDS, "external services",
        "base of those retries' exponential backoff", tolerant=True,
        shown_default="each client's own: arXiv 2, e-prints 2, OpenAlex 1")
    breaker_failures: int = _setting(
        "DEEPSCHOLAR_BREAKER_FAILURES", 5, POSITIVE_INT, "external services",
        "a host's calls failing in a row (after their retries) before every call to it fails at once and "
        "the step stops, to be retried (`http_guard.py`)", tolerant=True)
    breaker_seconds: float = _setting(
        "DEEPSCHOLAR_BREAKER_SECONDS", 120.0, POSITIVE_SECONDS, "external services",
        "two or more failed calls in a row spanning this long also open a host's breaker; it lets calls "
        "through again after as long", tolerant=True)
    # LLM calls
    llm_transport: str = _setting(
        "DEEPSCHOLAR_LLM_TRANSPORT", "direct", choice("direct", "litellm"), "LLM calls",
        "how requests to an `openai/<model>` at an explicit `api_base` (vLLM, a proxy, an OpenAI-compatible "
        "server) are sent: `direct` (the OpenAI wire format over one pooled httpx client, without litellm's or "
        "the OpenAI SDK's per-call work: about a fifth of litellm's client CPU per call) or `litellm` (every "
        "provider through litellm)")
    llm_timeout_seconds: float | None = _setting(
        "DEEPSCHOLAR_LLM_TIMEOUT_SECONDS", None, POSITIVE_SECONDS, "LLM calls",
        "every LLM client's (systems and judges) per-request timeout", tolerant=True, shown_default="`60`")
    llm_serving: tuple = _setting(
        "DEEPSCHOLAR_LLM_SERVING", (), SERVING, "LLM calls",
        "per model (as the judge or system names it, e.g. `openai/smollm2`): the server's own per-request "
        "`timeout_seconds` (over the timeout above) and `concurrency`, the most requests in flight to it (a cap "
        "on every client's: a 1-slot local server wants 1-2 and minutes, a frontier API 16+ and seconds)",
        shown_default="none")
    llm_retries: int | None = _setting(
        "DEEPSCHOLAR_LLM_RETRIES", None, COUNT, "LLM calls", "retries of a 429/5xx/timeout by every LLM client",
        tolerant=True, shown_default="`4`")
    llm_backoff_seconds: float | None = _setting(
        "DEEPSCHOLAR_LLM_BACKOFF_SECONDS", None, SECONDS, "LLM calls",
        "base of the LLM clients' exponential backoff", tolerant=True, shown_default="`0.5`")
    batch_max_requests: int = _setting(
        "DEEPSCHOLAR_BATCH_MAX_REQUESTS", 50_000, POSITIVE_INT, "LLM calls",
        "most requests in one batch submitted to a provider's batch API (`llm/batch_transport.py`; OpenAI "
        "accepts 50,000)")
    batch_max_bytes: int = _setting(
        "DEEPSCHOLAR_BATCH_MAX_BYTES", 200_000_000, POSITIVE_INT, "LLM calls",
        "most bytes of one batch's JSONL input file (OpenAI accepts 200 MB); also the most read of one "
        "output or error file")
    batch_max_attempts: int = _setting(
        "DEEPSCHOLAR_BATCH_MAX_ATTEMPTS", 3, POSITIVE_INT, "LLM calls",
        "submissions of one request to a batch API (an errored line, an expired or cancelled batch submits it "
        "again) before it is marked failed and its judgment stored unscored with the provider's error")
    batch_poll_seconds: float = _setting(
        "DEEPSCHOLAR_BATCH_POLL_SECONDS", 60.0, POSITIVE_SECONDS, "LLM calls",
        "how often a judge run in batch mode asks the provider whether its batches have ended (the benchmark "
        "DAG's `judge_batches` sensor: its poke interval, at least 10 s)")
    batch_wait_hours: float = _setting(
        "DEEPSCHOLAR_BATCH_WAIT_HOURS", 72.0, HOURS, "LLM calls",
        "how long the benchmark DAG's `judge_batches` waits for a month judged through batches before it fails "
        "(OpenAI answers a batch within 24 h; an expired one is submitted again)")
    # judging
    judge: str = _setting(
        "DEEPSCHOLAR_JUDGE", "local", TEXT, "judging",
        "the judge: `local` (offline embeddings) or a litellm model string such as `openai/gpt-4o`; also the "
        "release-time judge of a new month")
    release_judge: str | None = _setting(
        "DEEPSCHOLAR_RELEASE_JUDGE", None, TEXT, "judging",
        "the release-time judge of a new month (importance labels, nuggets), when it should differ from the "
        "benchmark's", shown_default="`DEEPSCHOLAR_JUDGE`")
    judge_api_base: str | None = _setting("DEEPSCHOLAR_JUDGE_API_BASE", None, URL, "judging",
                                          "base URL of the judge's provider", shown_default="the provider's")
    judge_concurrency: int = _setting("DEEPSCHOLAR_JUDGE_CONCURRENCY", 16, POSITIVE_INT, "judging",
                                      "judge requests in flight inside one judge task")
    release_judge_concurrency: int = _setting(
        "DEEPSCHOLAR_RELEASE_JUDGE_CONCURRENCY", 8, POSITIVE_INT, "judging",
        "release-time judge requests in flight inside one `importance` or `nuggets` task")
    cost_prompt_tokens: int = _setting(
        "DEEPSCHOLAR_COST_PROMPT_TOKENS", 1500, POSITIVE_INT, "judging",
        "prompt tokens of one judge call in `deepscholar cost`'s prediction, until the audit trail has calls of "
        "that metric and model to measure")
    cost_completion_tokens: int = _setting(
        "DEEPSCHOLAR_COST_COMPLETION_TOKENS", 150, POSITIVE_INT, "judging",
        "completion tokens of one judge call in that prediction, likewise")
    judge_budget_usd: float | None = _setting(
        "DEEPSCHOLAR_JUDGE_BUDGET_USD", None, USD, "judging",
        "the most one month's judging (and its drift check) may cost under one judge: a run predicted over it "
        "(or with an unpriced model) waits for an operator's approval, and judging stops once the month's spend "
        "passes it (or what was approved) by DEEPSCHOLAR_JUDGE_BUDGET_MARGIN; a benchmark run's `budget_usd` "
        "may lower it, never raise or remove it", shown_default="none (no bound)")
    judge_budget_margin: float = _setting(
        "DEEPSCHOLAR_JUDGE_BUDGET_MARGIN", 0.1, FRACTION, "judging",
        "how far past its budget a month's actual judge spend may go before judging stops (a share of the "
        "budget): room for the prediction's error and the requests in flight")
    judge_budget_approval_hours: float = _setting(
        "DEEPSCHOLAR_JUDGE_BUDGET_APPROVAL_HOURS", 72.0, HOURS, "judging",
        "how long the benchmark DAG waits for an operator to approve a month predicted over its budget before "
        "the run ends, nothing sent")
    judge_budget_approvers: tuple[str, ...] = _setting(
        "DEEPSCHOLAR_JUDGE_BUDGET_APPROVERS", ("admin",), NAMES, "judging",
        "the Airflow users (their ids: the user name with Airflow's simple auth manager) who may answer the "
        "benchmark DAG's budget approval; any other account, whatever its role, is refused (HTTP 403)")
    release_judge_budget_usd: float | None = _setting(
        "DEEPSCHOLAR_RELEASE_JUDGE_BUDGET_USD", None, USD, "judging",
        "the most one release's release-time judging may cost (importance labels, nuggets, RACE's criteria and "
        "weights, the claims' ground truth): its steps stop once the release's spend passes it",
        shown_default="none (no bound)")
    category_min_queries: int = _setting(
        "DEEPSCHOLAR_CATEGORY_MIN_QUERIES", 10, POSITIVE_INT, "judging",
        "a primary category's board is shown on the page only with at least this many queries (fewer make a mean "
        "nobody should rank by)")
    tracks: tuple[str, ...] = _setting(
        "DEEPSCHOLAR_TRACKS", (), NAMES, "judging",
        "evaluation tracks judged besides the core seven, when no metrics are named (families of the metric "
        "registry other than `core`); empty: the core only")
    family_packages: tuple[str, ...] = _setting(
        "DEEPSCHOLAR_FAMILY_PACKAGES", (), NAMES, "judging",
        "Python packages outside the library that each hold one more metric family (a track), laid out like "
        "the folders of evaluation/metrics/ (docs/ARCHITECTURE.md, \"Adding a track\"); empty: the library's only")
    judge_transport: str = _setting(
        "DEEPSCHOLAR_JUDGE_TRANSPORT", "direct", choice("direct", "batch"), "judging",
        "how a month's judge requests reach the provider: `direct` (one by one, at once) or `batch` (the "
        "provider's batch API: about half the price, answered within 24 h; OpenAI's format, `openai/<model>`); "
        "the benchmark DAG's `judge_transport` param")
    judge_tasks: int = _setting("DEEPSCHOLAR_JUDGE_TASKS", 4, POSITIVE_INT, "judging",
                                "parallel judge tasks per benchmark run")
    judge_pool: str = _setting("DEEPSCHOLAR_JUDGE_POOL", "default_pool", TEXT, "judging",
                               "Airflow pool bounding parallel judge tasks")
    judge_job_reports: int = _setting(
        "DEEPSCHOLAR_JUDGE_JOB_REPORTS", 8000, POSITIVE_INT, "judging",
        "about how many report-metric judgments one judge task takes on: a month gets that many jobs' worth, "
        "rounded up to a multiple of DEEPSCHOLAR_JUDGE_TASKS, of equal work (`evaluation/judging/jobs.py`)")
    judge_claim_lease_seconds: float = _setting(
        "DEEPSCHOLAR_JUDGE_CLAIM_LEASE_SECONDS", 120.0, POSITIVE_SECONDS, "judging",
        "lease of a judge process on the reports it is judging (`evaluation/judging/_leases.py`, renewed every "
        "third of it while it works): another evaluation of the month skips them, and takes them over at most "
        "this long after their holder died")
    agreement_resamples: int = _setting(
        "DEEPSCHOLAR_AGREEMENT_RESAMPLES", 1000, POSITIVE_INT, "judging",
        "bootstrap resamples behind the 95% intervals of judge validation (`deepscholar judges agreement`, "
        "`deepscholar judges compare`): more is steadier and slower")
    claim_coverage_w_max: int = _setting(
        "DEEPSCHOLAR_CLAIM_COVERAGE_W_MAX", 1, number(int, "an integer from 1 to 5", 1, maximum=5), "judging",
        "claim coverage's window cap: `1` asks only what the headline (w = 1) needs; `5` runs the w = 0..5 "
        "sweep as its own metric version", tolerant=True)
    race_weight_samples: int = _setting(
        "DEEPSCHOLAR_RACE_WEIGHT_SAMPLES", 5, number(int, "an integer >= 1", 1), "judging",
        "how many times an LLM release judge is asked a query's four RACE dimension weights, each its own cached "
        "request (temperature 1, seed = the sample's index), the rubric's weights their mean; `1`: one "
        "deterministic call. Named in the rubric's judge config (`race_weights_v1.x<N>`); the local judge's one "
        "fixed weight set ignores it")
    # judging: the drift alarm (evaluation/judge_validation/drift.py)
    drift_check: bool = _setting(
        "DEEPSCHOLAR_DRIFT_CHECK", True, BOOL, "judging",
        "the benchmark DAG's `check_judge_drift` re-judges the calibration slice every month (off: the task is "
        "skipped, saying so; `deepscholar judges drift` still runs when asked)")
    calibration_release: str | None = _setting(
        "DEEPSCHOLAR_CALIBRATION_RELEASE", None, TEXT, "judging",
        "the release whose judgments give the calibration slice when a metric has no human labels (read once, "
        "when a judge's slice is drawn)", shown_default="the first published release the judge judged")
    calibration_items: int = _setting(
        "DEEPSCHOLAR_CALIBRATION_ITEMS", 40, POSITIVE_INT, "judging",
        "questions per metric in a judge's calibration slice, drawn once and re-judged every month")
    calibration_max_cost_usd: float | None = _setting(
        "DEEPSCHOLAR_CALIBRATION_MAX_COST_USD", 5.0, or_none(number(float, "a number of USD >= 0", 0)),
        "judging",
        "the most a month's drift check may cost, besides the month's judging budget it is paid from: predicted "
        "above it (unpriced models at their fallback price), the check refuses that month and says so, and "
        "while it runs it stops past it by the budget margin; `none`: no bound of its own")
    drift_min_agreement: float = _setting(
        "DEEPSCHOLAR_DRIFT_MIN_AGREEMENT", 0.8, FRACTION, "judging",
        "the drift alarm trips when a metric's agreement with its calibration labels falls below this")
    drift_max_drop: float | None = _setting(
        "DEEPSCHOLAR_DRIFT_MAX_DROP", 0.1, or_none(FRACTION), "judging",
        "... or drops by more than this since the judge's previous month checked; `none`: only the minimum")
    # generation
    search_backend: str = _setting("DEEPSCHOLAR_SEARCH_BACKEND", "local", TEXT, "generation",
                                   "search backend of systems without a `search` config key")
    search_index_dir: Path | None = _setting(
        "DEEPSCHOLAR_SEARCH_INDEX_DIR", None, PATH, "generation",
        "folder of the `local` search's BM25 index, a cache derived from `corpus` (rebuilt by itself when the "
        "corpus changes; safe to delete; one per machine)", shown_default="`search-index/` in DEEPSCHOLAR_HOME")
    search_index_check_seconds: float = _setting(
        "DEEPSCHOLAR_SEARCH_INDEX_CHECK_SECONDS", 10.0, SECONDS, "generation",
        "how often a process asks whether `corpus` changed since its search index was built (0: before every "
        "search); a paper added since is found from the next check on")
    external_max_response_bytes: int = _setting(
        "DEEPSCHOLAR_EXTERNAL_MAX_RESPONSE_BYTES", 20_000_000, POSITIVE_INT, "generation",
        "largest answer, in bytes, an external system's endpoint may send for one query (read in chunks; a "
        "larger one, or a larger declared Content-Length, is that report's system_error)")
    generation_concurrency: int = _setting("DEEPSCHOLAR_GENERATION_CONCURRENCY", 4, POSITIVE_INT, "generation",
                                           "parallel mapped generation tasks per lane and run")
    offline_batch: int = _setting(
        "DEEPSCHOLAR_OFFLINE_BATCH", 25, POSITIVE_INT, "generation",
        "(system, query) pairs per generation task of offline systems (LLM systems: one per task)")
    pool_offline: str = _setting("DEEPSCHOLAR_POOL_OFFLINE", "default_pool", TEXT, "generation",
                                 "Airflow pool of the generation lane of systems without an LLM")
    pool_openai: str = _setting("DEEPSCHOLAR_POOL_OPENAI", "llm_openai", TEXT, "generation",
                                "Airflow pool of the OpenAI generation lane")
    pool_anthropic: str = _setting("DEEPSCHOLAR_POOL_ANTHROPIC", "llm_anthropic", TEXT, "generation",
                                   "Airflow pool of the Anthropic generation lane")
    pool_gemini: str = _setting("DEEPSCHOLAR_POOL_GEMINI", "llm_gemini", TEXT, "generation",
                                "Airflow pool of the Gemini generation lane")
    pool_local: str = _setting("DEEPSCHOLAR_POOL_LOCAL", "llm_local", TEXT, "generation",
                               "Airflow pool of the lane of local models (ollama, vLLM, ...)")
    pool_other: str = _setting("DEEPSCHOLAR_POOL_OTHER", "llm_other", TEXT, "generation",
                               "Airflow pool of the lane of every other provider")
    # orchestration
    task_retries: int = _setting("DEEPSCHOLAR_TASK_RETRIES", 2, COUNT, "orchestration", "retries per Airflow task")
    release_shards: int = _setting(
        "DEEPSCHOLAR_RELEASE_SHARDS", 4, POSITIVE_INT, "orchestration",
        "slices extraction and resolution run in: mapped tasks in the release DAG, threads in `release build`",
        tolerant=True)
    release_wait_hours: float = _setting("DEEPSCHOLAR_RELEASE_WAIT_HOURS", 96.0, HOURS, "orchestration",
                                         "hours a benchmark run waits for its month's release")
    release_poke_seconds: float = _setting("DEEPSCHOLAR_RELEASE_POKE_SECONDS", 300.0, SECONDS, "orchestration",
                                           "how often a waiting benchmark run looks at its release")
    schedule_start: str = _setting("DEEPSCHOLAR_SCHEDULE_START", "2025-01", MONTH, "orchestration",
                                   "first month the deployment covers")
    schedule_end: str | None = _setting("DEEPSCHOLAR_SCHEDULE_END", None, MONTH, "orchestration",
                                        "last month the scheduler starts by itself", shown_default="none")
    airflow_api_url: str | None = _setting(
        "DEEPSCHOLAR_AIRFLOW_API_URL", None, URL, "orchestration",
        "Airflow's API server (e.g. http://localhost:8080) that `deepscholar systems add --backfill` queues a new "
        "system's backfill on, signed in as DEEPSCHOLAR_AIRFLOW_USERNAME; unset: the plan and the commands are "
        "printed")
    airflow_username: str = _setting("DEEPSCHOLAR_AIRFLOW_USERNAME", "admin", TEXT, "orchestration",
                                     "the Airflow user that queues backfills")
    airflow_password_env: str = _setting("DEEPSCHOLAR_AIRFLOW_PASSWORD_ENV", "AIRFLOW_API_PASSWORD", TEXT,
                                         "orchestration", "the environment variable holding that user's password")
    frozen_slice: str | None = _setting(
        "DEEPSCHOLAR_FROZEN_SLICE", None, TEXT, "orchestration",
        "a past release (e.g. the first month) every newly registered system is backfilled on, whatever its "
        "knowledge cutoff, so systems of different months are also compared on the same queries; none: off",
        shown_default="none")
    notify: tuple[tuple[str, str], ...] = _setting("DEEPSCHOLAR_NOTIFY", (), NOTIFY_ROUTES, "orchestration",
                                                   "which events go to which Airflow connections (docs/RUNBOOK.md)")
    publication_deadline_hours: float | None = _setting("DEEPSCHOLAR_PUBLICATION_DEADLINE_HOURS", None, HOURS,
        "orchestration", "hours after month M ends by which its board should be published, else `deadline_missed`")
    catchup: bool = _setting("DEEPSCHOLAR_CATCHUP", False, BOOL, "orchestration",
                             "whether the scheduler catches up the months between start and now (or end)")
    warm_imports: tuple[str, ...] = _setting(
        "DEEPSCHOLAR_WARM_IMPORTS", ("litellm", "sentence_transformers"), NAMES, "orchestration",
        "modules the scheduler and Celery workers import once before forking task processes (`warm.py`; "
        "`none`: off; a module not installed is skipped with a warning)", blank_is_unset=False)
    worker_hostname: str | None = _setting(
        "DEEPSCHOLAR_WORKER_HOSTNAME", None, TEXT, "orchestration",
        "the name a local Celery worker records on its task instances", shown_default="the machine's name")
    # demo
    demo_port: int = _setting("DEEPSCHOLAR_DEMO_PORT", 0, PORT, "demo",
                              "the demo's Airflow port (`0`: any free one; `make demo-ui`: 8080)")
    demo_timeout_seconds: float = _setting("DEEPSCHOLAR_DEMO_TIMEOUT", 1200.0, POSITIVE_SECONDS, "demo",
                                           "seconds the demo waits for its month")
    # command line
    redistributable_licences: tuple[str, ...] = _setting(
        "DEEPSCHOLAR_REDISTRIBUTABLE_LICENCES", REDISTRIBUTABLE_LICENCES, URL_PREFIXES, "command line",
        "licences (URL prefixes) whose papers' related-work texts `deepscholar export` publishes; the others' "
        "are withheld and counted (titles and abstracts always stay)",
        shown_default="the Creative Commons licences (by, by-sa, by-nc, by-nc-sa, by-nd, by-nc-nd), CC0 and "
                      "public domain", blank_is_unset=False)
    progress: str = _setting(
        "DEEPSCHOLAR_PROGRESS", "auto", choice("auto", "bar", "plain"), "command line",
        "how the CLI shows long steps: `bar` (live bars), `plain` (\"n of N\" log lines), `auto` (bars when "
        "stderr is a terminal)")

    # --- web page: registration from the leaderboard page, and what a registered system may name -----------
    # (issue 32: whatever a third party sends is bounded, and never reaches configuration that reads a secret)
    system_key_variables: tuple[str, ...] = _setting(
        "DEEPSCHOLAR_SYSTEM_KEY_VARIABLES", PROVIDER_KEY_VARIABLES, NAMES, "web page",
        "the only environment variables a system's `api_key_env` may name (registration from the page or "
        "`systems add`, and again when the system runs); any other name is refused, so no registered system "
        "can read another secret of the workers' environment (`none`: no system may name a key)",
        shown_default="the usual LLM providers' key variables (" + ", ".join(PROVIDER_KEY_VARIABLES) + ")",
        blank_is_unset=False)
    web_api_bases: tuple[str, ...] = _setting(
        "DEEPSCHOLAR_WEB_API_BASES", (), ENDPOINT_PREFIXES, "web page",
        "base URLs a system registered from the page may give as its `api_base` (a provider's key would be "
        "sent there), compared parsed: same scheme, host and port, and a path at or below theirs on a `/` boundary; "
        "checked at registration and again each time such a system runs; `none`: the page refuses `api_base` (the "
        "CLI `systems add` is the operator's and is not bound by it)", shown_default="none", blank_is_unset=False)
    web_db_wait_seconds: float = _setting(
        "DEEPSCHOLAR_WEB_DB_WAIT_SECONDS", 5.0, POSITIVE_SECONDS, "web page",
        "longest a page request waits for the warehouse: to connect (no retries) and for one of the "
        "DEEPSCHOLAR_DB_POOL_SIZE pooled connections; past it the page answers 503 at once instead of hanging")
    web_max_body_bytes: int = _setting(
        "DEEPSCHOLAR_WEB_MAX_BODY_BYTES", 65536, POSITIVE_INT, "web page",
        "largest request body the page reads (a form post); larger ones get 413 before any byte is parsed")
    web_body_seconds: float = _setting(
        "DEEPSCHOLAR_WEB_BODY_SECONDS", 10.0, POSITIVE_SECONDS, "web page",
        "how long the page waits for a request body to arrive in full (408 after)")
    web_signin_per_minute: int = _setting(
        "DEEPSCHOLAR_WEB_SIGNIN_PER_MINUTE", 10, POSITIVE_INT, "web page",
        "sign-in attempts (registration and queueing posts) the page passes to Airflow per minute from one "
        "client address, and again per Airflow user name; more get 429")
    web_signin_timeout_seconds: float = _setting(
        "DEEPSCHOLAR_WEB_SIGNIN_TIMEOUT_SECONDS", 10.0, POSITIVE_SECONDS, "web page",
        "deadline of each call the page makes to Airflow's API for a sign-in, permission check or backfill")
    web_signin_workers: int = _setting(
        "DEEPSCHOLAR_WEB_SIGNIN_WORKERS", 2, POSITIVE_INT, "web page",
        "threads of the page's own that sign in and register (apart from the threads that serve the board); "
        "a post finding them all busy, and as many waiting, gets 503")
    web_allowed_origins: tuple[str, ...] = _setting(
        "DEEPSCHOLAR_WEB_ALLOWED_ORIGINS", (), NAMES, "web page",
        "origins (scheme://host:port) besides the page's own whose form posts are accepted (a proxy that "
        "rewrites Host); a post whose Origin is another site's gets 403", shown_default="none",
        blank_is_unset=False)

    # --- bounds on what a third party writes (annotation and report imports) -------------------------------
    # Each is checked before the input is read whole or stored, and refused in one line naming the setting.
    agreement_annotators_per_item: int = _setting(
        "DEEPSCHOLAR_AGREEMENT_ANNOTATORS_PER_ITEM", 10, number(int, "an integer >= 2", 2), "judging",
        "judge validation's humans-among-themselves statistics (alpha, pairwise agreement) read at most this many "
        "labels per item, the same ones every time (a seeded hash of item and annotator picks them); the "
        "judge-vs-humans majority uses every label. Bounds the work of `annotate import` and `agreement`")
    import_max_file_bytes: int = _setting(
        "DEEPSCHOLAR_IMPORT_MAX_FILE_BYTES", 100_000_000, POSITIVE_INT, "command line",
        "largest file `deepscholar reports import` (and `annotate import`) reads, in bytes; a larger one is "
        "refused before it is read")
    import_max_report_chars: int = _setting(
        "DEEPSCHOLAR_IMPORT_MAX_REPORT_CHARS", 200_000, POSITIVE_INT, "command line",
        "longest report text `deepscholar reports import` stores, in characters; a longer output is not imported "
        "(one line, exit 2)")
    import_max_citations: int = _setting(
        "DEEPSCHOLAR_IMPORT_MAX_CITATIONS", 500, number(int, "an integer from 1 to 999", 1, maximum=999),
        "command line",
        "most sources one imported report may have, and its highest citation number; an output with more is not "
        "imported (one line, exit 2; citation numbers are read up to 999)")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        """Every setting from `environ` (default: this process's environment); InvalidInput lists every
        malformed variable."""
        environ = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        problems: list[str] = []
        for setting in SETTINGS:
            try:
                values[setting.name] = setting.read(environ)
            except InvalidInput as exc:
                problems.append(str(exc))
        if problems:
            raise InvalidInput("; ".join(problems))
        return cls(**values)

    def replace(self, **changes: Any) -> Settings:
        """A copy with some values changed (tests, a replay server's endpoints)."""
        return dataclasses.replace(self, **changes)


SETTINGS: tuple[Setting, ...] = tuple(
    Setting(name=f.name, default=f.default, **f.metadata["setting"]) for f in fields(Settings))
_ENV_NAMES = tuple(s.env for s in SETTINGS)


# --- the current environment's settings ---------------------------------------------------------------------

_CACHE: OrderedDict[tuple[str | None, ...], Settings] = OrderedDict()
_CACHE_SIZE = 32
_CACHE_LOCK = threading.Lock()


def current_settings() -> Settings:
    """The settings of this process's environment as it is now, parsed once per distinct environment."""
    key = tuple(map(os.environ.get, _ENV_NAMES))  # ~50 us: read at client set-up, not per request
    with _CACHE_LOCK:
        if (hit := _CACHE.get(key)) is not None:
            _CACHE.move_to_end(key)
            return hit
    # Parsed from the values the key holds, so the cached settings are those of the key even when another
    # thread changes the environment meanwhile.
    settings = Settings.from_env({name: value for name, value in zip(_ENV_NAMES, key, strict=True)
                                  if value is not None})
    with _CACHE_LOCK:
        _CACHE[key] = settings
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
    return settings
