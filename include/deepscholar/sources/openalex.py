"""OpenAlex works by DOI or title, through the real `pyalex` client.

Design notes: docs/MODULE_NOTES.md, `deepscholar.sources.openalex`.
"""

from __future__ import annotations

import contextvars
import logging
import re
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date

import pyalex
import pyalex.api
import requests
from requests.adapters import HTTPAdapter
from urllib3.util import Retry

from deepscholar.http_guard import BREAKER, host_of, http_setting
from deepscholar.rate_limit import openalex_interval, service_key, wait_for_slot
from deepscholar.sources.endpoints import OPENALEX_URL
from deepscholar.text import normalise_title, title_similarity

__all__ = ["OpenAlexSource", "OpenAlexWork", "arxiv_id_from_work"]

logger = logging.getLogger(__name__)

BATCH = 50  # OpenAlex's limit of values OR-ed in one filter
_RETRY_STATUSES = (429, 500, 502, 503, 504)


@dataclass(frozen=True)
class OpenAlexWork:
    openalex_id: str  # short form, e.g. "W2741809807"
    doi: str | None  # bare, lower case: "10.48550/arxiv.2301.01234"
    title: str
    publication_date: date | None
    cited_by_count: int
    arxiv_id: str | None  # version-less
    abstract: str | None

    @classmethod
    def from_json(cls, work: dict) -> OpenAlexWork:
        return cls(
            openalex_id=str(work.get("id") or "").rsplit("/", 1)[-1],
            doi=bare_doi(work.get("doi")),
            title=" ".join(str(work.get("title") or work.get("display_name") or "").split()),
            publication_date=_parse_date(work.get("publication_date")),
            cited_by_count=int(work.get("cited_by_count") or 0),
            arxiv_id=arxiv_id_from_work(work),
            abstract=pyalex.invert_abstract(work.get("abstract_inverted_index")) or None,
        )


def bare_doi(doi: str | None) -> str | None:
    """DOIs compare case-insensitively and arrive with or without a resolver prefix."""
    if not doi:
        return None
    text = doi.strip()
    text = re.sub(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", "", text, flags=re.IGNORECASE)
    return text.lower() or None


def _parse_date(value: str | None) -> date | None:
    if not value:
        return None
    try:
        return date.fromisoformat(str(value)[:10])
    except ValueError:
        return None


_ARXIV_URL_RE = re.compile(
    r"arxiv\.org/(?:abs|pdf|e-print|src)/(?P<id>\d{4}\.\d{4,5}(?:v\d+)?|[a-z][a-z.\-]*/\d{7}(?:v\d+)?)",
    re.IGNORECASE,
)
_ARXIV_DOI_RE = re.compile(r"^10\.48550/arxiv\.(?P<id>.+)$", re.IGNORECASE)


def _version_less(arxiv_id: str) -> str:
    return re.sub(r"v\d+$", "", arxiv_id.strip())


def arxiv_id_from_work(work: dict) -> str | None:
    """OpenAlex has no arXiv id field of its own: look in ids, the arXiv DOI and arXiv locations."""
    ids = work.get("ids") or {}
    if ids.get("arxiv"):
        value = str(ids["arxiv"])
        m = _ARXIV_URL_RE.search(value)
        return _version_less(m.group("id") if m else value.split(":")[-1])
    for doi in (work.get("doi"), ids.get("doi")):
        m = _ARXIV_DOI_RE.match(bare_doi(doi) or "")
        if m:
            return _version_less(m.group("id"))
    locations = list(work.get("locations") or [])
    for key in ("primary_location", "best_oa_location"):
        if work.get(key):
            locations.append(work[key])
    for loc in locations:
        for field in ("landing_page_url", "pdf_url", "id"):
            m = _ARXIV_URL_RE.search(str((loc or {}).get(field) or ""))
            if m:
                return _version_less(m.group("id"))
    return None


class _RoutingAdapter(HTTPAdapter):
    """Sends requests meant for the public host to `base_url`, with a default timeout."""

    def __init__(self, base_url: str | None, timeout: float, *, rate_key: str = "", interval: float = 0.0,
                 **kwargs) -> None:
        self._base_url = base_url.rstrip("/") if base_url else None
        self._timeout = timeout
        self._rate_key, self._interval = rate_key, interval
        super().__init__(**kwargs)

    def send(self, request, stream=False, timeout=None, verify=True, cert=None, proxies=None):
        """HTTPAdapter.send's signature (requests' Session passes these by keyword)."""
        # One slot per request sent; urllib3's retries inside it are spaced by their backoff instead.
        wait_for_slot(self._rate_key, self._interval)
        if self._base_url and request.url.startswith(OPENALEX_URL):
            request.url = self._base_url + request.url[len(OPENALEX_URL):]
        if timeout is None:
            timeout = self._timeout
        return super().send(request, stream=stream, timeout=timeout, verify=verify, cert=cert,
                            proxies=proxies)


_current_source: contextvars.ContextVar[OpenAlexSource | None] = contextvars.ContextVar(
    "deepscholar_openalex_source", default=None
)
_install_lock = threading.Lock()
_fallback_factory: Callable[[], requests.Session] | None = None  # pyalex's own, wrapped


def _routed_session_factory() -> requests.Session:
    source = _current_source.get()
    if source is None:
        assert _fallback_factory is not None  # set before this factory is installed
        return _fallback_factory()
    return source._make_session()


def _install_session_hook() -> None:
    """Wrap pyalex's session factory once; re-wrap if something (a test) replaced it since."""
    global _fallback_factory
    with _install_lock:
        current = pyalex.api._get_requests_session
        if current is not _routed_session_factory:
            _fallback_factory = current
            pyalex.api._get_requests_session = _routed_session_factory


class OpenAlexSource:
    """OpenAlex lookups for reference resolution; `base_url=None` means the public API."""

    def __init__(
        self,
        base_url: str | None = None,
        email: str | None = None,
        *,
        timeout: float | None = None,
        max_retries: int | None = None,
        backoff_seconds: float | None = None,
        interval_seconds: float | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/") if base_url else None
        self.email = email
        # None: DEEPSCHOLAR_HTTP_* when set (http_guard.http_setting), else 30 s, 5 retries, 1 s backoff.
        self.timeout = http_setting("timeout", timeout, 30)
        self.max_retries = int(http_setting("retries", max_retries, 5))
        self.backoff_seconds = http_setting("backoff", backoff_seconds, 1.0)
        self.host = host_of(self.base_url or OPENALEX_URL)  # the circuit breaker's key (http_guard)
        # Seconds between request starts, kept across processes (rate_limit); None: the environment's.
        self.interval_seconds = openalex_interval() if interval_seconds is None else interval_seconds
        self.rate_key = service_key(self.base_url or OPENALEX_URL)
        _install_session_hook()

    def _make_session(self) -> requests.Session:
        session = requests.Session()
        # Same shape as pyalex's own session, but per source: OpenAlex answers 429 when the polite
        # pool's rate is exceeded and honours Retry-After.
        retry = Retry(
            total=self.max_retries,
            backoff_factor=self.backoff_seconds,
            status_forcelist=_RETRY_STATUSES,
            allowed_methods={"GET"},
            respect_retry_after_header=True,
            raise_on_status=False,
        )
        adapter = _RoutingAdapter(self.base_url, self.timeout, rate_key=self.rate_key,
                                  interval=self.interval_seconds, max_retries=retry)
        session.mount("https://", adapter)
        session.mount("http://", adapter)
        if self.email:
            session.headers["From"] = self.email
        return session

    @contextmanager
    def routed(self) -> Iterator[None]:
        """Inside the block, any pyalex call goes through this source's base URL, e-mail and retries."""
        _install_session_hook()
        token = _current_source.set(self)
        try:
            yield
        finally:
            _current_source.reset(token)

    def work_by_doi(self, doi: str) -> OpenAlexWork | None:
        """The work with this DOI, or None when OpenAlex does not know it."""
        key = bare_doi(doi)
        if not key:
            return None
        with BREAKER.guard(self.host), self.routed():
            try:
                work = pyalex.Works()[f"https://doi.org/{key}"]
            except requests.HTTPError as exc:
                if exc.response is not None and exc.response.status_code == 404:
                    return None
                raise
        return OpenAlexWork.from_json(dict(work))

    def works_by_dois(self, dois: Iterable[str | None]) -> dict[str, OpenAlexWork]:
        """Bare DOI -> work for the DOIs OpenAlex knows, one request per BATCH (`filter=doi:a|b|...`)
        instead of one per DOI; a DOI with filter syntax in it (',' '|') is looked up on its own."""
        wanted = sorted({d for d in (bare_doi(x) for x in dois) if d})
        found: dict[str, OpenAlexWork] = {}
        alone = [d for d in wanted if "," in d or "|" in d]
        for work in self._filter_batches("doi", [d for d in wanted if d not in alone]):
            if work.doi:
                found[work.doi] = work
        for doi in alone:
            if (single := self.work_by_doi(doi)) is not None:
                found[doi] = single
        return {d: found[d] for d in wanted if d in found}

    def works_by_ids(self, openalex_ids: Iterable[str | None]) -> dict[str, OpenAlexWork]:
        """Short OpenAlex id (W123) -> work, one request per BATCH ids (`filter=ids.openalex:W1|W2`)."""
        wanted = sorted({str(i).rsplit("/", 1)[-1].upper() for i in openalex_ids if i})
        return {w.openalex_id: w for w in self._filter_batches("ids.openalex", wanted)}

    def _filter_batches(self, field: str, values: list[str]) -> Iterator[OpenAlexWork]:
        for start in range(0, len(values), BATCH):
            batch = values[start:start + BATCH]
            with BREAKER.guard(self.host), self.routed():
                results = pyalex.Works().filter(**{field: "|".join(batch)}).get(per_page=len(batch))
            for work in results:
                yield OpenAlexWork.from_json(dict(work))

    def search_title(self, title: str, per_page: int = 5) -> list[OpenAlexWork]:
        # Punctuation is filter syntax in OpenAlex (',' separates filters, ':' and '|' too).
        query = normalise_title(title)
        if not query:
            return []
        with BREAKER.guard(self.host), self.routed():
            results = pyalex.Works().search_filter(title=query).get(per_page=max(1, min(per_page, 200)))
        return [OpenAlexWork.from_json(dict(w)) for w in results]

    def best_title_match(self, title: str, threshold: float = 0.9) -> OpenAlexWork | None:
        """The most similar title at or above the threshold; ties go to the more cited work."""
        best: tuple[float, int, OpenAlexWork] | None = None
        for work in self.search_title(title):
            score = title_similarity(title, work.title)
            if score >= threshold and (best is None or (score, work.cited_by_count) > best[:2]):
                best = (score, work.cited_by_count, work)
        return best[2] if best else None
