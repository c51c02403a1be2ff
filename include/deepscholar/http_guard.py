"""One circuit breaker per host, shared by every outbound client (arXiv API, e-prints, OpenAlex, HTTP
external systems, LLM providers).

Design notes: docs/MODULE_NOTES.md, `deepscholar.http_guard`.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any
from urllib.parse import urlsplit

from deepscholar.errors import InfrastructureError
from deepscholar.settings import Settings, current_settings

__all__ = ["BREAKER", "AnswerTooLarge", "BoundedAnswer", "DeadlinePassed", "HostBreaker", "HostUnavailable",
           "bounded_request", "host_of", "http_setting", "is_host_failure", "DEFAULT_FAILURES", "DEFAULT_SECONDS"]

log = logging.getLogger(__name__)

DEFAULT_FAILURES = Settings.breaker_failures
DEFAULT_SECONDS = Settings.breaker_seconds


class HostUnavailable(InfrastructureError):
    """Calls to `host` failed `failures` times in a row over `seconds`; the step stops and is retried."""

    def __init__(self, host: str, failures: int, seconds: float, last_error: str) -> None:
        self.host, self.failures, self.seconds, self.last_error = host, failures, seconds, last_error
        super().__init__(host, f"{failures} consecutive failures in {seconds:.0f} s (last: {last_error}); "
                               "stopping this step — it will be retried")


def host_of(url: str) -> str:
    """The breaker key of a URL: host and, when given, port (two local servers are two hosts)."""
    parts = urlsplit(url if "//" in url else f"//{url}")
    return (parts.netloc.rsplit("@", 1)[-1] or url).lower()


def _status(exc: BaseException) -> int | None:
    for value in (getattr(exc, "status_code", None), getattr(exc, "status", None),
                  getattr(getattr(exc, "response", None), "status_code", None)):
        if isinstance(value, int):
            return value
    return None


def is_host_failure(exc: BaseException) -> bool:
    """The host, not the request, failed: refused or dropped connections, timeouts, 5xx answers."""
    import requests
    import urllib3

    if isinstance(exc, (requests.exceptions.ConnectionError, requests.exceptions.Timeout,
                        requests.exceptions.ChunkedEncodingError, requests.exceptions.RetryError,
                        urllib3.exceptions.TimeoutError, urllib3.exceptions.ProtocolError,
                        urllib3.exceptions.NewConnectionError, urllib3.exceptions.MaxRetryError,
                        ConnectionError, TimeoutError)):
        return True
    status = _status(exc)
    return status is not None and status >= 500


# How hard the external-source clients (arXiv API, e-prints, OpenAlex) try before a call counts as failed.
# Each client has its own defaults (what suits that host); the settings DEEPSCHOLAR_HTTP_TIMEOUT_SECONDS,
# _RETRIES and _BACKOFF_SECONDS override all of them at once, e.g. a shorter timeout on a flaky network,
# or fast-failing retries in tests of outages.
_HTTP_SETTINGS = {"timeout": "http_timeout_seconds", "retries": "http_retries", "backoff": "http_backoff_seconds"}


def http_setting(kind: str, given: float | None, default: float) -> float:
    """`given` when the caller chose a value, else the settings' override, else the client's default."""
    if given is not None:
        return given
    value = getattr(current_settings(), _HTTP_SETTINGS[kind])
    return default if value is None else value


@dataclass
class _Streak:
    failures: int = 0
    since: float = 0.0  # when the first failed call of the streak started
    last_error: str = ""
    open_until: float | None = None


class HostBreaker:
    """Consecutive failed calls per host; `failures`/`seconds` of None read the settings at each use."""

    def __init__(self, failures: int | None = None, seconds: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._failures, self._seconds, self._clock = failures, seconds, clock
        self._hosts: dict[str, _Streak] = {}
        self._lock = threading.Lock()

    def limits(self) -> tuple[int, float]:
        settings = current_settings()
        return self._failures or settings.breaker_failures, self._seconds or settings.breaker_seconds

    def _error(self, host: str, streak: _Streak) -> HostUnavailable:
        return HostUnavailable(host, streak.failures, self._clock() - streak.since, streak.last_error)

    def check(self, host: str) -> None:
        """Raise HostUnavailable when the host's breaker is open (no request is made)."""
        with self._lock:
            streak = self._hosts.get(host)
            if streak is None or streak.open_until is None:
                return
            if self._clock() < streak.open_until:
                raise self._error(host, streak)
            streak.open_until = None  # cooled down: let calls through; one more failure opens it again

    def success(self, host: str) -> None:
        with self._lock:
            if self._hosts.pop(host, None) is not None:
                log.info("%s answers again", host)

    def failure(self, host: str, exc: BaseException | str, started: float | None = None) -> HostUnavailable | None:
        """Count one failed call (started at `started`, default now); the error to raise when it opened
        the breaker, else None."""
        now = self._clock()
        failures, seconds = self.limits()
        detail = exc if isinstance(exc, str) else f"{type(exc).__name__}: {exc}"
        with self._lock:
            streak = self._hosts.setdefault(host, _Streak(since=now if started is None else started))
            streak.failures += 1
            streak.last_error = " ".join(detail.split())[:300]
            if streak.failures >= failures or (streak.failures >= 2 and now - streak.since >= seconds):
                streak.open_until = now + seconds
                error = self._error(host, streak)
            else:
                return None
        log.error("%s", error)
        return error

    @contextmanager
    def guard(self, host: str, is_failure: Callable[[BaseException], bool] = is_host_failure) -> Iterator[None]:
        """One call to `host` (with its retries inside): refused at once when open, counted when done."""
        self.check(host)
        started = self._clock()
        try:
            yield
        except HostUnavailable:
            raise
        except BaseException as exc:
            if is_failure(exc) and (opened := self.failure(host, exc, started)) is not None:
                raise opened from exc
            raise
        self.success(host)

    def reset(self, host: str | None = None) -> None:
        with self._lock:
            if host is None:
                self._hosts.clear()
            else:
                self._hosts.pop(host, None)

    def failures_of(self, host: str) -> int:
        with self._lock:
            streak = self._hosts.get(host)
            return streak.failures if streak else 0


BREAKER = HostBreaker()


# --- one request with a whole-exchange deadline and a body limit ---------------------------------------------

class AnswerTooLarge(Exception):
    """The answer's body is (or declares to be) over `limit` bytes; reading stopped there."""

    def __init__(self, limit: int, seen: int, *, declared: bool) -> None:
        self.limit, self.seen, self.declared = limit, seen, declared
        what = f"declares {seen} bytes" if declared else f"passed {limit} bytes"
        super().__init__(f"answer {what}, over the limit of {limit} bytes")


class DeadlinePassed(Exception):
    """The answer had begun (status and headers received) but was not complete within `seconds`."""

    def __init__(self, seconds: float, received: int) -> None:
        self.seconds, self.received = seconds, received
        super().__init__(f"no complete answer within {seconds:g} s ({received} bytes of body received)")


@dataclass(frozen=True)
class BoundedAnswer:
    status_code: int
    headers: Mapping[str, str]
    content: bytes

    @property
    def text(self) -> str:
        return self.content.decode("utf-8", errors="replace")


class _Deadline:
    """Shuts every socket a request opens down when the time is up, which ends any read or write waiting
    on it at once."""

    def __init__(self, seconds: float) -> None:
        self.expired = False
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.daemon = True

    def __enter__(self) -> _Deadline:
        _WATCHED.deadline = self
        self._timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._timer.cancel()
        _WATCHED.deadline = None

    def adopt(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.append(sock)
            if self.expired:
                _shut(sock)

    def _expire(self) -> None:
        with self._lock:
            self.expired = True
            for sock in self._sockets:
                _shut(sock)


def _shut(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_RDWR)
    except OSError:  # already closed
        pass


_WATCHED = threading.local()  # the deadline of the request this thread is making, if any


@functools.cache
def _watched_pools() -> dict[str, type]:
    """urllib3 pools whose connections hand their socket to this thread's deadline once connected."""
    from urllib3 import connection, connectionpool

    def watched(base: Any) -> type:
        def connect(self: Any) -> None:
            base.connect(self)
            if (deadline := getattr(_WATCHED, "deadline", None)) is not None:
                deadline.adopt(self.sock)

        return type(f"Watched{base.__name__}", (base,), {"connect": connect})

    http_pool = type("WatchedHTTPConnectionPool", (connectionpool.HTTPConnectionPool,),
                     {"ConnectionCls": watched(connection.HTTPConnection)})
    https_pool = type("WatchedHTTPSConnectionPool", (connectionpool.HTTPSConnectionPool,),
                      {"ConnectionCls": watched(connection.HTTPSConnection)})
    return {"http": http_pool, "https": https_pool}


def _watched_session() -> Any:
    """A requests Session whose connections (direct or through an HTTP proxy) obey `_WATCHED.deadline`."""
    import requests
    from requests.adapters import HTTPAdapter

    pools = _watched_pools()

    class WatchedAdapter(HTTPAdapter):
        def init_poolmanager(self, *args: Any, **kwargs: Any) -> None:
            super().init_poolmanager(*args, **kwargs)
            self.poolmanager.pool_classes_by_scheme = pools

        def proxy_manager_for(self, proxy: str, **proxy_kwargs: Any) -> Any:
            manager = super().proxy_manager_for(proxy, **proxy_kwargs)
            if not proxy.lower().startswith("socks"):
                manager.pool_classes_by_scheme = pools
            return manager

    session = requests.Session()
    session.mount("http://", WatchedAdapter())
    session.mount("https://", WatchedAdapter())
    return session


def bounded_request(method: str, url: str, *, seconds: float, max_bytes: int, error_bytes: int = 4096,
                    into: IO[bytes] | None = None, **kwargs: Any) -> BoundedAnswer:
    """One request whose whole exchange ends within `seconds` and whose body is at most `max_bytes`
    (`error_bytes` for a 4xx/5xx answer, which is only read for its message). `into`: a successful answer's
    body is written there as it comes (its `content` is then empty), up to the limit or the deadline when
    either stops it (a large file is streamed to disk, never held in memory).

    Raises what requests raises for a connection that fails or times out; `requests.Timeout` also when the
    deadline passes before the answer's status and headers are in (`requests.ReadTimeout`: nothing was
    answered, the caller may retry as after any timeout); DeadlinePassed when it passes while the body is read; AnswerTooLarge past the limit (on a
    Content-Length over it, before reading). Each call opens its own connection (none is kept).
    """
    import requests

    received = 0
    with _Deadline(seconds) as deadline, _watched_session() as session:
        try:
            response = session.request(method, url, stream=True, timeout=(seconds, seconds), **kwargs)
        except requests.RequestException as exc:
            if deadline.expired:
                raise requests.ReadTimeout(f"no answer within {seconds:g} s") from exc
            raise
        if deadline.expired:  # the headers were cut short by the shutdown (http.client takes what came)
            response.close()
            raise requests.ReadTimeout(f"no answer within {seconds:g} s")
        with response:
            limit = max_bytes if response.status_code < 400 else error_bytes
            declared = response.headers.get("Content-Length", "")
            sink = into if response.status_code < 400 else None
            if response.status_code < 400 and declared.isdigit() and int(declared) > limit and sink is None:
                raise AnswerTooLarge(limit, int(declared), declared=True)
            chunks: list[bytes] = []
            try:
                for chunk in response.iter_content(64 * 1024):
                    received += len(chunk)
                    if received > limit:
                        if response.status_code < 400:
                            chunks.clear()  # freed now, not when the traceback goes
                            if sink is not None:  # what fits is kept: the caller may use its whole lines
                                sink.write(chunk[: limit - (received - len(chunk))])
                            raise AnswerTooLarge(limit, received, declared=False)
                        chunks.append(chunk[: limit - (received - len(chunk))])
                        break
                    if sink is not None:
                        sink.write(chunk)
                    else:
                        chunks.append(chunk)
                    if deadline.expired:
                        break
            except (requests.RequestException, OSError) as exc:
                if not deadline.expired:
                    raise
                raise DeadlinePassed(seconds, received) from exc
            if deadline.expired:  # the socket was shut: what came may be cut short
                raise DeadlinePassed(seconds, received)
            return BoundedAnswer(response.status_code, dict(response.headers), b"".join(chunks))
