"""One paper, however it is cited: the resolver every metric uses before it counts papers or pairs, and
the one rule by which a report's papers match the exemplar's. A metric module compares no identifiers
itself (tests/unit/test_paper_identity.py reads them for it).

Design notes: docs/MODULE_NOTES.md, `deepscholar.evaluation.metrics.papers`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from deepscholar.text import normalise_title, title_similarity
from deepscholar.text.paper_ids import arxiv_key, arxiv_key_of_doi, doi_key
from deepscholar.text.titles import same_title

__all__ = ["Citable", "Paper", "PaperMatch", "TITLE_RULE", "TitleRule", "arxiv_key", "arxiv_papers",
           "match_papers", "paper_keys", "resolve_papers", "same_title"]

TitleRule = Callable[[str, str], bool]
# The title rule's name in score details: what decided a "title" match.
TITLE_RULE = "same_title"


class Citable(Protocol):
    """What the resolver reads of an entry (SourceDoc, ExemplarReference)."""

    @property
    def arxiv_id(self) -> str | None: ...

    @property
    def doi(self) -> str | None: ...

    @property
    def title(self) -> str | None: ...


E = TypeVar("E", bound=Citable)


def paper_keys(entry: Citable) -> tuple[str | None, str | None, str]:
    """(arXiv key, DOI key, normalised title) of one entry; an arXiv DOI gives the arXiv key."""
    return (arxiv_key(entry.arxiv_id) or arxiv_key_of_doi(entry.doi), doi_key(entry.doi),
            normalise_title(entry.title or ""))


@dataclass(frozen=True)
class Paper(Generic[E]):
    """One paper: the entries resolved to it (input order) and the union of their keys."""

    entries: tuple[E, ...]
    arxiv_ids: frozenset[str]
    dois: frozenset[str]
    titles: tuple[str, ...]  # the entries' distinct non-empty titles, as written

    @property
    def first(self) -> E:
        return self.entries[0]

    @property
    def cited_by_count(self) -> int | None:
        """The paper's frozen cited-by count: its first entry's that has one (None when none has)."""
        return next((c for e in self.entries if (c := getattr(e, "cited_by_count", None)) is not None), None)

    def first_with_arxiv_id(self) -> E:
        """Its first entry that carries an arXiv id itself (the first entry when none does)."""
        return next((e for e in self.entries if arxiv_key(e.arxiv_id)), self.entries[0])

    @property
    def arxiv_key(self) -> str | None:
        """The first entry's arXiv key (the paper's name in details and item keys); None when it has none."""
        for entry in self.entries:
            if key := arxiv_key(entry.arxiv_id):
                return key
        return min(self.arxiv_ids) if self.arxiv_ids else None

    def shares_a_kind_with(self, other: Paper) -> bool:
        """Do both carry an identifier of the same kind (then identifiers decide, not titles)."""
        return bool(self.arxiv_ids and other.arxiv_ids) or bool(self.dois and other.dois)


@dataclass
class _Group:
    members: list[int]
    arxiv_ids: set[str]
    dois: set[str]


def resolve_papers(entries: Sequence[E], known: Sequence[Citable] = ()) -> list[Paper[E]]:
    """The distinct papers among `entries`, in the order of their first entry (module docstring).

    `known`: entries of the other side (the exemplar's bibliography for a report's sources, and back) that
    link keys without being counted: a report citing [1] by arXiv id and [3] by DOI cites one paper when a
    reference carries both. A paper's keys are those of everything linked to it."""
    everything: list[Citable] = [*entries, *known]
    keys = [paper_keys(e) for e in everything]
    parent = list(range(len(everything)))
    groups = {i: _Group([i], {a} if a else set(), {d} if d else set()) for i, (a, d, _) in enumerate(keys)}
    counted = len(entries)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    def union(i: int, j: int) -> None:
        a, b = sorted((find(i), find(j)))
        if a == b:
            return
        parent[b] = a
        ga, gb = groups[a], groups.pop(b)
        ga.members += gb.members
        ga.arxiv_ids |= gb.arxiv_ids
        ga.dois |= gb.dois

    first_with: dict[tuple[str, str], int] = {}
    for i, (arxiv, doi, _) in enumerate(keys):  # identifiers: equal means the same paper
        for kind, value in (("arxiv", arxiv), ("doi", doi)):
            if value:
                key = (kind, value)
                if key in first_with:
                    union(first_with[key], i)
                else:
                    first_with[key] = i
    titled: dict[str, list[int]] = {}
    for i, (_, _, title) in enumerate(keys):  # equal titles: the same paper unless the identifiers differ
        if not title:
            continue
        for j in titled.setdefault(title, []):
            if find(i) == find(j):
                break
            if not _groups_conflict(groups[find(i)], groups[find(j)]):
                union(i, j)
                break
        titled[title].append(i)
    out = []
    for root in sorted(groups, key=lambda r: min(groups[r].members)):
        members = sorted(m for m in groups[root].members if m < counted)
        if not members:
            continue
        out.append(Paper(tuple(entries[m] for m in members), frozenset(groups[root].arxiv_ids),
                         frozenset(groups[root].dois),
                         tuple(dict.fromkeys(t for m in members if (t := (entries[m].title or "").strip())))))
    return out


def arxiv_papers(entries: Sequence[E], known: Sequence[Citable] = ()) -> list[Paper[E]]:
    """The papers among `entries` that have an arXiv key (S, S*, E of docs/METRICS.md), in first-entry order."""
    return [p for p in resolve_papers(entries, known) if p.arxiv_ids]


def _groups_conflict(a: _Group, b: _Group) -> bool:
    return (bool(a.arxiv_ids and b.arxiv_ids) and not a.arxiv_ids & b.arxiv_ids) or \
        (bool(a.dois and b.dois) and not a.dois & b.dois)


@dataclass(frozen=True)
class PaperMatch(Generic[E]):
    reference: Paper  # a paper of the reference side (the exemplar's, the ground truth's)
    source: Paper  # a paper of the report's side
    by: str  # "id", "doi" or "title"
    similarity: float | None = None  # the title similarity, for title matches

    def as_detail(self) -> dict[str, Any]:
        ref, src = self.reference.first, self.source.first
        out: dict[str, Any] = {"cite_key": getattr(ref, "cite_key", None), "arxiv_id": self.reference.arxiv_key,
                               "by": self.by, "source_idx": getattr(src, "idx", None),
                               "source_arxiv_id": self.source.arxiv_key}
        if self.similarity is not None:
            out["similarity"] = round(self.similarity, 4)
        return out


def _title_similarity(a: Paper, b: Paper) -> float:
    return max((title_similarity(x, y) for x in a.titles for y in b.titles), default=0.0)


def _same_titles(a: Paper, b: Paper, rule: TitleRule) -> bool:
    return any(rule(x, y) for x in a.titles for y in b.titles)


def match_papers(sources: Sequence[Paper], references: Sequence[Paper],
                 title_rule: TitleRule = same_title) -> list[PaperMatch]:
    """The one-to-one matching of the module docstring; matches in reference order. `title_rule` decides
    step 3 (`text.same_title`; bench/title_rule.py passes the d2 rule, similarity >= 0.8, to compare)."""
    matches: list[PaperMatch] = []
    open_refs, open_sources = list(range(len(references))), list(range(len(sources)))

    def exact(by: str, same) -> None:
        nonlocal open_refs, open_sources
        still_open = []
        for r in open_refs:
            found = next((s for s in open_sources if same(references[r], sources[s])), None)
            if found is None:
                still_open.append(r)
                continue
            matches.append(PaperMatch(references[r], sources[found], by))
            open_sources = [s for s in open_sources if s != found]
        open_refs = still_open

    exact("id", lambda r, s: bool(r.arxiv_ids & s.arxiv_ids))
    exact("doi", lambda r, s: bool(r.dois & s.dois) and not (r.arxiv_ids and s.arxiv_ids))
    candidates = []
    for r in open_refs:
        for s in open_sources:
            if references[r].shares_a_kind_with(sources[s]):
                continue  # identifiers of one kind on both sides decide: they differ, so two papers
            if _same_titles(references[r], sources[s], title_rule):
                candidates.append((-_title_similarity(references[r], sources[s]), r, s))
    taken_refs: set[int] = set()
    taken_sources: set[int] = set()
    for neg_sim, r, s in sorted(candidates):
        if r in taken_refs or s in taken_sources:
            continue
        taken_refs.add(r)
        taken_sources.add(s)
        matches.append(PaperMatch(references[r], sources[s], "title", -neg_sim))
    order = {id(p): k for k, p in enumerate(references)}
    return sorted(matches, key=lambda m: order[id(m.reference)])
