"""A paper's licence from arXiv's OAI-PMH interface (GetRecord, metadata format `arXiv`).

Design notes: docs/MODULE_NOTES.md, `deepscholar.sources.oai`.
"""

from __future__ import annotations

import logging
import xml.etree.ElementTree as ET
from dataclasses import dataclass

import requests
from tenacity import Retrying, before_sleep_log, retry_if_exception, stop_after_attempt, wait_exponential

from deepscholar.errors import InfrastructureError
from deepscholar.http_guard import BREAKER, host_of, http_setting, is_host_failure
from deepscholar.rate_limit import service_key, wait_for_slot
from deepscholar.sources.endpoints import ARXIV_OAI_URL

__all__ = ["LicenceRecord", "MalformedOaiResponse", "OaiProtocolError", "fetch_licence", "parse_licence_record"]

logger = logging.getLogger(__name__)

OAI_NS = "http://www.openarchives.org/OAI/2.0/"
ARXIV_NS = "http://arxiv.org/OAI/arXiv/"
USER_AGENT = "deepscholar-live-benchmark (+https://github.com/guestrin-lab/deepscholar-bench)"
_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
_MAX_RETRY_AFTER = 120.0


@dataclass(frozen=True)
class LicenceRecord:
    """What the repository says of one paper: its licence URL (None: unknown) or why there is no record."""

    arxiv_id: str
    license: str | None
    error: str | None = None


class MalformedOaiResponse(Exception):
    """A 200 whose body is not a complete OAI-PMH document (a proxy page, a cut-off body): retried."""


class OaiProtocolError(InfrastructureError):
    """The endpoint answered with an OAI-PMH error other than idDoesNotExist, or an unexpected HTTP status:
    it is not the arXiv OAI-PMH interface we expect (wrong URL, a format it does not serve)."""


class _Transient(Exception):
    def __init__(self, url: str, status: int, retry_after: float | None) -> None:
        super().__init__(f"HTTP {status} for {url}")
        self.status = status
        self.retry_after = retry_after


def _q(ns: str, tag: str) -> str:
    return f"{{{ns}}}{tag}"


def parse_licence_record(body: bytes | str, arxiv_id: str) -> LicenceRecord:
    """The licence in one GetRecord answer. idDoesNotExist and a deleted record give license None with the
    reason in `error`; a record without <license> gives None (unknown). Raises MalformedOaiResponse for
    anything that is not an OAI-PMH document, OaiProtocolError for any other OAI-PMH error."""
    try:
        root = ET.fromstring(body)
    except ET.ParseError as exc:
        raise MalformedOaiResponse(f"not XML ({exc}) in the OAI-PMH answer for {arxiv_id}") from None
    if root.tag != _q(OAI_NS, "OAI-PMH"):
        raise MalformedOaiResponse(f"the answer for {arxiv_id} is a <{root.tag}>, not an OAI-PMH document")
    errors = [(e.get("code") or "unknown", " ".join((e.text or "").split())) for e in root.findall(_q(OAI_NS, "error"))]
    if errors:
        code, message = errors[0]
        if code == "idDoesNotExist":
            return LicenceRecord(arxiv_id, None, f"idDoesNotExist: {message}".rstrip(": "))
        raise OaiProtocolError("arXiv OAI-PMH", f"{code}: {message} (paper {arxiv_id})")
    record = root.find(f"{_q(OAI_NS, 'GetRecord')}/{_q(OAI_NS, 'record')}")
    if record is None:
        raise MalformedOaiResponse(f"the answer for {arxiv_id} has neither a record nor an error")
    header = record.find(_q(OAI_NS, "header"))
    if header is not None and header.get("status") == "deleted":
        return LicenceRecord(arxiv_id, None, "deleted: the repository marks the record deleted")
    metadata = record.find(f"{_q(OAI_NS, 'metadata')}/{_q(ARXIV_NS, 'arXiv')}")
    if metadata is None:
        raise MalformedOaiResponse(f"the record of {arxiv_id} carries no arXiv-format metadata")
    found_id = (metadata.findtext(_q(ARXIV_NS, "id")) or "").strip()
    if found_id and found_id != arxiv_id:
        raise MalformedOaiResponse(f"asked for {arxiv_id}, the record is {found_id}")
    licence = (metadata.findtext(_q(ARXIV_NS, "license")) or "").strip()
    return LicenceRecord(arxiv_id, licence or None)


def _retry_after(response: requests.Response) -> float | None:
    try:
        return min(_MAX_RETRY_AFTER, float(response.headers.get("Retry-After", "")))
    except ValueError:
        return None


def _is_transient(exc: BaseException) -> bool:
    return isinstance(exc, (_Transient, MalformedOaiResponse, requests.exceptions.Timeout,
                            requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError))


def _host_failed(exc: BaseException) -> bool:
    return isinstance(exc, MalformedOaiResponse) or is_host_failure(exc)


def _wait(backoff_seconds: float):
    exponential = wait_exponential(multiplier=backoff_seconds, max=120)

    def wait(state) -> float:
        """The backoff, or longer when the server said when to come back (arXiv's 503 flow control)."""
        exc = state.outcome.exception() if state.outcome else None
        return max(exponential(state), getattr(exc, "retry_after", None) or 0.0)

    return wait


def fetch_licence(arxiv_id: str, base_url: str = ARXIV_OAI_URL, *, rate_key: str | None = None,
                  delay_seconds: float = 3.0, timeout: float | None = None, max_retries: int | None = None,
                  backoff_seconds: float | None = None) -> LicenceRecord:
    """One paper's licence record. `rate_key` is the limiter slot it takes (default: the endpoint's own);
    a host still failing after the retries raises InfrastructureError (HostUnavailable once the breaker
    opens). Timeout and retries left None come from DEEPSCHOLAR_HTTP_* when set, else 30 s, 4, 2 s."""
    timeout = http_setting("timeout", timeout, 30)
    retries = int(http_setting("retries", max_retries, 4))
    backoff = http_setting("backoff", backoff_seconds, 2.0)
    params = {"verb": "GetRecord", "identifier": f"oai:arXiv.org:{arxiv_id}", "metadataPrefix": "arXiv"}
    key = rate_key or service_key(base_url)
    try:
        with BREAKER.guard(host_of(base_url), _host_failed):
            for attempt in Retrying(stop=stop_after_attempt(retries + 1), wait=_wait(backoff),
                                    retry=retry_if_exception(_is_transient), reraise=True,
                                    before_sleep=before_sleep_log(logger, logging.WARNING)):
                with attempt:
                    wait_for_slot(key, delay_seconds)
                    return _get(base_url, params, timeout, arxiv_id)
    except (_Transient, MalformedOaiResponse, requests.exceptions.RequestException) as exc:
        # Counted by the breaker above; to the caller an outage (the task fails and Airflow retries it).
        raise InfrastructureError(f"arXiv OAI-PMH at {base_url}", exc) from exc
    raise AssertionError("unreachable")  # pragma: no cover - tenacity reraises


def _get(base_url: str, params: dict, timeout: float, arxiv_id: str) -> LicenceRecord:
    response = requests.get(base_url, params=params, timeout=timeout, headers={"User-Agent": USER_AGENT})
    if response.status_code in _RETRY_STATUSES or response.status_code >= 500:
        raise _Transient(response.url, response.status_code, _retry_after(response))
    if response.status_code != 200:
        raise OaiProtocolError(f"arXiv OAI-PMH at {base_url}", f"HTTP {response.status_code} for {arxiv_id}")
    return parse_licence_record(response.content, arxiv_id)
