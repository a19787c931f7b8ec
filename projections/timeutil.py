"""Microsecond integers for time inside projections (fast to compare, exact to store)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

__all__ = ["to_us", "from_us", "from_us_opt"]

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)


def to_us(dt: datetime) -> int:
    """Microseconds since the Unix epoch of an aware datetime."""
    return (dt - _EPOCH) // _US


def from_us(us: int) -> datetime:
    return _EPOCH + timedelta(microseconds=us)


def from_us_opt(us: int | None) -> datetime | None:
    return None if us is None else from_us(us)
