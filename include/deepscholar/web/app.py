"""The leaderboard web app: latest month, history across months, a per-report drill-down and a JSON API.

Design notes: docs/MODULE_NOTES.md, `deepscholar.web.app`.
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
