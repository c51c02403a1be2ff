"""Month arithmetic: a release is named by its month and covers [first day, first day of next month)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

MONTH_RE = re.compile(r"^(\d{4})-(\d{2})$")


def month_window(release_id: str) -> tuple[datetime, datetime]:
    match = MONTH_RE.match(release_id)
    if not match:
        raise ValueError(f"release id must be a month 'YYYY-MM', got {release_id!r}")
    year, month = int(match[1]), int(match[2])
    if not 1 <= month <= 12:
        raise ValueError(f"release id {release_id!r} has no month {month}")
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def release_id_for(moment: datetime) -> str:
    """The month containing `moment` (Airflow's data_interval_start for a monthly run)."""
    return f"{moment.year:04d}-{moment.month:02d}"
