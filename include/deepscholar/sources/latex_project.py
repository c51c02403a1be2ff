"""The structure of a LaTeX project folder: its .tex files, the main file, the files ``\\input`` reads
(inlined into one :class:`FlatDocument`, as LaTeX would read them) and the project's own packages."""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from .latex_source import StrippedText, read_tex, strip_comments

__all__ = ["BEGIN_DOCUMENT_RE", "FlatDocument", "LatexProject", "find_main_tex", "flatten", "local_packages"]

_MAX_INCLUDE_DEPTH = 25
_MAX_TEX_FILES = 3000

_DOCCLASS_RE = re.compile(r"\\document(?:class|style)(?![A-Za-z@])")
BEGIN_DOCUMENT_RE = re.compile(r"\\begin\s*\{document\}")
_ENDINPUT_RE = re.compile(r"\\endinput(?![A-Za-z@])")
_INPUT_RE = re.compile(
    r"\\(?P<cmd>input|include|subfile|InputIfFileExists)(?![A-Za-z@])\*?\s*"
    r"(?:\{\s*(?P<arg>[^{}]*?)\s*\}|(?P<bare>[^\s{}\\%]+))"
    r"|\\(?P<icmd>import|subimport|inputfrom|subinputfrom|includefrom|subincludefrom)\*?\s*"
    r"\{\s*(?P<dir>[^{}]*?)\s*\}\s*\{\s*(?P<file>[^{}]*?)\s*\}"
)


class LatexProject:
    """The .tex files of one project folder, read once and cached with their comment-free text."""

    def __init__(self, project_dir: Path) -> None:
        self.root = Path(project_dir)
        self._root_resolved = self.root.resolve()
        self._cache: dict[str, StrippedText] = {}
        self._tex_files: list[str] | None = None

    def rel(self, path: Path) -> str:
        return path.resolve().relative_to(self._root_resolved).as_posix()

    def tex_files(self) -> list[str]:
        if self._tex_files is None:
            found: list[str] = []
            for p in sorted(self.root.rglob("*")):
                if len(found) >= _MAX_TEX_FILES:
                    break
                if p.suffix.lower() != ".tex" or not p.is_file() or p.is_symlink():
                    continue
                rel = p.relative_to(self.root)
                if any(part.startswith((".", "__MACOSX")) for part in rel.parts):
                    continue
                found.append(rel.as_posix())
            self._tex_files = found
        return self._tex_files

    def source(self, rel: str) -> StrippedText:
        src = self._cache.get(rel)
        if src is None:
            src = strip_comments(read_tex(self.root / rel))
            self._cache[rel] = src
        return src

    def resolve_input(
        self, name: str, *, current: str, main: str | None, base_dir: str | None = None
    ) -> str | None:
        """Find the file an \\input refers to, the way TeX would from the main file's folder."""
        name = name.strip().strip('"')
        if not name or "#" in name or "\\" in name:
            return None
        bases: list[Path] = []
        if base_dir is not None:
            bases.append(self.root / base_dir)
        if main is not None:
            bases.append((self.root / main).parent)
        bases.append(self.root)
        bases.append((self.root / current).parent)
        seen: set[Path] = set()
        for base in bases:
            if base in seen:
                continue
            seen.add(base)
            cand = base / name
            options = [cand] if cand.suffix.lower() in (".tex", ".ltx") else [Path(f"{cand}.tex"), cand]
            for opt in options:
                if not opt.is_file():
                    continue
                try:
                    rel = self.rel(opt)
                except ValueError:  # outside the project folder
                    continue
                return rel
        return None

    def inputs_of(self, rel: str, main: str | None) -> list[str]:
        out = []
        for m in _INPUT_RE.finditer(self.source(rel).live):
            target = self._resolve_match(m, current=rel, main=main)
            if target is not None:
                out.append(target)
        return out

    def _resolve_match(self, m: re.Match[str], *, current: str, main: str | None) -> str | None:
        if m.group("icmd"):
            cmd = m.group("icmd")
            # \import paths start at the main file's folder, \subimport ones at the current file's.
            start = Path(current).parent if cmd.startswith("sub") or main is None else Path(main).parent
            folder = str(start / m.group("dir"))
            return self.resolve_input(m.group("file"), current=current, main=main, base_dir=folder)
        return self.resolve_input(m.group("arg") or m.group("bare") or "", current=current, main=main)


def find_main_tex(project_dir: Path, project: LatexProject | None = None) -> str | None:
    """Pick the file LaTeX would be run on: \\documentclass + \\begin{document}, not input by others."""
    project = project or LatexProject(project_dir)
    files = project.tex_files()
    if not files:
        return None
    toplevel = _readme_toplevel(project.root)
    if toplevel in files:
        return toplevel
    full, partial = [], []
    for rel in files:
        live = project.source(rel).live
        has_class = bool(_DOCCLASS_RE.search(live))
        has_begin = bool(BEGIN_DOCUMENT_RE.search(live))
        if has_class and has_begin:
            full.append(rel)
        elif has_begin or has_class:
            partial.append(rel)
    candidates = full or partial
    if not candidates:
        return None
    included: set[str] = set()
    for rel in files:
        included.update(project.inputs_of(rel, main=rel))

    def score(rel: str) -> tuple:
        stem = Path(rel).stem.lower()
        return (
            rel in included,
            stem not in ("main", "paper", "ms", "article", "manuscript"),
            rel.count("/"),
            -len(project.source(rel).live),
            rel,
        )

    return min(candidates, key=score)


def _readme_toplevel(root: Path) -> str | None:
    """arXiv's 00README.json may name the top-level file explicitly."""
    readme = root / "00README.json"
    if not readme.is_file():
        return None
    try:
        data = json.loads(readme.read_text(encoding="utf-8"))
        for src in data.get("sources", []):
            if src.get("usage") == "toplevel" and src.get("filename"):
                return str(src["filename"])
    except (ValueError, AttributeError, OSError):
        return None
    return None


@dataclass
class _Piece:
    file: str | None  # None for glue text we add between files
    src: StrippedText | None
    start: int  # live offsets into src.live
    end: int
    text: str


@dataclass
class FlatDocument:
    """The main file with its inputs inlined; ``live`` has comments removed."""

    main_tex: str
    live: str
    pieces: list[_Piece]
    offsets: list[int]
    included: list[str]
    # Comment-free text of the project's own .sty files the preamble loads (\usepackage{macros}),
    # dependencies first: they define macros but are not part of the document's text.
    packages: list[str] = field(default_factory=list)

    def file_at(self, pos: int) -> str:
        for i in range(max(0, bisect.bisect_right(self.offsets, pos) - 1), len(self.pieces)):
            file = self.pieces[i].file
            if file is not None:
                return file
        return self.main_tex

    def raw_between(self, start: int, end: int) -> str:
        """Original source (comments included) behind live[start:end], inputs inlined."""
        out = []
        for piece, off in zip(self.pieces, self.offsets, strict=True):
            p_start, p_end = off, off + len(piece.text)
            lo, hi = max(start, p_start), min(end, p_end)
            if lo >= hi and not (lo == hi == p_start and piece.text == ""):
                continue
            if piece.src is None:
                out.append(piece.text[lo - p_start : hi - p_start])
                continue
            raw_lo = piece.src.raw_pos(piece.start + (lo - p_start))
            if hi == p_end:
                at_end = piece.end >= len(piece.src.live)
                raw_hi = len(piece.src.raw) if at_end else piece.src.raw_pos(piece.end)
            else:
                raw_hi = piece.src.raw_pos(piece.start + (hi - p_start))
            out.append(piece.src.raw[raw_lo:raw_hi])
        return "".join(out)


def flatten(project: LatexProject, main_tex: str) -> FlatDocument:
    pieces: list[_Piece] = []
    included: list[str] = []

    def walk(rel: str, stack: tuple[str, ...]) -> None:
        src = project.source(rel)
        live = src.live
        # TeX stops reading a file at \endinput (the rest of that line still counts); drafts often follow.
        stop = _ENDINPUT_RE.search(live)
        limit = live.find("\n", stop.end()) if stop else len(live)
        limit = len(live) if limit < 0 else limit
        pos = 0
        for m in _INPUT_RE.finditer(live, 0, limit):
            target = project._resolve_match(m, current=rel, main=main_tex)
            if target is None or target in stack or len(stack) >= _MAX_INCLUDE_DEPTH:
                continue
            if Path(target).suffix.lower() == ".bbl":
                continue
            pieces.append(_Piece(rel, src, pos, m.start(), live[pos : m.start()]))
            included.append(target)
            walk(target, (*stack, target))
            # TeX ends an input file with an end-of-line; keep words of adjacent files apart.
            pieces.append(_Piece(None, None, 0, 0, "\n"))
            pos = m.end()
        pieces.append(_Piece(rel, src, pos, limit, live[pos:limit]))

    walk(main_tex, (main_tex,))
    offsets = []
    total = 0
    for piece in pieces:
        offsets.append(total)
        total += len(piece.text)
    live = "".join(p.text for p in pieces)
    begin = BEGIN_DOCUMENT_RE.search(live)
    return FlatDocument(
        main_tex=main_tex,
        live=live,
        pieces=pieces,
        offsets=offsets,
        included=included,
        packages=local_packages(project, live[: begin.start()] if begin else live, main_tex),
    )


_USEPACKAGE_RE = re.compile(
    r"\\(?:usepackage|RequirePackage)(?![A-Za-z@])\s*(?:\[[^\]]*\]\s*)?\{(?P<names>[^{}]*)\}"
)
_MAX_LOCAL_PACKAGES = 50
_MAX_PACKAGE_DEPTH = 5


def local_packages(project: LatexProject, preamble: str, main_tex: str) -> list[str]:
    """Comment-free text of the .sty files of the project itself that ``preamble`` loads.

    Papers often keep their macros in a local package (``\\usepackage{macros}`` + macros.sty);
    packages from the TeX distribution are not in the folder and are skipped.
    """
    found: list[str] = []
    seen: set[str] = set()

    def visit(text: str, current: str, depth: int) -> None:
        for m in _USEPACKAGE_RE.finditer(text):
            for name in m.group("names").split(","):
                rel = project.resolve_input(name.strip() + ".sty", current=current, main=main_tex)
                if rel is None or rel in seen or len(seen) >= _MAX_LOCAL_PACKAGES:
                    continue
                seen.add(rel)
                sty = project.source(rel).live
                if depth < _MAX_PACKAGE_DEPTH:
                    visit(sty, rel, depth + 1)
                found.append(sty)

    visit(preamble, main_tex, 0)
    return found
