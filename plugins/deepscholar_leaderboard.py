"""Airflow 3 plugin: the DeepScholar leaderboard page inside the Airflow UI.

The FastAPI app (deepscholar.web) is mounted by the API server under /deepscholar, and a menu entry
shows it in an iframe. Thin on purpose: everything else lives in the installable package. Creating
the app opens no database connection (that happens on the first request), so importing this file —
which every Airflow process does — stays cheap.

Like every plugin app it is not behind Airflow's login: it shows what the public leaderboard shows. Its one
write, registering a system and queueing its backfill, signs in to Airflow's REST API with the user's own
Airflow credentials first (deepscholar/web/registration.py).
"""

from __future__ import annotations

from airflow.plugins_manager import AirflowPlugin

from deepscholar.web import create_app

URL_PREFIX = "/deepscholar"

leaderboard_app = {
    "app": create_app(),
    "url_prefix": URL_PREFIX,
    "name": "DeepScholar leaderboard",
}

leaderboard_view = {
    "name": "DeepScholar leaderboard",
    # Relative to the UI's base URL, so it also works when Airflow is served under a sub-path.
    "href": URL_PREFIX.lstrip("/") + "/",
    # With a url_route the UI embeds the page (iframe) at /plugin/deepscholar-leaderboard.
    "url_route": "deepscholar-leaderboard",
    # No category: a top-level entry of the navigation bar rather than one under Browse.
    "destination": "nav",
}


class DeepScholarLeaderboardPlugin(AirflowPlugin):
    name = "deepscholar_leaderboard"
    fastapi_apps = [leaderboard_app]
    external_views = [leaderboard_view]
