"""Which of a month's candidate papers become queries when the month has more than `max_queries`.

Design notes: docs/MODULE_NOTES.md, `deepscholar.release.sampling`.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Iterable


def sample_order(candidates: Iterable[tuple[str, str | None]], seed: int, release_id: str) -> list[str]:
    """arXiv ids of (arxiv_id, primary_category) pairs in the order extraction takes them."""
    rng = random.Random(f"{seed}:{release_id}")  # str seeds hash with SHA-512: stable across Pythons
    by_category: dict[str, list[str]] = defaultdict(list)
    for arxiv_id, category in sorted(set(candidates)):
        by_category[category or ""].append(arxiv_id)
    keyed: list[tuple[float, str, str]] = []
    for category in sorted(by_category):
        ids = by_category[category]
        rng.shuffle(ids)
        offset = rng.random()  # where in its first interval each category starts: no category always first
        keyed += [((position + offset) / len(ids), category, arxiv_id) for position, arxiv_id in enumerate(ids)]
    keyed.sort()
    return [arxiv_id for _, _, arxiv_id in keyed]
