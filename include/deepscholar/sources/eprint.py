"""Safe extraction of arXiv e-print payloads.

arXiv serves the "e-print" of a paper as one of: a gzip-compressed tar of the LaTeX project, a single
gzip-compressed .tex file, a plain tar, a bare .tex file, or a PDF when the authors uploaded no source.
The payload comes from the network and is treated as hostile: every archive member is checked by hand
(path, type, sizes) before anything is written, and tarfile's ``data`` filter is applied on top as a
second line of defence.
"""

from __future__ import annotations

import gzip
import io
import os
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

__all__ = [
    "EprintContents",
    "EprintError",
    "NoLatexSourceError",
    "UnsafeArchiveError",
    "detect_kind",
    "extract_eprint",
]

_CHUNK = 1 << 16
# Tar headers and block padding make the tar stream bigger than the files it holds; allow for that
# when bounding the decompressed size so a legal archive near the cap is not refused.
_TAR_OVERHEAD_PER_MEMBER = 1536
# No LaTeX project needs more; a longer or deeper member name is refused before any folder is made
# (thousands of members 3000 folders deep would each walk the whole path, and the OS refuses such paths).
_MAX_MEMBER_NAME = 1024
_MAX_MEMBER_DEPTH = 32


class EprintError(Exception):
    """An e-print that cannot be had: here, a payload we cannot turn into a source folder; in
    sources.arxiv, `EprintDownloadError`, one that could not be downloaded."""


class NoLatexSourceError(EprintError):
    """The e-print exists but carries no LaTeX source (PDF- or PostScript-only submission)."""

    def __init__(self, message: str, *, kind: str) -> None:
        super().__init__(message)
        self.kind = kind


class UnsafeArchiveError(EprintError):
    """The archive breaks a safety limit (size or member count); nothing more is extracted."""


@dataclass
class EprintContents:
    kind: str  # "tar" | "gzip_single" | "tex"
    root: Path
    files: list[str] = field(default_factory=list)  # posix paths relative to root, sorted
    skipped_members: list[tuple[str, str]] = field(default_factory=list)  # (member name, reason)
    compressed: bool = False


def detect_kind(payload: bytes) -> str:
    """Classify by magic bytes, since arXiv's Content-Type is not reliable for e-prints."""
    head = payload[:1024]
    if head.startswith(b"%PDF-"):
        return "pdf"
    if head.startswith(b"%!PS"):
        return "postscript"
    if head.startswith(b"\x1f\x8b"):
        return "gzip"
    if _looks_like_tar(payload):
        return "tar"
    if _looks_like_latex(payload):
        return "tex"
    return "unknown"


def extract_eprint(
    payload: bytes,
    dest: Path,
    *,
    max_total_bytes: int = 200_000_000,
    max_members: int = 5000,
) -> EprintContents:
    """Write the LaTeX files of ``payload`` under ``dest`` and nowhere else."""
    dest = Path(dest)
    kind = detect_kind(payload)
    _raise_if_no_source(kind)
    if kind == "unknown":
        raise EprintError("e-print payload is neither gzip, tar, PDF nor LaTeX text")

    compressed = False
    data = payload
    if kind == "gzip":
        compressed = True
        limit = max_total_bytes + _TAR_OVERHEAD_PER_MEMBER * (max_members + 2)
        data = _gunzip_bounded(payload, limit)
        inner = detect_kind(data)
        _raise_if_no_source(inner)
        if inner == "gzip":
            raise EprintError("e-print is gzip inside gzip; refusing nested compression")
        if inner != "tar":
            if len(data) > max_total_bytes:
                raise UnsafeArchiveError(
                    f"decompressed e-print is {len(data)} bytes, over the cap of {max_total_bytes}"
                )
            if b"\x00" in data[:65536]:
                raise EprintError("gzip e-print holds binary data that is neither tar nor LaTeX")
            return _write_single(data, dest, kind="gzip_single", compressed=True)
        kind = "tar"

    if kind == "tex":
        if len(data) > max_total_bytes:
            raise UnsafeArchiveError(f"e-print is {len(data)} bytes, over the cap of {max_total_bytes}")
        return _write_single(data, dest, kind="tex", compressed=False)

    return _extract_tar(data, dest, max_total_bytes=max_total_bytes, max_members=max_members,
                        compressed=compressed)


def _raise_if_no_source(kind: str) -> None:
    if kind == "pdf":
        raise NoLatexSourceError("e-print is a PDF (no LaTeX source)", kind="pdf")
    if kind == "postscript":
        raise NoLatexSourceError("e-print is PostScript (no LaTeX source)", kind="postscript")


def _looks_like_tar(data: bytes) -> bool:
    if len(data) < 512:
        return False
    if data[257:262] == b"ustar":
        return True
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:") as tf:
            return tf.next() is not None
    except (tarfile.TarError, EOFError, OSError, ValueError):
        return False


def _looks_like_latex(data: bytes) -> bool:
    head = data[:65536]
    if b"\x00" in head:
        return False
    text = head.decode("utf-8", errors="replace")
    return any(tok in text for tok in ("\\documentclass", "\\documentstyle", "\\begin{document}"))


def _gunzip_bounded(payload: bytes, limit: int) -> bytes:
    """Decompress at most ``limit`` bytes so a gzip bomb cannot exhaust memory."""
    out = io.BytesIO()
    try:
        with gzip.GzipFile(fileobj=io.BytesIO(payload)) as gz:
            while True:
                chunk = gz.read(_CHUNK)
                if not chunk:
                    break
                out.write(chunk)
                if out.tell() > limit:
                    raise UnsafeArchiveError(f"decompressed e-print exceeds {limit} bytes")
    except (OSError, EOFError, zlib.error) as exc:
        raise EprintError(f"corrupt gzip e-print: {exc}") from exc
    return out.getvalue()


def _write_single(data: bytes, dest: Path, *, kind: str, compressed: bool) -> EprintContents:
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / "main.tex"
    _write_bytes_nofollow(target, [data])
    return EprintContents(kind=kind, root=dest, files=["main.tex"], compressed=compressed)


def _member_problem(member: tarfile.TarInfo) -> str | None:
    """Why a member must not be written, or None when it is a plain file or folder at a safe path."""
    name = member.name
    if member.issym():
        return "symlink"
    if member.islnk():
        return "hardlink"
    if member.ischr() or member.isblk():
        return "device file"
    if member.isfifo():
        return "fifo"
    if not (member.isreg() or member.isdir()):
        return "unsupported member type"
    if not name or "\x00" in name:
        return "empty or invalid name"
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "absolute path"
    parts = name.replace("\\", "/").split("/")
    if ".." in parts:
        return "parent-directory (..) component"
    if len(name) > _MAX_MEMBER_NAME or len(parts) > _MAX_MEMBER_DEPTH:
        return f"path longer than {_MAX_MEMBER_NAME} characters or deeper than {_MAX_MEMBER_DEPTH} folders"
    return None


def _safe_relpath(name: str) -> str | None:
    parts = [p for p in name.replace("\\", "/").split("/") if p not in ("", ".")]
    if not parts:
        return None
    return str(PurePosixPath(*parts))


def _extract_tar(
    data: bytes, dest: Path, *, max_total_bytes: int, max_members: int, compressed: bool
) -> EprintContents:
    try:
        tf = tarfile.open(fileobj=io.BytesIO(data), mode="r:")
    except (tarfile.TarError, EOFError, OSError) as exc:
        raise EprintError(f"corrupt tar e-print: {exc}") from exc
    with tf:
        # Read every header first: the member and declared-size caps are enforced before any write.
        members: list[tarfile.TarInfo] = []
        try:
            while True:
                member = tf.next()
                if member is None:
                    break
                members.append(member)
                if len(members) > max_members:
                    raise UnsafeArchiveError(f"e-print has more than {max_members} members")
        except tarfile.TarError as exc:
            if not members:
                raise EprintError(f"corrupt tar e-print: {exc}") from exc
        declared = _declared_bytes(members)
        if declared > max_total_bytes:
            raise UnsafeArchiveError(
                f"e-print declares {declared} bytes of files, over the cap of {max_total_bytes}"
            )

        dest.mkdir(parents=True, exist_ok=True)
        root = dest.resolve()
        contents = EprintContents(kind="tar", root=dest, compressed=compressed)
        files: set[str] = set()
        try:
            _extract_members(tf, members, root, contents, files, max_total_bytes)
        except UnsafeArchiveError:
            # Leave no half-extracted project behind: callers treat the paper as unusable.
            for rel in files:
                (root / rel).unlink(missing_ok=True)
            raise
        contents.files = sorted(files)
        return contents


def _extract_members(
    tf: tarfile.TarFile,
    members: list[tarfile.TarInfo],
    root: Path,
    contents: EprintContents,
    files: set[str],
    max_total_bytes: int,
) -> None:
    written_total = 0
    for member in members:
        problem = _member_problem(member)
        rel = _safe_relpath(member.name) if problem is None else None
        if problem is None and rel is None:
            problem = "empty or invalid name"
        if problem is None:
            problem = _data_filter_problem(member, root)
        if problem is not None:
            contents.skipped_members.append((member.name, problem))
            continue
        assert rel is not None
        target = root / rel
        if not _is_within(root, target):
            contents.skipped_members.append((member.name, "path escapes destination"))
            continue
        try:
            if member.isdir():
                _mkdirs_within(root, target)
                continue
            _mkdirs_within(root, target.parent)
            src = tf.extractfile(member)
            if src is None:
                contents.skipped_members.append((member.name, "unreadable member"))
                continue
            budget = max_total_bytes - written_total
            written = _write_bytes_nofollow(target, _read_chunks(src), budget=budget)
        except _PathConflict as exc:
            contents.skipped_members.append((member.name, str(exc)))
            continue
        except (OSError, EOFError, tarfile.TarError) as exc:
            # A truncated archive or a name the filesystem refuses: skip this member, keep the others.
            if not member.isdir():
                target.unlink(missing_ok=True)
            contents.skipped_members.append((member.name, f"cannot extract: {type(exc).__name__}: {exc}"[:300]))
            continue
        written_total += written
        files.add(rel)


def _declared_bytes(members: list[tarfile.TarInfo]) -> int:
    return sum(m.size for m in members if m.isreg())


class _PathConflict(Exception):
    pass


def _data_filter_problem(member: tarfile.TarInfo, root: Path) -> str | None:
    data_filter = getattr(tarfile, "data_filter", None)
    if data_filter is None:  # Python without PEP 706 filters: our own checks already ran
        return None
    try:
        data_filter(member, str(root))
    except tarfile.FilterError as exc:
        return f"refused by tarfile data filter: {exc.__class__.__name__}"
    return None


def _read_chunks(src: IO[bytes]) -> Iterator[bytes]:
    while True:
        chunk = src.read(_CHUNK)
        if not chunk:
            return
        yield chunk


def _is_within(root: Path, target: Path) -> bool:
    try:
        Path(os.path.realpath(target)).relative_to(root)
    except ValueError:
        return False
    return True


def _mkdirs_within(root: Path, folder: Path) -> None:
    """Create ``folder`` one level at a time, refusing symlinks or files in the way."""
    rel = folder.relative_to(root)
    current = root
    for part in rel.parts:
        current = current / part
        if current.is_symlink():
            raise _PathConflict("path goes through a symlink")
        if current.exists():
            if not current.is_dir():
                raise _PathConflict("path conflicts with an extracted file")
            continue
        current.mkdir()


def _write_bytes_nofollow(target: Path, chunks, *, budget: int | None = None) -> int:
    """Write chunks to ``target`` without following a symlink there; enforce the byte budget."""
    if target.is_dir() and not target.is_symlink():
        raise _PathConflict("path conflicts with an extracted folder")
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(target, flags, 0o644)
    except OSError as exc:
        raise _PathConflict(f"cannot create file: {exc.strerror}") from exc
    written = 0
    try:
        with os.fdopen(fd, "wb") as out:
            for chunk in chunks:
                written += len(chunk)
                if budget is not None and written > budget:
                    raise UnsafeArchiveError("e-print files exceed the size cap while extracting")
                out.write(chunk)
    except UnsafeArchiveError:
        target.unlink(missing_ok=True)
        raise
    return written
