"""Where the outside services live: the one place for their default URLs. The settings that point a run
elsewhere (a replay server, a mirror) are DEEPSCHOLAR_ARXIV_API_URL, DEEPSCHOLAR_ARXIV_EPRINT_URL and
DEEPSCHOLAR_OPENALEX_URL (deepscholar.settings)."""

from __future__ import annotations

__all__ = ["ARXIV_API_URL", "ARXIV_EPRINT_URL", "OPENALEX_URL"]

ARXIV_API_URL = "https://export.arxiv.org/api/query"
ARXIV_EPRINT_URL = "https://arxiv.org/e-print"
OPENALEX_URL = "https://api.openalex.org"
