"""The leaderboard page: a small FastAPI app, mounted in the Airflow UI by plugins/deepscholar_leaderboard.py.

Read-only: it shows what the roll-up stored (deepscholar.leaderboard*, metric_scores, judgments) and
never computes a number itself, so the page and plain SQL always agree.
"""

from deepscholar.web.app import create_app

__all__ = ["create_app"]
