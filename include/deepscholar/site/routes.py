"""Where each page of the static site lives, and the live page's links turned into links between its files.

Design notes: docs/MODULE_NOTES.md, `deepscholar.site.routes`.
"""

from __future__ import annotations

import hashlib
import html
import logging
import posixpath
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import parse_qs, quote, unquote, urlsplit

_LOG = logging.getLogger(__name__)

__all__ = ["file_name", "SiteMap", "board_path", "version_path", "versions_path", "system_path", "report_path",
           "history_path", "window_path", "api_board_path", "api_window_path", "relative_href"]

_PLAIN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
# `\b` before the name is checked in `rewrite` instead: a leading \b makes the scan several times slower.
_ATTR = re.compile(r'(href|action)="(/[^"]*)"')


def file_name(name: str) -> str:
    """A warehouse name as one safe path segment (see the module docstring)."""
    if _PLAIN.fullmatch(name) and not name.endswith(".") and ".." not in name:
        return name
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.").replace("..", ".")[:40]
    return f"{slug}~{hashlib.sha256(name.encode('utf-8', 'surrogatepass')).hexdigest()[:12]}"


def board_path(release: str, judge: str) -> str:
    return f"board/{file_name(release)}/{file_name(judge)}/index.html"


def version_path(release: str, judge: str, version: int) -> str:
    return f"board/{file_name(release)}/{file_name(judge)}/v{version}.html"


def versions_path(release: str, judge: str) -> str:
    return f"board/{file_name(release)}/{file_name(judge)}/versions.html"


def system_path(system_id: str, judge: str | None = None, release: str | None = None) -> str:
    """A system's page of every month (its default judge's, or `judge`'s), or of one month's reports."""
    if judge is None:
        return f"system/{file_name(system_id)}/index.html"
    if release is None:
        return f"system/{file_name(system_id)}/{file_name(judge)}/index.html"
    return f"system/{file_name(system_id)}/{file_name(judge)}/{file_name(release)}.html"


def report_path(report_id: int) -> str:
    return f"report/{int(report_id)}.html"


def history_path(judge: str | None = None) -> str:
    return "history.html" if judge is None else f"history/{file_name(judge)}.html"


def window_path(judge: str, window_from: str, window_to: str) -> str:
    return f"window/{file_name(judge)}/{file_name(window_from)}_{file_name(window_to)}.html"


def api_window_path(judge: str, window_from: str, window_to: str) -> str:
    return f"api/window/{file_name(judge)}/{file_name(window_from)}_{file_name(window_to)}.json"


def api_board_path(release: str, judge: str, version: int | None = None) -> str:
    tail = "current" if version is None else f"v{version}"
    return f"api/board/{file_name(release)}/{file_name(judge)}/{tail}.json"


def relative_href(target: str, page: str) -> str:
    """`target` (a site path) as a link from the file `page`."""
    return quote(posixpath.relpath(target, posixpath.dirname(page) or "."), safe="/~._-")


@dataclass
class SiteMap:
    """What the site holds, so a live link can be resolved to a file: the default board, each judge's
    latest release, each board's current version, each system's judges and months (oldest first) and each
    judge's standard windows."""

    default: tuple[str, str] | None = None  # (release, judge) of index.html
    latest_by_judge: dict[str, str] = field(default_factory=dict)
    default_judge_of: dict[str, str] = field(default_factory=dict)  # release -> the board its page shows
    current_version: dict[tuple[str, str], int] = field(default_factory=dict)
    system_months: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # system -> judge -> months
    system_default: dict[str, str | None] = field(default_factory=dict)  # system -> the judge its page picks
    history_default: str | None = None
    reports: set[int] = field(default_factory=set)
    windows: dict[tuple[str, str, str], str] = field(default_factory=dict)  # (judge, from, to) -> its label
    extra: dict[str, str] = field(default_factory=dict)  # a live path without parameters -> site path

    def target(self, path: str, params: Mapping[str, str]) -> str | None:
        """The site file showing what the live `path?params` shows; None when the site has none."""
        if path in ("/", "") and ("from" in params or "to" in params):
            key = (params.get("judge_config") or "", params.get("from") or "", params.get("to") or "")
            return window_path(*key) if key in self.windows and not {"release", "version"} & params.keys() else None
        if path in ("/", ""):
            return self._board(params.get("release"), params.get("judge_config"), params.get("version"))
        if path == "/history":
            judge = params.get("judge_config")
            return history_path(None if judge in (None, self.history_default) else judge)
        if path == "/versions":
            release, judge = params.get("release"), params.get("judge_config")
            known = (release, judge) in self.current_version
            return versions_path(release, judge) if known and release and judge else None
        if path.startswith("/system/"):
            return self._system(unquote(path[len("/system/"):]), params.get("judge_config"), params.get("release"))
        if path.startswith("/report/"):
            tail = path[len("/report/"):]
            return report_path(int(tail)) if tail.isdigit() and int(tail) in self.reports else None
        return self.extra.get(path)

    def _board(self, release: str | None, judge: str | None, version: str | None) -> str | None:
        if release is None:
            if judge is None or (self.default and judge == self.default[1]):
                return "index.html" if self.default else None
            release = self.latest_by_judge.get(judge)
            if release is None:
                return None
        judge = judge or self.default_judge_of.get(release)
        current = self.current_version.get((release, judge or ""))
        if judge is None or current is None:
            return None
        if version is None or str(current) == version:
            return board_path(release, judge)
        return version_path(release, judge, int(version)) if version.isdigit() else None

    def _system(self, system_id: str, judge: str | None, release: str | None) -> str | None:
        """The system's page of every month (its default judge's at the system's own path, another judge's
        beside it), or its page of one (judge, month)'s reports, a path that never moves."""
        months = self.system_months.get(system_id)
        if months is None:
            return None
        chosen = judge or self.system_default.get(system_id)
        if release is None and chosen == self.system_default.get(system_id):
            return system_path(system_id)
        if chosen is None or chosen not in months:
            return None
        if release is None:
            return system_path(system_id, chosen)
        return system_path(system_id, chosen, release) if release in months[chosen] else None

    def rewrite(self, page_html: str, page: str) -> str:
        """Every href / action of `page_html` that points into the app, pointed at the site's file instead."""
        def one(match: re.Match) -> str:
            before = match.string[match.start() - 1] if match.start() else " "
            if before.isalnum() or before == "_":  # part of a longer name (not an href or action attribute)
                return match.group(0)
            live = html.unescape(match.group(2))
            parts = urlsplit(live)
            params = {k: v[-1] for k, v in parse_qs(parts.query, keep_blank_values=False).items()}
            target = self.target(parts.path, params)
            if target is None:
                _LOG.info("site: %s links to %s, which the static site does not have: left as text", page, live)
                return 'data-not-in-site="true"'
            fragment = f"#{parts.fragment}" if parts.fragment else ""
            return f'{match.group(1)}="{html.escape(relative_href(target, page) + fragment)}"'
        return _ATTR.sub(one, page_html)
