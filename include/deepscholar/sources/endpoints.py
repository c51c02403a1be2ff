"""Where the outside services live: the one place for their default URLs and the environment
variables that point a run elsewhere (a replay server, a mirror)."""

from __future__ import annotations

import os

__all__ = [
    "ARXIV_API_URL",
    "ARXIV_EPRINT_URL",
    "OPENALEX_URL",
    "arxiv_api_url_from_env",
    "arxiv_delay_seconds_from_env",
    "arxiv_eprint_url_from_env",
    "openalex_url_from_env",
]

ARXIV_API_URL = "https://export.arxiv.org/api/query"
ARXIV_EPRINT_URL = "https://arxiv.org/e-print"
OPENALEX_URL = "https://api.openalex.org"


def arxiv_api_url_from_env() -> str:
    return os.environ.get("DEEPSCHOLAR_ARXIV_API_URL", ARXIV_API_URL)


def arxiv_eprint_url_from_env() -> str:
    return os.environ.get("DEEPSCHOLAR_ARXIV_EPRINT_URL", ARXIV_EPRINT_URL)


def openalex_url_from_env() -> str | None:
    """None: the public OpenAlex host."""
    return os.environ.get("DEEPSCHOLAR_OPENALEX_URL") or None


def arxiv_delay_seconds_from_env() -> float:
    """Seconds between arXiv requests (arXiv asks for at most one every 3 s)."""
    return float(os.environ.get("DEEPSCHOLAR_ARXIV_DELAY_SECONDS", "3.0"))
