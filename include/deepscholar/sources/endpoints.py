"""Where the outside services live: the one place for their default URLs. The settings that point a run
elsewhere (a replay server, a mirror) are DEEPSCHOLAR_ARXIV_API_URL, DEEPSCHOLAR_ARXIV_EPRINT_URL,
DEEPSCHOLAR_ARXIV_OAI_URL and DEEPSCHOLAR_OPENALEX_URL (deepscholar.settings)."""

from __future__ import annotations

__all__ = ["ARXIV_API_URL", "ARXIV_EPRINT_URL", "ARXIV_OAI_URL", "OPENALEX_URL"]

ARXIV_API_URL = "https://export.arxiv.org/api/query"
ARXIV_EPRINT_URL = "https://arxiv.org/e-print"
# OAI-PMH: the only arXiv interface that says under which licence a paper is distributed.
ARXIV_OAI_URL = "https://export.arxiv.org/oai2"
OPENALEX_URL = "https://api.openalex.org"
