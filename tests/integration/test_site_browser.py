"""The built site as its readers get it: a plain static server (`python -m http.server`) and headless Chromium.

The warehouse is test_site's: the leaderboard page's fixture with a track section, judge-validation figures
and a standard window, so the crawl loads those pages too.

From index.html every page is loaded in Chromium and its links are collected from the DOM Chromium built; each
internal link must answer 200 from the static server, every page must be reached, no page may log anything
to the console (a CSP violation, a failed load, a script error: the site has no script at all), every table
has headers, and the board's numbers are those `deepscholar leaderboard --format json` prints.
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urljoin, urlsplit

import pytest
from support.chromium import _chromium_args, parse_html, require_chromium
from support.site_extras import TRACK
from support.warehouse import empty_warehouse
from test_leaderboard_page import LLM, MONTHS
from test_site import WINDOW, seed_site

from deepscholar import cli
from deepscholar.evaluation.metrics import registry
from deepscholar.site import routes
from deepscholar.site.build import build_site
from deepscholar.web.render import format_value

pytestmark = pytest.mark.slow  # Chromium loads every page of the site


@contextlib.contextmanager
def static_server(folder: Path) -> Iterator[str]:
    """`python -m http.server` over `folder` on a free loopback port."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                             "--directory", str(folder)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                urllib.request.urlopen(url, timeout=2).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def load(url: str) -> tuple[str, list[str]]:
    """The DOM Chromium built for `url`, and what the page wrote to the console."""
    binary = require_chromium()
    with tempfile.TemporaryDirectory(prefix="chromium_profile_") as profile:
        done = subprocess.run([*_chromium_args(binary, profile), "--enable-logging=stderr", "--v=0", "--dump-dom", url],
                              capture_output=True, text=True, timeout=90, check=False)
    assert done.returncode == 0 and "<html" in done.stdout, done.stderr[-2000:]
    return done.stdout, [line for line in done.stderr.splitlines() if ":CONSOLE" in line]


def status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=30) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code


def test_chromium_reads_every_page_and_the_board_is_the_cli_s(engine, db_url, tmp_path, monkeypatch, capsys):
    empty_warehouse(engine)
    seed_site(engine)  # with a track section and judge-validation figures
    build = build_site(engine, tmp_path / "site")
    pages = {p for p in build.files if p.endswith(".html")}
    doms: dict[str, object] = {}
    with static_server(build.out) as base:
        todo, checked = ["index.html"], set()
        while todo:
            path = todo.pop()
            if path in doms:
                continue
            html, console = load(urljoin(base, path))
            assert console == [], (path, console)
            dom = doms[path] = parse_html(html)
            for table in dom.find_all("table"):
                assert table.find("th") is not None, (path, table.attrs)
            for el in dom.iter():
                link = el.attrs.get("href") or el.attrs.get("src")
                if not link or link.startswith("#") or urlsplit(link).scheme in ("http", "https", "mailto"):
                    continue
                absolute = urljoin(urljoin(base, path), link).split("#")[0]
                if absolute not in checked:
                    checked.add(absolute)
                    assert status(absolute) == 200, (path, link)
                target = urlsplit(absolute).path.lstrip("/")
                if target.endswith(".html"):
                    todo.append(target)
    assert set(doms) == pages
    assert {routes.window_path(*WINDOW), "methodology.html"} <= pages
    assert doms["index.html"].find("section", {"data-track": TRACK}) is not None

    monkeypatch.setenv("DEEPSCHOLAR_DB_URL", db_url)
    capsys.readouterr()
    assert cli.main(["leaderboard", "--format", "json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    table = doms["index.html"].find_all("table", {"class": "leaderboard"})[0]  # the core board, then the track's
    assert (table.attrs["data-release"], table.attrs["data-judge-config"]) == (MONTHS[-1], LLM)
    assert [tr.attrs["data-system"] for tr in table.find_all("tr", {"data-system": True})] == \
        [r["system_id"] for r in printed]
    for row in printed:
        sid = row["system_id"]
        assert table.cell(sid, "rank").text() == str(row["rank"])
        means = {m: d["mean"] for m, d in row["metrics"].items()} | {"geometric_mean": row["geometric_mean"]}
        assert set(means) == {*registry.metric_names(registry.CORE), "geometric_mean"}
        for metric, mean in means.items():
            cell = table.cell(sid, metric)
            assert float(cell.attrs["data-value"]) == mean, (sid, metric)
            assert cell.own_text() == format_value(mean), (sid, metric)
