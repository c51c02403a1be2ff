"""Month arithmetic and release ids: release M covers [first day of M, first day of the next month)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from deepscholar.errors import InvalidInput

# ASCII digits only, the whole string: Python's \d also takes '２０２５-０６' and `$` a trailing newline,
# which PostgreSQL's CHECK on releases.release_id then refused with a traceback.
MONTH_RE = re.compile(r"([0-9]{4})-([0-9]{2})")
# The releases table's CHECK: a month, or an imported dataset's name (e.g. "official").
RELEASE_ID_RE = re.compile(r"[0-9]{4}-[0-9]{2}|[a-z0-9][a-z0-9._-]*")
MAX_RELEASE_ID = 100
# A version after the first of a release (release/versions.py): '2025-06.v2'.
VERSION_RE = re.compile(r"(.+)\.v([0-9]+)")


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def validate_release_id(release_id: object) -> str:
    """A release id the warehouse could hold, checked before any query (NUL bytes, 10k characters, quotes)."""
    if not isinstance(release_id, str) or len(release_id) > MAX_RELEASE_ID or not RELEASE_ID_RE.fullmatch(release_id):
        raise InvalidInput(f"invalid release id {_shown(release_id)}: a month YYYY-MM or lower-case letters, digits, "
                           f"'.', '_' and '-' (at most {MAX_RELEASE_ID}); `deepscholar release list` lists the releases")
    return release_id


def month_window(release_id: str) -> tuple[datetime, datetime]:
    """The month's half-open window; a version of the month (`2025-06.v2`) covers the month too."""
    base = release_id
    if isinstance(release_id, str) and (version := VERSION_RE.fullmatch(release_id)):
        base = version[1]
    match = MONTH_RE.fullmatch(base) if isinstance(base, str) else None
    if not match:
        raise InvalidInput(f"release id must be a month 'YYYY-MM' (or a version of one, 'YYYY-MM.v2'), "
                           f"got {_shown(release_id)}")
    year, month = int(match[1]), int(match[2])
    if not 1 <= month <= 12:
        raise InvalidInput(f"release id {release_id!r} has no month {month}")
    start = datetime(year, month, 1, tzinfo=UTC)
    end = datetime(year + (month == 12), month % 12 + 1, 1, tzinfo=UTC)
    return start, end


def release_id_for(moment: datetime) -> str:
    """The month containing `moment` (Airflow's data_interval_start for a monthly run)."""
    return f"{moment.year:04d}-{moment.month:02d}"
