"""Which of a month's candidate papers become queries when the month has more than `max_queries`.

A real month of cs.CL/LG/IR/AI leaves one to two thousand papers after the metadata filters, and the
published releases kept 63 and 200. Downloading and resolving every candidate only to throw most away
costs hours at arXiv's rate limits, so the cap is applied before extraction, without biasing the result:

- The candidates that passed the filters are put in one seeded random order (`sample_order`), balanced
  over primary categories: within a category the order is a random permutation, and the categories
  are interleaved systematically, so every prefix of the order holds each category in proportion to
  its share of the candidates (to within one paper).
- Extraction walks that order and stops once `max_queries` papers are kept. Whether a paper survives
  extraction (has LaTeX, a related-work section, enough references) does not depend on its place in a
  random order, so the kept papers are a uniform sample of the papers that would have survived —
  the population a month without a cap would keep — stratified by category, and no paper past the
  cut-off is ever downloaded.
- The order depends only on the seed, the release id and the set of candidates, and the seed is part
  of the stored release spec, so re-building a month reproduces the same sample.
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
