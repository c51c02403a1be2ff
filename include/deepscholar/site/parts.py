"""The site in parts (a month's boards, its reports, its export; a system's pages): each part is hard-linked from
the previous build when its key and the targets of its links are unchanged, else rendered, spread over worker
processes when there is much to render.

Design notes: docs/MODULE_NOTES.md, `deepscholar.site.parts`.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import multiprocessing
import os
import shutil
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from deepscholar.errors import InvalidInput
from deepscholar.site import documents, json_mirror, pages, routes
from deepscholar.site.routes import SiteMap

_LOG = logging.getLogger(__name__)

__all__ = ["MANIFEST_FILE", "KEYS_FILE", "KINDS", "Part", "LinkRecorder", "Folder", "Previous", "render_parts",
           "manifest_bytes", "read_manifest", "keys_bytes", "worker_count", "links_hold", "render_part"]

MANIFEST_FILE = "site-manifest.json"  # every file of the site but itself, the stamp and the keys, with its SHA-256
KEYS_FILE = "site-keys.json"  # each part's key, files and links: what the next build reuses by
_FORMAT = 1
KINDS = ("board", "reports", "export", "system")
REPORT_CHUNK = 1000  # report pages per job handed to a worker
PARALLEL_FROM = 2000  # report pages to render before worker processes are worth their start


@dataclass(frozen=True)
class Part:
    """One part of the site: `kind` of KINDS, `subject` its month (or system id), `key` (content_keys.py)."""

    kind: str
    subject: str
    key: str
    report_ids: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return f"{self.kind}/{self.subject}"


class LinkRecorder(SiteMap):
    """The site map, noting which file every live link of a part's pages resolved to (None: no file)."""

    def __init__(self, sm: SiteMap) -> None:
        super().__init__(**{f.name: getattr(sm, f.name) for f in dataclasses.fields(sm)})
        self.seen: dict[tuple[str, tuple[tuple[str, str], ...]], str | None] = {}

    def target(self, path: str, params: Any) -> str | None:
        found = super().target(path, params)
        self.seen[(path, tuple(sorted(params.items())))] = found
        return found

    def links(self) -> list[list]:
        return [[path, [list(p) for p in params], found] for (path, params), found in sorted(self.seen.items())]


def links_hold(links: Iterable[list], sm: SiteMap) -> bool:
    """Whether every recorded link still resolves to the same file (else the part's pages would differ)."""
    return all(sm.target(path, dict(params)) == found for path, params, found in links)


class Folder:
    """A staged build: each file put, adopted or linked into it, with its SHA-256 and size."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.files: dict[str, tuple[str, int]] = {}

    def put(self, path: str, content: str | bytes) -> None:
        data = content.encode() if isinstance(content, str) else content
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        self.files[path] = (hashlib.sha256(data).hexdigest(), len(data))

    def put_all(self, files: Iterable[tuple[str, str | bytes]]) -> None:
        for path, content in files:
            self.put(path, content)

    def adopt(self, prefix: str) -> None:
        """The files another writer put under `prefix` (a month's export)."""
        for found in sorted((self.root / prefix).rglob("*")):
            if found.is_file():
                data = found.read_bytes()
                self.files[found.relative_to(self.root).as_posix()] = (hashlib.sha256(data).hexdigest(), len(data))

    def link(self, source: Path, path: str, digest: str, size: int) -> None:
        """The previous build's file, hard-linked (copied across file systems)."""
        target = self.root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(source, target)
        except OSError:
            shutil.copyfile(source, target)
        self.files[path] = (digest, size)


@dataclass
class Previous:
    """An earlier build: its folder, manifest {path: sha256} and each part's key, files {path: size} and links."""

    folder: Path
    files: dict[str, str]
    parts: dict[str, dict]

    @classmethod
    def load(cls, folder: Path) -> Previous | None:
        """The build in `folder`; None (and a log line) when there is none or it cannot be read."""
        try:
            files = read_manifest(folder)
            keys = json.loads((folder / KEYS_FILE).read_text())
            if keys.get("format") != _FORMAT or not isinstance(keys.get("parts"), dict):
                raise ValueError(f"{KEYS_FILE} is not format {_FORMAT}")
        except (InvalidInput, OSError, ValueError, TypeError, AttributeError) as exc:
            _LOG.warning("site: no earlier build to reuse in %s (%s): every part is rendered", folder, exc)
            return None
        return cls(folder, files, keys["parts"])

    def reusable(self, part: Part, sm: SiteMap) -> dict[str, int] | None:
        """The part's files {path: size} when the earlier build has them for the same key and links, else None."""
        entry = self.parts.get(part.name)
        if not isinstance(entry, dict) or entry.get("key") != part.key:
            return None
        try:
            files = {str(p): int(s) for p, s in entry["files"].items()}
            if any(p not in self.files or (self.folder / p).stat().st_size != s for p, s in files.items()):
                return None
            return files if links_hold(entry["links"], sm) else None
        except (OSError, KeyError, TypeError, ValueError, AttributeError):
            return None


def manifest_bytes(files: dict[str, str]) -> bytes:
    return (json.dumps({"files": files}, indent=1, sort_keys=True) + "\n").encode()


def read_manifest(folder: Path) -> dict[str, str]:
    """{path: sha256} of a built site folder (InvalidInput when the folder is not one)."""
    try:
        return json.loads((folder / MANIFEST_FILE).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InvalidInput(f"{folder} is not a built site (no readable {MANIFEST_FILE}): "
                           "run `deepscholar site build --out DIR` first") from exc


def keys_bytes(entries: dict[str, dict]) -> bytes:
    return (json.dumps({"format": _FORMAT, "parts": entries}, sort_keys=True) + "\n").encode()


def render_part(engine: Engine, sm: SiteMap, part: Part, root: Path) -> tuple[dict[str, tuple[str, int]], list]:
    """Write one part (or a chunk of a month's reports) under `root`: ({path: (sha256, size)}, its links)."""
    recorder = LinkRecorder(sm)
    folder = Folder(root)
    if part.kind == "board":
        folder.put_all(pages.board_pages(engine, recorder, part.subject).items())
        folder.put_all(json_mirror.board_json_pages(engine, recorder, part.subject).items())
    elif part.kind == "reports":
        folder.put_all(pages.report_pages(engine, recorder, part.report_ids))
    elif part.kind == "export":
        documents.export_month(engine, part.subject, root)
        folder.adopt(f"downloads/{routes.file_name(part.subject)}")
    elif part.kind == "system":
        folder.put_all(pages.system_pages(engine, recorder, part.subject).items())
    else:
        raise ValueError(f"no part of kind {part.kind!r}")
    return folder.files, recorder.links()


_WORKER: dict[str, Any] = {}


def _start_worker(engine: Engine, sm: SiteMap, root: Path) -> None:
    """In a forked worker: the parent's engine without the parent's connections (new ones are opened here)."""
    engine.dispose(close=False)
    _WORKER.update(engine=engine, sm=sm, root=root)


def _run_job(part: Part) -> tuple[str, dict[str, tuple[str, int]], list]:
    return part.name, *render_part(_WORKER["engine"], _WORKER["sm"], part, _WORKER["root"])


def _jobs(parts: Iterable[Part]) -> list[Part]:
    """The parts as jobs, largest first: a month's reports in chunks of REPORT_CHUNK."""
    jobs = []
    for part in parts:
        ids = part.report_ids
        jobs += ([dataclasses.replace(part, report_ids=ids[i:i + REPORT_CHUNK]) for i in range(0, len(ids), REPORT_CHUNK)]
                 if part.kind == "reports" and ids else [part])
    weight = {"reports": 0, "export": 1, "system": 2, "board": 3}
    return sorted(jobs, key=lambda p: (weight[p.kind], -len(p.report_ids), p.name))


def worker_count(parts: Iterable[Part], workers: int | None) -> int:
    """`workers`, else as many as the cores (at most 4) when PARALLEL_FROM report pages or more are to be
    rendered; 1 inside a daemon process (which may not start any)."""
    if multiprocessing.current_process().daemon:
        return 1
    if workers is not None:
        return max(1, workers)
    pages_to_render = sum(len(p.report_ids) for p in parts)
    return min(os.cpu_count() or 1, 4) if pages_to_render >= PARALLEL_FROM else 1


def render_parts(engine: Engine, sm: SiteMap, parts: list[Part], root: Path, workers: int,
                 meanwhile: Any = None) -> Iterator[tuple[str, dict[str, tuple[str, int]], list]]:
    """(part name, files, links) of each job (a part or a chunk of one); `meanwhile()` runs in this process
    while the workers render."""
    jobs = _jobs(parts)
    if workers <= 1 or len(jobs) <= 1:
        if meanwhile is not None:
            meanwhile()
        for job in jobs:
            yield job.name, *render_part(engine, sm, job, root)
        return
    # Forked: the site map and the engine are inherited (not pickled), nothing is imported again, and a worker
    # that fails or dies fails the build at once (BrokenProcessPool).
    context = multiprocessing.get_context("fork")
    with ProcessPoolExecutor(workers, mp_context=context, initializer=_start_worker,
                             initargs=(engine, sm, root)) as pool:
        futures: list[Future] = [pool.submit(_run_job, job) for job in jobs]
        try:
            if meanwhile is not None:
                meanwhile()
            for future in futures:
                yield future.result()
        except BaseException:
            for future in futures:  # a failed job fails the build at once, not after the rest
                future.cancel()
            raise
