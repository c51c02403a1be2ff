"""Safe extraction of arXiv e-print payloads: the archive comes from the network, so no member may write
outside its folder, and no payload may fill the disk, however it is built.

Design notes: docs/MODULE_NOTES.md, `deepscholar.sources.eprint`.
"""

from __future__ import annotations

import io
import os
import tarfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import IO

__all__ = [
    "MAX_GZIP_RATIO",
    "CompressionBombError",
    "EprintContents",
    "GunzipStream",
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
# Decompressed bytes per compressed byte read so far beyond which a gzip e-print is refused. LaTeX and tar
# padding compress 3-20x, PostScript figures at most some tens; DEFLATE tops out near 1032x, reached only
# by long runs of one byte, which is what a bomb is. At 200 a payload must carry at least a megabyte of
# gzip to reach the 200 MB cap, and a bomb is stopped after _RATIO_GRACE decompressed bytes.
MAX_GZIP_RATIO = 200
# Below this many decompressed bytes the ratio is not applied: a small archive (a tar of many short files
# is mostly zero padding and near-identical headers: 6000 empty files are 3 MB that gzip to 10 KB) may
# compress far better than a whole project, and is bounded by the member and byte caps anyway.
_RATIO_GRACE = 4 * 2**20
# Compressed bytes handed to zlib at a time: the ratio is checked at least this finely.
_GZIP_INPUT_CHUNK = 16 * 1024


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


class CompressionBombError(UnsafeArchiveError):
    """A gzip payload decompressed past the cap or the ratio; how far it got when it was stopped."""

    def __init__(self, message: str, *, compressed_bytes: int, decompressed_bytes: int) -> None:
        super().__init__(message)
        self.compressed_bytes = compressed_bytes
        self.decompressed_bytes = decompressed_bytes


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
    max_ratio: float = MAX_GZIP_RATIO,
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
        data = _gunzip_bounded(payload, limit, max_ratio)
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


def _gunzip_bounded(payload: bytes, limit: int, max_ratio: float = MAX_GZIP_RATIO) -> bytes:
    """Decompress at most ``limit`` bytes, and at most ``max_ratio`` times the compressed bytes read so far
    (past the first _RATIO_GRACE), so a gzip bomb cannot exhaust memory nor take long to refuse."""
    stream = GunzipStream(payload, limit=limit, max_ratio=max_ratio)
    out = io.BytesIO()
    for chunk in stream:
        out.write(chunk)
    return out.getvalue()


class GunzipStream:
    """The decompressed chunks of a gzip payload (concatenated members allowed, trailing zero padding
    ignored, as the gzip module reads them), counting what it has read and written.

    ``compressed`` and ``decompressed`` are the bytes read from the payload and produced so far; past
    ``limit`` or past ``max_ratio`` times what was read (after the first _RATIO_GRACE bytes) it raises
    CompressionBombError. A corrupt or truncated payload raises EprintError.
    """

    def __init__(self, payload: bytes, *, limit: int, max_ratio: float = MAX_GZIP_RATIO) -> None:
        self.payload, self.limit, self.max_ratio = memoryview(payload), limit, max_ratio
        self.compressed = 0
        self.decompressed = 0

    def __iter__(self) -> Iterator[bytes]:
        try:
            yield from self._chunks()
        except zlib.error as exc:
            raise EprintError(f"corrupt gzip e-print: {exc}") from exc

    def _chunks(self) -> Iterator[bytes]:
        payload, pos = self.payload, 0
        member = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)  # one gzip member, trailer checked
        pending = b""
        while True:
            if not pending:
                if pos >= len(payload):
                    break
                pending = bytes(payload[pos:pos + _GZIP_INPUT_CHUNK])
                pos += len(pending)
            given = len(pending)
            chunk = member.decompress(pending, _CHUNK)
            if member.eof:
                pending = member.unused_data
                self.compressed += given - len(pending)
                if _more_members(pending, payload[pos:]):
                    member = zlib.decompressobj(wbits=16 + zlib.MAX_WBITS)
                else:
                    pending, pos = b"", len(payload)
            else:
                pending = member.unconsumed_tail
                self.compressed += given - len(pending)
            if chunk:
                self.decompressed += len(chunk)
                self._check()
                yield chunk
        if not member.eof:
            raise EprintError("corrupt gzip e-print: the payload ends before its gzip stream does")

    def _check(self) -> None:
        if self.decompressed > self.limit:
            raise self._refusal(f"decompressed e-print exceeds {self.limit} bytes")
        if self.decompressed > max(_RATIO_GRACE, self.max_ratio * self.compressed):
            raise self._refusal(
                f"decompressed e-print exceeds {self.max_ratio:g} times its compressed size "
                f"({self.decompressed} bytes from {self.compressed}): refused as a gzip bomb")

    def _refusal(self, message: str) -> CompressionBombError:
        return CompressionBombError(message, compressed_bytes=self.compressed,
                                    decompressed_bytes=self.decompressed)


def _more_members(rest: bytes, unread: memoryview) -> bool:
    """Whether another gzip member follows the one that ended: the gzip module's rule, where zero bytes
    after the last member are padding and anything else must be a member."""
    head = (rest + bytes(unread[:2]))[:2] if len(rest) < 2 else rest[:2]
    if not head:
        return False
    if head == b"\x1f\x8b":
        return True
    if not rest.strip(b"\0") and not bytes(unread).strip(b"\0"):
        return False
    raise EprintError("corrupt gzip e-print: data after the last gzip member is not a gzip member")


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
