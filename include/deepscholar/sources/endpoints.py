"""Where the outside services live by default. The URLs are declared in deepscholar.settings, as the
defaults of the settings that point a run elsewhere (DEEPSCHOLAR_ARXIV_API_URL, DEEPSCHOLAR_ARXIV_EPRINT_URL,
DEEPSCHOLAR_ARXIV_OAI_URL, DEEPSCHOLAR_OPENALEX_URL): the sources' clients read the settings, so the
settings cannot read the sources. Named here too for code that looks for them among the sources."""

from __future__ import annotations

from deepscholar.settings import ARXIV_API_URL, ARXIV_EPRINT_URL, ARXIV_OAI_URL, OPENALEX_URL

__all__ = ["ARXIV_API_URL", "ARXIV_EPRINT_URL", "ARXIV_OAI_URL", "OPENALEX_URL"]
