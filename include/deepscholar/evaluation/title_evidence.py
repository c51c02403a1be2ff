"""The evidence behind the title rule (`text.same_title`): real titles labelled by their identifiers, and
how each candidate rule does on them (docs/METRICS.md, "Matching", gives the figures; the unit test
tests/unit/test_title_rule.py rebuilds them from the published dataset slice and holds them there).

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.title_evidence`.
"""

from __future__ import annotations

import csv
import itertools
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import lru_cache
from pathlib import Path
from typing import Any

from deepscholar.text import normalise_title
from deepscholar.text.paper_ids import arxiv_id_named, doi_key
from deepscholar.text.titles import MIN_PART_WORDS, same_title

__all__ = ["CANDIDATES", "KEPT", "SIMILARITY_D2", "LabelledSet", "RuleFigures", "TitledEntry", "address_ids",
           "dataset_entries", "figures", "kept_rule", "label_pairs", "markdown_rows", "output_entries"]

Ids = frozenset[tuple[str, str]]  # (kind, value): ("arxiv", "2004.13332"), ("doi", "10.3386/w21340"), ...

_DOI_IN_ADDRESS_RE = re.compile(r"(10\.\d{4,9}/[^\s?#&]+)")
_ADDRESS_ID_RES = (
    ("openreview", re.compile(r"openreview\.net/(?:forum|pdf)\?id=([A-Za-z0-9_-]+)")),
    ("acl", re.compile(r"aclanthology\.org/([A-Za-z0-9.-]+?)(?:\.pdf)?/?$")),
    ("s2", re.compile(r"CorpusID:(\d+)")),
)
_CITATION_FILES = ("recovered_citations.csv", "citations.csv")


@dataclass(frozen=True)
class TitledEntry:
    origin: str  # where the title was read: "resolved", "bibliography", "search", "query", "output:<system>"
    title: str
    ids: Ids


def address_ids(address: str | None) -> Ids:
    """The identifiers an address names: an arXiv page or DOI, a DOI inside another site's address (an
    `?id=10.1257/...` query), an OpenReview forum, an ACL Anthology paper, a Semantic Scholar corpus id."""
    text = (address or "").strip()
    if not text:
        return frozenset()
    if "arxiv" in text.casefold() and (arxiv := arxiv_id_named(text)):
        return frozenset({("arxiv", arxiv)})
    found: set[tuple[str, str]] = set()
    if (m := _DOI_IN_ADDRESS_RE.search(text)) and (doi := doi_key(m.group(1).removesuffix(".pdf"))):
        found.add(("doi", doi))
    for kind, pattern in _ADDRESS_ID_RES:
        if m := pattern.search(text):
            found.add((kind, m.group(1).casefold()))
    return frozenset(found)


def _ids(*, arxiv: str | None = None, doi: str | None = None, address: str | None = None) -> Ids:
    found = set(address_ids(address))
    if arxiv and (key := arxiv_id_named(arxiv)):
        found.add(("arxiv", key))
    if doi and (key := doi_key(doi)):
        found.add(("doi", key))
    elif doi and (key := arxiv_id_named(doi)):
        found.add(("arxiv", key))
    return frozenset(found)


def _squash(text: str | None) -> str:
    return " ".join((text or "").split())


def dataset_entries(dataset: Path) -> list[TitledEntry]:
    """The titled entries of the published dataset's folder (its references and query papers)."""
    csv.field_size_limit(1 << 30)
    path = next(p for name in _CITATION_FILES if (p := dataset / name).exists())
    out = []
    with path.open(encoding="utf-8", newline="") as fh:
        for row in csv.DictReader(fh):
            out += [TitledEntry("resolved", _squash(row.get("cited_paper_title")),
                                _ids(arxiv=row.get("cited_paper_arxiv_link"))),
                    TitledEntry("bibliography", _squash(row.get("original_title") or row.get("cited_paper_title")),
                                _ids(doi=row.get("bib_paper_doi"), address=row.get("bib_paper_url"))),
                    TitledEntry("search", _squash(row.get("search_res_title")),
                                _ids(address=row.get("search_res_url")))]
    with (dataset / "papers.csv").open(encoding="utf-8", newline="") as fh:
        out += [TitledEntry("query", _squash(r.get("title")), _ids(arxiv=r.get("arxiv_id"))) for r in csv.DictReader(fh)]
    return [e for e in out if e.title and e.ids]


def output_entries(outputs: Iterable[tuple[str, Iterable[Any]]]) -> list[TitledEntry]:
    """The titled sources (cited and retrieved) of system outputs, given as (system, its outputs' sources)
    as the import formats read them (systems/external/formats.read_outputs; evaluation does not import
    systems, which import evaluation)."""
    return [e for system, sources in outputs for s in sources
            if (e := TitledEntry(f"output:{system}", _squash(s.title), _ids(arxiv=s.arxiv_id, address=s.url))).title
            and e.ids]


@dataclass(frozen=True)
class LabelledSet:
    positives: tuple[tuple[str, str], ...]  # pairs of written titles naming one paper
    negatives: tuple[tuple[str, str], ...]  # pairs naming two papers
    conflicts: int  # title pairs labelled both ways, left out


def _label(a: TitledEntry, b: TitledEntry) -> bool | None:
    if a.ids & b.ids:
        return True
    kinds = {k for k, _ in a.ids} & {k for k, _ in b.ids}
    return False if kinds else None


def label_pairs(entries: Iterable[TitledEntry]) -> LabelledSet:
    """The labelled pairs of written titles among `entries` (module docstring)."""
    labels: dict[tuple[str, str], set[bool]] = {}
    for a, b in itertools.combinations(list(entries), 2):
        if a.title == b.title or (same := _label(a, b)) is None:
            continue
        labels.setdefault((min(a.title, b.title), max(a.title, b.title)), set()).add(same)
    clean = {pair: next(iter(seen)) for pair, seen in labels.items() if len(seen) == 1}
    return LabelledSet(tuple(sorted(p for p, same in clean.items() if same)),
                       tuple(sorted(p for p, same in clean.items() if not same)), len(labels) - len(clean))


# --- candidate rules --------------------------------------------------------------------------------------

TitleRule = Callable[[str, str], bool]


_key = lru_cache(maxsize=None)(normalise_title)  # 15,000 pairs of a few hundred titles: each normalised once


def _at_least(threshold: float) -> TitleRule:
    """`title_similarity(a, b) >= threshold`, with difflib's cheap upper bounds tried first."""
    def rule(a: str, b: str) -> bool:
        ka, kb = _key(a), _key(b)
        if not ka or not kb or ka == kb:
            return bool(ka) and ka == kb
        m = SequenceMatcher(None, ka, kb, autojunk=False)
        return m.real_quick_ratio() >= threshold and m.quick_ratio() >= threshold and m.ratio() >= threshold
    return rule


def _edit_distance(a: str, b: str) -> int:
    row = list(range(len(b) + 1))
    for i, ca in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, cb in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (ca != cb))
    return row[-1]


def _distinguishing_words_within(distance: int) -> TitleRule:
    """Match when every stretch of words the two titles do not share is within `distance` edits (spaces
    ignored): a spelling, a hyphen, a plural; not a word of content."""
    def within(x: str, y: str) -> bool:
        return abs(len(x) - len(y)) <= distance and _edit_distance(x, y) <= distance

    def rule(a: str, b: str) -> bool:
        wa, wb = _key(a).split(), _key(b).split()
        if not wa or not wb:
            return False
        blocks = SequenceMatcher(None, wa, wb, autojunk=False).get_opcodes()
        return all(within("".join(wa[i1:i2]), "".join(wb[j1:j2])) for tag, i1, i2, j1, j2 in blocks if tag != "equal")
    return rule


def _exact(a: str, b: str) -> bool:
    return bool(_key(a)) and _key(a) == _key(b)


def _exact_spaces_ignored(a: str, b: str) -> bool:
    return bool(_key(a)) and _key(a).replace(" ", "") == _key(b).replace(" ", "")


SIMILARITY_D2: TitleRule = _at_least(0.8)
KEPT = f"same_title (parts of >= {MIN_PART_WORDS} words)"
CANDIDATES: dict[str, TitleRule] = {
    "exact normalised title (ReportBench)": _exact,
    "exact, spaces ignored": _exact_spaces_ignored,
    "similarity >= 0.95": _at_least(0.95),
    "similarity >= 0.90": _at_least(0.90),
    "similarity >= 0.85": _at_least(0.85),
    "similarity >= 0.80 (d2)": SIMILARITY_D2,
    "distinguishing words within 1 edit": _distinguishing_words_within(1),
    "distinguishing words within 2 edits": _distinguishing_words_within(2),
    KEPT: same_title,
    "same_title (parts of >= 1 word)": lambda a, b: same_title(a, b, min_part_words=1),
}


@dataclass(frozen=True)
class RuleFigures:
    rule: str
    true_matches: int
    false_matches: int
    missed: int

    @property
    def precision(self) -> float | None:
        found = self.true_matches + self.false_matches
        return self.true_matches / found if found else None

    @property
    def recall(self) -> float | None:
        total = self.true_matches + self.missed
        return self.true_matches / total if total else None

    def as_dict(self) -> dict:
        return {"rule": self.rule, "true_matches": self.true_matches, "false_matches": self.false_matches,
                "missed": self.missed, "precision": self.precision, "recall": self.recall}


def figures(labelled: LabelledSet, rules: dict[str, TitleRule] | None = None) -> list[RuleFigures]:
    """Each rule's true and false matches and misses on the labelled pairs, in `rules` order."""
    out = []
    for name, rule in (rules or CANDIDATES).items():
        hits = sum(rule(a, b) for a, b in labelled.positives)
        out.append(RuleFigures(name, hits, sum(rule(a, b) for a, b in labelled.negatives),
                               len(labelled.positives) - hits))
    return out


def kept_rule(table: Sequence[RuleFigures]) -> RuleFigures:
    """The candidate with no false match and the highest recall; on a tie the first listed, which is the
    stricter of a family (`CANDIDATES` lists each family from strict to loose)."""
    clean = [f for f in table if f.false_matches == 0]
    return max(clean, key=lambda f: f.true_matches)


def markdown_rows(table: Sequence[RuleFigures]) -> list[str]:
    """The table as docs/METRICS.md prints it: rule, true matches, false matches, missed, precision, recall."""
    def ratio(x: float | None) -> str:
        return "—" if x is None else f"{x:.2f}"
    return [f"| {f.rule} | {f.true_matches} | {f.false_matches} | {f.missed} | {ratio(f.precision)} | "
            f"{ratio(f.recall)} |" for f in table]
