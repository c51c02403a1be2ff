"""Find and clean the related-work section of a LaTeX project folder: the exemplar every report is
compared with, so its text and its citations must survive the project's own layout and macros.

Design notes: docs/MODULE_NOTES.md, `deepscholar.sources.latex`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from .latex_citations import cite_keys_in_latex
from .latex_macros import MacroTable
from .latex_project import BEGIN_DOCUMENT_RE, FlatDocument, LatexProject, find_main_tex, flatten
from .latex_source import brace_group_end
from .latex_text import latex_to_text

__all__ = [
    "RelatedWorkSection",
    "find_related_work",
    "is_related_work_title",
    "related_work_in_document",
    "related_work_title_quality",
]

_END_DOCUMENT_RE = re.compile(r"\\end\s*\{document\}")

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
    begin = BEGIN_DOCUMENT_RE.search(live)
    body_start = begin.end() if begin else 0
    appendix = re.compile(r"\\appendix(?![A-Za-z@])").search(live, body_start)
    appendix_at = appendix.start() if appendix else len(live)

    # TeX ignores everything after \end{document}; old drafts often live there.
    doc_end = _END_DOCUMENT_RE.search(live, body_start)
    live = live[: doc_end.end()] if doc_end else live

    headings = list(_iter_headings(live, body_start))
    idx = _related_work_heading(headings, appendix_at)
    if idx is None:
        return None
    heading = headings[idx]
    end = _section_end(live, heading, headings[idx + 1 :])
    return _section(doc, live, heading, end)


def _related_work_heading(headings: list[_Heading], appendix_at: int) -> int | None:
    """Index of the best related-work heading: outside the appendix, the standard title, the higher level,
    the first."""
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
    return None if best is None else best[1]


def _section_end(live: str, heading: _Heading, later_headings: list[_Heading]) -> int:
    """Where the section of ``heading`` ends: the next heading of its level or above, or the bibliography,
    appendix or end of the document."""
    rank = _LEVELS[heading.level]
    end = len(live)
    for later in later_headings:
        if _LEVELS[later.level] <= rank:
            end = later.start
            break
    stop = _DOC_END_RE.search(live, heading.end, end)
    return stop.start() if stop is not None else end


def _section(doc: FlatDocument, live: str, heading: _Heading, end: int) -> RelatedWorkSection:
    """The section from ``heading`` to ``end``: its title, raw LaTeX, cleaned text and cite keys."""
    # User macros (\newcommand{\sysname}{...}) from local packages, the preamble and every file read
    # before the heading, then any defined inside the section; see latex_macros for what is expanded.
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
