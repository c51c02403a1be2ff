"""Settings that point the release steps at a replay server (tests and benches build months through it)."""

from __future__ import annotations

from typing import Any


def replay_settings(server: Any, **changes: Any):
    """This environment's settings with arXiv's API, e-prints and OAI-PMH and OpenAlex served by `server` (a
    ReplayServer), unpaced arXiv requests, and any other `changes` (e.g. arxiv_delay_seconds=0.5)."""
    from deepscholar.settings import Settings

    return Settings.from_env().replace(**{
        "arxiv_api_url": server.arxiv_api_url, "arxiv_eprint_url": server.eprint_url, "arxiv_oai_url": server.oai_url,
        "openalex_url": server.openalex_url, "arxiv_delay_seconds": 0, **changes})
