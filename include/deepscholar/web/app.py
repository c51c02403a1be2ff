"""The leaderboard web app: latest month, history across months, a per-report drill-down and a JSON API.

Pages are Jinja2 templates (deepscholar/web/templates/, autoescaped; no JavaScript, no CDN: the page must
work offline and inside Airflow's iframe). Every string from the database is escaped — report texts,
source titles and judge explanations are untrusted; a report's markdown goes through a sanitising renderer
(report_text.py) — and a strict Content-Security-Policy forbids scripts altogether. Cells carry data-*
attributes (data-system, data-metric, data-value, ...) so tests and scrapers can read the numbers without
parsing the visible text. The app reads only what the roll-up stored (queries.py); it computes no metric
itself, so a number on the page is always the number in Postgres.

This module only builds the app; each job has its module: bounded_input.py (request bodies bounded, HEAD),
guards.py (security headers, errors as one line), page_reads.py and freshness.py (ETag and 304: what each page
reads), board_pages.py, drilldown_pages.py, api_routes.py and registration_pages.py (the routes).
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from fastapi import FastAPI
from sqlalchemy.engine import Engine

from deepscholar import db
from deepscholar.web.api_routes import install_api
from deepscholar.web.board_pages import install_board_pages
from deepscholar.web.bounded_input import BoundedInput
from deepscholar.web.drilldown_pages import install_drilldown_pages
from deepscholar.web.guards import install_guards
from deepscholar.web.page_reads import PageReads
from deepscholar.web.registration_pages import install_registration

__all__ = ["create_app"]


def create_app(engine_factory: Callable[[], Engine] = db.reader_engine) -> FastAPI:
    """The leaderboard app. The engine is made on the first request, so importing the Airflow plugin
    (done by every Airflow process) never opens a database connection."""
    app = FastAPI(title="DeepScholar leaderboard", docs_url=None, redoc_url=None)
    lock = threading.Lock()
    holder: dict[str, Engine] = {}

    def engine() -> Engine:
        with lock:
            if "engine" not in holder:
                holder["engine"] = engine_factory()
            return holder["engine"]

    install_guards(app)
    reads = PageReads()
    app.state.page_reads = reads  # what the app keeps rendered (tests read its bytes)
    install_board_pages(app, engine, reads)
    install_drilldown_pages(app, engine, reads)
    install_registration(app, engine)
    install_api(app, engine, reads)
    app.add_middleware(BoundedInput)  # the outermost: no other layer touches a body before its limits
    return app
