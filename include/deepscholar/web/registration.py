"""Registering a system from the page, behind Airflow's own sign-in and permission.

Design notes: docs/MODULE_NOTES.md, `deepscholar.web.registration`.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from sqlalchemy.engine import Engine

from deepscholar.airflow_api import AirflowAPI, AirflowAPIError
from deepscholar.errors import InvalidInput, UserError

__all__ = ["RegistrationForm", "registration_enabled", "sign_in", "register", "plan_of", "queue", "SignInThrottle",
           "Throttled", "ForeignOrigin", "check_origin", "NotPermitted"]

MAX_USERNAME_CHARS = 256
MAX_PASSWORD_CHARS = 1024


class Throttled(UserError):
    """Too many sign-in attempts from one client or for one user name (HTTP 429)."""


class ForeignOrigin(UserError):
    """A form post sent by another site's page (HTTP 403)."""


class NotPermitted(AirflowAPIError):
    """Signed in, but Airflow does not let this user create runs of the benchmark DAG (HTTP 403)."""


@dataclass(frozen=True)
class RegistrationForm:
    name: str
    kind: str
    config: str  # JSON object, as typed
    version: str
    knowledge_cutoff: str  # YYYY-MM-DD, 'unknown' or empty

    def config_object(self) -> dict[str, Any]:
        from deepscholar.systems.registry import parse_config

        return parse_config(self.config, "config")

    def system_name(self) -> str:
        from deepscholar.systems.config_schema import normalised

        return normalised(self.name).strip()


def registration_enabled() -> str | None:
    """None when the page may register systems; else why not (shown on the form)."""
    from deepscholar.settings import current_settings

    if not current_settings().airflow_api_url:
        return ("Registration from this page is off: it signs in to Airflow's API to check who you are, and "
                "DEEPSCHOLAR_AIRFLOW_API_URL is not set. Use `deepscholar systems add NAME --kind KIND --backfill`.")
    return None


def user_key(username: str) -> str:
    """The user name as the throttle counts it: NFKC, case-folded, trimmed (look-alikes count as one)."""
    from deepscholar.systems.config_schema import normalised

    return normalised(username).strip().casefold()


class SignInThrottle:
    """Sign-in attempts in any 60 s, in process: at most `per_minute` per client address, and per user name
    without letting a stranger lock that user out.

    Per address: every attempt counts (right or wrong password), before Airflow is asked, so a guesser costs
    Airflow nothing past the limit. Per user name: once `per_minute` attempts named it, from anywhere, an
    address that already tried that name this minute is refused, while an address that has not gets its
    attempt. So ten wrong passwords from one address no longer lock the named user out of the form (issue 46
    §14), and guessing one name from many addresses still slows to one try a minute per address. The table
    holds at most `max_keys` keys; when full of live keys, attempts are refused (fail closed) until some
    expire (filling it takes that many addresses: forwarded headers are trusted only from configured
    proxies, `deepscholar web --trusted-proxy`).
    """

    WINDOW = 60.0

    def __init__(self, max_keys: int = 10_000, clock=time.monotonic) -> None:
        self.max_keys = max_keys
        self.clock = clock
        self._seen: dict[tuple[str, ...], deque[float]] = {}
        self._lock = threading.Lock()

    def _prune(self, now: float) -> None:
        for key in [k for k, q in self._seen.items() if not q or q[-1] <= now - self.WINDOW]:
            del self._seen[key]

    def _live(self, key: tuple[str, ...], now: float) -> int:
        q = self._seen.get(key)
        while q and q[0] <= now - self.WINDOW:
            q.popleft()
        return len(q) if q else 0

    def _refuse(self, who: str, key: tuple[str, ...], per_minute: int, now: float) -> Throttled:
        wait = max(1, round(self._seen[key][0] + self.WINDOW - now))
        return Throttled(f"Too many sign-in attempts {who}: at most {per_minute} a minute "
                         f"(DEEPSCHOLAR_WEB_SIGNIN_PER_MINUTE); try again in {wait} s.")

    def take(self, client: str, username: str, per_minute: int) -> None:
        """Count one attempt, or raise Throttled (nothing counted) when this address, or this user name from
        an address that already tried it, is at its limit."""
        now = self.clock()
        name = user_key(username)
        by_client, by_user, pair = ("client", client), ("user", name), ("user-client", name, client)
        keys = (by_client, by_user, pair)
        with self._lock:
            if len(self._seen) + len(keys) > self.max_keys:
                self._prune(now)
            if self._live(by_client, now) >= per_minute:
                raise self._refuse("from this address", by_client, per_minute, now)
            if self._live(by_user, now) >= per_minute and self._live(pair, now):
                raise self._refuse("for this user name from this address", by_user, per_minute, now)
            if sum(k not in self._seen for k in keys) + len(self._seen) > self.max_keys:
                raise Throttled("Too many sign-in attempts on this page right now; try again in a minute.")
            for key in keys:
                self._seen.setdefault(key, deque()).append(now)


def check_origin(headers: Mapping[str, str], allowed: Sequence[str]) -> None:
    """A browser's form post carries Origin (and Sec-Fetch-Site): refuse one another site's page sent.
    A post without them (a script, curl) is not a cross-site browser request and passes."""
    site = headers.get("sec-fetch-site", "").lower()
    origin = headers.get("origin")
    if site == "cross-site":
        raise ForeignOrigin("Refused: this form was posted from another site's page.")
    if origin is None:
        return
    host = headers.get("host", "").lower()
    parts = urlsplit(origin.strip().lower())
    if origin.strip().lower() in {o.strip().lower().rstrip("/") for o in allowed}:
        return
    if parts.scheme in ("http", "https") and parts.netloc and parts.netloc == host:
        return
    raise ForeignOrigin("Refused: this form was posted from another site's page (Origin "
                        f"{origin[:100]!r} is not this page's; DEEPSCHOLAR_WEB_ALLOWED_ORIGINS).")


def sign_in(username: str, password: str) -> AirflowAPI:
    """An Airflow API client signed in as this user, who Airflow lets create runs of the benchmark DAG;
    AirflowAPIError (shown as 403) when Airflow refuses either."""
    from deepscholar.orchestration import BENCHMARK_DAG_ID
    from deepscholar.settings import current_settings

    settings = current_settings()
    url = settings.airflow_api_url
    if not url:
        raise AirflowAPIError(registration_enabled() or "no Airflow API")
    if not username.strip() or not password:
        raise AirflowAPIError("an Airflow username and password are required")
    if len(username) > MAX_USERNAME_CHARS or len(password) > MAX_PASSWORD_CHARS:
        raise InvalidInput("the Airflow username or password is too long")
    api = AirflowAPI(url, username.strip(), password, timeout=settings.web_signin_timeout_seconds)
    api.sign_in()
    try:
        api.may_backfill(BENCHMARK_DAG_ID, settings.schedule_start)
    except AirflowAPIError as exc:
        raise NotPermitted(f"Airflow user {username.strip()!r} may not create runs of {BENCHMARK_DAG_ID} "
                           f"(Airflow answered the permission check with HTTP {exc.status}): registering and "
                           "queueing from this page need that permission") from exc
    except ValueError as exc:  # an answer that is not JSON
        raise NotPermitted(f"Airflow's answer to the permission check was not JSON: {exc}") from exc
    return api


def check_api_base(config: Mapping[str, Any]) -> None:
    """The page's own rule: `api_base` only under a base URL of DEEPSCHOLAR_WEB_API_BASES, compared parsed
    (systems/config_schema.check_api_base; the provider's key would be sent there). The system is recorded as
    registered from the page, so the same rule holds each time it runs."""
    from deepscholar.settings import current_settings
    from deepscholar.systems.config_schema import check_api_base as under_allowed

    under_allowed(config, current_settings().web_api_bases)


def register(engine: Engine, form: RegistrationForm) -> str:
    """Register a new system with `deepscholar systems add`'s checks (and the page's own); returns what
    happened. An already registered name is refused (SystemExists)."""
    from deepscholar.systems.registry import add_system

    config = form.config_object()
    check_api_base(config)
    name = form.system_name()
    outcome = add_system(engine, name, form.kind.strip(), config, version=form.version.strip() or "1",
                         knowledge_cutoff=form.knowledge_cutoff.strip() or None, create_only=True, from_page=True)
    return f"system {name} ({form.kind.strip()}) {outcome}"


def plan_of(engine: Engine, name: str) -> dict[str, Any]:
    """The backfill plan with its cost estimate, as the page shows it."""
    from deepscholar.systems.backfill import format_plan, missing_months, plan_backfill

    plan = plan_backfill(engine, name)
    return {"system_id": name, "plan_text": format_plan(plan), "months": missing_months(plan),
            "judge_cost": plan.judge_cost_usd, "generation_cost": plan.generation_cost_usd}


def queue(engine: Engine, name: str, api: AirflowAPI) -> list[str]:
    """Queue the system's backfill (the plan recomputed now) with the signed-in user's token."""
    from deepscholar.systems.backfill import describe_queued, missing_months, plan_backfill, queue_backfill

    plan = plan_backfill(engine, name)
    if not missing_months(plan):
        return ["nothing to backfill: every eligible month already has its reports"]
    return [describe_queued(created) for created in queue_backfill(plan, api)]
