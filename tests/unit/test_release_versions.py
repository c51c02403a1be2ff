"""Release version ids: naming, parsing back, the month window of a version, and the changelog's line."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from deepscholar.errors import InvalidInput
from deepscholar.release.versions import base_of, describe_changes, parse_version, version_id
from deepscholar.release.window import month_window


@pytest.mark.parametrize(("base", "n", "expected"), [
    ("2025-06", 1, "2025-06"), ("2025-06", 2, "2025-06.v2"), ("official", 12, "official.v12")])
def test_version_ids_round_trip(base, n, expected):
    assert version_id(base, n) == expected
    assert parse_version(expected) == (base, None if n == 1 else n)
    assert base_of(expected) == base


def test_parsing_names():
    assert parse_version("2025-06.v1") == ("2025-06", 1)  # explicit v1: the base id
    assert parse_version("2025-06.v02") == ("2025-06", 2)
    assert parse_version("deepscholar-bench-2025-q2") == ("deepscholar-bench-2025-q2", None)
    assert parse_version("a.vx") == ("a.vx", None)  # not a version suffix
    with pytest.raises(InvalidInput):
        parse_version("2025-06.v0")
    with pytest.raises(InvalidInput):
        version_id("2025-06", 0)


def test_a_version_of_a_month_covers_the_month():
    assert month_window("2025-06.v3") == month_window("2025-06") == (
        datetime(2025, 6, 1, tzinfo=UTC), datetime(2025, 7, 1, tzinfo=UTC))
    with pytest.raises(InvalidInput):
        month_window("official.v2")


def test_changelog_line_counts_added_removed_and_changed_queries():
    old = {"query_digests": {"a": "1", "b": "2", "c": "3"}}
    new = {"query_digests": {"a": "1", "b": "9", "d": "4", "e": "5"}}
    line, details = describe_changes("2025-06", "1a2b3c4d5e6f7788", old, "99aa88bb77cc6655", new)
    assert details == {"added": ["d", "e"], "removed": ["c"], "changed": ["b"]}
    assert line.startswith("2 queries added, 1 removed, 1 changed")
    assert "vs 2025-06; manifest 1a2b3c4d5e6f -> 99aa88bb77cc" in line
