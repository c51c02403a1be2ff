"""A synthetic month at real scale, for throughput benches (bench/real_month.py).

Design notes: docs/MODULE_NOTES.md, `deepscholar.replay.scale_snapshot`.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import shutil
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from deepscholar.replay import demo_snapshot as demo
from deepscholar.text import normalise_title

__all__ = ["ScaleSpec", "write_scale_snapshot"]

GENERATOR_VERSION = 1
CATEGORIES = ["cs.CL", "cs.LG", "cs.IR", "cs.AI"]
_VENUES = ["ACL", "EMNLP", "NAACL", "NeurIPS", "ICLR", "ICML", "SIGIR", "KDD", "WWW", "AAAI"]
_LAYOUTS = ["section", "section", "section", "section_star", "section_lower", "input_file",
            "background_and_related", "background_subsection"]
_STOP = {"with", "from", "into", "over", "under", "their", "when", "what", "does", "than", "that", "this",
         "towards", "toward", "beyond", "without", "through", "via", "using", "learning"}


@dataclass(frozen=True)
class ScaleSpec:
    month: str = "2025-09"
    candidates: int = 10_000  # submissions in the window and categories
    pass_share: float = 0.15  # v1 with a venue: the share the metadata filters keep
    refs_per_paper: int = 25
    pdf_share: float = 0.08  # of those passing: PDF-only (no LaTeX source)
    no_related_share: float = 0.05  # of those passing: no related-work section
    unknown_ref_share: float = 0.05  # references neither arXiv nor OpenAlex knows
    seed: int = 0


def _vocabulary() -> list[str]:
    words: set[str] = set()
    for theme in demo.THEMES.values():
        for _, title, _, _, _ in theme.refs:
            words.update(w.lower() for w in re.findall(r"[A-Za-z]{5,}", title))
    for spec in demo.CANDIDATES:
        words.update(w.lower() for w in re.findall(r"[A-Za-z]{5,}", spec.title))
    return sorted(words - _STOP)


class _ScaleBuilder:
    def __init__(self, spec: ScaleSpec) -> None:
        self.spec = spec
        self.b = demo._Builder(spec.month)  # the demo's references stay in the pool
        self.rng = random.Random(f"deepscholar-scale-snapshot/{spec.month}/{spec.seed}/v{GENERATOR_VERSION}")
        self.vocab = _vocabulary()
        self.titles = {normalise_title(r.title) for r in self.b.refs.values()}
        self.unknown: set[str] = set()
        self.pool: dict[str, list[str]] = {t: [r.slug for r in self.b.refs.values() if r.theme == t]
                                           for t in demo.THEMES}

    def _title(self, words: int) -> str:
        while True:
            picked = self.rng.sample(self.vocab, words)
            title = " ".join(w.capitalize() for w in picked[:-2]) + f" for {picked[-2]} {picked[-1]}"
            key = normalise_title(title)
            if key not in self.titles:
                self.titles.add(key)
                return title

    def add_references(self, n: int) -> None:
        themes = list(demo.THEMES.values())
        serial = 10_000
        for i in range(n):
            serial += 1
            theme = themes[i % len(themes)]
            _, _, contribution, _, _ = self.rng.choice(theme.refs)
            months_back = 2 + self.rng.randint(0, 76)
            first = demo._add_months(self.b.start, -months_back)
            published = first.replace(day=self.rng.randint(1, 28), hour=self.rng.randint(0, 23),
                                      minute=self.rng.randint(0, 59))
            on_arxiv = self.rng.random() < 0.7
            slug = f"scale-{serial}"
            ref = demo.Ref(slug=slug, theme=theme.slug, title=self._title(self.rng.randint(4, 6)),
                           contribution=contribution, group=self.rng.randrange(len(theme.groups)),
                           on_arxiv=on_arxiv, authors=self.b._authors(self.rng.randint(2, 5)), published=published)
            ref.abstract = self.b._ref_abstract(theme, ref)
            ref.cited_by_count = int(self.rng.paretovariate(1.2) * 25) + self.rng.randint(0, 40)
            ref.openalex_id = f"W{4400000000 + serial * 7919}"
            if on_arxiv:
                ref.arxiv_id = self.b._new_id(published, 1, 29999)
                ref.primary_category, ref.categories = theme.categories[0], list(theme.categories)
                ref.doi = f"10.48550/arXiv.{ref.arxiv_id}"
            else:
                ref.doi = f"10.1016/j.scale.{published.year}.{100000 + serial:06d}"
                ref.venue = theme.journals[serial % len(theme.journals)]
                if self.rng.random() < self.spec.unknown_ref_share / 0.3:
                    self.unknown.add(slug)  # a workshop paper or a book nobody indexed
            self.b.refs[slug] = ref
            self.pool[theme.slug].append(slug)

    def cites(self, theme: str, n: int) -> list[str]:
        """n distinct references of the theme, popular ones more often (a Zipf-like skew)."""
        pool = self.pool[theme]
        chosen: list[str] = []
        while len(chosen) < min(n, len(pool)):
            slug = pool[min(len(pool) - 1, int(self.rng.paretovariate(0.6)) - 1 + self.rng.randrange(0, 3))
                        if self.rng.random() < 0.3 else self.rng.randrange(len(pool))]
            if slug not in chosen:
                chosen.append(slug)
        return chosen


def _method_name(rng: random.Random) -> str:
    syllables = ["Re", "Graph", "Cal", "Ret", "Prox", "Vec", "Lum", "Ner", "Syn", "Tab", "Kin", "Dex", "Mor"]
    return "".join(rng.sample(syllables, 2)) + rng.choice(["", "-2", "Net", "RAG", "Rank", "LM"])


def build_scale_snapshot(spec: ScaleSpec = ScaleSpec()):  # noqa: B008 - a frozen dataclass
    """Yield (path, bytes) for every snapshot file; the manifest comes last."""
    sb = _ScaleBuilder(spec)
    b, rng = sb.b, sb.rng
    n_pass = round(spec.candidates * spec.pass_share)
    sb.add_references(max(2000, n_pass * spec.refs_per_paper // 2))
    passing = set(rng.sample(range(spec.candidates), n_pass))
    span = (b.end - b.start).total_seconds() - 120
    entries: list[dict] = []
    outcomes: dict[str, int] = {}
    themes = list(demo.THEMES.values())
    for i in range(spec.candidates):
        theme = themes[i % len(themes)]
        arxiv_id = f"{demo._yymm(b.start)}.{10000 + i:05d}"
        published = b.start + timedelta(seconds=60 + span * i / spec.candidates)
        title = sb._title(rng.randint(5, 7))
        method = _method_name(rng)
        primary = rng.choice(theme.categories[:1] * 3 + ["cs.AI"]) if theme.categories[0].startswith("cs.") \
            else "cs.LG"
        comment, source, layout, outcome, versions = _fate(rng, spec, i in passing, b.start.year)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        abstract = [rng.choice(theme.contexts),
                    f"We present {method}, a method that {rng.choice(theme.refs)[2]}.",
                    rng.choice(theme.details),
                    f"Experiments on {theme.datasets} show {rng.choice(theme.results)}."]
        for v in range(1, versions + 1):
            entries.append({
                "id": f"{arxiv_id}v{v}", "title": title, "summary": " ".join(abstract),
                "authors": b._authors_for(i), "published": demo._iso(published),
                "updated": demo._iso(published + timedelta(days=9 * (v - 1))), "comment": comment,
                "journal_ref": None, "doi": None, "categories": sorted({primary, *theme.categories} & set(CATEGORIES))
                or [primary], "primary_category": primary,
            })
        if i not in passing:
            continue
        n_refs = max(8, spec.refs_per_paper + rng.randint(-6, 6))
        cites = sb.cites(theme.slug, n_refs + 2)
        cand = demo.CandidateSpec(num=100 + i, theme=theme.slug, title=title, method=method, abstract=abstract,
                                  contrast=f"{method} {rng.choice(theme.refs)[2]} jointly", cites=cites[2:],
                                  intro_cites=cites[:2], comment=comment, journal_ref=None, outcome=outcome,
                                  source=source, layout=layout, bib=rng.choice(["bib", "bib", "bbl", "inline"]),
                                  primary=primary)
        if source == "pdf":
            payload = demo._minimal_pdf([title, "", *abstract])
        else:
            payload = demo._tar_gz(demo._PaperWriter(b, cand, arxiv_id).files())
        yield f"eprint/{arxiv_id}v1", payload
    yield from _index_files(sb, entries, outcomes)


def _fate(rng: random.Random, spec: ScaleSpec, passing: bool, year: int) -> tuple[str | None, str, str, str, int]:
    """(comment, source, layout, outcome, versions) of one submission; the draws keep their order."""
    versions = 1
    comment: str | None = rng.choice([None, "12 pages, 5 figures", "Preprint. Under review."])
    if passing:
        comment = f"Accepted at {rng.choice(_VENUES)} {year}. {rng.randint(8, 14)} pages"
        roll = rng.random()
        source = "pdf" if roll < spec.pdf_share else "tar.gz"
        layout = "none" if spec.pdf_share <= roll < spec.pdf_share + spec.no_related_share else rng.choice(_LAYOUTS)
        outcome = "no_source_pdf" if source == "pdf" else "no_related_work" if layout == "none" else "kept"
    else:
        outcome = "not_v1" if rng.random() < 0.3 else "no_venue"
        versions = 2 if outcome == "not_v1" else 1
        source, layout = "tar.gz", "section"
    return comment, source, layout, outcome, versions


def _index_files(sb: _ScaleBuilder, entries: list[dict], outcomes: dict[str, int]):
    """The arXiv entries, the OpenAlex works and the manifest, as (path, bytes)."""
    b, spec = sb.b, sb.spec
    entries += b.ref_entries()
    unknown_ids = {b.refs[s].openalex_id for s in sb.unknown}
    works = [w for w in b.openalex_works() if w["id"].rsplit("/", 1)[-1] not in unknown_ids]
    entries.sort(key=lambda e: e["id"])
    yield "arxiv/entries.jsonl", demo._jsonl(entries)
    yield "openalex/works.jsonl", demo._jsonl(works)
    manifest = {
        "month": spec.month, "categories": CATEGORIES, "generator": "scale_snapshot",
        "version": GENERATOR_VERSION, "spec": spec.__dict__,
        "window": {"start": demo._iso(b.start), "end": demo._iso(b.end)},
        "outcomes": outcomes, "references_in_pool": len(b.refs), "unknown_references": len(sb.unknown),
        "note": "Synthetic data at real scale: titles, authors, abstracts and numbers are invented.",
    }
    yield "manifest.json", (json.dumps(manifest, indent=2, sort_keys=True) + "\n").encode()


def write_scale_snapshot(dest: Path, spec: ScaleSpec = ScaleSpec()) -> dict:  # noqa: B008
    """Write the snapshot into dest (replacing what this generator owns); returns the manifest."""
    dest = Path(dest)
    for owned in ("arxiv", "eprint", "openalex"):
        if (dest / owned).is_dir():
            shutil.rmtree(dest / owned)
    digest = hashlib.sha256()
    manifest = {}
    for rel, data in build_scale_snapshot(spec):
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        digest.update(rel.encode() + b"\0" + hashlib.sha256(data).digest())
        if rel == "manifest.json":
            manifest = json.loads(data)
    return manifest | {"sha256": digest.hexdigest()}
