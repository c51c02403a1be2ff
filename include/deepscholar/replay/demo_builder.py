"""The demo snapshot's reference pool: seeded authors, ids, abstracts, arXiv entries and OpenAlex works.

`_Builder(month)` turns the themes of demo_data into `Ref` records for one month (always published
before it), then renders them as arXiv API entries and OpenAlex works.
"""

from __future__ import annotations

import calendar
import random
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from deepscholar.replay.demo_data import (
    FIRST_NAMES,
    IDS_ARXIV_EVERY,
    LAST_NAMES,
    MULTI_VERSION_REFS,
    OLD_STYLE_REF,
    THEMES,
    VENUE_DOI_REFS,
    Theme,
)

GENERATOR_VERSION = 1


@dataclass
class Ref:
    slug: str
    theme: str
    title: str
    contribution: str
    group: int
    on_arxiv: bool
    authors: list[str]
    published: datetime
    arxiv_id: str | None = None
    versions: int = 1
    doi: str = ""  # the DOI OpenAlex lists (arXiv DOI, venue DOI or journal DOI); set for every reference
    arxiv_doi_field: str | None = None  # arXiv's <arxiv:doi>: a published version's DOI
    venue: str | None = None
    abstract: str = ""
    openalex_id: str = ""
    cited_by_count: int = 0
    primary_category: str = ""
    categories: list[str] = field(default_factory=list)



def _parse_month(month: str) -> tuple[datetime, datetime]:
    m = re.fullmatch(r"(\d{4})-(\d{2})", month)
    if not m:
        raise ValueError(f"month must look like YYYY-MM, got {month!r}")
    year, mon = int(m.group(1)), int(m.group(2))
    if not 1 <= mon <= 12 or year < 2012:
        raise ValueError(f"month out of range: {month!r}")
    start = datetime(year, mon, 1, tzinfo=UTC)
    end = datetime(year + (mon == 12), mon % 12 + 1, 1, tzinfo=UTC)
    return start, end


def _add_months(dt: datetime, months: int) -> datetime:
    idx = dt.year * 12 + dt.month - 1 + months
    return dt.replace(year=idx // 12, month=idx % 12 + 1, day=1)


def _iso(dt: datetime) -> str:
    return dt.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _yymm(dt: datetime) -> str:
    return f"{dt.year % 100:02d}{dt.month:02d}"


class _Builder:
    def __init__(self, month: str) -> None:
        self.month = month
        self.start, self.end = _parse_month(month)
        self.rng = random.Random(f"deepscholar-demo-snapshot/{month}/v{GENERATOR_VERSION}")
        self.used_ids: set[str] = set()
        self.refs: dict[str, Ref] = {}
        self._make_refs()

    # -- names and ids -----------------------------------------------------------------------------------

    def _authors(self, n: int) -> list[str]:
        names: list[str] = []
        while len(names) < n:
            name = f"{self.rng.choice(FIRST_NAMES)} {self.rng.choice(LAST_NAMES)}"
            if name not in names:
                names.append(name)
        return names

    def _authors_for(self, num: int) -> list[str]:
        """A candidate's authors, from its own RNG so they do not shift when references change."""
        rng = random.Random(f"{self.month}/authors/{num}")
        names: list[str] = []
        while len(names) < 3 + num % 3:
            name = f"{rng.choice(FIRST_NAMES)} {rng.choice(LAST_NAMES)}"
            if name not in names:
                names.append(name)
        return names

    def _new_id(self, when: datetime, lo: int = 1, hi: int = 19999) -> str:
        while True:
            candidate = f"{_yymm(when)}.{self.rng.randint(lo, hi):05d}"
            if candidate not in self.used_ids:
                self.used_ids.add(candidate)
                return candidate

    # -- references --------------------------------------------------------------------------------------

    def _make_refs(self) -> None:
        serial = 0
        for theme in THEMES.values():
            for slug, title, contribution, on_arxiv, group in theme.refs:
                serial += 1
                # Published 2 to 78 months before the month: never inside the search window.
                months_back = 2 + self.rng.randint(0, 76)
                first = _add_months(self.start, -months_back)
                days = calendar.monthrange(first.year, first.month)[1]
                published = first.replace(day=self.rng.randint(1, days), hour=self.rng.randint(0, 23),
                                          minute=self.rng.randint(0, 59))
                ref = Ref(slug=slug, theme=theme.slug, title=title, contribution=contribution, group=group,
                          on_arxiv=on_arxiv, authors=self._authors(self.rng.randint(2, 5)), published=published)
                ref.abstract = self._ref_abstract(theme, ref)
                ref.cited_by_count = int(self.rng.paretovariate(1.2) * 25) + self.rng.randint(0, 40)
                ref.openalex_id = f"W{4300000000 + serial * 7919}"
                if on_arxiv:
                    if slug == OLD_STYLE_REF:
                        ref.published = published.replace(year=2006, month=5, day=min(published.day, 28))
                        ref.arxiv_id = f"cs/0605{serial:03d}"
                    else:
                        ref.arxiv_id = self._new_id(ref.published)
                    ref.versions = 2 if slug in MULTI_VERSION_REFS else 1
                    ref.primary_category = theme.categories[0]
                    ref.categories = list(theme.categories)
                    if slug in VENUE_DOI_REFS:
                        ref.doi = self._venue_doi(theme, ref, serial)
                        ref.arxiv_doi_field = ref.doi
                        ref.venue = self.rng.choice(["ACL", "EMNLP", "ICLR", "ICML", "NeurIPS", "SIGIR", "KDD"])
                    else:
                        ref.doi = f"10.48550/arXiv.{ref.arxiv_id}"
                else:
                    ref.doi = f"10.1016/j.demo.{ref.published.year}.{100000 + serial * 13:06d}"
                    ref.venue = theme.journals[serial % len(theme.journals)]
                self.refs[slug] = ref

    def _venue_doi(self, theme: Theme, ref: Ref, serial: int) -> str:
        year = ref.published.year
        if theme.venue_doi_prefix == "10.18653/v1":
            return f"10.18653/v1/{year}.acl-long.{100 + serial}"
        if theme.venue_doi_prefix == "10.1145":
            return f"10.1145/{3500000 + serial * 37}.{3600000 + serial * 41}"
        return f"10.5555/{3600000 + serial}.{3700000 + serial}"

    def _ref_abstract(self, theme: Theme, ref: Ref) -> str:
        ctx = self.rng.choice(theme.contexts)
        detail = self.rng.choice(theme.details)
        result = self.rng.choice(theme.results)
        return (f"{ctx} In this paper, we {ref.contribution}. {detail} "
                f"Experiments on {theme.datasets} show {result}. "
                f"Our analysis clarifies when such methods are most useful for {theme.name}.")

    # -- arXiv entries ------------------------------------------------------------------------------------

    def ref_entries(self) -> list[dict]:
        entries = []
        for ref in self.refs.values():
            if not ref.on_arxiv:
                continue
            comment = self.rng.choice([None, "10 pages, 4 figures", f"Accepted at {ref.venue}"
                                       if ref.venue else "Preprint, work in progress"])
            for v in range(1, ref.versions + 1):
                updated = ref.published + timedelta(days=37 * (v - 1), hours=v - 1)
                entries.append({
                    "id": f"{ref.arxiv_id}v{v}",
                    "title": ref.title,
                    "summary": ref.abstract,
                    "authors": ref.authors,
                    "published": _iso(ref.published),
                    "updated": _iso(updated),
                    "comment": comment,
                    "journal_ref": None,
                    "doi": ref.arxiv_doi_field,
                    "categories": ref.categories,
                    "primary_category": ref.primary_category,
                })
        return entries

    # -- OpenAlex works -----------------------------------------------------------------------------------

    def openalex_works(self) -> list[dict]:
        works = []
        for i, ref in enumerate(self.refs.values()):
            oa_url = f"https://openalex.org/{ref.openalex_id}"
            doi_url = f"https://doi.org/{ref.doi.lower()}"
            ids = {"openalex": oa_url, "doi": doi_url}
            locations = []
            if ref.on_arxiv:
                if i % IDS_ARXIV_EVERY == 0:
                    ids["arxiv"] = f"arXiv:{ref.arxiv_id}"
                locations.append({
                    "is_oa": True, "version": "submittedVersion",
                    "landing_page_url": f"https://arxiv.org/abs/{ref.arxiv_id}",
                    "pdf_url": f"https://arxiv.org/pdf/{ref.arxiv_id}",
                    "source": {"id": "https://openalex.org/S4306400194", "display_name": "arXiv (Cornell University)",
                               "type": "repository"},
                })
            if not ref.doi.lower().startswith("10.48550/"):
                locations.insert(0, {
                    "is_oa": False, "version": "publishedVersion", "landing_page_url": doi_url, "pdf_url": None,
                    "source": {"id": f"https://openalex.org/S{200000000 + i}", "display_name": ref.venue,
                               "type": "journal" if not ref.on_arxiv else "conference"},
                })
            works.append({
                "id": oa_url,
                "doi": doi_url,
                "title": ref.title,
                "display_name": ref.title,
                "publication_date": ref.published.date().isoformat(),
                "publication_year": ref.published.year,
                "type": "preprint" if ref.doi.lower().startswith("10.48550/") else "article",
                "cited_by_count": ref.cited_by_count,
                "ids": ids,
                "authorships": [{"author_position": "first" if k == 0 else "middle",
                                 "author": {"display_name": a}} for k, a in enumerate(ref.authors)],
                "abstract_inverted_index": _inverted_index(ref.abstract),
                "primary_location": locations[0],
                "locations": locations,
            })
        return works


def _inverted_index(text: str) -> dict[str, list[int]]:
    index: dict[str, list[int]] = {}
    for pos, word in enumerate(text.split()):
        index.setdefault(word, []).append(pos)
    return index

