"""`deepscholar site build --out DIR`: the whole static site, written from the warehouse in one go.

Design notes: docs/MODULE_NOTES.md, `deepscholar.site.build`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from sqlalchemy.engine import Engine

from deepscholar.errors import InvalidInput
from deepscholar.site import documents, json_mirror, pages

_LOG = logging.getLogger(__name__)

__all__ = ["STAMP_FILE", "MANIFEST_FILE", "SiteBuild", "build_site", "read_manifest"]

STAMP_FILE = "build-stamp.json"
MANIFEST_FILE = "site-manifest.json"


@dataclass
class SiteBuild:
    """A built site: its folder, {path: sha256} of every file but the stamp and manifest, and their sizes."""

    out: Path
    files: dict[str, str]
    sizes: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def digest(self) -> str:
        """One hash of the whole site (the manifest's): equal for equal sites."""
        return hashlib.sha256(_manifest_bytes(self.files)).hexdigest()


def _manifest_bytes(files: dict[str, str]) -> bytes:
    return (json.dumps({"files": files}, indent=1, sort_keys=True) + "\n").encode()


def read_manifest(folder: Path) -> dict[str, str]:
    """{path: sha256} of a built site folder (InvalidInput when the folder is not one)."""
    try:
        return json.loads((folder / MANIFEST_FILE).read_text())["files"]
    except (OSError, ValueError, KeyError) as exc:
        raise InvalidInput(f"{folder} is not a built site (no readable {MANIFEST_FILE}): "
                           "run `deepscholar site build --out DIR` first") from exc


def _check_out(out: Path) -> None:
    if out.is_file() or (out.is_dir() and any(out.iterdir()) and not (out / MANIFEST_FILE).is_file()):
        raise InvalidInput(f"--out {out} holds something other than a built site: choose an empty or new folder")


def _render(engine: Engine, sm, staged: Path, with_downloads: bool, docs: Path) -> dict[str, str | bytes]:
    exports = documents.export_months(engine, sm, staged) if with_downloads else {}
    files: dict[str, str | bytes] = {}
    for part in (pages.board_pages(engine, sm), pages.history_pages(engine, sm), pages.system_pages(engine, sm),
                 pages.report_pages(engine, sm), documents.methodology_page(engine, sm, docs),
                 documents.submit_page(sm, docs), documents.downloads_page(sm, exports),
                 json_mirror.json_pages(engine, sm),
                 pages.window_pages(engine, sm)):
        files.update(part)
    return files


def build_site(engine: Engine, out: Path, *, with_reports: bool = True, with_downloads: bool = True,
               docs: Path = documents.DOCS_DIR) -> SiteBuild:
    """Write the site of what `engine`'s warehouse holds into `out` (replacing an earlier build there)."""
    started = time.monotonic()
    out = Path(out)
    _check_out(out)
    with engine.connect() as conn:
        sm = pages.load_site_map(conn, with_reports)
    sm.extra = {"/api/leaderboard": "api/leaderboard.json", "/downloads": "downloads.html"}
    for live, name, doc in (("/methodology", "methodology.html", "METRICS.md"), ("/submit", "submit.html",
                                                                                 "SUBMITTING.md")):
        if (docs / doc).is_file():
            sm.extra[live] = name
    out.parent.mkdir(parents=True, exist_ok=True)
    staged = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        for path, content in _render(engine, sm, staged, with_downloads, docs).items():
            target = staged / path
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(content.encode() if isinstance(content, str) else content)
        found = sorted(p for p in staged.rglob("*") if p.is_file())
        files = {p.relative_to(staged).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest() for p in found}
        sizes = {p.relative_to(staged).as_posix(): p.stat().st_size for p in found}
        (staged / MANIFEST_FILE).write_bytes(_manifest_bytes(files))
        stamp = {"built_at": datetime.now(UTC).isoformat(timespec="seconds"), "files": len(files),
                 "site": hashlib.sha256(_manifest_bytes(files)).hexdigest()}
        (staged / STAMP_FILE).write_text(json.dumps(stamp, indent=1, sort_keys=True) + "\n")
        from deepscholar.export.writer import replace_folder  # (pandas: imported when a build is written)

        _check_out(out)
        replace_folder(staged, out)
    except BaseException:
        shutil.rmtree(staged, ignore_errors=True)
        raise
    build = SiteBuild(out, files, sizes, time.monotonic() - started)
    _LOG.info("site: %d files, %.1f MB, in %s (%.1f s)", len(files), sum(sizes.values()) / 1e6, out, build.seconds)
    return build
