"""Reports of a made-up external system for the demo month, as the generic JSONL import format.

It stands for a system run elsewhere: it cites some of each paper's real references and, like real
external systems can, one paper that appeared after the query paper, so the leakage check has
something to find in the demo.
"""

from __future__ import annotations

import json
from pathlib import Path


def _first_clause(text: str) -> str:
    return text.strip().split(". ")[0].strip().rstrip(".")


def build_external_reports(snapshot_dir: Path, max_citations: int = 5) -> list[dict]:
    manifest = json.loads((snapshot_dir / "manifest.json").read_text())
    entries = {}
    for line in (snapshot_dir / "arxiv" / "entries.jsonl").read_text().splitlines():
        if line.strip():
            e = json.loads(line)
            entries[e["id"].rsplit("v", 1)[0]] = e
    kept = sorted((pid for pid, p in manifest["papers"].items() if p["outcome"] == "kept"),
                  key=lambda pid: (manifest["papers"][pid]["published"], pid))
    reports = []
    for position, pid in enumerate(kept):
        paper = manifest["papers"][pid]
        cited = sorted({r["arxiv_id"] for r in paper["references"].values() if r.get("arxiv_id")})
        cited = [a for a in cited if a in entries][:max_citations]
        sources, sentences = [], []
        for idx, arxiv_id in enumerate(cited, start=1):
            entry = entries[arxiv_id]
            sources.append({"idx": idx, "arxiv_id": arxiv_id, "title": entry["title"], "snippet": entry["summary"]})
            sentences.append(f"{entry['title']}: {_first_clause(entry['summary'])} [{idx}].")
        # A citation from the future: the next kept paper of the month, or an id from the next month.
        later = kept[position + 1] if position + 1 < len(kept) else None
        yy, mm = int(pid[:2]), int(pid[2:4])
        leak_id = later or (f"{yy + 1:02d}01.00001" if mm == 12 else f"{yy:02d}{mm + 1:02d}.00001")
        leak_title = entries[later]["title"] if later else "A follow-up study"
        sources.append({"idx": len(sources) + 1, "arxiv_id": leak_id, "title": leak_title,
                        "snippet": entries[later]["summary"] if later else ""})
        sentences.append(f"Concurrent work extends these ideas [{len(sources)}].")
        reports.append({"arxiv_id": pid, "text": "## Related Work\n\n" + " ".join(sentences), "sources": sources})
    return reports


def write_external_reports(snapshot_dir: Path, dest: Path) -> Path:
    dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in build_external_reports(snapshot_dir)))
    return dest
