"""Publishing a built site to its URL, so readers never see half of one (docs/SITE.md says it per scheme).

Design notes: docs/MODULE_NOTES.md, `deepscholar.site.publish`.
"""

from __future__ import annotations

import logging
import os
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from deepscholar.site.build import MANIFEST_FILE, STAMP_FILE, SiteBuild, read_manifest

_LOG = logging.getLogger(__name__)

__all__ = ["KEEP_BUILDS", "Published", "site_url", "storage_of", "publish_site", "published_build", "build_folder",
           "refresh_site"]

KEEP_BUILDS = 3
_REDIRECT = ('<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
             '<meta http-equiv="refresh" content="0; url={0}"><title>DeepScholar leaderboard</title></head>'
             '<body><p><a href="{0}">The DeepScholar leaderboard</a></p></body></html>\n')


@dataclass
class Published:
    """One publication: where, which build readers now see, and what it cost."""

    url: str
    build_id: str
    uploaded: int  # files sent (changed or new)
    reused: int  # files kept from the published build (linked or copied inside the store)
    seconds: float
    unchanged: bool = False  # the site equals the published one: nothing was written


def site_url(settings: Any = None) -> str:
    """DEEPSCHOLAR_SITE_URL, else the folder site/ under DEEPSCHOLAR_HOME (as a file:// URL)."""
    from deepscholar.settings import current_settings

    settings = settings or current_settings()
    return settings.site_url or (Path(settings.home) / "site").resolve().as_uri()


def storage_of(target: Any) -> tuple[Any, str, bool]:
    """(fsspec file system, root path, is local) of a URL or an ObjectStoragePath-like (.fs and .path)."""
    if isinstance(target, str | Path):
        import fsspec  # type: ignore[import-untyped]

        fs, root = fsspec.core.url_to_fs(str(target))
    else:
        fs, root = target.fs, target.path
    protocols = fs.protocol if isinstance(fs.protocol, tuple) else (fs.protocol,)
    return fs, root.rstrip("/") or "/", bool({"file", "local"} & set(protocols))


def published_build(target: Any) -> str | None:
    """The id of the build readers see at `target`, None before the first publication."""
    fs, root, local = storage_of(target)
    if local:
        link = Path(root) / "current"
        return Path(os.readlink(link)).name if link.is_symlink() else None
    try:
        return fs.cat_file(f"{root}/current").decode().strip() or None
    except FileNotFoundError:
        return None


def _published_manifest(fs: Any, root: str, build_id: str | None) -> dict[str, str]:
    if build_id is None:
        return {}
    import json

    try:
        return json.loads(fs.cat_file(f"{root}/builds/{build_id}/{MANIFEST_FILE}"))["files"]
    except (FileNotFoundError, ValueError, KeyError):
        return {}


def publish_site(build: SiteBuild | Path, target: Any, keep: int = KEEP_BUILDS) -> Published:
    """Publish the built site folder `build` to `target` (a URL, a path or an ObjectStoragePath)."""
    started = time.monotonic()
    folder = build.out if isinstance(build, SiteBuild) else Path(build)
    files = read_manifest(folder)
    fs, root, local = storage_of(target)
    url = target if isinstance(target, str) else str(target)
    previous = published_build(target)
    before = _published_manifest(fs, root, previous)
    if previous is not None and before == files:
        _LOG.info("site: %s already shows this site (build %s): nothing to publish", url, previous)
        return Published(url, previous, 0, len(files), time.monotonic() - started, unchanged=True)
    digest = SiteBuild(folder, files).digest
    build_id = f"{datetime.now(UTC):%Y%m%dT%H%M%S.%fZ}-{digest[:10]}"
    new, old = f"{root}/builds/{build_id}", f"{root}/builds/{previous}"
    uploaded = reused = 0
    for path in sorted(files):
        if before.get(path) == files[path]:
            _reuse(fs, local, f"{old}/{path}", f"{new}/{path}")
            reused += 1
        else:
            _upload(fs, local, folder / path, f"{new}/{path}")
            uploaded += 1
    for extra in (MANIFEST_FILE, STAMP_FILE):  # last: a build with its manifest is a complete build
        _upload(fs, local, folder / extra, f"{new}/{extra}")
    _switch(fs, root, local, build_id)
    _prune(fs, root, local, build_id, keep)
    done = Published(url, build_id, uploaded, reused, time.monotonic() - started)
    _LOG.info("site: published build %s to %s: %d files uploaded, %d kept from build %s (%.1f s)", build_id, url,
              uploaded, reused, previous, done.seconds)
    return done


def _upload(fs: Any, local: bool, source: Path, dest: str) -> None:
    if local:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
    fs.pipe_file(dest, source.read_bytes())


def _reuse(fs: Any, local: bool, source: str, dest: str) -> None:
    if local:
        Path(dest).parent.mkdir(parents=True, exist_ok=True)
        os.link(source, dest)
    else:
        fs.copy(source, dest)


def _switch(fs: Any, root: str, local: bool, build_id: str) -> None:
    """Readers see `build_id` from now on: one atomic step (see the module docstring)."""
    if local:
        base = Path(root)
        temporary = base / f".current-{build_id}"
        temporary.unlink(missing_ok=True)
        temporary.symlink_to(f"builds/{build_id}", target_is_directory=True)
        os.replace(temporary, base / "current")
        index = base / "index.html"
        page = _REDIRECT.format("current/index.html")
        if not index.is_file() or index.read_text() != page:
            index.write_text(page)
        return
    fs.pipe_file(f"{root}/index.html", _REDIRECT.format(f"builds/{build_id}/index.html").encode())
    fs.pipe_file(f"{root}/current", build_id.encode())


def _prune(fs: Any, root: str, local: bool, current: str, keep: int) -> None:
    """Remove all but the newest `keep` builds (never the current one)."""
    try:
        names = sorted(p.rstrip("/").rsplit("/", 1)[-1] for p in fs.ls(f"{root}/builds", detail=False))
    except FileNotFoundError:
        return
    for name in names[:-keep] if keep > 0 else names:
        if name != current:
            fs.rm(f"{root}/builds/{name}", recursive=True)
            _LOG.info("site: removed the old build %s", name)


def build_folder(settings: Any = None) -> Path:
    """Where the DAG keeps its latest build, so the next one reuses it: site-build/ under DEEPSCHOLAR_HOME."""
    from deepscholar.settings import current_settings

    return Path((settings or current_settings()).home) / "site-build"


def refresh_site(engine: Any, target: Any, folder: Path | None = None) -> tuple[SiteBuild, Published]:
    """Build the site of the warehouse and publish it to `target` (the DAG's task). In `folder`, reusing the
    unchanged parts of the build kept there (a missing or unreadable one: every part rendered); without one,
    or when `folder` holds something else, in a temporary folder."""
    import shutil
    import tempfile

    from deepscholar.site.build import build_site, holds_something_else, is_built_site

    if folder is not None and holds_something_else(Path(folder)):
        _LOG.warning("site: %s holds something other than a built site: building in a temporary folder instead",
                     folder)
    elif folder is not None:
        folder = Path(folder)
        build = build_site(engine, folder, previous=folder if is_built_site(folder) else None)
        return build, publish_site(build, target)
    work = Path(tempfile.mkdtemp(prefix="deepscholar-site-"))
    try:
        build = build_site(engine, work / "site")
        return build, publish_site(build, target)
    finally:
        shutil.rmtree(work, ignore_errors=True)
