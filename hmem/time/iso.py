"""Time arguments as ISO 8601: aware datetimes, dates and ISO strings; never naive times.
(:func:`hmem.time.arguments.parse_when` reads spoken times on top of it.)"""

from __future__ import annotations

from datetime import date, datetime, time, timezone

from hmem.errors import InvalidTime, shown

__all__ = ["MAX_TIME_CHARS", "PYTHON_ZONE_HINT", "SHELL_ZONE_HINT", "check_time_length",
           "parse_time", "parse_time_opt", "TimeLike"]

TimeLike = datetime | date | str
MAX_TIME_CHARS = 100  # the longest time string any argument takes (ISO 8601 or spoken)

# how a Python caller adds a zone; the CLI says it for a shell user (SHELL_ZONE_HINT)
PYTHON_ZONE_HINT = "datetime(..., tzinfo=timezone.utc)"
SHELL_ZONE_HINT = "'2025-01-01T09:30:00+02:00'"
_MIN = datetime(1, 1, 2, tzinfo=timezone.utc)
_MAX = datetime(9999, 12, 30, tzinfo=timezone.utc)


def check_time_length(value: object, label: str) -> None:
    """Refuse a time string longer than :data:`MAX_TIME_CHARS` before reading it."""
    if isinstance(value, str) and len(value) > MAX_TIME_CHARS:
        raise InvalidTime(
            f"{label} has {len(value):,} characters; the limit for a time is {MAX_TIME_CHARS}: "
            f"give an ISO 8601 time ('2025-01-01T09:30:00Z') or a short phrase ('3 days ago')"
        )


def parse_time(value: TimeLike, label: str) -> datetime:
    """An aware UTC datetime from a datetime, a date (midnight UTC) or an ISO 8601 string.

    Naive datetimes are rejected: a time without a zone is ambiguous, and guessing would make
    as_of answers silently wrong.
    """
    if isinstance(value, datetime):
        dt = value
    elif isinstance(value, date):
        dt = datetime.combine(value, time(), tzinfo=timezone.utc)
    elif isinstance(value, str):
        check_time_length(value, label)
        text = value.strip()
        try:
            if len(text) == 10:
                dt = datetime.combine(date.fromisoformat(text), time(), tzinfo=timezone.utc)
            else:
                dt = datetime.fromisoformat(text)
        except ValueError as e:
            raise InvalidTime(
                f"{label} {shown(value)} is not a date or time; use ISO 8601, e.g. '2025-01-01' or "
                f"'2025-01-01T09:30:00Z'"
            ) from e
    else:
        raise InvalidTime(
            f"{label} must be a datetime, a date or an ISO 8601 string, not {type(value).__name__}"
        )
    if dt.tzinfo is None or dt.utcoffset() is None:
        raise InvalidTime(
            f"{label} {shown(value)} has no time zone; add one (e.g. '2025-01-01T09:30:00Z' or "
            f"{PYTHON_ZONE_HINT}), or give a plain date"
        )
    utc: datetime | None
    try:
        utc = dt.astimezone(timezone.utc)
    except OverflowError:  # e.g. 9999-12-31T23:00-05:00 is in the year 10000 in UTC
        utc = None
    if utc is None or not _MIN <= utc <= _MAX:
        raise InvalidTime(
            f"{label} {shown(value)} is outside the supported years 1-9999 (in UTC)"
        ) from None
    return utc


def parse_time_opt(value: TimeLike | None, label: str) -> datetime | None:
    return None if value is None else parse_time(value, label)
