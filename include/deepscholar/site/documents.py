"""The site's reading pages: methodology, how to submit, and downloads (each month's export files).

Design notes: docs/MODULE_NOTES.md, `deepscholar.site.documents`.
"""

from __future__ import annotations

import html
import logging
import re
from pathlib import Path

import sqlalchemy as sa
from markdown_it import MarkdownIt
from markupsafe import Markup
from sqlalchemy.engine import Engine

from deepscholar.site import routes
from deepscholar.site.pages import page
from deepscholar.site.routes import SiteMap

_LOG = logging.getLogger(__name__)

__all__ = ["DOCS_DIR", "markdown_html", "methodology_page", "submit_page", "downloads_page", "export_month"]

DOCS_DIR = Path(__file__).resolve().parents[3] / "docs"
_HREF = re.compile(r'href="([^"]*)"')
_HEADING = re.compile(r"<h([1-6])>(.*?)</h\1>", re.S)
_H2_WITH_ID = re.compile(r'<h2 id="([^"]*)">(.*?)</h2>', re.S)
_TAG = re.compile(r"<[^>]*>")
_KEPT = ("http://", "https://", "mailto:", "#")


def _heading_ids(rendered: str) -> str:
    """Each heading gets the id GitHub gives it (lower case, punctuation dropped, spaces as hyphens; a repeat
    numbered), so a section can be linked to: the methodology's contents, a reader's bookmark."""
    used: dict[str, int] = {}

    def one(match: re.Match) -> str:
        text = html.unescape(_TAG.sub("", match.group(2))).strip().lower()
        slug = re.sub(r"\s", "-", re.sub(r"[^\w\s-]", "", text))
        n = used.get(slug, 0)
        used[slug] = n + 1
        return f'<h{match.group(1)} id="{html.escape(slug if n == 0 else f"{slug}-{n}")}">{match.group(2)}</h{match.group(1)}>'
    return _HEADING.sub(one, rendered)


def markdown_html(text: str) -> Markup:
    """Our own markdown (a doc of the repository) as HTML: raw HTML off, tables on, repository links as text,
    headings with ids."""
    rendered = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    return Markup(_heading_ids(_HREF.sub(
        lambda m: m.group(0) if m.group(1).startswith(_KEPT) else 'data-not-in-site="true"', rendered)))


def _contents(sections: list[dict]) -> Markup:
    """A list of links to the page's sections and the second-level headings of its documents."""
    entries = []
    for s in sections:
        if s.get("heading"):
            entries.append((s["id"], s["heading"]))
        if s.get("html"):
            entries += [(m.group(1), html.unescape(_TAG.sub("", m.group(2))))
                        for m in _H2_WITH_ID.finditer(str(s["html"]))]
    items = "".join(f'<li><a href="#{html.escape(i)}">{html.escape(t)}</a></li>' for i, t in entries)
    return Markup(f'<nav class="contents" aria-label="Contents"><ul>{items}</ul></nav>')


def _doc(name: str, docs: Path) -> str | None:
    path = docs / name
    if not path.is_file():
        _LOG.warning("site: %s is missing: its page is left out of the site", path)
        return None
    return path.read_text(encoding="utf-8")


def _judge_rows(engine: Engine) -> list[list[tuple[str, str | None]]]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT judge_config, kind, model, metric_models::text, params::text "
                                    "FROM deepscholar.judge_configs ORDER BY 1")).all()
    return [[(str(v), None) for v in r] for r in rows]


def methodology_page(engine: Engine, sm: SiteMap, docs: Path = DOCS_DIR) -> dict[str, str]:
    """methodology.html: the judge configs of the boards, METRICS.md rendered (the metrics, the roll-up, the
    conformance notes), then the judge-validation figures the warehouse stores; nothing without METRICS.md."""
    from deepscholar.site.validation import validation_sections

    text = _doc("METRICS.md", docs)
    if text is None:
        return {}
    sections: list[dict] = [
        {"id": "judge-configs", "heading": "Judge configurations", "html": None,
         "columns": ["Judge config", "Kind", "Default model", "Per-metric models", "Request parameters"],
         "rows": _judge_rows(engine)},
        {"id": "metrics", "heading": None, "html": markdown_html(text), "rows": [], "columns": []},
        *validation_sections(engine),
    ]
    return {"methodology.html": page(sm, "methodology.html", "static_page.html", "Methodology",
                                     heading="Methodology", contents=_contents(sections), sections=sections)}


def submit_page(sm: SiteMap, docs: Path = DOCS_DIR) -> dict[str, str]:
    """submit.html: docs/SUBMITTING.md rendered; {} (and a log line) when the repository has none."""
    text = _doc("SUBMITTING.md", docs)
    if text is None:
        return {}
    section: dict[str, object] = {"id": "submitting", "heading": None, "html": markdown_html(text), "rows": [], "columns": []}
    return {"submit.html": page(sm, "submit.html", "static_page.html", "How to submit", heading="How to submit",
                                sections=[section])}


def export_month(engine: Engine, release: str, folder: Path) -> list[str]:
    """The month's `deepscholar export` (every judge with a board) into folder/downloads/<month>/; its files,
    sorted."""
    from deepscholar.export.writer import export_release

    target = folder / "downloads" / routes.file_name(release)
    export_release(engine, release, target)
    return sorted(p.name for p in target.iterdir() if p.is_file())


def downloads_page(sm: SiteMap, exports: dict[str, list[str]]) -> dict[str, str]:
    """downloads.html: each month's export files, each board's JSON (current and every version) and each
    standard window's."""
    path = "downloads.html"
    files = [[(release, None), (name, routes.relative_href(f"downloads/{routes.file_name(release)}/{name}", path))]
             for release, names in sorted(exports.items()) for name in names]
    boards = []
    for (release, judge), current in sorted(sm.current_version.items()):
        api = routes.api_board_path(release, judge)
        boards.append([(release, None), (judge, None), (f"current (v{current})", routes.relative_href(api, path))])
    windows = [[(judge, None), (label, None), (f"{start} to {end}", routes.relative_href(
        routes.api_window_path(judge, start, end), path))] for (judge, start, end), label in sorted(sm.windows.items())]
    sections = [
        {"id": "exports", "heading": "Each month's data (CSV and Parquet, with its datacard README.md)",
         "html": None, "columns": ["Month", "File"], "rows": files},
        {"id": "json", "heading": "Every board as JSON (the API's answer for that board)", "html": None,
         "columns": ["Month", "Judge config", "Board"], "rows": boards},
        {"id": "window-json", "heading": "Each standard window's pooled board as JSON (the API's answer with "
         "from and to)", "html": None, "columns": ["Judge config", "Window", "Months"], "rows": windows},
    ]
    sections = [s for s in sections if s["rows"] or s["id"] == "json"]
    return {path: page(sm, path, "static_page.html", "Downloads", heading="Downloads", sections=sections)}
