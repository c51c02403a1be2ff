"""Find and clean the related-work section of a LaTeX project folder.

The section is located in the *compiled* document: we start from the main .tex file, inline the
\\input/\\include files that LaTeX would read (commented-out ones do not count) and search that. A file
named related_work.tex that nothing inputs, or a commented-out heading, is therefore not a related-work
section.

Cleaned text format: plain text where each citation command becomes a marker ``[@key1; @key2]``
(pandoc style; see :mod:`deepscholar.text.markers`), floats and labels are dropped, footnotes are kept inline
in parentheses, nested headings become their own paragraphs, paragraphs are separated by a blank line and
all other whitespace is collapsed to single spaces. Cross-references (\\ref, \\cref, ...) become ``[ref]``.
Math is kept verbatim (``$...$``) because a lossy unicode rendering of macros is worse than the source
for readers and judges. ``cite_keys`` come from the LaTeX itself, so keys cited only inside a table of
the section still count, while keys in comments never do.
"""

from __future__ import annotations

import bisect
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from pylatexenc.latex2text import (
    EnvironmentTextSpec,
    LatexNodes2Text,
    MacroTextSpec,
    SpecialsTextSpec,
)
from pylatexenc.latex2text import get_default_latex_context_db as _l2t_default_db
from pylatexenc.latexwalker import LatexGroupNode as _GroupNode
from pylatexenc.latexwalker import LatexWalker
from pylatexenc.latexwalker import get_default_latex_context_db as _walker_default_db
from pylatexenc.macrospec import std_environment, std_macro

from deepscholar.text.markers import CITATION_MARKER_RE, format_marker

__all__ = [
    "FlatDocument",
    "LatexProject",
    "RelatedWorkSection",
    "cite_keys_in_latex",
    "find_main_tex",
    "find_related_work",
    "flatten",
    "is_related_work_title",
    "latex_to_text",
    "read_tex",
    "related_work_in_document",
    "strip_comments",
    "word_count",
]

_MAX_INCLUDE_DEPTH = 25
_MAX_TEX_FILES = 3000
_MAX_TEX_BYTES = 20_000_000

# --------------------------------------------------------------------------------------------------
# Reading and comment stripping


def read_tex(path: Path) -> str:
    """Decode a TeX file: UTF-8 first, then cp1252 (``ansinew``) as old sources often are."""
    data = path.read_bytes()[:_MAX_TEX_BYTES]
    for encoding in ("utf-8-sig", "cp1252"):
        try:
            text = data.decode(encoding)
            break
        except UnicodeDecodeError:
            continue
    else:
        text = data.decode("latin-1")
    # NUL is an ignored character to TeX (catcode 9) and PostgreSQL text and jsonb refuse it: a stray one
    # in a source used to make storing the paper's section fail and stop the whole extraction step.
    return text.replace("\x00", "").replace("\r\n", "\n").replace("\r", "\n")


# Every construct starts with a backslash or a percent sign; leading with that character class lets
# the regex engine skip plain text quickly.
_SCAN_RE = re.compile(
    r"""
    [\\%]
    (?:
      (?<=\\)
      (?: (?P<env>begin\s*\{(?P<envname>comment|verbatim\*?|Verbatim\*?|lstlisting|minted)\})
        | (?P<iffalse>iffalse(?![A-Za-z@]))
        | (?P<url>(?:url|path|href)\s*\{[^{}\n]*\})
        | (?P<verb>verb\*?(?P<vdelim>[^A-Za-z\s*])[^\n]*?(?P=vdelim))
        | (?P<esc>[\\%])
      )
    | (?<=%)(?P<comment>[^\n]*+(?:\n[ \t]*+(?!\n))?)
    )
    """,
    re.VERBOSE | re.DOTALL,
)
_IF_SCAN_RE = re.compile(
    r"\\(?:(?P<if>if(?!f(?![A-Za-z@]))[A-Za-z@]*)|(?P<fi>fi)|(?P<else>else))(?![A-Za-z@])|\\.|%[^\n]*",
    re.DOTALL,
)


@dataclass
class StrippedText:
    """Text with comments removed, plus a map back to positions in the original."""

    raw: str
    live: str
    _live_starts: list[int] = field(default_factory=list, repr=False)
    _raw_starts: list[int] = field(default_factory=list, repr=False)

    def raw_pos(self, live_pos: int) -> int:
        i = bisect.bisect_right(self._live_starts, live_pos) - 1
        if i < 0:
            return live_pos
        return self._raw_starts[i] + (live_pos - self._live_starts[i])


def strip_comments(raw: str) -> StrippedText:
    """Drop what LaTeX never reads: ``%`` comments (not ``\\%``), comment environments, ``\\iffalse``.

    A ``%`` comment also eats its line end (as in TeX) unless the next line is blank, so paragraph
    breaks survive. Verbatim-like environments, ``\\verb`` and URLs are skipped so a ``%`` in them is
    not taken as a comment.
    """
    cuts: list[tuple[int, int]] = []
    pos = 0
    n = len(raw)
    while pos < n:
        m = _SCAN_RE.search(raw, pos)
        if m is None:
            break
        if m.group("env") is not None:
            name = m.group("envname")
            end_re = re.compile(r"\\end\s*\{" + re.escape(name) + r"\}")
            e = end_re.search(raw, m.end())
            stop = e.end() if e else n
            if name == "comment":
                cuts.append((m.start(), stop))
            pos = stop
            continue
        if m.group("iffalse") is not None:
            stop, else_at = _match_fi(raw, m.end())
            if else_at is not None:
                cuts.append((m.start(), else_at))
            else:
                cuts.append((m.start(), stop))
            pos = else_at if else_at is not None else stop
            continue
        if m.group("comment") is not None:
            cuts.append((m.start(), m.end()))
        pos = m.end()

    live_parts: list[str] = []
    live_starts: list[int] = []
    raw_starts: list[int] = []
    prev = 0
    live_len = 0
    for start, end in cuts:
        if start > prev:
            live_starts.append(live_len)
            raw_starts.append(prev)
            live_parts.append(raw[prev:start])
            live_len += start - prev
        prev = max(prev, end)
    live_starts.append(live_len)
    raw_starts.append(prev)
    live_parts.append(raw[prev:])
    return StrippedText(raw=raw, live="".join(live_parts), _live_starts=live_starts, _raw_starts=raw_starts)


def _match_fi(text: str, pos: int) -> tuple[int, int | None]:
    """End of an ``\\iffalse`` block; also where its ``\\else`` branch (which is live) starts."""
    depth = 1
    for m in _IF_SCAN_RE.finditer(text, pos):
        if m.group("if"):
            depth += 1
        elif m.group("fi"):
            depth -= 1
            if depth == 0:
                return m.end(), None
        elif m.group("else") and depth == 1:
            return m.end(), m.end()
    return len(text), None


# --------------------------------------------------------------------------------------------------
# Project structure: main file and \input resolution

_DOCCLASS_RE = re.compile(r"\\document(?:class|style)(?![A-Za-z@])")
_BEGIN_DOC_RE = re.compile(r"\\begin\s*\{document\}")
_END_DOCUMENT_RE = re.compile(r"\\end\s*\{document\}")
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
        has_begin = bool(_BEGIN_DOC_RE.search(live))
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

    def locate(self, pos: int) -> tuple[_Piece, int]:
        i = max(0, bisect.bisect_right(self.offsets, pos) - 1)
        return self.pieces[i], pos - self.offsets[i]

    def file_at(self, pos: int) -> str:
        for i in range(max(0, bisect.bisect_right(self.offsets, pos) - 1), len(self.pieces)):
            if self.pieces[i].file is not None:
                return self.pieces[i].file
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
    begin = _BEGIN_DOC_RE.search(live)
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


# --------------------------------------------------------------------------------------------------
# Section search

_LEVELS = {
    "part": 0,
    "chapter": 1,
    "section": 2,
    "subsection": 3,
    "subsubsection": 4,
    "paragraph": 5,
    "subparagraph": 6,
}
_SEARCH_LEVELS = ("chapter", "section", "subsection")
_HEADING_RE = re.compile(
    r"\\(?P<level>part|chapter|section|subsection|subsubsection|paragraph|subparagraph)(?![A-Za-z@])"
    r"\s*(?P<star>\*)?\s*(?:\[[^\]]*\]\s*)?\{"
)
# Things that close any open section (rank 2) or chapter.
_DOC_END_RE = re.compile(
    r"\\(?:appendix|backmatter|printbibliography|bibliography|bibliographystyle)(?![A-Za-z@])"
    r"|\\begin\s*\{(?:thebibliography|acks|acknowledgments?|acknowledgements?)\}"
    r"|\\end\s*\{document\}"
)
_RW_TITLE_RE = re.compile(
    r"^(?:"
    r"(?:background and )?related (?:works?|literature|research)(?: and background)?"
    r"|(?:prior|previous) works?"
    r"|literature review"
    r")$"
)


def _normalise_title(title_text: str) -> str:
    t = title_text.lower().replace("&", " and ")
    t = re.sub(r"[^a-z ]+", " ", t)
    return re.sub(r"\s+", " ", t).strip()


# Looser fallback, used only when no title matches exactly: "Preliminaries and Related Work" etc.
_RW_TITLE_CONTAINS_RE = re.compile(r"\brelated (?:works?|literature)\b|\bliterature review\b")


def related_work_title_quality(title_text: str) -> int | None:
    """0 for a standard related-work title, 1 for one that mentions related work, None otherwise."""
    norm = _normalise_title(title_text)
    if _RW_TITLE_RE.match(norm):
        return 0
    if _RW_TITLE_CONTAINS_RE.search(norm):
        return 1
    return None


def is_related_work_title(title_text: str) -> bool:
    return related_work_title_quality(title_text) is not None


def brace_group_end(text: str, open_pos: int) -> int | None:
    """Index just past the brace group that opens at ``open_pos``."""
    depth = 0
    i = open_pos
    n = len(text)
    while i < n:
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    return None


@dataclass
class _Heading:
    level: str
    star: bool
    start: int
    end: int  # just past the closing brace of the title
    title_latex: str


def _iter_headings(live: str, start: int = 0):
    for m in _HEADING_RE.finditer(live, start):
        close = brace_group_end(live, m.end() - 1)
        if close is None:
            continue
        yield _Heading(
            level=m.group("level"),
            star=bool(m.group("star")),
            start=m.start(),
            end=close,
            title_latex=live[m.end() : close - 1],
        )


@dataclass
class RelatedWorkSection:
    title: str
    command: str
    level: str
    file: str
    raw_latex: str
    text: str
    cite_keys: list[str]
    main_tex: str


def find_related_work(project_dir: Path) -> RelatedWorkSection | None:
    """The related-work section of the compiled document, or None when it has none."""
    project = LatexProject(project_dir)
    main = find_main_tex(project_dir, project)
    if main is None:
        return None
    doc = flatten(project, main)
    return related_work_in_document(doc)


def related_work_in_document(doc: FlatDocument) -> RelatedWorkSection | None:
    live = doc.live
    begin = _BEGIN_DOC_RE.search(live)
    body_start = begin.end() if begin else 0
    appendix = re.compile(r"\\appendix(?![A-Za-z@])").search(live, body_start)
    appendix_at = appendix.start() if appendix else len(live)

    # TeX ignores everything after \end{document}; old drafts often live there.
    doc_end = _END_DOCUMENT_RE.search(live, body_start)
    live = live[: doc_end.end()] if doc_end else live

    headings = list(_iter_headings(live, body_start))
    best: tuple[tuple[int, int, int, int], int] | None = None
    for idx, h in enumerate(headings):
        if h.level not in _SEARCH_LEVELS:
            continue
        quality = related_work_title_quality(latex_to_text(_strip_labels(h.title_latex)))
        if quality is None:
            continue
        key = (int(h.start >= appendix_at), quality, _LEVELS[h.level], h.start)
        if best is None or key < best[0]:
            best = (key, idx)
    if best is None:
        return None
    idx = best[1]
    heading = headings[idx]
    rank = _LEVELS[heading.level]

    end = len(live)
    for later in headings[idx + 1 :]:
        if _LEVELS[later.level] <= rank:
            end = later.start
            break
    stop = _DOC_END_RE.search(live, heading.end, end)
    if stop is not None:
        end = stop.start()

    # User macros (\newcommand{\sysname}{...}) from local packages, the preamble and every file read
    # before the heading, then any defined inside the section; see latex_macros for what is expanded.
    from .latex_macros import MacroTable  # here: latex_macros itself uses this module

    macros = MacroTable.from_sources([*doc.packages, live[: heading.start]])
    body_live = macros.expand(live[heading.end : end])
    raw = doc.raw_between(heading.end, end)
    title_latex = _strip_labels(heading.title_latex).strip()
    command = "\\" + heading.level + ("*" if heading.star else "") + "{" + title_latex + "}"
    return RelatedWorkSection(
        title=latex_to_text(title_latex).strip(),
        command=command,
        level=heading.level,
        file=doc.file_at(heading.start),
        raw_latex=raw.strip(),
        text=latex_to_text(body_live),
        cite_keys=cite_keys_in_latex(body_live),
        main_tex=doc.main_tex,
    )


_LABEL_RE = re.compile(r"\\label\s*\{[^{}]*\}")
def _strip_labels(latex: str) -> str:
    return _LABEL_RE.sub("", latex)


# --------------------------------------------------------------------------------------------------
# Citations

_CITE_NAME_RE = re.compile(r"\\((?:[A-Za-z]*cite[A-Za-z]*|citeA|citeN|shortcite|bibentry))(?![A-Za-z@])")
# Macros with "cite" in their name that do not cite anything in the text.
_NOT_CITATIONS = frozenset(
    {"nocite", "citestyle", "citeindextrue", "citeindexfalse", "citetext", "defcitealias"}
)
_CITE_CALL_RE = re.compile(
    r"\\(?P<name>[A-Za-z]*cite[A-Za-z]*|citeA|citeN|shortcite|bibentry)(?![A-Za-z@])\*?\s*"
    r"(?P<args>(?:(?:\[(?:[^\[\]{}]|\{[^{}]*\})*\]\s*|\((?:[^()]*)\)\s*)*\{[^{}]*\}\s*)+)"
)
_CITE_GROUP_RE = re.compile(r"(?:\[(?:[^\[\]{}]|\{[^{}]*\})*\]|\([^()]*\))|\{(?P<keys>[^{}]*)\}")


def _split_keys(keys: str) -> list[str]:
    return [k.strip() for k in keys.split(",") if k.strip() and k.strip() != "*"]


def cite_keys_in_latex(latex: str) -> list[str]:
    """Sorted unique keys cited in comment-free LaTeX (floats included)."""
    keys: set[str] = set()
    for m in _CITE_CALL_RE.finditer(latex):
        if m.group("name") in _NOT_CITATIONS:
            continue
        groups = [g.group("keys") for g in _CITE_GROUP_RE.finditer(m.group("args"))]
        groups = [g for g in groups if g is not None]
        if m.group("name").endswith("cites"):
            for g in groups:  # biblatex multicite: every mandatory group is a key list
                keys.update(_split_keys(g))
        elif groups:
            keys.update(_split_keys(groups[0]))
    return sorted(keys)


# --------------------------------------------------------------------------------------------------
# LaTeX -> text

_FLOAT_ENVS = (
    "figure", "figure*", "table", "table*", "wrapfigure", "wraptable", "algorithm", "algorithm*",
    "SCfigure", "subfigure", "sidewaystable", "sidewaysfigure", "tabular", "tabular*", "tabularx",
    "longtable", "algorithmic", "lstlisting", "verbatim", "tikzpicture", "thebibliography",
)
_HEADING_MACROS = ("part", "chapter", "section", "subsection", "subsubsection", "paragraph", "subparagraph")
_DROP_MACROS_WALKER = {
    # name -> argspec, so the walker swallows the arguments of macros we drop entirely
    "label": "{",
    "vspace": "*{",
    "hspace": "*{",
    "setlength": "{{",
    "addtolength": "{{",
    "setcounter": "{{",
    "addtocounter": "{{",
    "renewcommand": "*{[[{",
    "newcommand": "*{[[{",
    "providecommand": "*{[[{",
    "DeclareMathOperator": "*{{",
    "definecolor": "{{{",
    "includegraphics": "*[{",
    "caption": "*[{",
    "captionof": "*{[{",
    "bibliographystyle": "{",
    "bibliography": "{",
    "addbibresource": "[{",
    "nocite": "{",
    "todo": "[{",
    "graphicspath": "{",
    "linespread": "{",
    "color": "[{",
    "pagecolor": "[{",
    "rowcolor": "[{",
    "cellcolor": "[{",
    "index": "{",
    "glsadd": "{",
    "resizebox": "*{{",
}
_REF_MACROS = ("ref", "eqref", "autoref", "Autoref", "cref", "Cref", "vref", "Vref", "pageref", "nameref",
               "cpageref", "Cpageref", "autopageref", "subref")
_CITE_MACROS = (
    "cite", "Cite", "citep", "Citep", "citet", "Citet", "citealp", "Citealp", "citealt", "Citealt",
    "citeauthor", "Citeauthor", "citeyear", "citeyearpar", "citenum", "citeA", "citeN", "shortcite",
    "parencite", "Parencite", "textcite", "Textcite", "autocite", "Autocite", "footcite", "footcitetext",
    "smartcite", "Smartcite", "supercite", "fullcite", "footfullcite", "citetitle", "citeurl",
    "citetalias", "citepalias", "cites", "parencites", "textcites", "autocites",
)


def _cite_repl(node, macroname=None) -> str:
    if macroname in _NOT_CITATIONS:
        return ""
    args = node.nodeargd.argnlist if node.nodeargd and node.nodeargd.argnlist else []
    mandatory = [a for a in args if a is not None and a.isNodeType(_GroupNode) and a.delimiters[0] == "{"]
    if not mandatory:
        return ""
    keys: list[str] = []
    for group in mandatory:
        keys.extend(_split_keys("".join(n.latex_verbatim() for n in group.nodelist)))
    return format_marker(list(dict.fromkeys(keys)))


def _heading_repl(node, l2tobj) -> str:
    args = node.nodeargd.argnlist if node.nodeargd and node.nodeargd.argnlist else []
    title = l2tobj.nodelist_to_text([args[-1]]) if args and args[-1] is not None else ""
    title = title.strip()
    return f"\n\n{title}\n\n" if title else "\n\n"


def _footnote_repl(node, l2tobj) -> str:
    args = node.nodeargd.argnlist if node.nodeargd and node.nodeargd.argnlist else []
    text = l2tobj.nodelist_to_text([args[-1]]).strip() if args and args[-1] is not None else ""
    return f" ({text})" if text else ""


def _href_repl(node, l2tobj) -> str:
    args = node.nodeargd.argnlist if node.nodeargd and node.nodeargd.argnlist else []
    if len(args) >= 2 and args[1] is not None:
        return l2tobj.nodelist_to_text([args[1]])
    return ""


def _url_repl(node) -> str:
    args = node.nodeargd.argnlist if node.nodeargd and node.nodeargd.argnlist else []
    if args and args[-1] is not None:
        return "".join(n.latex_verbatim() for n in args[-1].nodelist).replace("\\%", "%")
    return ""


@lru_cache(maxsize=64)
def _contexts(extra_cites: tuple[str, ...]):
    cite_names = tuple(dict.fromkeys((*_CITE_MACROS, *extra_cites)))
    walker_db = _walker_default_db()
    walker_macros = [std_macro(name, "*[[{") for name in cite_names if not name.endswith("cites")]
    walker_macros += [std_macro(name, "[[{[[{[[{[[{") for name in cite_names if name.endswith("cites")]
    walker_macros += [std_macro(name, spec) for name, spec in _DROP_MACROS_WALKER.items()]
    walker_macros += [std_macro(name, "*{") for name in _REF_MACROS]
    walker_macros += [std_macro(name, "*[{") for name in _HEADING_MACROS]
    walker_macros += [
        std_macro("footnote", "[{"),
        std_macro("footnotetext", "[{"),
        std_macro("url", "{"),
        std_macro("href", "{{"),
        std_macro("hyperref", "[{"),
        std_macro("textcolor", "[{{"),
        std_macro("colorbox", "[{{"),
        std_macro("multicolumn", "{{{"),
        std_macro("multirow", "[{[{{"),
        std_macro("scalebox", "{[{"),
    ]
    walker_envs = [std_environment(name, "[{") for name in ("figure", "figure*", "table", "table*")]
    walker_envs += [std_environment(name, "[{{") for name in ("wrapfigure", "wraptable")]
    walker_envs += [std_environment(name, "{") for name in ("tabular", "tabularx", "minipage")]
    walker_envs += [std_environment("tabular*", "{{")]
    walker_db.add_context_category(
        "deepscholar", prepend=True, macros=walker_macros, environments=walker_envs
    )
    _speed_up_specials(walker_db)

    text_db = _l2t_default_db()
    text_macros = [MacroTextSpec(name, simplify_repl=_cite_repl) for name in cite_names]
    text_macros += [MacroTextSpec(name, discard=True) for name in _DROP_MACROS_WALKER]
    text_macros += [MacroTextSpec(name, simplify_repl="[ref]") for name in _REF_MACROS]
    text_macros += [MacroTextSpec(name, simplify_repl=_heading_repl) for name in _HEADING_MACROS]
    text_macros += [
        MacroTextSpec("footnote", simplify_repl=_footnote_repl),
        MacroTextSpec("footnotetext", simplify_repl=_footnote_repl),
        MacroTextSpec("url", simplify_repl=_url_repl),
        MacroTextSpec("href", simplify_repl=_href_repl),
        MacroTextSpec("hyperref", simplify_repl=_href_repl),
        MacroTextSpec("textcolor", simplify_repl="%(3)s"),
        MacroTextSpec("colorbox", simplify_repl="%(3)s"),
        MacroTextSpec("item", simplify_repl="\n"),
        MacroTextSpec("\\", simplify_repl="\n"),
        MacroTextSpec("xspace", discard=True),
        MacroTextSpec("maketitle", discard=True),
        MacroTextSpec("and", simplify_repl=" and "),
    ]
    text_envs = [EnvironmentTextSpec(name, discard=True) for name in _FLOAT_ENVS]
    text_specials = [SpecialsTextSpec("~", " ")]
    text_db.add_context_category(
        "deepscholar", prepend=True, macros=text_macros, environments=text_envs, specials=text_specials
    )
    return walker_db, text_db


def _speed_up_specials(db) -> None:
    """pylatexenc tries every specials string at every character; most characters start none."""
    original = db.test_for_specials
    first_chars = frozenset(spec.specials_chars[0] for spec in db.iter_specials_specs())

    def test_for_specials(s, pos, parsing_state=None):
        if pos >= len(s) or s[pos] not in first_chars:
            return None
        return original(s, pos, parsing_state=parsing_state)

    db.test_for_specials = test_for_specials


_WS_RE = re.compile(r"[ \t\r\f\v\u00a0]+")
_PARA_SPLIT_RE = re.compile(r"\n\s*\n")


def normalise_whitespace(text: str) -> str:
    """Blank-line separated paragraphs, single spaces inside them."""
    paras = []
    for para in _PARA_SPLIT_RE.split(text):
        p = _WS_RE.sub(" ", para.replace("\n", " ")).strip()
        if p:
            paras.append(p)
    return "\n\n".join(paras)


_URL_ARG_RE = re.compile(r"(\\(?:url|href|path)\s*\{)([^{}]*)(\})")


def _prepare(latex: str) -> str:
    # A URL may hold a literal %, which pylatexenc would read as a comment.
    latex = _URL_ARG_RE.sub(
        lambda m: m.group(1) + re.sub(r"(?<!\\)%", r"\\%", m.group(2)) + m.group(3), latex
    )
    # ``\"`` before a space is a mistyped closing quote (``...\"), not an umlaut on the next word.
    latex = re.sub(r'\\"(?=\s)', "''", latex)
    # ``\cite{a}`` right after a word with no space would glue the marker onto the word.
    latex = re.sub(r"(?<=[^\s~(\[])(\\[A-Za-z]*cite[A-Za-z]*(?![A-Za-z@]))", r" \1", latex)
    return latex


_PLAIN_GROUP_RE = re.compile(r"\{([^{}\\$%&#^_~]*)\}")


def _is_macro_argument(text: str, brace: int) -> bool:
    """Whether the group opening at ``brace`` follows a macro name or another argument."""
    i = brace - 1
    while i >= 0 and text[i] in " \t\n":
        i -= 1
    if i < 0:
        return False
    if text[i] in "]}^_":  # another argument, or a math super/subscript
        return True
    if text[i] == "*":
        i -= 1
    end = i
    while i >= 0 and (text[i].isalpha() or text[i] == "@"):
        i -= 1
    return i >= 0 and i < end and text[i] == "\\"


def _unwrap_plain_groups(latex: str) -> str:
    """Drop braces around plain text ({B}ERT -> BERT) unless they are a macro's argument.

    Plain text does not need case-protecting braces, and text without markup can then skip
    pylatexenc, which is slow (it tokenises character by character).
    """
    if "{" not in latex:
        return latex
    for _ in range(8):
        current = latex
        new = _PLAIN_GROUP_RE.sub(
            lambda m, text=current: m.group(0) if _is_macro_argument(text, m.start()) else m.group(1), current
        )
        if new == current:
            break
        latex = new
    return latex


# Anything pylatexenc would change: markup characters and TeX ligatures (-- ``).
_SPECIAL_CHARS_RE = re.compile(r"[\\{}$&~%^_#]|--|``|''|[!?]`")


# pylatexenc's time grows faster than the text (a 2 MB one-line section took 80 s): past this size the
# crude strip below is used, as for input pylatexenc cannot parse. A section under the word cap (1000
# words) is a few tens of thousands of characters, so only sections dropped as too long take this path.
_MAX_PARSED_CHARS = 100_000


def _crude_text(latex: str) -> str:
    """Commands and braces dropped; citations kept as markers, as the real conversion writes them."""
    def marker(m: re.Match[str]) -> str:
        return " " + format_marker(cite_keys_in_latex(m.group(0))) + " "

    return re.sub(r"\\[A-Za-z@]+\*?|[{}]", " ", _CITE_CALL_RE.sub(marker, latex))


def latex_to_text(latex: str) -> str:
    """Plain text of a LaTeX fragment (comments must already be stripped)."""
    if not latex.strip():
        return ""
    latex = _unwrap_plain_groups(latex)
    if not _SPECIAL_CHARS_RE.search(latex):
        return normalise_whitespace(latex)
    if len(latex) > _MAX_PARSED_CHARS:
        return normalise_whitespace(_crude_text(latex))
    latex = _prepare(latex)
    extra = tuple(sorted({m for m in _CITE_NAME_RE.findall(latex) if m not in _CITE_MACROS}))
    walker_db, text_db = _contexts(extra)
    try:
        walker = LatexWalker(latex, latex_context=walker_db, tolerant_parsing=True)
        nodes, _, _ = walker.get_latex_nodes()
        text = LatexNodes2Text(latex_context=text_db, math_mode="verbatim").nodelist_to_text(nodes)
    except Exception:  # pylatexenc on hostile input: degrade to a crude strip, never sink a whole run
        text = _crude_text(latex)
    return normalise_whitespace(text)


_WORD_RE = re.compile(r"\w", re.UNICODE)


def word_count(text: str) -> int:
    """Words of cleaned text, not counting citation markers (they are not prose)."""
    stripped = CITATION_MARKER_RE.sub(" ", text)
    return sum(1 for tok in stripped.split() if _WORD_RE.search(tok))
