"""An external system reached over HTTP: we send the query, it sends back a report with its sources.

Design notes: docs/MODULE_NOTES.md, `deepscholar.systems.external.http_system`.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping
from typing import Any

import requests
from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

from deepscholar.errors import SystemFailure
from deepscholar.http_guard import (
    BREAKER,
    AnswerTooLarge,
    BoundedAnswer,
    DeadlinePassed,
    bounded_request,
    host_of,
)
from deepscholar.search.base import SearchTool
from deepscholar.settings import current_settings
from deepscholar.systems import config_schema as cs
from deepscholar.systems.base import Query, Report, System, register_system
from deepscholar.systems.external.formats.sources import cap_sources, report_from_json
from deepscholar.systems.external.rules import Caps, too_big

__all__ = ["ExternalHTTPSystem"]

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT = 600.0
DEFAULT_ATTEMPTS = 3


class _Transient(Exception):
    """A failure worth another attempt (the service may be restarting or overloaded)."""


@register_system("external")
class ExternalHTTPSystem(System):
    """config {"endpoint", "timeout", "attempts", "retry_wait"}; without an endpoint the system is file-imported
    and generation must not pretend to run it."""

    uses_search = False
    version = "1"  # bump rule: systems/base.py System.version (here: how the answer is read)
    # `source` and `format`: where `deepscholar reports import` read a file-imported system's reports from.
    config_schema = {"endpoint": cs.http_url, "timeout": cs.number(0.001, 86_400), "attempts": cs.positive_int,
                     "retry_wait": cs.number(0, 3_600), "source": cs.text, "format": cs.text}

    @classmethod
    def models(cls, config: Mapping[str, Any]) -> tuple[str, ...]:
        return ()  # whatever the service runs is its own business; its version is the registered one

    def generate(self, query: Query, search: SearchTool | None = None) -> Report:
        endpoint = self.config.get("endpoint")
        if not endpoint:
            raise SystemFailure(f"external system {self.name} has no endpoint; its reports are imported with "
                                "`deepscholar reports import`")
        payload = {"arxiv_id": query.arxiv_id, "title": query.title, "abstract": query.abstract,
                   "cutoff": query.cutoff.isoformat()}
        body, attempts = self._post(str(endpoint), payload)
        try:
            report = report_from_json(body, "http", str(endpoint))
        except ValueError as exc:
            raise SystemFailure(f"external system {self.name} returned a malformed report: {exc}") from exc
        why = too_big(report, Caps.from_settings())  # the bounds of a file import hold for an answer too
        if why:
            raise SystemFailure(f"external system {self.name} at {endpoint} sent a report over the caps: {why}; "
                                "not stored")
        cap_sources(report)  # what its page shows of each source, bounded as for an import
        report.trace.setdefault("import", {}).update({"endpoint": str(endpoint), "attempts": attempts})
        return report

    def _post(self, endpoint: str, payload: dict[str, Any]) -> tuple[Any, int]:
        timeout = float(self.config.get("timeout", DEFAULT_TIMEOUT))
        attempts = int(self.config.get("attempts", DEFAULT_ATTEMPTS))
        wait = float(self.config.get("retry_wait", 1.0))
        max_bytes = current_settings().external_max_response_bytes
        state = {"n": 0}
        host = host_of(endpoint)
        BREAKER.check(host)
        started = time.monotonic()

        def once() -> BoundedAnswer:
            state["n"] += 1
            try:
                resp = bounded_request("POST", endpoint, json=payload, seconds=timeout, max_bytes=max_bytes)
            except (requests.Timeout, requests.ConnectionError) as exc:
                log.warning("external system %s: attempt %d failed: %s", self.name, state["n"], exc)
                raise _Transient(f"{type(exc).__name__}: {exc}") from exc
            if resp.status_code >= 500:
                log.warning("external system %s: attempt %d got HTTP %d", self.name, state["n"], resp.status_code)
                raise _Transient(f"HTTP {resp.status_code}: {resp.text[:200]}")
            return resp

        try:
            resp = Retrying(retry=retry_if_exception_type(_Transient), stop=stop_after_attempt(max(attempts, 1)),
                            wait=wait_exponential(multiplier=wait, max=max(wait * 8, wait)), reraise=False)(once)
        except RetryError as exc:
            cause = exc.last_attempt.exception()
            if (opened := BREAKER.failure(host, str(cause), started)) is not None:
                raise opened from cause
            raise SystemFailure(f"external system {self.name} at {endpoint} failed after {state['n']} attempts: "
                                f"{cause}") from cause
        except AnswerTooLarge as exc:
            BREAKER.success(host)  # it answered, too much
            raise SystemFailure(f"external system {self.name} at {endpoint} sent too large an answer: {exc} "
                                "(DEEPSCHOLAR_EXTERNAL_MAX_RESPONSE_BYTES)") from exc
        except DeadlinePassed as exc:
            if (opened := BREAKER.failure(host, str(exc), started)) is not None:
                raise opened from exc
            raise SystemFailure(f"external system {self.name} at {endpoint}: no complete answer within {timeout:g} s "
                                f"(its `timeout`, the deadline of the whole request; {exc.received} bytes of the "
                                "answer had come)") from exc
        BREAKER.success(host)  # it answered, even if to refuse
        if resp.status_code >= 400:
            raise SystemFailure(f"external system {self.name} at {endpoint} refused the query: "
                                f"HTTP {resp.status_code}: {resp.text[:200]}")
        try:
            return json.loads(resp.content), state["n"]
        except ValueError as exc:
            raise SystemFailure(f"external system {self.name} returned no JSON: {resp.text[:200]!r}") from exc
