"""The clock as the records write it: ISO-8601 UTC timestamps to the millisecond, ending in ``Z``.

One format everywhere, so stores, the runtime and the bridges compare timestamps as strings.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta


def now_iso() -> str:
    return _iso(datetime.now(UTC))


def iso_days_ago(days: float) -> str:
    try:
        return _iso(datetime.now(UTC) - timedelta(days=days))
    except OverflowError:  # further back than a datetime reaches: before every timestamp
        return _iso(datetime.min.replace(tzinfo=UTC))


def iso_from_epoch(seconds: float) -> str:
    """Epoch seconds (a run's ``leaseUntil``) in the ISO-8601 UTC form of every other timestamp."""
    return _iso(datetime.fromtimestamp(seconds, UTC))


def _iso(when: datetime) -> str:
    return when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
