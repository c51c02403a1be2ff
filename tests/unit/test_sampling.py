"""The month's sample order: seeded, reproducible, and balanced over primary categories at every prefix."""

from __future__ import annotations

from collections import Counter

import pytest

from deepscholar.errors import InvalidInput
from deepscholar.release.sampling import sample_order
from deepscholar.release.spec import ReleaseSpec

# An uneven month: 600 cs.LG, 300 cs.CL, 90 cs.IR, 10 cs.AI candidates.
SHARES = {"cs.LG": 600, "cs.CL": 300, "cs.IR": 90, "cs.AI": 10}
CANDIDATES = [(f"2506.{i:05d}", cat) for i, cat in enumerate(c for c, n in SHARES.items() for _ in range(n))]
CATEGORY = dict(CANDIDATES)


def test_every_candidate_once_and_the_same_order_from_the_same_seed():
    order = sample_order(CANDIDATES, seed=7, release_id="2025-06")
    assert sorted(order) == sorted(a for a, _ in CANDIDATES)
    assert sample_order(list(reversed(CANDIDATES)), seed=7, release_id="2025-06") == order  # input order is irrelevant
    assert sample_order(CANDIDATES, seed=8, release_id="2025-06") != order
    assert sample_order(CANDIDATES, seed=7, release_id="2025-07") != order  # months differ under one seed


@pytest.mark.parametrize("prefix", [1, 10, 37, 200, 555, 1000])
def test_every_prefix_holds_each_category_in_proportion(prefix):
    order = sample_order(CANDIDATES, seed=3, release_id="2025-06")
    counts = Counter(CATEGORY[a] for a in order[:prefix])
    total = len(CANDIDATES)
    for category, n in SHARES.items():
        assert abs(counts[category] - prefix * n / total) <= 1, (category, counts)


def test_within_a_category_the_order_is_random_not_by_id():
    order = [a for a in sample_order(CANDIDATES, seed=3, release_id="2025-06") if CATEGORY[a] == "cs.LG"]
    assert order != sorted(order)
    # The first 60 cs.LG papers are spread over the whole id range, not its first tenth.
    first = sorted(int(a.split(".")[1]) for a in order[:60])
    assert first[-1] - first[0] > 300


def test_the_cap_is_a_positive_count_or_none():
    assert ReleaseSpec(max_queries=None).max_queries is None
    with pytest.raises(InvalidInput, match="max_queries"):
        ReleaseSpec(max_queries=0)
    # A release stored before the cap existed was built from every paper: it keeps no cap.
    assert ReleaseSpec.from_dict({"categories": ["cs.CL"]}).max_queries is None
    assert ReleaseSpec.from_dict(ReleaseSpec().to_dict()).max_queries == 200


def test_environment_and_overrides(monkeypatch):
    monkeypatch.setenv("DEEPSCHOLAR_MAX_QUERIES", "none")
    monkeypatch.setenv("DEEPSCHOLAR_SAMPLE_SEED", "11")
    assert (ReleaseSpec.from_env().max_queries, ReleaseSpec.from_env().sample_seed) == (None, 11)
    assert ReleaseSpec.from_env(max_queries=50).max_queries == 50
    monkeypatch.setenv("DEEPSCHOLAR_MAX_QUERIES", "63")
    assert ReleaseSpec.from_env(max_queries=0).max_queries is None  # 0: no cap, as the DAG param says
    monkeypatch.setenv("DEEPSCHOLAR_MAX_QUERIES", "lots")
    with pytest.raises(InvalidInput, match="DEEPSCHOLAR_MAX_QUERIES"):
        ReleaseSpec.from_env()
