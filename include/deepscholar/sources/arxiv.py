"""arXiv search API and e-print downloads, through the real `arxiv` client and `requests`.

Design notes: docs/MODULE_NOTES.md, `deepscholar.sources.arxiv`.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import arxiv
import requests
import urllib3
from requests.adapters import HTTPAdapter
from tenacity import Retrying, before_sleep_log, retry_if_exception, stop_after_attempt, wait_exponential

from deepscholar.clock import as_utc
from deepscholar.http_guard import BREAKER, host_of, http_setting, is_host_failure
from deepscholar.rate_limit import service_key, wait_for_slot
from deepscholar.sources.endpoints import ARXIV_API_URL, ARXIV_EPRINT_URL
from deepscholar.sources.eprint import EprintError
from deepscholar.text import ARXIV_NEW_ID_RE, ARXIV_OLD_ID_RE, strip_arxiv_version, title_similarity

__all__ = [
    "ArxivPaper",
    "ArxivSource",
    "EprintDownloadError",
    "EprintNotFound",
    "EprintPayload",
    "MalformedFeedError",
    "fetch_eprint",
]

logger = logging.getLogger(__name__)

USER_AGENT = "deepscholar-live-benchmark (+https://github.com/guestrin-lab/deepscholar-bench)"

_RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})


@dataclass
class ArxivPaper:
    arxiv_id: str
    version: int
    title: str
    abstract: str
    authors: list[str]
    categories: list[str]
    primary_category: str
    published: datetime
    updated: datetime
    comment: str | None = None
    journal_ref: str | None = None
    doi: str | None = None

    @property
    def versioned_id(self) -> str:
        return f"{self.arxiv_id}v{self.version}"

    @classmethod
    def from_result(cls, result: arxiv.Result) -> ArxivPaper:
        arxiv_id, version = strip_arxiv_version(result.get_short_id())
        return cls(
            arxiv_id=arxiv_id,
            version=version or 1,
            title=_squash(result.title),
            abstract=_squash(result.summary),
            authors=[a.name for a in result.authors],
            categories=list(result.categories),
            primary_category=result.primary_category,
            published=as_utc(result.published),
            updated=as_utc(result.updated),
            comment=_squash(result.comment) or None,
            journal_ref=_squash(result.journal_ref) or None,
            doi=(result.doi or "").strip() or None,
        )


def _squash(text: str | None) -> str:
    """arXiv wraps titles and abstracts at ~80 columns; the line breaks carry no meaning."""
    return " ".join((text or "").split())


class _TimeoutAdapter(HTTPAdapter):
    """Neither the arxiv client nor pyalex pass a timeout; without one a stalled server hangs a task."""

    def __init__(self, timeout: float, **kwargs) -> None:
        self._timeout = timeout
        super().__init__(**kwargs)

    def send(self, request, stream=False, timeout=None, verify=True, cert=None, proxies=None):
        """HTTPAdapter.send's signature (requests' Session passes these by keyword)."""
        return super().send(request, stream=stream, timeout=self._timeout if timeout is None else timeout,
                            verify=verify, cert=cert, proxies=proxies)


class MalformedFeedError(arxiv.ArxivError):
    """The API answered 200 with something that is not an Atom feed (a proxy page, a cut-off body)."""


def _require_complete_feed(response: requests.Response, *args, **kwargs) -> None:
    """A 200 whose body does not end the Atom document was cut off on the way (a proxy, a dropped
    connection). arxiv's parser recovers what it can from it and says nothing, so a page would come back
    with its last entries missing or with a half abstract; it is refused here and retried instead."""
    if response.status_code == 200 and not response.content.rstrip().endswith(b"</feed>"):
        raise MalformedFeedError(response.url, 0, f"feed cut off: {len(response.content)} bytes without the "
                                                  "closing </feed>")


def is_transient(exc: BaseException) -> bool:
    if isinstance(exc, MalformedFeedError):
        return True
    if isinstance(exc, arxiv.HTTPError):
        return exc.status in _RETRY_STATUSES or exc.status >= 500
    if isinstance(exc, _TransientHTTPStatus):
        return True
    return isinstance(
        exc,
        (
            arxiv.UnexpectedEmptyPageError,
            requests.exceptions.Timeout,
            requests.exceptions.ConnectionError,
            requests.exceptions.ChunkedEncodingError,
            # Raised by the raw stream of an e-print body, which requests does not wrap.
            urllib3.exceptions.ReadTimeoutError,
            urllib3.exceptions.ProtocolError,
        ),
    )


def _host_failed(exc: BaseException) -> bool:
    """For the breaker: connection failures, timeouts, 5xx, and 200 pages that are not feeds (a proxy's)."""
    return isinstance(exc, MalformedFeedError) or is_host_failure(exc)


def _retrying(max_retries: int, backoff_seconds: float) -> Retrying:
    return Retrying(
        stop=stop_after_attempt(max_retries + 1),
        wait=wait_exponential(multiplier=backoff_seconds, max=120),
        retry=retry_if_exception(is_transient),
        reraise=True,
        before_sleep=before_sleep_log(logger, logging.WARNING),
    )


def _minute(dt: datetime) -> str:
    return as_utc(dt).strftime("%Y%m%d%H%M")


def _is_arxiv_id(text: str) -> bool:
    base, _ = strip_arxiv_version(text)
    return bool(ARXIV_NEW_ID_RE.fullmatch(base) or ARXIV_OLD_ID_RE.fullmatch(base))


_PHRASE_UNSAFE_RE = re.compile(r"[\"\\]")
_TITLE_TOKEN_RE = re.compile(r"[A-Za-z0-9]+")
# Lucene stop words and operators that would break or widen a ti:word AND ... query.
QUERY_STOP_WORDS = frozenset(
    "a an and are as at be but by for from if in into is it no not of on or such that the their then "
    "there these they this to was will with via using towards toward".split()
)


def _title_phrase(title: str) -> str:
    """The title as the inside of a quoted ti:"..." phrase."""
    return " ".join(_PHRASE_UNSAFE_RE.sub(" ", title).split())


def _best_match(title: str, papers: list[ArxivPaper], threshold: float) -> ArxivPaper | None:
    best = max(papers, key=lambda p: title_similarity(p.title, title), default=None)
    return best if best is not None and title_similarity(best.title, title) >= threshold else None


class ArxivSource:
    """The arXiv search API for one process: paginated window search, id lookups, title search."""

    # The API refuses to page past this many results of one query; larger windows are split.
    max_results_per_query = 30000

    def __init__(
        self,
        api_url: str = ARXIV_API_URL,
        delay_seconds: float = 3.0,
        page_size: int = 500,
        max_retries: int | None = None,
        timeout: float | None = None,
        *,
        backoff_seconds: float | None = None,
        id_batch_size: int = 100,
        title_batch_size: int = 10,
    ) -> None:
        self.api_url = api_url.rstrip("?")
        self.delay_seconds = delay_seconds
        self.page_size = page_size
        # None: DEEPSCHOLAR_HTTP_* when set (http_guard.http_setting), else 4 retries, 30 s, 2 s backoff.
        self.max_retries = int(http_setting("retries", max_retries, 4))
        self.timeout = timeout = http_setting("timeout", timeout, 30)
        self.backoff_seconds = http_setting("backoff", backoff_seconds, 2.0)
        self.id_batch_size = id_batch_size
        self.title_batch_size = title_batch_size
        self.host = host_of(self.api_url)  # the circuit breaker's key (http_guard)
        self.rate_key = service_key(self.api_url)  # the shared rate limiter's key (rate_limit)
        # Pacing and retries are ours (see module docstring), so the client must not add its own.
        self._client = arxiv.Client(page_size=page_size, delay_seconds=0.0, num_retries=0)
        self._client.query_url_format = self.api_url + "?{}"
        adapter = _TimeoutAdapter(timeout)
        self._client._session.mount("http://", adapter)
        self._client._session.mount("https://", adapter)
        self._client._session.hooks["response"].append(_require_complete_feed)

    # -- paging -----------------------------------------------------------------------------

    def _fetch_page(self, search: arxiv.Search, start: int, size: int):  # -> arxiv._feed.ParsedFeed
        # `_format_url`/`_parse_feed` are the client's page primitives (arxiv 4.0.2, pinned): the
        # public `results()` hides totalResults and retries inside, which we need to own.
        url = self._client._format_url(search, start, size)
        with BREAKER.guard(self.host, _host_failed):
            for attempt in _retrying(self.max_retries, self.backoff_seconds):
                with attempt:
                    wait_for_slot(self.rate_key, self.delay_seconds)
                    feed = self._client._parse_feed(url, first_page=start == 0)
                    # The client logs and returns an empty feed; read as "no results" it would silently
                    # end a month's search, so it is retried like a 5xx.
                    if feed.malformed:
                        tries = attempt.retry_state.attempt_number - 1
                        raise MalformedFeedError(url, tries, f"malformed feed: {feed.error}")
                    return feed
        raise AssertionError("unreachable")  # pragma: no cover - tenacity reraises

    def _paginate(self, search: arxiv.Search, limit: int | None = None) -> Iterator[arxiv.Result]:
        start = 0
        while limit is None or start < limit:
            size = self.page_size if limit is None else min(self.page_size, limit - start)
            feed = self._fetch_page(search, start, size)
            if not feed.results:
                return
            yield from feed.results
            start += len(feed.results)
            if start >= feed.header.total_results:
                return

    # -- public API -------------------------------------------------------------------------

    def search_window(self, categories: list[str], start: datetime, end: datetime) -> Iterator[ArxivPaper]:
        """Papers first submitted in [start, end) in any of the categories, oldest first."""
        if not categories:
            raise ValueError("at least one category is required")
        cats = " OR ".join(f"cat:{c}" for c in categories)
        seen: set[str] = set()
        for paper in self._search_range(f"({cats})", as_utc(start), as_utc(end)):
            if paper.arxiv_id not in seen:
                seen.add(paper.arxiv_id)
                yield paper

    def _search_range(self, cat_query: str, start: datetime, end: datetime) -> Iterator[ArxivPaper]:
        # submittedDate bounds are inclusive and minute-grained, so [start, end) is [start, end - 1 min].
        last = end - timedelta(minutes=1)
        if last < start:
            return
        search = arxiv.Search(
            query=f"{cat_query} AND submittedDate:[{_minute(start)} TO {_minute(last)}]",
            max_results=None,
            sort_by=arxiv.SortCriterion.SubmittedDate,
            sort_order=arxiv.SortOrder.Ascending,
        )
        first = self._fetch_page(search, 0, self.page_size)
        total = first.header.total_results
        if total > self.max_results_per_query and end - start > timedelta(minutes=2):
            mid = start + (end - start) / 2
            mid = mid.replace(second=0, microsecond=0)
            logger.info("window %s..%s has %d results; splitting at %s", start, end, total, mid)
            yield from self._search_range(cat_query, start, mid)
            yield from self._search_range(cat_query, mid, end)
            return
        results = list(first.results)
        offset = len(results)
        for r in results:
            yield ArxivPaper.from_result(r)
        while results and offset < total:
            feed = self._fetch_page(search, offset, self.page_size)
            results = feed.results
            for r in results:
                yield ArxivPaper.from_result(r)
            offset += len(results)

    def get_by_ids(self, ids: list[str]) -> list[ArxivPaper]:
        """Look papers up by id; a version in the id pins that version, otherwise the latest."""
        wanted: list[str] = []
        for raw in ids:
            text = raw.strip()
            if text.lower().startswith("arxiv:"):
                text = text[6:]
            if not _is_arxiv_id(text):
                logger.warning("skipping malformed arXiv id %r", raw)
                continue
            if text not in wanted:
                wanted.append(text)
        papers: dict[str, ArxivPaper] = {}
        for i in range(0, len(wanted), self.id_batch_size):
            batch = wanted[i: i + self.id_batch_size]
            search = arxiv.Search(id_list=batch, max_results=len(batch))
            for result in self._paginate(search, limit=len(batch)):
                # The API reports unknown ids as entries pointing at its error page.
                if "arxiv.org/abs/" not in result.entry_id:
                    continue
                paper = ArxivPaper.from_result(result)
                papers.setdefault(paper.versioned_id, paper)
        return list(papers.values())

    def search_title(self, title: str, max_results: int = 5) -> list[ArxivPaper]:
        """Candidates for a title, most similar first; callers decide what similarity is enough."""
        phrase = _title_phrase(title)
        if not phrase:
            return []
        found = self._search_query(f'ti:"{phrase}"', max_results)
        if not found:
            found = self._search_title_words(title, max_results)
        return sorted(found, key=lambda p: -title_similarity(title, p.title))

    def _search_title_words(self, title: str, max_results: int) -> list[ArxivPaper]:
        # An exact phrase misses small differences ("LLMs" vs "LLM"); all significant words in the title
        # field is the usual fallback.
        words = [w for w in _TITLE_TOKEN_RE.findall(title) if w.lower() not in QUERY_STOP_WORDS]
        if len(words) < 2:
            return []
        return self._search_query(" AND ".join(f"ti:{w}" for w in words[:12]), max_results)

    def match_titles(self, titles: list[str], threshold: float, per_title: int = 5) -> dict[str, ArxivPaper | None]:
        """The best paper for each title (None when nothing reaches `threshold` similarity).

        Titles go `title_batch_size` at a time into one query of OR-ed title phrases, so a month's
        title-only references cost a tenth of the requests (one in 3 s each at arXiv's rate); a title the
        batch did not match is searched again alone by its significant words, as `search_title` would.
        """
        out: dict[str, ArxivPaper | None] = {}
        todo = [t for t in dict.fromkeys(titles) if _title_phrase(t)]
        for title in titles:
            out.setdefault(title, None)
        for i in range(0, len(todo), self.title_batch_size):
            batch = todo[i:i + self.title_batch_size]
            query = " OR ".join(f'ti:"{_title_phrase(t)}"' for t in batch)
            found = self._search_query(query, per_title * len(batch))
            for title in batch:
                out[title] = _best_match(title, found, threshold)
        for title in todo:
            if out[title] is None:
                out[title] = _best_match(title, self._search_title_words(title, per_title), threshold)
        return out

    def _search_query(self, query: str, max_results: int) -> list[ArxivPaper]:
        search = arxiv.Search(query=query, max_results=max_results, sort_by=arxiv.SortCriterion.Relevance)
        out: dict[str, ArxivPaper] = {}
        for result in self._paginate(search, limit=max_results):
            paper = ArxivPaper.from_result(result)
            out.setdefault(paper.arxiv_id, paper)
        return list(out.values())


# -- e-prints --------------------------------------------------------------------------------


class EprintDownloadError(EprintError, RuntimeError):
    """An e-print could not be downloaded (sources.eprint.EprintError: one that cannot be extracted)."""


class EprintNotFound(EprintDownloadError):
    """arXiv has no e-print at this id (withdrawn, wrong id or version)."""


class _TransientHTTPStatus(EprintDownloadError):
    def __init__(self, url: str, status: int) -> None:
        super().__init__(f"HTTP {status} for {url}")
        self.status = status


@dataclass(frozen=True)
class EprintPayload:
    content: bytes
    content_type: str
    url: str = field(default="", compare=False)


def fetch_eprint(
    versioned_id: str,
    base_url: str = ARXIV_EPRINT_URL,
    timeout: float | None = None,
    *,
    max_retries: int | None = None,
    backoff_seconds: float | None = None,
    delay_seconds: float = 0.0,
    max_bytes: int = 200 * 1024 * 1024,
) -> EprintPayload:
    """Download the raw e-print bytes exactly as served (never content-decoded).

    arXiv may label a gzip file with Content-Encoding, which requests would silently unpack; the
    extractor sniffs the bytes itself, so we hand it what the server stored. Timeout and retries left
    None come from DEEPSCHOLAR_HTTP_* when set, else 60 s, 4 retries, 2 s backoff.
    """
    timeout = http_setting("timeout", timeout, 60)
    max_retries = int(http_setting("retries", max_retries, 4))
    backoff_seconds = http_setting("backoff", backoff_seconds, 2.0)
    url = f"{base_url.rstrip('/')}/{versioned_id}"
    with BREAKER.guard(host_of(base_url)):
        for attempt in _retrying(max_retries, backoff_seconds):
            with attempt:
                wait_for_slot(service_key(base_url), delay_seconds)
                return _download(url, timeout, max_bytes)
    raise AssertionError("unreachable")  # pragma: no cover - tenacity reraises


def _download(url: str, timeout: float, max_bytes: int) -> EprintPayload:
    with requests.get(url, timeout=timeout, stream=True, headers={"User-Agent": USER_AGENT}) as resp:
        if resp.status_code == 404:
            raise EprintNotFound(f"no e-print at {url}")
        if resp.status_code in _RETRY_STATUSES or resp.status_code >= 500:
            raise _TransientHTTPStatus(url, resp.status_code)
        if resp.status_code != 200:
            raise EprintDownloadError(f"HTTP {resp.status_code} for {url}")
        chunks: list[bytes] = []
        size = 0
        for chunk in resp.raw.stream(64 * 1024, decode_content=False):
            size += len(chunk)
            if size > max_bytes:
                raise EprintDownloadError(f"e-print at {url} is larger than {max_bytes} bytes")
            chunks.append(chunk)
        content_type = resp.headers.get("Content-Type", "application/octet-stream").split(";")[0].strip()
        return EprintPayload(content=b"".join(chunks), content_type=content_type, url=url)
