"""Writes the bundled demo snapshot: one synthetic month of arXiv papers, e-prints and OpenAlex works.

Design notes: docs/MODULE_NOTES.md, `deepscholar.replay.demo_snapshot`.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from deepscholar.replay.demo_archive import _gzip_bytes, _minimal_pdf, _tar_gz
from deepscholar.replay.demo_builder import (
    GENERATOR_VERSION,
    Ref,
    _add_months,
    _Builder,
    _iso,
    _yymm,
)
from deepscholar.replay.demo_data import CANDIDATES, DISTRACTORS, IIR_BOOK, THEMES, CandidateSpec, Theme
from deepscholar.replay.demo_latex import _PaperWriter, plain_word_count

__all__ = ["SnapshotSummary", "write_demo_snapshot", "main"]

# Names scale_snapshot (and older callers) reach through this module.
_REEXPORTED = (CandidateSpec, Ref, Theme, _add_months, GENERATOR_VERSION)

CATEGORIES = ["cs.CL", "cs.IR", "cs.LG"]


@dataclass
class SnapshotSummary:
    path: Path
    month: str
    categories: list[str]
    n_candidates: int
    n_expected_kept: int
    n_references: int
    n_references_on_arxiv: int
    n_arxiv_entries: int
    n_openalex_works: int
    n_eprints: int
    sha256: str
    expected: dict[str, str] = field(default_factory=dict)

    def __str__(self) -> str:
        kept = ", ".join(k for k, v in self.expected.items() if v == "kept")
        return (f"demo snapshot {self.month} at {self.path}: {self.n_candidates} candidates "
                f"({self.n_expected_kept} expected kept: {kept}), {self.n_references} references "
                f"({self.n_references_on_arxiv} on arXiv), {self.n_arxiv_entries} arXiv entries, "
                f"{self.n_openalex_works} OpenAlex works, {self.n_eprints} e-prints; sha256 {self.sha256[:16]}")



def _candidate_times(builder: _Builder) -> dict[int, datetime]:
    start, end = builder.start, builder.end
    days = (end - start).days
    times = {}
    for spec in CANDIDATES:
        if spec.last_minute:
            times[spec.num] = end - timedelta(minutes=1)
        elif spec.day is not None:
            h, m = spec.at or (9, 0)
            times[spec.num] = start.replace(day=spec.day, hour=h, minute=m)
        else:
            day = 1 + (spec.num * 7) % (days - 1)
            times[spec.num] = start.replace(day=day, hour=(spec.num * 5) % 24, minute=(spec.num * 13) % 60)
    return times



def _eprint_payload(spec: CandidateSpec, project: dict[str, bytes]) -> bytes:
    if spec.source == "pdf":
        return _minimal_pdf([spec.title, "", *spec.abstract])
    if spec.source == "gz":
        return _gzip_bytes(project["main.tex"])
    members = dict(project)
    if spec.num == 15:
        members["../evil.tex"] = (b"\\section{Related Work}\nThis file sits outside the project "
                                  b"and must never be extracted \\cite{evil}.\n")
    return _tar_gz(members)


def _candidate_entries(b: _Builder, spec: CandidateSpec, arxiv_id: str, published: datetime) -> list[dict]:
    """One arXiv entry per version of the candidate."""
    entries = []
    for v in range(1, spec.versions + 1):
        updated = published + timedelta(days=15 * (v - 1), hours=3 * (v - 1))
        # An earlier version carries the comment without the revision note.
        comment = spec.comment if v == spec.versions else (spec.comment or "").split(". v")[0]
        entries.append({
            "id": f"{arxiv_id}v{v}", "title": spec.title, "summary": " ".join(spec.abstract),
            "authors": b._authors_for(spec.num), "published": _iso(published), "updated": _iso(updated),
            "comment": comment, "journal_ref": spec.journal_ref,
            "doi": None, "categories": [spec.primary, *spec.cross], "primary_category": spec.primary,
            "license": demo_licence(spec.num),
        })
    return entries


CC_BY = "http://creativecommons.org/licenses/by/4.0/"
ARXIV_NONEXCLUSIVE = "http://arxiv.org/licenses/nonexclusive-distrib/1.0/"


def demo_licence(num: int) -> str:
    """Half the candidates CC BY, half arXiv's non-exclusive licence: the demo's export withholds and counts
    the texts of the latter (served by the replay's OAI-PMH route)."""
    return CC_BY if num % 2 == 0 else ARXIV_NONEXCLUSIVE


def _expected_paper(writer: _PaperWriter, published: datetime) -> dict:
    """What the pipeline should make of one candidate (its manifest record)."""
    spec = writer.spec
    writer.bib_entries()  # records the .bib style of every key
    words = plain_word_count(writer.related_body()) if spec.layout != "none" else 0
    cite_keys = sorted({writer.keys[s] for s in spec.cites}) if spec.layout != "none" else []
    return {
        "versioned_id": f"{writer.arxiv_id}v{spec.versions}",
        "outcome": spec.outcome,
        "theme": THEMES[spec.theme].name,
        "comment": spec.comment,
        "journal_ref": spec.journal_ref,
        "source": spec.source,
        "published": _iso(published),
        "section_title": writer.section_title() if spec.source != "pdf" else None,
        "section_level": writer.section_level() if spec.source != "pdf" else None,
        "section_file": writer.related_file() if spec.layout != "none" and spec.source != "pdf" else None,
        "bibliography": {"bib": "references.bib", "bbl": "main.bbl", "inline": "main.tex"}[spec.bib],
        "cite_keys": cite_keys,
        "cite_keys_only_in_comments": [writer.keys[writer._comment_only_slug]]
        if writer._comment_only_slug else [],
        "approx_words": words,
        "references": writer.expected_references() if spec.layout != "none" else {},
        "traps": spec.traps,
    }


def _distractor_entries(b: _Builder) -> tuple[list[dict], dict[str, str]]:
    """arXiv entries just outside the search, and id -> why each is outside."""
    start, end = b.start, b.end
    id_months = {"previous": _add_months(start, -1), "window": start, "next": end}
    entries, reasons = [], {}
    for n, d in enumerate(DISTRACTORS, start=1):
        published = {"start": start, "end": end}[d.anchor] + timedelta(minutes=d.offset_minutes)
        arxiv_id = f"{_yymm(id_months[d.id_month])}.{90000 + n:05d}"
        entries.append({
            "id": f"{arxiv_id}v1", "title": d.title,
            "summary": f"{d.title}. This paper is outside the demo month's search window or categories.",
            "authors": b._authors(2), "published": _iso(published), "updated": _iso(published),
            "comment": "Accepted at ICML 2025", "journal_ref": None, "doi": None,
            "categories": list(d.categories), "primary_category": d.categories[0],
        })
        reasons[arxiv_id] = d.reason
    return entries, reasons


def build_snapshot(month: str = "2025-06") -> tuple[dict[str, bytes], dict]:
    """All snapshot files as path -> bytes, and the manifest; no disk access."""
    b = _Builder(month)
    times = _candidate_times(b)
    files: dict[str, bytes] = {}
    entries: list[dict] = b.ref_entries()
    expected: dict[str, dict] = {}

    for spec in CANDIDATES:
        arxiv_id = f"{_yymm(b.start)}.{1000 + spec.num:05d}"
        writer = _PaperWriter(b, spec, arxiv_id)
        project = writer.files()
        published = times[spec.num]
        entries += _candidate_entries(b, spec, arxiv_id, published)
        for v in range(1, spec.versions + 1):
            files[f"eprint/{arxiv_id}v{v}"] = _eprint_payload(spec, project)
        expected[arxiv_id] = _expected_paper(writer, published)

    distractors, distractor_info = _distractor_entries(b)
    entries += distractors
    works = b.openalex_works()
    refs = list(b.refs.values())
    manifest = {
        "month": month,
        "categories": CATEGORIES,
        "generator": "demo_snapshot",
        "version": GENERATOR_VERSION,
        "window": {"start": _iso(b.start), "end": _iso(b.end)},
        # id -> "kept" or the reason the pipeline drops it; "papers" holds what to expect in detail.
        "expected": {k: v["outcome"] for k, v in expected.items()},
        "papers": expected,
        "distractors": distractor_info,
        "references": {
            "total": len(refs) + 1,
            "on_arxiv": sum(r.on_arxiv for r in refs),
            "openalex_only": sum(not r.on_arxiv for r in refs),
            "unresolvable": [IIR_BOOK["title"]],
        },
        "note": "Synthetic data: titles, authors, abstracts and numbers are invented.",
    }
    entries.sort(key=lambda e: e["id"])
    works.sort(key=lambda w: w["id"])
    files["arxiv/entries.jsonl"] = _jsonl(entries)
    files["openalex/works.jsonl"] = _jsonl(works)
    files["manifest.json"] = (json.dumps(manifest, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()
    return files, manifest


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n"
                   for r in rows).encode("utf-8")


def write_demo_snapshot(dest: Path, month: str = "2025-06") -> SnapshotSummary:
    """Write (or rewrite) the snapshot into dest; files this generator owns are replaced, nothing else."""
    dest = Path(dest)
    files, manifest = build_snapshot(month)
    dest.mkdir(parents=True, exist_ok=True)
    for owned in ("arxiv", "eprint", "openalex"):
        if (dest / owned).is_dir():
            shutil.rmtree(dest / owned)
    digest = hashlib.sha256()
    for rel in sorted(files):
        path = dest / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(files[rel])
        digest.update(rel.encode() + b"\0" + hashlib.sha256(files[rel]).digest())
    expected = manifest["expected"]
    entries = files["arxiv/entries.jsonl"].count(b"\n")
    return SnapshotSummary(
        path=dest,
        month=month,
        categories=list(manifest["categories"]),
        n_candidates=len(expected),
        n_expected_kept=sum(outcome == "kept" for outcome in expected.values()),
        n_references=manifest["references"]["total"],
        n_references_on_arxiv=manifest["references"]["on_arxiv"],
        n_arxiv_entries=entries,
        n_openalex_works=files["openalex/works.jsonl"].count(b"\n"),
        n_eprints=sum(1 for rel in files if rel.startswith("eprint/")),
        sha256=digest.hexdigest(),
        expected=dict(expected),
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Write the DeepScholar demo snapshot.")
    parser.add_argument("dest", type=Path)
    parser.add_argument("--month", default="2025-06")
    args = parser.parse_args(argv)
    print(write_demo_snapshot(args.dest, month=args.month))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
