"""The site's reading pages: methodology, how to submit, and downloads (each month's export files).

Design notes: docs/MODULE_NOTES.md, `deepscholar.site.documents`.
"""

from __future__ import annotations

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
_KEPT = ("http://", "https://", "mailto:", "#")


def markdown_html(text: str) -> Markup:
    """Our own markdown (a doc of the repository) as HTML: raw HTML off, tables on, repository links as text."""
    rendered = MarkdownIt("commonmark", {"html": False}).enable("table").render(text)
    return Markup(_HREF.sub(lambda m: m.group(0) if m.group(1).startswith(_KEPT) else 'data-not-in-site="true"',
                            rendered))


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
    """methodology.html: the judge configs of the boards, then METRICS.md rendered (or nothing without it)."""
    text = _doc("METRICS.md", docs)
    if text is None:
        return {}
    sections = [
        {"id": "judge-configs", "heading": "Judge configurations", "html": None,
         "columns": ["Judge config", "Kind", "Default model", "Per-metric models", "Request parameters"],
         "rows": _judge_rows(engine)},
        {"id": "metrics", "heading": None, "html": markdown_html(text), "rows": [], "columns": []},
    ]
    return {"methodology.html": page(sm, "methodology.html", "static_page.html", "Methodology",
                                     heading="Methodology", sections=sections)}


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
    """downloads.html: each month's export files and each board's JSON (current and every version)."""
    path = "downloads.html"
    files = [[(release, None), (name, routes.relative_href(f"downloads/{routes.file_name(release)}/{name}", path))]
             for release, names in sorted(exports.items()) for name in names]
    boards = []
    for (release, judge), current in sorted(sm.current_version.items()):
        api = routes.api_board_path(release, judge)
        boards.append([(release, None), (judge, None), (f"current (v{current})", routes.relative_href(api, path))])
    sections = [
        {"id": "exports", "heading": "Each month's data (CSV and Parquet, with its datacard README.md)",
         "html": None, "columns": ["Month", "File"], "rows": files},
        {"id": "json", "heading": "Every board as JSON (the API's answer for that board)", "html": None,
         "columns": ["Month", "Judge config", "Board"], "rows": boards},
    ]
    if not files:
        sections = sections[1:]
    return {path: page(sm, path, "static_page.html", "Downloads", heading="Downloads", sections=sections)}
