"""Every time argument, one parser: ISO 8601, plus words and clock times.

:func:`parse_when` takes what :func:`hmem.time.iso.parse_time` takes (an aware datetime, a
date, an ISO 8601 string with a zone; never a naive time) and, for a string that is not
ISO 8601, a spoken point in time,
read relative to ``now`` (the store's clock, or a reference time the caller gave):

=====================================  ===================================================
now                                    ``now``
14:02, 14:02:30, 2pm, 9:30 am          that time today (UTC, the zone hmem shows times in);
                                       for a transaction time (``past``) its last occurrence
yesterday, today, tomorrow             the first instant of that day (as a plain date is)
yesterday 14:02, 8 May 2023 at 2pm     that day at that time (UTC)
3 days ago, 2 hours ago, an hour ago   ``now`` minus that much (seconds to years; months and
                                       years are calendar months and years)
last week, last Tuesday, March 2023,   the first instant of the period the phrase names (the
 8 May 2023, summer 2022, last month   phrases of recall's time expressions,
                                       :mod:`hmem.time.expressions`)
=====================================  ===================================================

Input that can be read more than one way is refused with its readings (``InvalidTime``):
``03/04/2025`` (3 April or 4 March), a bare weekday (``tuesday``: last or next), a bare month
(``march``: which year). Spoken clock times are UTC. A string that starts with an ISO date is
read as ISO 8601 only, so a time without a zone there (``2026-03-10T14:05``, ``2026-03-10
14:05``) is still refused: that is a program's timestamp that lost its zone, and guessing it
would make answers silently wrong.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import date, datetime, time, timedelta, timezone

from hmem.errors import InvalidTime, shown
from hmem.time.expressions import NUMBER_WORDS, WEEKDAYS, find_time_expressions
from hmem.time.iso import TimeLike, check_time_length, parse_time

__all__ = ["Now", "parse_when", "parse_when_opt"]

UTC = timezone.utc
Now = Callable[[], datetime] | datetime | None  # the reference: a clock, a time, or the wall clock

_CLOCK = r"(?P<h>\d{1,2})(?::(?P<m>\d{2})(?::(?P<s>\d{2}))?)?\s*(?P<ampm>am|pm|a\.m\.|p\.m\.)?"
_CLOCK_RE = re.compile(rf"(?:(?P<day>.+?)\s+(?:at\s+)?)?{_CLOCK}(?:\s*(?:utc|z))?", re.I)
_AGO = re.compile(r"(?P<n>\d+|" + "|".join(NUMBER_WORDS) + r")\s+"
                  r"(?P<unit>second|sec|minute|min|hour|day|week|month|year)s?\s+ago", re.I)
_MAX_COUNT_DIGITS = 12  # 10^12 seconds back is before year 1 already
_SLASHED = re.compile(r"(?P<a>\d{1,2})/(?P<b>\d{1,2})(?:/(?P<y>\d{4}))?")
_MONTHS = {n.lower(): i for i, n in enumerate(calendar.month_name) if n}
_PERIODS = ("day", "week", "month", "season", "year", "part")
_HELP = ("use ISO 8601 ('2025-01-01', '2025-01-01T09:30:00Z'), a clock time ('14:02', '2pm'), "
         "'yesterday', 'yesterday 14:02', '3 days ago' or a period such as 'last week' or "
         "'March 2023'")


def parse_when(value: TimeLike, label: str, now: Now = None, *, past: bool = False) -> datetime:
    """An aware UTC datetime from ``value``: see the module docstring. ``now`` is only read when
    ``value`` is relative (a clock passed here is not called otherwise).

    ``past``: ``value`` is a transaction time (``as_of``, ``since``, ``until``), which names a
    moment of what was believed, so it cannot be in the future: a clock time with no day
    (``2pm``) is its last occurrence (at 02:50, yesterday 14:00), and a spoken time after
    ``now`` (``tomorrow``, ``next week``) is refused. An exact time (ISO, a datetime) after now
    is taken as asked: the end of a period, say."""
    if not isinstance(value, str):
        return parse_time(value, label)
    check_time_length(value, label)  # before any reading, ISO or spoken
    try:
        return parse_time(value, label)
    except InvalidTime as iso_error:
        text = " ".join(value.split()).lower()
        if not text or _looks_iso(text):
            raise  # an ISO string with a mistake: its own message says what is wrong
        seen: list[datetime] = []

        def ref() -> datetime:  # the reference, read once
            if not seen:
                seen.append(_reference(now))
            return seen[0]

        found = _spoken(text, ref, label, value, past=past)
        if found is None:
            raise InvalidTime(f"{label} {shown(value)} is not a time hmem can read; {_HELP}") \
                from iso_error
        if past and found > ref():
            raise InvalidTime(_future(label, value, found, ref())) from None
        return found


def _future(label: str, value: object, found: datetime, ref: datetime) -> str:
    at = "" if str(value) == found.isoformat() else f" ({found:%Y-%m-%dT%H:%M:%SZ})"
    return (f"{label} {shown(value)}{at} is in the future (now is {ref:%Y-%m-%dT%H:%M:%SZ}): "
            f"a transaction time names what was believed then, and nothing is believed after "
            f"now yet; give a past time, or leave {label} out for now")


def parse_when_opt(
    value: TimeLike | None, label: str, now: Now = None, *, past: bool = False
) -> datetime | None:
    return None if value is None else parse_when(value, label, now, past=past)


def _reference(now: Now) -> datetime:
    if now is None:
        return datetime.now(UTC)
    point = now() if callable(now) else now
    return parse_time(point, "reference time")


def _looks_iso(text: str) -> bool:
    return bool(re.fullmatch(r"[+-]?\d{4}-\d{2}(-\d{2})?([t ].*)?", text))


def _spoken(
    text: str, ref: Callable[[], datetime], label: str, value: str, *, past: bool = False
) -> datetime | None:
    if text == "now":
        return ref()
    if m := _AGO.fullmatch(text):
        found = _ago(ref(), m["n"], m["unit"].lower())
        if found is None:
            raise InvalidTime(f"{label} {shown(value)} is outside the supported years 1-9999 "
                              f"(in UTC); count back less far, or give the date")
        return found
    if m := _SLASHED.fullmatch(text):
        return _slashed(m, ref, label, value)
    if text in WEEKDAYS:
        day = ref().date()
        back = day - timedelta(days=(day.weekday() - WEEKDAYS[text]) % 7 or 7)
        ahead = day + timedelta(days=(WEEKDAYS[text] - day.weekday()) % 7 or 7)
        raise InvalidTime(f"{label} {shown(value)} could be last {text.title()} ({back}) or next "
                          f"{text.title()} ({ahead}); say which, or give the date")
    if text in _MONTHS:
        year = ref().year
        raise InvalidTime(f"{label} {shown(value)} names no year: {text.title()} {year - 1} or "
                          f"{text.title()} {year}? Say e.g. '{text.title()} {year}'")
    if (m := _CLOCK_RE.fullmatch(text)) and (m["m"] or m["ampm"]):
        clock = _clock(m)
        if clock is None:
            return None
        on = ref().date() if m["day"] is None else _day(m["day"], ref)
        if on is None:
            return None
        at = datetime.combine(on, clock, tzinfo=UTC)
        if past and m["day"] is None and at > ref():  # not yet today: the last one, yesterday's
            at -= timedelta(days=1)
        return at
    start = _period_start(text, ref)
    return None if start is None else datetime.combine(start, time(), tzinfo=UTC)


def _ago(ref: datetime, n_text: str, unit: str) -> datetime | None:
    """``ref`` minus n units; None when that is beyond the years 1-9999 (however many digits
    n has: a count past _MAX_COUNT_DIGITS is never read as a number)."""
    if len(n_text) > _MAX_COUNT_DIGITS:
        return None
    n = int(n_text) if n_text.isdigit() else NUMBER_WORDS[n_text.lower()]
    try:
        if unit in ("month", "year"):
            months = n * (12 if unit == "year" else 1)
            y, m = divmod(ref.year * 12 + ref.month - 1 - months, 12)
            last = calendar.monthrange(y, m + 1)[1]
            return ref.replace(year=y, month=m + 1, day=min(ref.day, last))
        seconds = {"second": 1, "sec": 1, "minute": 60, "min": 60, "hour": 3600, "day": 86400,
                   "week": 7 * 86400}[unit]
        return ref - timedelta(seconds=n * seconds)
    except (ValueError, OverflowError):
        return None


def _slashed(m: re.Match[str], ref: Callable[[], datetime], label: str, value: str) -> datetime:
    a, b = int(m["a"]), int(m["b"])
    year = int(m["y"]) if m["y"] else ref().year
    readings = {}
    for day, month, how in ((a, b, "day/month"), (b, a, "month/day")):
        try:
            readings[date(year, month, day)] = how
        except ValueError:
            continue
    if len(readings) == 1:
        return datetime.combine(next(iter(readings)), time(), tzinfo=UTC)
    if not readings:
        raise InvalidTime(f"{label} {shown(value)} is no date as day/month or month/day; {_HELP}")
    first, second = readings
    raise InvalidTime(f"{label} {shown(value)} could be {first:%d %B %Y} ({readings[first]}) or "
                      f"{second:%d %B %Y} ({readings[second]}); use ISO 8601, e.g. '{first}'")


def _clock(m: re.Match[str]) -> time | None:
    h, minute, second = int(m["h"]), int(m["m"] or 0), int(m["s"] or 0)
    ampm = (m["ampm"] or "").replace(".", "").lower()
    if ampm:
        if not 1 <= h <= 12:
            return None
        h = h % 12 + (12 if ampm == "pm" else 0)
    if h > 23 or minute > 59 or second > 59:
        return None
    return time(h, minute, second)


def _day(text: str, ref: Callable[[], datetime]) -> date | None:
    """The one day ``text`` names (a clock time is read on a day, not a week or a month)."""
    return _period_start(text, ref, ("day",))


def _period_start(
    text: str, ref: Callable[[], datetime], kinds: tuple[str, ...] = _PERIODS
) -> date | None:
    """The first day of the one period ``text`` names as a whole, if it names one."""
    ranges = find_time_expressions(text, ref())
    whole = [r for r in ranges if r.kind in kinds and r.text.lower() == text]
    return whole[0].start.date() if len(whole) == 1 and len(ranges) == 1 else None
