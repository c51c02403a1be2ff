"""A replay snapshot folder, indexed for the queries the replay server answers.

    manifest.json          {"month", "categories", "generator", "version", "expected"}
    arxiv/entries.jsonl    one arXiv entry (one version) per line
    eprint/<versioned id>  raw e-print bytes
    openalex/works.jsonl   one OpenAlex work per line
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from deepscholar.replay.arxiv_query import Query, required_title_tokens, stem, text_tokens
from deepscholar.text import normalise_title, strip_arxiv_version

__all__ = ["Snapshot", "bare_doi"]


def _minute_key(iso: str) -> str:
    """'2025-06-01T12:34:56Z' -> '202506011234', the granularity of submittedDate queries."""
    dt = datetime.fromisoformat(iso.replace("Z", "+00:00")).astimezone(UTC)
    return dt.strftime("%Y%m%d%H%M")


@dataclass
class _Entry:
    data: dict
    base_id: str
    version: int
    title_tokens: list[str]
    abstract_tokens: list[str]
    author_tokens: list[str]
    submitted: str  # YYYYMMDDHHMM of v1
    updated: str


class Snapshot:
    """The snapshot folder, indexed for the queries the clients send."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        manifest_path = self.root / "manifest.json"
        self.manifest = json.loads(manifest_path.read_text()) if manifest_path.exists() else {}
        self.versions: dict[str, dict[int, _Entry]] = {}
        for data in _read_jsonl(self.root / "arxiv" / "entries.jsonl"):
            base, version = strip_arxiv_version(data["id"])
            entry = _Entry(
                data=data,
                base_id=base,
                version=version or 1,
                title_tokens=text_tokens(data.get("title", "")),
                abstract_tokens=text_tokens(data.get("summary", "")),
                author_tokens=text_tokens(" ".join(data.get("authors", []))),
                submitted=_minute_key(data["published"]),
                updated=_minute_key(data.get("updated") or data["published"]),
            )
            self.versions.setdefault(base, {})[entry.version] = entry
        self.works: list[dict] = list(_read_jsonl(self.root / "openalex" / "works.jsonl"))
        self.works_by_id = {w["id"].rsplit("/", 1)[-1].upper(): w for w in self.works}
        self.works_by_doi = {bare_doi(w.get("doi")): w for w in self.works if w.get("doi")}
        self._work_title_tokens = {id(w): set(_stems(w.get("title") or w.get("display_name") or ""))
                                   for w in self.works}
        self._work_text_tokens = {id(w): set(_stems(_work_text(w))) for w in self.works}

        # Title token -> papers whose latest title has it: a title search looks only at those.
        self._latest = [v[max(v)] for v in self.versions.values()]
        self._title_postings: dict[str, set[int]] = {}
        for i, entry in enumerate(self._latest):
            for token in entry.title_tokens:
                self._title_postings.setdefault(token, set()).add(i)

    def latest_entries(self, tree: Query | None = None) -> list[_Entry]:
        """What search returns: one entry per paper, its latest version (as arXiv does); with a query,
        only those that could match it (by the title words it requires), in the same order."""
        possible = self._possible(tree) if tree is not None else None
        if possible is None:
            return list(self._latest)
        return [self._latest[i] for i in sorted(possible)]

    def _possible(self, node: Query) -> set[int] | None:
        """Indexes of the entries that can match `node` by their title words; None: any entry can."""
        kind = node[0]
        if kind in ("and", "or"):
            left, right = self._possible(node[1]), self._possible(node[2])
            if kind == "and":
                return left if right is None else right if left is None else left & right
            return None if left is None or right is None else left | right
        if kind == "andnot":
            return self._possible(node[1])
        required = required_title_tokens(node)
        if not required:
            return None
        return set.intersection(*(self._title_postings.get(t, set()) for t in required))

    def lookup(self, arxiv_id: str) -> _Entry | None:
        base, version = strip_arxiv_version(arxiv_id)
        versions = self.versions.get(base)
        if not versions:
            return None
        if version is None:
            return versions[max(versions)]
        return versions.get(version)

    def eprint_path(self, arxiv_id: str) -> Path | None:
        folder = (self.root / "eprint").resolve()
        base, version = strip_arxiv_version(arxiv_id)
        if version is None:
            versions = self.versions.get(base, {})
            candidates = [f"{base}v{v}" for v in sorted(versions, reverse=True)]
            candidates += sorted((p.relative_to(folder).as_posix() for p in folder.glob(f"{base}v*")),
                                 reverse=True) if folder.is_dir() and ".." not in base else []
        else:
            candidates = [f"{base}v{version}"]
        for name in candidates:
            path = (folder / name).resolve()
            # The id comes from a URL: never serve anything outside the snapshot's eprint folder.
            if folder in path.parents and path.is_file():
                return path
        return None

    def work_search(self, text: str, title_only: bool) -> list[dict]:
        wanted = set(_stems(text))
        if not wanted:
            return []
        index = self._work_title_tokens if title_only else self._work_text_tokens
        hits = [w for w in self.works if wanted <= index[id(w)]]
        # Relevance stand-in: how much of the title the query covers, then citations.
        hits.sort(key=lambda w: (-len(wanted & self._work_title_tokens[id(w)]) /
                                 max(1, len(self._work_title_tokens[id(w)])),
                                 -int(w.get("cited_by_count") or 0), w["id"]))
        return hits


def _read_jsonl(path: Path):
    if not path.exists():
        return
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                yield json.loads(line)


def bare_doi(doi: str | None) -> str:
    text = (doi or "").strip()
    text = re.sub(r"^(?:https?://(?:dx\.)?doi\.org/|doi:\s*)", "", text, flags=re.IGNORECASE)
    return text.lower()


_STOP = frozenset("a an and are as at be by for from in into is of on or the to with via".split())


def _stems(text: str) -> list[str]:
    """Tokens for OpenAlex-style full-text search: stop words dropped, plurals folded."""
    return [stem(tok) for tok in normalise_title(text).split() if tok not in _STOP]


def _work_text(work: dict) -> str:
    inv = work.get("abstract_inverted_index") or {}
    words = sorted(((p, w) for w, ps in inv.items() for p in ps))
    return " ".join([work.get("title") or work.get("display_name") or "", " ".join(w for _, w in words)])

