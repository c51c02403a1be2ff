"""UTC, once: making datetimes timezone-aware and reading the current time.

Two ways to make a datetime aware, because callers differ on an aware value in another zone:
`as_utc` converts it to UTC (arXiv dates, cutoffs sent to arXiv), `assume_utc` keeps it as it is
(both compare equal; only naive values are read as UTC).
"""

from __future__ import annotations

from datetime import UTC, datetime

__all__ = ["UTC", "as_utc", "assume_utc", "utc_now"]


def as_utc(dt: datetime) -> datetime:
    """Naive: read as UTC; aware: converted to UTC."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt.astimezone(UTC)


def assume_utc(dt: datetime) -> datetime:
    """Naive: read as UTC; aware: unchanged."""
    return dt.replace(tzinfo=UTC) if dt.tzinfo is None else dt


def utc_now() -> datetime:
    return datetime.now(UTC)
