"""Registering a system from the page, behind Airflow's own sign-in.

Everything else on the page is public and read-only. Registering a system writes to the warehouse and may
queue a backfill, so the form asks for an Airflow user's name and password and signs in to Airflow's REST
API with them (DEEPSCHOLAR_AIRFLOW_API_URL) before anything is written: Airflow's users decide who may
register, and the backfill is queued with that user's token, so Airflow's roles decide who may queue it
(a user who may not create backfills gets Airflow's refusal, shown as such). No session is kept: each
write asks again. Without an Airflow API configured, registration from the page is off and says so; the
CLI (`deepscholar systems add ... --backfill`) does the same work.

The flow is the CLI's: register (same checks as `systems add`), show the backfill plan with its cost
estimate first, and queue only when the operator confirms on that page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Engine

from deepscholar.airflow_api import AirflowAPI, AirflowAPIError

__all__ = ["RegistrationForm", "registration_enabled", "sign_in", "register", "plan_of", "queue"]


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


def registration_enabled() -> str | None:
    """None when the page may register systems; else why not (shown on the form)."""
    from deepscholar.settings import current_settings

    if not current_settings().airflow_api_url:
        return ("Registration from this page is off: it signs in to Airflow's API to check who you are, and "
                "DEEPSCHOLAR_AIRFLOW_API_URL is not set. Use `deepscholar systems add NAME --kind KIND --backfill`.")
    return None


def sign_in(username: str, password: str) -> AirflowAPI:
    """An Airflow API client signed in as this user; AirflowAPIError (shown as 403) when Airflow refuses."""
    from deepscholar.settings import current_settings

    url = current_settings().airflow_api_url
    if not url:
        raise AirflowAPIError(registration_enabled() or "no Airflow API")
    if not username.strip() or not password:
        raise AirflowAPIError("an Airflow username and password are required")
    api = AirflowAPI(url, username.strip(), password)
    api.sign_in()
    return api


def register(engine: Engine, form: RegistrationForm) -> str:
    """Register (or update) the system exactly as `deepscholar systems add` does; returns what happened."""
    from deepscholar.systems.registry import add_system

    outcome = add_system(engine, form.name.strip(), form.kind.strip(), form.config_object(),
                         version=form.version.strip() or "1", knowledge_cutoff=form.knowledge_cutoff.strip() or None)
    return f"system {form.name.strip()} ({form.kind.strip()}) {outcome}"


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
