"""Airflow's REST API (/api/v2) as an operator's tools call it: sign in for a token, then JSON requests.

Used to queue work from outside Airflow (a new system's backfill, systems/backfill.py) and by the local
Airflow the demo and the end-to-end tests run (local_airflow.py). The password may be a callable, read when
the first request needs it (a standalone writes its generated admin password only once it has started).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import requests

from deepscholar.errors import InfrastructureError, UserError

__all__ = ["AirflowAPI", "AirflowAPIError", "PASSWORD_VARIABLE"]

PASSWORD_VARIABLE = "AIRFLOW_API_PASSWORD"  # the queueing user's password (a secret, never a setting)


class AirflowAPIError(UserError):
    """Airflow refused a request (wrong credentials, unknown DAG, a backfill already running, ...);
    `status` is Airflow's HTTP status when it answered one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class AirflowAPI:
    url: str  # the API server, e.g. http://localhost:8080
    username: str
    password: str | Callable[[], str]
    timeout: float = 60.0
    _token: str | None = field(default=None, repr=False)

    def _headers(self) -> dict[str, str]:
        if self._token is None:
            password = self.password() if callable(self.password) else self.password
            try:
                resp = requests.post(f"{self.url.rstrip('/')}/auth/token",
                                     json={"username": self.username, "password": password}, timeout=self.timeout)
            except requests.RequestException as exc:
                raise InfrastructureError(f"Airflow API at {self.url}", exc) from exc
            if not resp.ok:
                raise AirflowAPIError(f"Airflow at {self.url} refused to sign in {self.username!r}: HTTP "
                                      f"{resp.status_code} {resp.text[:200]}", resp.status_code)
            self._token = resp.json()["access_token"]
        return {"Authorization": f"Bearer {self._token}", "Accept": "application/json"}

    def sign_in(self) -> None:
        """Sign in now (AirflowAPIError when Airflow refuses these credentials), e.g. to check who a user is."""
        self._headers()

    def request(self, method: str, path: str, **kwargs: Any) -> dict:
        """One call of /api/v2{path}; an error answer raises AirflowAPIError with Airflow's own words."""
        try:
            resp = requests.request(method, f"{self.url.rstrip('/')}/api/v2{path}", headers=self._headers(),
                                    timeout=self.timeout, **kwargs)
        except requests.RequestException as exc:
            raise InfrastructureError(f"Airflow API at {self.url}", exc) from exc
        if not resp.ok:
            raise AirflowAPIError(f"{method} {path}: HTTP {resp.status_code}: {resp.text[:500]}", resp.status_code)
        return resp.json() if resp.content else {}

    def may_backfill(self, dag_id: str, month: str) -> None:
        """Whether this user may create backfills (DAG runs) of `dag_id`, asked of Airflow itself: a backfill
        *dry run* (POST /api/v2/backfills/dry_run, which creates nothing) over `month` requires exactly the
        permission creating the backfill does. AirflowAPIError (status 403) when Airflow refuses it; any answer
        but success is a refusal too, so the check fails closed."""
        self.request("POST", "/backfills/dry_run", json={
            "dag_id": dag_id, "from_date": f"{month}-01T00:00:00Z", "to_date": f"{month}-01T00:00:00Z",
            "reprocess_behavior": "completed"})

    @classmethod
    def from_settings(cls) -> AirflowAPI:
        """The API server of DEEPSCHOLAR_AIRFLOW_API_URL, as DEEPSCHOLAR_AIRFLOW_USERNAME with the password in
        AIRFLOW_API_PASSWORD (a secret, so not a setting)."""
        from deepscholar.settings import current_settings

        settings = current_settings()
        if not settings.airflow_api_url:
            raise AirflowAPIError("DEEPSCHOLAR_AIRFLOW_API_URL is not set: no Airflow to queue work on")
        password = os.environ.get(PASSWORD_VARIABLE)
        if not password:
            raise AirflowAPIError(f"{PASSWORD_VARIABLE} is not set: the password of "
                                  f"{settings.airflow_username} on {settings.airflow_api_url}")
        return cls(settings.airflow_api_url, settings.airflow_username, password)

