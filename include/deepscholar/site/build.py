"""`deepscholar site build --out DIR`: the whole static site, written from the warehouse, reusing what an
earlier build made of the parts that did not change.

Design notes: docs/MODULE_NOTES.md, `deepscholar.site.build`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from deepscholar.errors import InvalidInput
from deepscholar.site import documents, json_mirror, pages, routes
from deepscholar.site.parts import (
    KEYS_FILE,
    KINDS,
    MANIFEST_FILE,
    Folder,
    Part,
    Previous,
    keys_bytes,
    manifest_bytes,
    read_manifest,
    render_parts,
    worker_count,
)
from deepscholar.site.routes import SiteMap

_LOG = logging.getLogger(__name__)

__all__ = ["STAMP_FILE", "MANIFEST_FILE", "KEYS_FILE", "SiteBuild", "build_site", "read_manifest", "is_built_site",
           "holds_something_else"]

STAMP_FILE = "build-stamp.json"


@dataclass
class SiteBuild:
    """A built site: its folder, {path: sha256} of every file but the stamp, manifest and keys, their sizes,
    and how many parts of each kind were reused from the previous build or rendered."""

    out: Path
    files: dict[str, str]
    sizes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0
    reused: dict[str, int] = field(default_factory=dict)
    rendered: dict[str, int] = field(default_factory=dict)

    def parts_text(self) -> str:
        """How many parts of each kind were reused, e.g. "reused: board 12 of 13 months, system 0 of 20"."""
        counts = [f"{kind} {self.reused.get(kind, 0)} of {self.reused.get(kind, 0) + self.rendered.get(kind, 0)} "
                  f"{'systems' if kind == 'system' else 'months'}" for kind in KINDS
                  if self.reused.get(kind) or self.rendered.get(kind)]
        return "reused: " + (", ".join(counts) or "nothing to reuse")

    @property
    def digest(self) -> str:
        """One hash of the whole site (the manifest's): equal for equal sites."""
        return hashlib.sha256(manifest_bytes(self.files)).hexdigest()


def is_built_site(folder: Path) -> bool:
    """Whether `folder` holds an earlier build (its manifest is there)."""
    return (Path(folder) / MANIFEST_FILE).is_file()


def holds_something_else(out: Path) -> bool:
    """Whether `out` is a file, or a folder holding files but no earlier build (a build never replaces it)."""
    out = Path(out)
    return out.is_file() or (out.is_dir() and any(out.iterdir()) and not is_built_site(out))


def _check_out(out: Path) -> None:
    if holds_something_else(out):
        raise InvalidInput(f"--out {out} holds something other than a built site: choose an empty or new folder")


def _site_map(engine: Engine, with_reports: bool, docs: Path) -> SiteMap:
    with engine.connect() as conn:
        sm = pages.load_site_map(conn, with_reports)
    sm.extra = {"/api/leaderboard": "api/leaderboard.json", "/downloads": "downloads.html"}
    for live, name, doc in (("/methodology", "methodology.html", "METRICS.md"),
                            ("/submit", "submit.html", "SUBMITTING.md")):
        if (docs / doc).is_file():
            sm.extra[live] = name
    return sm


def _parts(engine: Engine, sm: SiteMap, with_reports: bool, with_downloads: bool) -> list[Part]:
    """Every part of the site with its key: each month's boards (and reports, export), each system's pages."""
    from deepscholar.settings import current_settings
    from deepscholar.site.content_keys import read_stamps

    stamps = read_stamps(engine, current_settings())
    months = sorted({release for release, _ in sm.current_version})
    latest = _latest_of(engine, sm)
    parts = [Part("board", m, stamps.board(m, latest.get(m, ()))) for m in months]
    if with_reports:
        by_month: dict[str, list[int]] = {}
        with engine.connect() as conn:
            for report_id, release in conn.execute(sa.text("SELECT report_id, release_id FROM deepscholar.reports")):
                if report_id in sm.reports:
                    by_month.setdefault(release, []).append(report_id)
        parts += [Part("reports", m, stamps.reports(m, ids), tuple(sorted(ids))) for m, ids in sorted(by_month.items())]
    if with_downloads:
        from deepscholar.release.context import code_version

        exported_by = code_version()
        parts += [Part("export", m, stamps.export(m, exported_by)) for m in months]
    return parts + [Part("system", s, stamps.system(s)) for s in sorted(sm.system_months)]


def _latest_of(engine: Engine, sm: SiteMap) -> dict[str, list[str]]:
    """{month: the judges whose latest board it is}, as the board page picks it (board_pages.py)."""
    from deepscholar.evaluation.boards.leaderboard import pick_board

    found: dict[str, list[str]] = {}
    with engine.connect() as conn:
        for judge in sorted({j for _, j in sm.current_version}):
            picked = pick_board(conn, None, judge)
            if picked is not None:
                found.setdefault(picked[0], []).append(judge)
    return found


def _spanning(engine: Engine, sm: SiteMap, folder: Folder, docs: Path) -> None:
    """The pages over every month, rendered at every build: index, history, the standard windows (a new month
    moves each), methodology, how to submit, the latest board's and the history's JSON."""
    for part in (pages.index_page(engine, sm), pages.history_pages(engine, sm), pages.window_pages(engine, sm),
                 documents.methodology_page(engine, sm, docs), documents.submit_page(sm, docs),
                 json_mirror.json_pages(engine, sm)):
        folder.put_all(part.items())


def _downloads(sm: SiteMap, folder: Folder, months: list[str]) -> None:
    """downloads.html, from each exported month's files as they are in the folder."""
    exports = {}
    for month in months:
        prefix = f"downloads/{routes.file_name(month)}/"
        exports[month] = sorted(p[len(prefix):] for p in folder.files if p.startswith(prefix) and "/" not in
                                p[len(prefix):])
    folder.put_all(documents.downloads_page(sm, exports).items())


def _assemble(engine: Engine, sm: SiteMap, staged: Path, previous: Previous | None, parts: list[Part],
              docs: Path, workers: int | None) -> tuple[Folder, dict[str, dict], Counter, Counter]:
    """Every part reused or rendered into `staged`, and the pages over every month: (folder, keys entries,
    reused and rendered parts per kind). The reused parts are linked while the workers render the others."""
    folder = Folder(staged)
    entries: dict[str, dict] = {}
    reused: dict[str, tuple[Part, dict[str, int]]] = {}
    for part in parts:
        found = previous.reusable(part, sm) if previous is not None else None
        if found is not None:
            reused[part.name] = (part, found)
    to_render = [p for p in parts if p.name not in reused]

    def meanwhile() -> None:
        for name, (_, found) in reused.items():
            assert previous is not None
            for path, size in found.items():
                folder.link(previous.folder / path, path, previous.files[path], size)
            entries[name] = previous.parts[name]
        _spanning(engine, sm, folder, docs)

    keys = {p.name: p.key for p in to_render}
    links: dict[str, dict] = {}
    for name, files, found_links in render_parts(engine, sm, to_render, staged, worker_count(to_render, workers),
                                                 meanwhile):
        entries.setdefault(name, {"key": keys[name], "files": {}})["files"].update(
            {path: size for path, (_, size) in files.items()})
        folder.files.update(files)
        links.setdefault(name, {}).update({json.dumps(link[:2]): link for link in found_links})
    for name, found in links.items():
        entries[name]["links"] = [found[k] for k in sorted(found)]
    _downloads(sm, folder, sorted(p.subject for p in parts if p.kind == "export"))
    return folder, entries, Counter(p.kind for p, _ in reused.values()), Counter(p.kind for p in to_render)


def build_site(engine: Engine, out: Path, *, with_reports: bool = True, with_downloads: bool = True,
               docs: Path = documents.DOCS_DIR, previous: Path | None = None, workers: int | None = None) -> SiteBuild:
    """Write the site of what `engine`'s warehouse holds into `out` (replacing an earlier build there). With
    `previous` (an earlier build's folder, often `out` itself), each part whose key and links are unchanged is
    hard-linked from it instead of rendered; the files are the same bytes either way. `workers`: processes
    rendering parts (default: the cores, when there are thousands of pages to render)."""
    started = time.monotonic()
    out = Path(out)
    _check_out(out)
    sm = _site_map(engine, with_reports, docs)
    earlier = Previous.load(Path(previous)) if previous is not None else None
    parts = _parts(engine, sm, with_reports, with_downloads)
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        folder, entries, reused, rendered = _assemble(engine, sm, staged, earlier, parts, docs, workers)
        files = {path: digest for path, (digest, _) in sorted(folder.files.items())}
        (staged / MANIFEST_FILE).write_bytes(manifest_bytes(files))
        (staged / KEYS_FILE).write_bytes(keys_bytes(entries))
        stamp = {"built_at": datetime.now(UTC).isoformat(timespec="seconds"), "files": len(files),
                 "site": hashlib.sha256(manifest_bytes(files)).hexdigest()}
        (staged / STAMP_FILE).write_text(json.dumps(stamp, indent=1, sort_keys=True) + "\n")
        from deepscholar.export.writer import replace_folder  # (pandas: imported when a build is written)

        _check_out(out)
        replace_folder(staged, out)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    sizes = {path: size for path, (_, size) in folder.files.items()}
    build = SiteBuild(out, files, sizes, time.monotonic() - started, dict(reused), dict(rendered))
    _LOG.info("site: %d files, %.1f MB, in %s (%.1f s); %s; the rest rendered", len(files), sum(sizes.values()) / 1e6,
              out, build.seconds, build.parts_text())
    return build
