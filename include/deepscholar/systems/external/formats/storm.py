"""storm: a folder with url_to_info.json and the generated article.

url_to_info.json maps each URL to the unified citation index its [n] use; the reference lists the
polishing model writes into the article are not used.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepscholar.systems.base import Report, Source
from deepscholar.systems.external.formats.base import (
    ExternalOutput,
    ImportFormat,
    Unit,
    arxiv_id,
    load_json,
    read_text,
    text_of,
    trace,
)

NAME = "storm"
ARTICLES = ("storm_gen_article_polished.md", "storm_gen_article_polished.txt", "storm_gen_article.md",
            "storm_gen_article.txt")
INFO = "url_to_info.json"


def is_output_folder(d: Path) -> bool:
    return (d / INFO).is_file() and any((d / a).is_file() for a in ARTICLES)


def _source(n: int, url: str, item: dict[str, Any]) -> Source:
    snippets = item.get("snippets")
    if not isinstance(snippets, list):
        snippets = []
    snippet = "\n\n".join(text_of(s) for s in snippets if text_of(s).strip()) or text_of(item.get("description"))
    return Source(idx=n, title=text_of(item.get("title")).strip(), snippet=snippet, arxiv_id=arxiv_id(url), url=url)


def _sources(info: Any, notes: list[str]) -> list[Source]:
    """One source per unified index; a URL without an index is numbered in url_to_info order."""
    by_url = info.get("url_to_info", {}) if isinstance(info, dict) else {}
    index = info.get("url_to_unified_index") if isinstance(info, dict) else None
    if not isinstance(index, dict):
        index = {url: i for i, url in enumerate(by_url, start=1)}
        notes.append("no url_to_unified_index: sources numbered in url_to_info order")
    sources: list[Source] = []
    seen: set[int] = set()
    for url, n in sorted(index.items(), key=lambda kv: int(kv[1])):
        n = int(n)
        if n in seen:
            notes.append(f"index {n} given to several URLs; first kept")
            continue
        seen.add(n)
        sources.append(_source(n, url, by_url.get(url) or {}))
    return sources


def parse(unit: Unit) -> list[ExternalOutput]:
    d = unit.path
    article = next(d / a for a in ARTICLES if (d / a).is_file())
    text = read_text(article)
    notes: list[str] = []
    sources = _sources(load_json(d / INFO), notes)
    return [ExternalOutput(key=unit.key, path=str(article), format=NAME,
                           report=Report(text=text, sources=sources,
                                         trace=trace(NAME, article, notes, numbering="url_to_unified_index")))]


FORMAT = ImportFormat(name=NAME, position=60, parse=parse, folder=is_output_folder, folder_files=(*ARTICLES, INFO),
                      description="STORM's article and url_to_info.json")
