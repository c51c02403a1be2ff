"""Render pages the way a person sees them: a live server and headless Chromium, then a small DOM to query.

- `serve(app)`: run an ASGI app with uvicorn in a thread on a free loopback port; yields its base URL.
- `require_chromium()`: the Chromium binary; skips the test when there is none (and CI is not set),
  fails on CI, where .ci/run installs it (`apt-get install -y chromium`).
- `dump_dom(url)`: the DOM after Chromium loaded the page (`--dump-dom`), i.e. what the browser built
  from our HTML, not the HTML we sent.
- `parse_html(text)`: a tree of `Element`s (stdlib html.parser, no lxml/bs4 needed) with
  find/find_all by tag and attributes and `text()`.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from html.parser import HTMLParser

import pytest

__all__ = ["serve", "require_chromium", "dump_dom", "screenshot", "parse_html", "Element", "CHROMIUM_INSTALL"]

CHROMIUM_INSTALL = "apt-get install -y chromium"
_CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def chromium_path() -> str | None:
    explicit = os.environ.get("CHROMIUM_BIN")
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    return next((p for p in map(shutil.which, _CANDIDATES) if p), None)


def _on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def require_chromium() -> str:
    path = chromium_path()
    if path:
        return path
    message = f"headless Chromium not found (looked for {', '.join(_CANDIDATES)}); install it: {CHROMIUM_INSTALL}"
    if _on_ci():
        pytest.fail(message + " — CI must install it (.ci/run)")
    pytest.skip(message)


def _chromium_args(binary: str, profile: str) -> list[str]:
    return [binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
            "--no-first-run", "--no-default-browser-check", "--disable-extensions",
            "--disable-background-networking", "--disable-component-update", f"--user-data-dir={profile}"]


def dump_dom(url: str, timeout: float = 90) -> str:
    binary = require_chromium()
    with tempfile.TemporaryDirectory(prefix="chromium_profile_") as profile:
        done = subprocess.run([*_chromium_args(binary, profile), "--dump-dom", url],
                              capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0 or "<html" not in done.stdout:
        raise AssertionError(f"chromium --dump-dom {url} failed ({done.returncode}): {done.stderr[-2000:]}")
    return done.stdout


def screenshot(url: str, path: str, size: str = "1400,1000", timeout: float = 90) -> str:
    """A PNG of the page (handy to look at a page while developing; tests use dump_dom)."""
    binary = require_chromium()
    with tempfile.TemporaryDirectory(prefix="chromium_profile_") as profile:
        subprocess.run([*_chromium_args(binary, profile), "--hide-scrollbars", f"--window-size={size}",
                        f"--screenshot={path}", url], capture_output=True, timeout=timeout, check=True)
    return path


@contextlib.contextmanager
def serve(app, startup_timeout: float = 20) -> Iterator[str]:
    """Serve `app` on 127.0.0.1 (a socket we bind first, so there is no free-port race)."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off", access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="uvicorn-test")
    thread.start()
    deadline = time.monotonic() + startup_timeout
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


# --- a minimal DOM -----------------------------------------------------------------------------------

_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}


@dataclass(eq=False)
class Element:
    tag: str
    attrs: dict[str, str]
    children: list[Element | str] = field(default_factory=list)
    parent: Element | None = field(default=None, repr=False)

    def iter(self) -> Iterator[Element]:
        yield self
        for child in self.children:
            if isinstance(child, Element):
                yield from child.iter()

    def find_all(self, tag: str | None = None, attrs: Mapping[str, str | bool] | None = None) -> list[Element]:
        """Descendants (self included) by tag and attributes; an attribute given as True need only exist."""
        def ok(el: Element) -> bool:
            if tag is not None and el.tag != tag:
                return False
            for name, want in (attrs or {}).items():
                if want is True:
                    if name not in el.attrs:
                        return False
                elif el.attrs.get(name) != want:
                    return False
            return True
        return [el for el in self.iter() if ok(el)]

    def find(self, tag: str | None = None, attrs: Mapping[str, str | bool] | None = None) -> Element | None:
        found = self.find_all(tag, attrs)
        return found[0] if found else None

    def one(self, tag: str | None = None, attrs: Mapping[str, str | bool] | None = None) -> Element:
        found = self.find_all(tag, attrs)
        assert len(found) == 1, f"expected one <{tag or '*'} {dict(attrs or {})}>, found {len(found)}"
        return found[0]

    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def own_text(self) -> str:
        """The text directly inside this element, without its children's (a board cell's value, not its marks)."""
        return "".join(c for c in self.children if isinstance(c, str))

    def cell(self, system_id: str, metric: str) -> Element:
        """A board table's cell of one system (its row names it) and one column."""
        return self.one("tr", {"data-system": system_id}).one("td", {"data-metric": metric})

    def classes(self) -> set[str]:
        return set(self.attrs.get("class", "").split())


class _TreeBuilder(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = Element("#document", {})
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        el = Element(tag, {k: (v if v is not None else "") for k, v in attrs}, parent=self.stack[-1])
        self.stack[-1].children.append(el)
        if tag not in _VOID:
            self.stack.append(el)

    def handle_startendtag(self, tag, attrs):
        el = Element(tag, {k: (v if v is not None else "") for k, v in attrs}, parent=self.stack[-1])
        self.stack[-1].children.append(el)

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def parse_html(text: str) -> Element:
    builder = _TreeBuilder()
    builder.feed(text)
    builder.close()
    return builder.root
