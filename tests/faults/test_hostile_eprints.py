"""Hostile arXiv e-prints: through the extractor, `deepscholar latex inspect`, and the release step.

tests/unit/test_eprint.py pins each member check on its own (../x, /etc/x, links, devices, small caps);
here the archives are what an attacker would upload: names the filesystem refuses, truncated streams, bombs
at the default caps, sources in other encodings, and a month whose e-prints are hostile, served by the replay
server to the real release step, which must record each bad paper with its reason and go on.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import math
import os
import struct
import subprocess
import sys
import tarfile
import time
import tracemalloc
import uuid
import zlib
from pathlib import Path

import pytest
import sqlalchemy as sa
from support.settings import replay_settings
from support.warehouse import empty_warehouse

from deepscholar.sources.eprint import (
    MAX_GZIP_RATIO,
    CompressionBombError,
    EprintError,
    GunzipStream,
    extract_eprint,
)
from deepscholar.sources.latex import find_related_work
from faults.conftest import unchanged

pytestmark = pytest.mark.slow  # builds releases

TEX = (b"\\documentclass{article}\n\\begin{document}\n\\section{Introduction}\nIntro.\n"
       b"\\section{Related Work}\nPrior work \\cite{a}.\n\\section{Method}\nM.\n\\end{document}\n")


def _info(name: str, size: int = 0, kind: bytes = tarfile.REGTYPE, linkname: str = "") -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.size, info.type, info.linkname = size, kind, linkname
    return info


def tar(members: list[tuple[str, bytes]], *, gz: bool = True, extra: list[tarfile.TarInfo] = ()) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w", format=tarfile.PAX_FORMAT) as tf:
        for name, data in members:
            tf.addfile(_info(name, len(data)), io.BytesIO(data))
        for info in extra:
            tf.addfile(info)
    return buf.getvalue()


def declared_bomb(declared: int, members: int = 1) -> bytes:
    """Headers that declare `declared` bytes each and carry none: the archive is a few KB."""
    main = _info("main.tex", len(TEX)).tobuf(format=tarfile.GNU_FORMAT) + TEX + b"\0" * (-len(TEX) % 512)
    blocks = b"".join(_info(f"big{i}.tex", declared).tobuf(format=tarfile.GNU_FORMAT) for i in range(members))
    return gzip.compress(main + blocks + b"\0" * 1024)


def member_bomb(n: int) -> bytes:
    """n empty members as one repeated 512-byte header: a tiny gzip, n headers to read."""
    header = _info("empty.tex").tobuf(format=tarfile.USTAR_FORMAT)
    per_piece = min(n, 8192)  # gzip members may be concatenated: compress one piece, repeat it
    return gzip.compress(header * per_piece) * (n // per_piece) + gzip.compress(b"\0" * 1024)


def gzip_bomb(decompressed: int) -> bytes:
    """`decompressed` bytes of LaTeX-looking text from a payload of a few hundred KB (repeated gzip members)."""
    piece = gzip.compress(b"\\documentclass{article}" + b" " * (16 * 2**20 - 23), 9)
    return piece * (decompressed // (16 * 2**20))


TEN_GB = 10 * 2**30
_BLOCK = 64 * 2**20


@functools.cache
def declared_bomb_gzip(kind: str, size: int = TEN_GB) -> bytes:
    """One gzip stream of a tar whose one member holds `size` zero bytes ("tar") or of a LaTeX file
    followed by `size` spaces ("tex"): its trailer declares the whole (mod 2**32, as gzip does) and it
    weighs about size / 1000 bytes. 64 MiB of the filler is streamed through a compressobj once, ending
    in a full flush (no back-reference crosses it), so that block's output is repeated instead of
    compressing 10 GB again; nothing of the decompressed size is ever held or written."""
    if kind == "tar":
        prefix, fill = _info("main.tex", size).tobuf(format=tarfile.GNU_FORMAT), b"\0"
        suffix = b"\0" * 1024  # end of archive
    else:
        prefix, fill, suffix = b"\\documentclass{article}\n\\begin{document}\n", b" ", b"\n\\end{document}\n"
    assert size % _BLOCK == 0
    deflate = zlib.compressobj(9, zlib.DEFLATED, -zlib.MAX_WBITS)
    block = fill * _BLOCK
    head = deflate.compress(prefix) + deflate.flush(zlib.Z_FULL_FLUSH)
    body = deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH)
    assert deflate.compress(block) + deflate.flush(zlib.Z_FULL_FLUSH) == body  # the same bytes every time
    tail = deflate.compress(suffix) + deflate.flush()
    crc = crc32_joined(zlib.crc32(prefix), _repeated_crc32(zlib.crc32(block), _BLOCK, size // _BLOCK), size)
    crc = crc32_joined(crc, zlib.crc32(suffix), len(suffix))
    total = len(prefix) + size + len(suffix)
    header = b"\x1f\x8b\x08\x00" + b"\0\0\0\0" + b"\x02\xff"  # deflate, no name, no mtime, best compression
    return header + head + body * (size // _BLOCK) + tail + struct.pack("<II", crc, total % 2**32)


# CRC-32 of a concatenation from the CRCs of its parts, so the bomb's trailer is right without hashing 10 GB:
# the CRC is linear over GF(2), and crc(A + B) is crc(A) run through len(B) zero bytes, xor crc(B). Running
# a CRC register through one zero bit is a linear map, kept as the images of the 32 unit vectors; running
# it through n bits is that map raised to the n-th power, by repeated squaring.

def _image(columns: list[int], vector: int) -> int:
    out, bit = 0, 0
    while vector:
        if vector & 1:
            out ^= columns[bit]
        vector, bit = vector >> 1, bit + 1
    return out


def crc32_joined(crc_a: int, crc_b: int, len_b: int) -> int:
    step = [(1 << i) >> 1 ^ (0xEDB88320 if i == 0 else 0) for i in range(32)]  # one zero bit, reflected
    bits, register = 8 * len_b, crc_a
    while bits:
        if bits & 1:
            register = _image(step, register)
        step = [_image(step, column) for column in step]  # the map applied twice
        bits >>= 1
    return register ^ crc_b


def _repeated_crc32(crc: int, length: int, times: int) -> int:
    """CRC-32 of one block of `length` bytes (CRC `crc`) written `times` times in a row."""
    whole = 0  # the CRC of the empty string
    while times:
        if times & 1:
            whole = crc32_joined(whole, crc, length)
        crc, length, times = crc32_joined(crc, crc, length), 2 * length, times >> 1
    return whole


def truncated(payload: bytes, keep: float = 0.5) -> bytes:
    return payload[: int(len(payload) * keep)]


def _section(dest: Path) -> str | None:
    found = find_related_work(dest)
    return found.text if found else None


# (id, payload factory, extract_eprint keyword caps, expected): expected is
#   ("refused", message part)            extract_eprint raises EprintError, nothing stays in dest
#   ("skipped", member name, reason part) that member is refused, the project around it is extracted
#   ("text", expected related-work text or None)
ARCHIVE_CASES = [
    pytest.param(lambda: tar([("main.tex", TEX), ("x" * 10_000 + ".tex", b"x")]), {},
                 ("skipped", "x" * 10_000 + ".tex", "longer than 1024"), id="member-name-10k-chars"),
    pytest.param(lambda: tar([("main.tex", TEX), ("d/" * 3000 + "f.tex", b"x")]), {},
                 ("skipped", "d/" * 3000 + "f.tex", "deeper than 32"), id="member-path-3000-folders-deep"),
    pytest.param(lambda: tar([("main.tex", TEX), ("./../evil.tex", b"x")]), {},
                 ("skipped", "./../evil.tex", "parent-directory"), id="traversal-dot-prefixed"),
    pytest.param(lambda: tar([("main.tex", TEX), ("..\\..\\evil.tex", b"x")]), {},
                 ("skipped", "..\\..\\evil.tex", "parent-directory"), id="traversal-backslashes"),
    pytest.param(lambda: tar([("main.tex", TEX), ("C:\\evil.tex", b"x")]), {},
                 ("skipped", "C:\\evil.tex", "absolute"), id="absolute-windows-drive"),
    pytest.param(lambda: tar([("main.tex", TEX), ("//etc/evil.tex", b"x")]), {},
                 ("skipped", "//etc/evil.tex", "absolute"), id="absolute-double-slash"),
    pytest.param(lambda: tar([("main.tex", TEX)], extra=[_info("passwd.tex", kind=tarfile.LNKTYPE,
                                                               linkname="/etc/passwd")]), {},
                 ("skipped", "passwd.tex", "hardlink"), id="hardlink-to-absolute-path"),
    pytest.param(lambda: tar([("main.tex", TEX)], extra=[_info("sec", kind=tarfile.SYMTYPE, linkname="/etc")]), {},
                 ("skipped", "sec", "symlink"), id="symlink-to-system-folder"),
    pytest.param(lambda: tar([("main.tex", TEX)], extra=[_info("tty.tex", kind=tarfile.CHRTYPE)]), {},
                 ("skipped", "tty.tex", "device"), id="character-device-member"),
    pytest.param(lambda: tar([("main.tex", TEX)], extra=[_info("pipe.tex", kind=tarfile.FIFOTYPE)]), {},
                 ("skipped", "pipe.tex", "fifo"), id="fifo-member"),
    pytest.param(lambda: truncated(tar([("main.tex", TEX), ("b.tex", os.urandom(100_000))], gz=False)), {},
                 ("skipped", "b.tex", "cannot extract"), id="truncated-tar-keeps-what-is-whole"),
    pytest.param(lambda: truncated(gzip.compress(tar([("main.tex", TEX), ("b.tex", os.urandom(50_000))], gz=False))),
                 {}, ("refused", "corrupt gzip"), id="truncated-gzip"),
    pytest.param(lambda: truncated(gzip.compress(TEX * 200), 0.3), {}, ("refused", "corrupt gzip"),
                 id="truncated-single-file-gzip"),
    pytest.param(lambda: declared_bomb(10**12), {}, ("refused", "declares"), id="tar-bomb-one-member-declares-1TB"),
    pytest.param(lambda: tar([(f"f{i}.tex", b"\0" * 20_000) for i in range(100)]), {"max_total_bytes": 1_000_000},
                 ("refused", "declares 2000000 bytes"), id="tar-bomb-100-members-over-the-byte-cap"),
    pytest.param(lambda: member_bomb(6000), {}, ("refused", "more than 5000 members"),
                 id="tar-bomb-6000-members-default-cap"),
    pytest.param(lambda: member_bomb(2_000_000), {"max_total_bytes": 1_000_000}, ("refused", "exceeds"),
                 id="tar-bomb-2M-members-stops-while-decompressing"),
    pytest.param(lambda: gzip_bomb(2**30), {"max_total_bytes": 4_000_000, "max_members": 100}, ("refused", "exceeds"),
                 id="gzip-bomb-1GB"),
    pytest.param(lambda: gzip.compress(gzip.compress(TEX)), {}, ("refused", "gzip inside gzip"),
                 id="nested-gzip"),
    pytest.param(lambda: tar([("main.tex", TEX.replace(b"Prior work", "Prior work by M\u00fcller and Ca\u00f1as"
                                                        .encode("latin-1")))]), {},
                 ("text", "Prior work by M\u00fcller and Ca\u00f1as [@a]."), id="latin-1-source"),
    pytest.param(lambda: tar([("main.tex", TEX.replace(b"Prior work", b"\x93Prior\x94 work"))]), {},
                 ("text", "\u201cPrior\u201d work [@a]."), id="cp1252-smart-quotes"),
    pytest.param(lambda: tar([("main.tex", TEX.replace(b"Prior work", b"Prior \xff\xfe\x81 work"))]), {},
                 ("text", "Prior \u00ff\u00fe\u0081 work [@a]."), id="invalid-utf8-bytes"),
    pytest.param(lambda: tar([("main.tex", TEX.replace(b"Prior work", b"Prior\x00 work\x00"))]), {},
                 ("text", "Prior work [@a]."), id="nul-bytes-in-source"),
    pytest.param(lambda: tar([("main.tex", TEX.decode().encode("utf-16"))]), {}, ("text", "Prior work [@a]."),
                 id="utf-16-source-read-once-nul-dropped"),
    pytest.param(lambda: gzip.compress(b"%PDF-1.5\n" + os.urandom(3000)), {}, ("refused", "PDF"),
                 id="gzipped-pdf"),
]


@pytest.mark.parametrize(("make", "caps", "expected"), ARCHIVE_CASES)
def test_hostile_archive(tmp_path, make, caps, expected):
    payload = make()
    dest = tmp_path / "out"
    tracemalloc.start()
    started = time.perf_counter()
    try:
        if expected[0] == "refused":
            with pytest.raises(EprintError, match=expected[1]):
                extract_eprint(payload, dest, **caps)
            assert not dest.exists() or not any(p.is_file() for p in dest.rglob("*"))
        else:
            contents = extract_eprint(payload, dest, **caps)
            if expected[0] == "skipped":
                _, name, reason = expected
                refused = dict(contents.skipped_members)
                assert name in refused and reason in refused[name], contents.skipped_members
                assert contents.files[0] == "main.tex"
            assert _section(dest) == (expected[1] if expected[0] == "text" else "Prior work [@a].")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    # The caps stop a bomb early: work is bounded by the cap, not by what the archive claims to hold.
    assert peak < 64 * 2**20, f"peak {peak / 2**20:.0f} MB"
    assert time.perf_counter() - started < 20
    assert sorted(p.name for p in tmp_path.iterdir()) == (["out"] if dest.exists() else [])
    assert all(Path(os.path.realpath(p)).is_relative_to(dest.resolve()) for p in dest.rglob("*"))


# --- a gzip declaring 10 GB: refused after a few MB, not after the 200 MB cap -----------------------------

@pytest.mark.parametrize("kind", ["tar", "tex"], ids=["tar-inside-gzip-10GB", "single-file-gzip-10GB"])
def test_a_10gb_gzip_bomb_is_refused_after_a_few_megabytes(tmp_path, kind):
    extra = 512 + 1024 if kind == "tar" else 41 + 16  # tar header and end, or the two LaTeX lines
    # The same construction, small enough to read whole: gzip checks the trailer's CRC and length.
    assert len(gzip.decompress(declared_bomb_gzip(kind, 3 * _BLOCK))) == 3 * _BLOCK + extra
    payload = declared_bomb_gzip(kind)
    assert len(payload) < 12 * 2**20
    assert struct.unpack("<I", payload[-4:])[0] == (TEN_GB + extra) % 2**32
    # What it is, read the way the extractor reads it (no limits): the path it would take past the refusal.
    first = next(iter(GunzipStream(payload, limit=2**62, max_ratio=math.inf)))
    assert first[257:262] == b"ustar" if kind == "tar" else first.startswith(b"\\documentclass")

    dest = tmp_path / "out"
    tracemalloc.start()
    try:
        with pytest.raises(CompressionBombError, match=f"exceeds {MAX_GZIP_RATIO} times its compressed size") as err:
            extract_eprint(payload, dest)  # the default caps, as the release uses them
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    refused = err.value
    assert isinstance(refused, EprintError) and "refused as a gzip bomb" in str(refused)
    # Refused within the first few MB decompressed, after a few KB of the 10 MB payload were read.
    assert refused.decompressed_bytes <= 4 * 2**20 + 64 * 2**10, refused.decompressed_bytes
    assert refused.compressed_bytes <= 64 * 2**10, refused.compressed_bytes
    assert peak < 16 * 2**20, f"peak {peak / 2**20:.1f} MB"
    assert not dest.exists() or not any(dest.rglob("*"))


def test_the_ratio_refusal_does_not_touch_an_ordinary_project(tmp_path):
    """A project of a few MB of varied LaTeX, and one whose tar is mostly padding, pass the ratio."""
    body = b"".join(b"\\section{Part %d}\nResult %d follows from Lemma %d \\cite{k%d}.\n" % (i, i * 7, i % 13, i)
                    for i in range(150_000))
    payload = tar([("main.tex", TEX), ("body.tex", body)] + [(f"tiny{i}.tex", b"%\n") for i in range(1000)])
    stream = GunzipStream(payload, limit=2**40)
    assert sum(len(chunk) for chunk in stream) > 2 * (4 * 2**20)  # past the grace: the ratio was applied
    assert stream.decompressed / stream.compressed < MAX_GZIP_RATIO / 4
    contents = extract_eprint(payload, tmp_path / "out")
    assert len(contents.files) == 1002 and not contents.skipped_members


# --- the command line: `deepscholar latex inspect FILE` ----------------------------------------------------

CLI_CASES = [
    pytest.param(lambda: declared_bomb(10**12), 2, "declares", id="cli-tar-bomb"),
    pytest.param(lambda: declared_bomb_gzip("tar"), 2, "refused as a gzip bomb", id="cli-gzip-bomb-10GB"),
    pytest.param(lambda: truncated(gzip.compress(tar([("main.tex", TEX), ("b", os.urandom(9000))], gz=False))), 2,
                 "corrupt gzip", id="cli-truncated-gzip"),
    pytest.param(lambda: truncated(tar([("main.tex", TEX), ("b.tex", os.urandom(100_000))], gz=False)), 0,
                 "Prior work [@a].", id="cli-truncated-tar-partial-parse"),
]


@pytest.mark.parametrize(("make", "code", "says"), CLI_CASES)
def test_latex_inspect_on_a_hostile_eprint(tmp_path, make, code, says):
    path = tmp_path / "2506.99999"
    path.write_bytes(make())
    out = subprocess.run([sys.executable, "-m", "deepscholar.cli", "latex", "inspect", str(path), "--json"],
                         capture_output=True, text=True, timeout=120,
                         env=dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True"))
    assert out.returncode == code, out.stderr
    if code:
        assert len(out.stderr.splitlines()) == 1 and "Traceback" not in out.stderr and says in out.stderr
    else:
        assert json.loads(out.stdout)["section_text"] == says
    assert sorted(p.name for p in tmp_path.iterdir()) == ["2506.99999"]


# --- the release step: hostile e-prints served by the replay server ----------------------------------------

MONTH = "2025-06"
ESCAPE_NAME = f"escaped_{uuid.uuid4().hex[:8]}.tex"


def _members(payload: bytes) -> list[tuple[str, bytes]]:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(payload))) as tf:
        return [(m.name, tf.extractfile(m).read()) for m in tf.getmembers() if m.isreg()]


def _with_hostile_members(payload: bytes) -> bytes:
    hostile = [_info(f"../../{ESCAPE_NAME}", 1), _info(f"/tmp/{ESCAPE_NAME}", 1),
               _info("evil_link.tex", kind=tarfile.SYMTYPE, linkname="/etc/passwd"),
               _info("hard.tex", kind=tarfile.LNKTYPE, linkname="/etc/passwd"),
               _info("dev.tex", kind=tarfile.CHRTYPE), _info("pipe.tex", kind=tarfile.FIFOTYPE)]
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tf:
        for info in hostile:
            tf.addfile(info, io.BytesIO(b"x") if info.isreg() else None)
        for name, data in _members(payload):
            tf.addfile(_info(name, len(data)), io.BytesIO(data))
    return buf.getvalue()


def _with_odd_bytes(payload: bytes) -> bytes:
    """The real project with NUL bytes and latin-1 text inside its related-work section."""
    members = []
    for name, data in _members(payload):
        if name.endswith(".tex") and b"Related Work" in data:
            data = data.replace(b"Related Work}", "Related Work}\nM\u00fcller\x00 wrote \x00this.\n".encode("latin-1"), 1)
        members.append((name, data))
    return tar(members)


# arXiv id in the demo month -> (how its e-print is replaced, status, reason, detail part)
RELEASE_CASES = {
    "2506.01002": (_with_hostile_members, "kept", None, "refused archive member"),
    "2506.01003": (lambda _: declared_bomb(10**12), "skipped", "unsafe_or_bad_archive", "declares"),
    "2506.01004": (lambda p: truncated(p), "skipped", "unsafe_or_bad_archive", "corrupt gzip"),
    "2506.01005": (_with_odd_bytes, "kept", None, None),
    "2506.01006": (lambda _: member_bomb(6000), "skipped", "unsafe_or_bad_archive", "more than 5000 members"),
    "2506.01015": (lambda _: declared_bomb_gzip("tar"), "skipped", "unsafe_or_bad_archive",
                   f"exceeds {MAX_GZIP_RATIO} times its compressed size"),
}
RELEASE_STEP_CASES = [pytest.param(arxiv_id, id=f"release-step-{arxiv_id}-{case[1]}")
                      for arxiv_id, case in RELEASE_CASES.items()]


@pytest.fixture(scope="module")
def hostile_month(tmp_path_factory, db_url):
    """The demo month with six hostile e-prints, extracted once by the real steps behind the replay server."""
    from deepscholar import db
    from deepscholar.release.spec import ReleaseSpec
    from deepscholar.release.steps import (
        extract_exemplars,
        filter_candidates,
        open_release,
        search_candidates,
    )
    from deepscholar.replay.demo_snapshot import write_demo_snapshot
    from deepscholar.replay.server import ReplayServer

    engine = db.get_engine(db_url)
    empty_warehouse(engine)
    snapshot = tmp_path_factory.mktemp("hostile") / "snapshot"
    write_demo_snapshot(snapshot, month=MONTH)
    for arxiv_id, (replace, *_) in RELEASE_CASES.items():
        path = snapshot / "eprint" / f"{arxiv_id}v1"
        path.write_bytes(replace(path.read_bytes()))
    categories = json.loads((snapshot / "manifest.json").read_text())["categories"]
    with ReplayServer(snapshot) as server:
        spec, settings = ReleaseSpec(categories=categories, judge="local"), replay_settings(server)
        ctx = open_release(engine, MONTH, spec, settings)
        search_candidates(ctx)
        filter_candidates(ctx)
        counts = extract_exemplars(ctx)  # must return: a bad paper never stops the month
        again = open_release(engine, MONTH, spec, settings)
        with unchanged(engine):  # a second run of the step is a no-op: nothing lost, nothing duplicated
            extract_exemplars(again)
        with engine.connect() as conn:
            rows = {r.arxiv_id: r for r in conn.execute(sa.text(
                "SELECT arxiv_id, stage, status, reason, detail FROM release_candidates WHERE release_id = :r"),
                {"r": MONTH})}
            sections = dict(conn.execute(sa.text("SELECT arxiv_id, section_text FROM release_queries")).all())
    yield {"counts": counts, "candidates": rows, "sections": sections, "manifest": json.loads(
        (snapshot / "manifest.json").read_text())}


@pytest.mark.parametrize("arxiv_id", RELEASE_STEP_CASES)
def test_release_step_records_the_hostile_eprint_and_goes_on(hostile_month, arxiv_id):
    _, status, reason, detail = RELEASE_CASES[arxiv_id]
    row = hostile_month["candidates"][arxiv_id]
    assert (row.status, row.reason) == (status, reason), row
    if detail:
        assert detail in row.detail, row.detail
    if status == "kept":
        assert "\x00" not in hostile_month["sections"][arxiv_id]
    # The month went on: every paper the demo keeps that we left alone is still kept.
    untouched = [a for a, outcome in hostile_month["manifest"]["expected"].items()
                 if outcome == "kept" and a not in RELEASE_CASES]
    assert untouched and all(hostile_month["candidates"][a].status == "kept" for a in untouched)
    # ../../ from the step's temporary folder (/tmp/eprint_*/) is /, and /tmp/ was named outright.
    assert not Path("/", ESCAPE_NAME).exists() and not Path("/tmp", ESCAPE_NAME).exists()


def test_release_step_latin1_text_survives(hostile_month):
    assert "M\u00fcller wrote this." in hostile_month["sections"]["2506.01005"]
