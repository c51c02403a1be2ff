"""Base URLs a provider's key is sent to (a system's `api_base`, DEEPSCHOLAR_WEB_API_BASES), compared parsed.

Design notes: docs/MODULE_NOTES.md, `deepscholar.url_bases`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

__all__ = ["BaseURL", "parse_base_url", "under_any", "checked_api_base"]

_DEFAULT_PORTS = {"http": 80, "https": 443}
_REFUSED_CHARS = re.compile(r"[\s\\\x00-\x1f\x7f]")


@dataclass(frozen=True)
class BaseURL:
    """Where requests to a base URL go: scheme, host (lower case), port (the scheme's when not given) and
    path (no trailing slash)."""

    scheme: str
    host: str
    port: int
    path: str

    def segments(self) -> list[str]:
        return [s for s in self.path.split("/") if s]

    def contains(self, other: BaseURL) -> bool:
        """`other` lies under this base: same scheme, host and port, and a path at or below this one's."""
        if (self.scheme, self.host, self.port) != (other.scheme, other.host, other.port):
            return False
        mine, theirs = self.segments(), other.segments()
        if any(unquote(s) in (".", "..") or "/" in unquote(s) for s in theirs):
            return False  # a server may resolve them (or a decoded %2F) to a path outside this base
        return theirs[:len(mine)] == mine


def _httpx_view(url: str) -> tuple[str, str, int]:
    """(scheme, host as IDNA ASCII, port) as httpx sends to them."""
    import httpx  # litellm's and the direct path's parser; imported here, when a base URL is checked

    try:
        parsed = httpx.URL(url)
        host = parsed.raw_host.decode("ascii").lower()
    except (httpx.InvalidURL, TypeError, ValueError) as exc:
        raise ValueError(f"not a URL ({exc})") from None
    return parsed.scheme, host, parsed.port or _DEFAULT_PORTS.get(parsed.scheme, 0)


def _ascii_host(host: str) -> str:
    try:
        return host.encode("idna").decode("ascii").lower()
    except UnicodeError:
        raise ValueError("its host is not a valid domain name") from None


def parse_base_url(url: object) -> BaseURL:
    """The parsed base URL; ValueError saying why it is refused (not http(s), no host, userinfo, a character
    no base URL has, or a URL two parsers read differently)."""
    if not isinstance(url, str) or not url:
        raise ValueError("not a URL")
    if _REFUSED_CHARS.search(url):
        raise ValueError("it holds whitespace, a backslash or a control character")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        raise ValueError(f"not a URL ({exc})") from None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS:
        raise ValueError("not an http(s) URL")
    if "@" in parts.netloc or parts.username is not None:
        raise ValueError("it carries userinfo (user@ or user:password@ before the host): requests would go to "
                         "the host after the @")
    if "?" in url or "#" in url:
        raise ValueError("a base URL has no query or fragment")
    host = parts.hostname or ""
    if not host:
        raise ValueError("it names no host")
    seen = (scheme, host if ":" in host else _ascii_host(host), port or _DEFAULT_PORTS[scheme])
    if _httpx_view(url) != seen:
        raise ValueError("its host or port reads differently to the HTTP client")
    return BaseURL(*seen, parts.path.rstrip("/"))


def under_any(url: object, allowed: Iterable[str]) -> bool:
    """`url` is a valid base URL lying under one of the `allowed` base URLs (an unparsable one admits none)."""
    try:
        base = parse_base_url(url)
    except ValueError:
        return False
    for prefix in allowed:
        try:
            if parse_base_url(prefix).contains(base):
                return True
        except ValueError:
            continue
    return False


def checked_api_base(model: str, api_base: str | None) -> str | None:
    """An LLM client's base URL checked where the key is sent (InvalidInput when refused; never echoed, it may
    hold a password), without a trailing slash; None when none is given."""
    from deepscholar.errors import InvalidInput

    if not api_base:
        return None
    try:
        parse_base_url(api_base)
    except ValueError as exc:
        raise InvalidInput(f"the api_base of {model} is refused: {exc}; nothing was sent") from None
    return api_base.rstrip("/")
