"""arXiv e-print extraction treats the payload as hostile: nothing may land outside ``dest``."""

from __future__ import annotations

import gzip
import io
import json
import tarfile
from pathlib import Path

import pytest
from support import shared_data

from deepscholar.sources.eprint import (
    EprintError,
    NoLatexSourceError,
    UnsafeArchiveError,
    extract_eprint,
)
from deepscholar.sources.inspect import inspect_latex

TEX = (
    b"\\documentclass{article}\n\\begin{document}\n"
    b"\\section{Related Work}\nSee \\cite{a}.\n\\end{document}\n"
)


def _tar(members: list[tuple[tarfile.TarInfo, bytes | None]], *, gz: bool = True) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz" if gz else "w", format=tarfile.PAX_FORMAT) as tf:
        for info, data in members:
            tf.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _file(name: str, data: bytes) -> tuple[tarfile.TarInfo, bytes]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def _special(name: str, kind: bytes, linkname: str = "") -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    info.linkname = linkname
    return info, None


def _all_paths(root: Path) -> set[str]:
    return {p.relative_to(root).as_posix() for p in root.rglob("*")}


@pytest.fixture
def dest(tmp_path: Path) -> Path:
    # dest is a child of tmp_path so anything escaping it would show up in tmp_path.
    return tmp_path / "out"


def _nothing_outside(tmp_path: Path) -> None:
    outside = {p.name for p in tmp_path.iterdir()} - {"out"}
    assert outside == set(), outside


def test_normal_tar_gz(tmp_path, dest):
    payload = _tar(
        [_file("main.tex", TEX), _file("./sec/related.tex", b"x"), _file("refs.bib", b"@misc{a,}")]
    )
    contents = extract_eprint(payload, dest)
    assert contents.kind == "tar" and contents.compressed
    assert contents.files == ["main.tex", "refs.bib", "sec/related.tex"]
    assert contents.skipped_members == []
    assert (dest / "main.tex").read_bytes() == TEX
    _nothing_outside(tmp_path)


def test_plain_tar(tmp_path, dest):
    contents = extract_eprint(_tar([_file("main.tex", TEX)], gz=False), dest)
    assert contents.kind == "tar" and not contents.compressed
    assert contents.files == ["main.tex"]


def test_single_gzip_file_becomes_main_tex(tmp_path, dest):
    contents = extract_eprint(gzip.compress(TEX), dest)
    assert contents.kind == "gzip_single"
    assert contents.files == ["main.tex"]
    assert (dest / "main.tex").read_bytes() == TEX


def test_bare_latex_payload(dest):
    contents = extract_eprint(TEX, dest)
    assert contents.kind == "tex" and contents.files == ["main.tex"]


def test_pdf_has_no_source(dest):
    with pytest.raises(NoLatexSourceError, match=r"e-print is a PDF \(no LaTeX source\)") as err:
        extract_eprint(b"%PDF-1.5\n%\xe2\xe3\xcf\xd3\n1 0 obj\n", dest)
    assert err.value.kind == "pdf"
    assert isinstance(err.value, EprintError)
    assert not dest.exists() or not any(dest.iterdir())


def test_gzipped_pdf_has_no_source(dest):
    with pytest.raises(NoLatexSourceError):
        extract_eprint(gzip.compress(b"%PDF-1.4 binary"), dest)


@pytest.mark.parametrize("payload", [b"", b"garbage \x00\x01\x02 not an archive" * 40, b"\x1f\x8bnot-gzip"])
def test_garbage_raises_eprint_error(dest, payload):
    with pytest.raises(EprintError):
        extract_eprint(payload, dest)


@pytest.mark.parametrize(
    ("member", "reason"),
    [
        (_file("/etc/evil.tex", b"x"), "absolute path"),
        (_file("../evil.tex", b"x"), "parent-directory"),
        (_file("sub/../../evil.tex", b"x"), "parent-directory"),
        (_special("link.tex", tarfile.SYMTYPE, "/etc/passwd"), "symlink"),
        (_special("rel_link", tarfile.SYMTYPE, "../.."), "symlink"),
        (_special("hard.tex", tarfile.LNKTYPE, "main.tex"), "hardlink"),
        (_special("dev", tarfile.CHRTYPE), "device"),
        (_special("blk", tarfile.BLKTYPE), "device"),
        (_special("pipe", tarfile.FIFOTYPE), "fifo"),
    ],
)
def test_unsafe_members_are_skipped(tmp_path, dest, member, reason):
    payload = _tar([_file("main.tex", TEX), member, _file("z.tex", b"after")])
    contents = extract_eprint(payload, dest)
    assert contents.files == ["main.tex", "z.tex"]  # the safe members on both sides are still written
    assert len(contents.skipped_members) == 1
    name, why = contents.skipped_members[0]
    assert name == member[0].name and reason in why
    assert _all_paths(dest) == {"main.tex", "z.tex"}
    _nothing_outside(tmp_path)
    assert not (tmp_path.parent / "evil.tex").exists()


def test_symlinked_folder_cannot_be_used_to_escape(tmp_path, dest):
    payload = _tar([_special("d", tarfile.SYMTYPE, str(tmp_path)), _file("d/escape.tex", b"x")])
    contents = extract_eprint(payload, dest)
    assert {n for n, _ in contents.skipped_members} == {"d"}
    assert contents.files == ["d/escape.tex"]  # written as a real folder inside dest
    assert not (dest / "d").is_symlink()
    _nothing_outside(tmp_path)


def test_too_many_members(tmp_path, dest):
    payload = _tar([_file(f"f{i}.tex", b"x") for i in range(11)])
    with pytest.raises(UnsafeArchiveError, match="more than 10 members"):
        extract_eprint(payload, dest, max_members=10)
    assert not dest.exists() or _all_paths(dest) == set()
    assert extract_eprint(payload, dest, max_members=11).files  # at the cap is fine


def test_too_large_declared(tmp_path, dest):
    payload = _tar([_file("a.tex", b"x" * 600), _file("b.tex", b"y" * 600)])
    with pytest.raises(UnsafeArchiveError, match="declares 1200 bytes"):
        extract_eprint(payload, dest, max_total_bytes=1000)
    assert not dest.exists() or _all_paths(dest) == set()


def test_too_large_actual_gzip_bomb(dest):
    bomb = gzip.compress(b"\\documentclass{article}" + b" " * 5_000_000)
    assert len(bomb) < 20_000
    with pytest.raises(UnsafeArchiveError):
        extract_eprint(bomb, dest, max_total_bytes=100_000, max_members=10)
    assert not (dest / "main.tex").exists()


def test_too_large_actual_bytes_while_writing(dest, monkeypatch):
    # Simulate headers that under-declare sizes: the byte count while writing is the last line of defence.
    import deepscholar.sources.eprint as eprint_mod

    monkeypatch.setattr(eprint_mod, "_declared_bytes", lambda members: 0)
    payload = _tar([_file("a.tex", b"x" * 800), _file("b.tex", b"y" * 800)], gz=False)
    with pytest.raises(UnsafeArchiveError, match="while extracting"):
        extract_eprint(payload, dest, max_total_bytes=1000)
    assert _all_paths(dest) == set()  # the partial extraction is removed


def test_inspect_eprint_file(tmp_path):
    paper = shared_data.require("latex_real", "sybilhunter")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tf:
        for p in sorted(paper.iterdir()):
            if p.suffix in (".tex", ".bib"):
                tf.add(p, arcname=p.name)
    path = tmp_path / "2016.00001.tar.gz"
    path.write_bytes(buf.getvalue())
    report = inspect_latex(path)
    labels = json.loads((paper / "labels.json").read_text())
    assert report["section_title"] == labels["section_title"]
    assert report["section_file"] == labels["section_file"]
    assert report["cite_keys"] == labels["cite_keys"]
    assert report["unresolved_cite_keys"] == []
    assert report["n_bib_entries"] == labels["n_bib_entries"]
