"""The demo snapshot's written content, read from the TOML files in replay/data/.

Design notes: docs/MODULE_NOTES.md, `deepscholar.replay.demo_data`.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from importlib import resources

__all__ = ["CANDIDATES", "DISTRACTORS", "FIRST_NAMES", "IDS_ARXIV_EVERY", "IIR_BOOK", "LAST_NAMES",
           "LATEX_ESCAPES", "MULTI_VERSION_REFS", "OLD_STYLE_REF", "THEMES", "VENUE_DOI_REFS", "CandidateSpec",
           "Distractor", "Theme", "load_toml"]


@dataclass(frozen=True)
class Theme:
    slug: str
    name: str
    categories: list[str]
    datasets: str
    contexts: list[str]
    details: list[str]
    results: list[str]
    limitations: list[str]
    groups: list[tuple[str, str, str]]  # (heading, opening sentence, what the group's works share)
    refs: list[tuple[str, str, str, bool, int]]  # (slug, title, contribution, on_arxiv, group)
    venue_doi_prefix: str
    journals: list[str]


@dataclass
class CandidateSpec:
    num: int
    theme: str
    title: str
    method: str
    abstract: list[str]
    contrast: str  # how this paper differs, used to close related-work paragraphs
    cites: list[str]  # reference slugs cited in the related-work section
    intro_cites: list[str]  # cited only in the introduction
    comment: str | None
    journal_ref: str | None
    outcome: str
    source: str  # "tar.gz" | "gz" | "pdf"
    layout: str  # how the related work is written (see _PaperWriter.main_tex)
    bib: str = "bib"  # "bib" | "bbl" | "inline"
    primary: str = "cs.CL"
    cross: list[str] = field(default_factory=list)
    traps: list[str] = field(default_factory=list)
    versions: int = 1
    day: int | None = None  # submission day; None = spread over the month
    at: tuple[int, int] | None = None  # (hour, minute)
    last_minute: bool = False


@dataclass(frozen=True)
class Distractor:
    """A paper just outside the search (window or categories) that a correct search does not return."""

    title: str
    categories: list[str]
    anchor: str  # "start" | "end" of the window
    offset_minutes: int  # published = anchor + offset
    id_month: str  # "previous" | "window" | "next": the month its arXiv id is numbered in
    reason: str


def load_toml(name: str) -> dict:
    """A file of replay/data/, parsed (it ships as package data)."""
    text = resources.files("deepscholar.replay").joinpath("data").joinpath(name).read_text(encoding="utf-8")
    return tomllib.loads(text)


def _theme(slug: str, row: dict) -> Theme:
    return Theme(
        slug=slug,
        name=row["name"],
        categories=list(row["categories"]),
        datasets=row["datasets"],
        contexts=list(row["contexts"]),
        details=list(row["details"]),
        results=list(row["results"]),
        limitations=list(row["limitations"]),
        groups=[(g["heading"], g["opening"], g["shared"]) for g in row["groups"]],
        refs=[(r["slug"], r["title"], r["contribution"], r["on_arxiv"], r["group"]) for r in row["refs"]],
        venue_doi_prefix=row["venue_doi_prefix"],
        journals=list(row["journals"]),
    )


def _candidate(row: dict) -> CandidateSpec:
    row = dict(row)
    if "at" in row:
        row["at"] = tuple(row["at"])
    row.setdefault("comment", None)
    row.setdefault("journal_ref", None)
    return CandidateSpec(**row)


_themes_file = load_toml("demo_themes.toml")
_candidates_file = load_toml("demo_candidates.toml")
_names_file = load_toml("demo_names.toml")

THEMES: dict[str, Theme] = {slug: _theme(slug, row) for slug, row in _themes_file["themes"].items()}
CANDIDATES: list[CandidateSpec] = [_candidate(row) for row in _candidates_file["candidates"]]
DISTRACTORS: list[Distractor] = [Distractor(**row) for row in _candidates_file["distractors"]]

_roles = _themes_file["reference_roles"]
# Reference slugs whose arXiv version also carries a published DOI (OpenAlex lists the venue DOI).
VENUE_DOI_REFS: list[str] = list(_roles["venue_doi"])
# An old-style id keeps the pre-2007 identifier path exercised.
OLD_STYLE_REF: str = _roles["old_style_id"]
# Reference slugs whose arXiv record has a later version (id_list without a version returns it).
MULTI_VERSION_REFS: list[str] = list(_roles["multi_version"])
# OpenAlex lists the arXiv id in `ids` for every n-th work; the others are found through locations or the DOI.
IDS_ARXIV_EVERY: int = _roles["ids_arxiv_every"]
# A reference that neither arXiv nor OpenAlex knows: {"slug", "title", "authors", "year"}.
IIR_BOOK: dict = dict(_themes_file["unresolvable_book"])

FIRST_NAMES: list[str] = list(_names_file["first_names"])
LAST_NAMES: list[str] = list(_names_file["last_names"])
# What a .bib needs to turn a UTF-8 name into the LaTeX escapes real .bib files contain.
LATEX_ESCAPES: dict[str, str] = dict(_names_file["latex_escapes"])
