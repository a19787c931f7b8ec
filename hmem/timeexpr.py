"""Time expressions in recall queries: the valid-time range a question names, if any.

``parse_time_expression("what did we do last summer?", ref)`` gives a :class:`TimeRange`, a
half-open ``[start, end)`` range of aware UTC datetimes, midnight-aligned (UTC days). ``ref`` is
the reference time (benchmarks pass the question's date); d below is its UTC day.

=====================================  ====================================================
Expression (case-insensitive)           Range (kind)
=====================================  ====================================================
today, tonight, this morning            d (day); yesterday d-1; tomorrow d+1; the day
                                        before yesterday d-2; the day after tomorrow d+2
last night                              d-1 00:00 to d 06:00 (day)
this / last / next week                 ISO week (Monday first) of d, before, after (week)
the week before last / after next       two ISO weeks back / ahead (week); also month, year
this / last / next weekend              Saturday and Sunday of this / the previous / next
                                        ISO week (week)
this / last / next month, year          calendar month / year (month, year)
last / this / next summer               meteorological seasons: spring Mar-May, summer Jun-Aug,
 (spring, fall, autumn, winter)         autumn Sep-Nov, winter Dec-Feb. last = the latest
                                        that ended on or before d (in August, last summer is
                                        last year's); this = the one holding d, else the
                                        nearest; next = the first starting after d (season)
summer 2022, the fall of 2022           that season; winter 2023 is Dec 2022 - Feb 2023
March 2023, in March 2023, 2023-03      that month (month)
in March (also during, since, of ..)    the latest March starting on or before d (month);
                                        last March: the latest before d's month; this March:
                                        d's year; next March: the first after d's month
8 May 2023, May 8, 2023, 2023-05-08     that day (day); "8th of May", "Monday, 8 May" too
8 May, May 8th                          the latest 8 May on or before d (day)
in 2022 (during, since, of ...)         that year (year); a bare number is never a year
early / mid / late X, the beginning /   thirds (first / second half: halves) of a year,
 middle / end of X, first half of X     season or month X (part)
last Tuesday, on Tuesday, past Tuesday  the latest Tuesday before d, never d itself (day)
this Tuesday                            the Tuesday of d's ISO week (day)
next Tuesday                            the first Tuesday after d through the one a week
                                        later: both readings of "next" (relative)
N days / weeks / months / years ago     d - N units, widened by half a unit each side
 (also "back"; N = 3, three, a, a few   (1 day, 3 days, 15 days, 182 days); a couple = 2-3,
 (2-5), a couple of, several (3-7))     a few = 2-5, several = 3-7 (relative)
in the last / past N days, these past   from d - N units through d (relative)
 few weeks
recently, lately                        the 30 days before d, and d (relative)
the week / day / weekend / Tuesday /    relative to that date instead of d; "the week before
 N days before <date>; the week of D    D" is the Monday of the week before D's up to D (relative)
since X / after X                       from X's start (after: X's end) to d+1 (since)
until X, by X, as of X / before X       from the beginning of time to X's end (before: X's
                                        start) (until)
when ..., what year / month / day ...,  kind "question", all of time, ``asks_when=True``
 which week ..., how long ago           (see below)
=====================================  ====================================================

When a query names one full date ("last Friday, on 23 January 2022"; "last week, as mentioned
on 6 November 2023"), the relative phrases are resolved against that date rather than ``ref``.

``asks_when`` is set on every range of a query that asks for a time: recall should then prefer
facts with explicit dates. When such a question names no time, the one range is of kind
"question" and spans all of time (a filter that keeps everything).

Conservative by design, since a wrong time filter hurts recall more than a missed one: "may"
and "march" without a year or day need a preposition ("in May"), and lowercase ones after
"this/last/next" are verbs; a bare number is never a year; a four-digit number after a
preposition is a year only in 1900-2199 and not before a plural noun ("in 2000 steps"); "fall"
after "the/her/my ..." is a noun; bare seasons ("in the summer"), bare weekdays, numeric dates
like 5/8/2023, and impossible dates (31 February) give nothing.
"""

from __future__ import annotations

import calendar
import re
from collections.abc import Callable
from datetime import date, datetime, time, timedelta, timezone

import msgspec

from hmem.timeparse import TimeLike, parse_time

__all__ = ["TimeRange", "parse_time_expression", "find_time_expressions", "ALL_START", "ALL_END"]

UTC = timezone.utc
ALL_START = datetime(1, 1, 2, tzinfo=UTC)
ALL_END = datetime(9999, 12, 30, tzinfo=UTC)


class TimeRange(msgspec.Struct, frozen=True):
    """A half-open ``[start, end)`` range of aware UTC datetimes named by ``text`` in a query."""

    start: datetime
    end: datetime
    text: str
    kind: str  # day week month season year part relative since until question
    asks_when: bool = False

    def contains(self, t: datetime) -> bool:
        return self.start <= t < self.end

    def strip(self, query: str) -> str:
        """The query without this phrase (a "question" range leaves the query as it is)."""
        i = query.lower().find(self.text.lower())
        if self.kind == "question" or not self.text or i < 0:
            return query
        out = re.sub(r"\s+", " ", query[:i] + " " + query[i + len(self.text):])
        return re.sub(r"^[\s,]+|\s*,?\s*(?=[.?!;:]|$)|\s(?=,)", "", out)


_Span = tuple[date | datetime, date | datetime, str]
_Handler = Callable[[re.Match[str], date], _Span | None]

_MONTHS = {n.lower(): i for i, n in enumerate(calendar.month_name) if n}
_MONTHS |= {"jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9,
            "sept": 9, "oct": 10, "nov": 11, "dec": 12}
_FULL_MON = "|".join(n.lower() for n in calendar.month_name if n)
_MON = "|".join(sorted(_MONTHS, key=len, reverse=True))
_WEEKDAYS = {n.lower(): i for i, n in enumerate(calendar.day_name)}
_WD = "|".join(_WEEKDAYS)
_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_SEASON = "|".join(_SEASONS)
_NUMS = {w: i for i, w in enumerate("zero one two three four five six seven eight nine ten eleven "
                                    "twelve".split())} | {"a": 1, "an": 1}
_VAGUE = {"a few": (2, 5), "few": (2, 5), "a couple of": (2, 3), "a couple": (2, 3),
          "couple of": (2, 3), "several": (3, 7)}
_QTY = r"\d{1,3}|a\s+few|a\s+couple(?:\s+of)?|couple\s+of|few|several|" + "|".join(_NUMS)
_UNIT = r"(?P<u>day|week|month|year)s?"
_HALF = {"day": 1, "week": 3, "month": 15, "year": 182}
_TRIGGERS = ("in", "during", "throughout", "since", "until", "till", "by", "before", "after",
             "of", "from", "for", "early", "late", "mid", "mid-", "the year")
_AFTER_TRIGGER = "".join(
    rf"(?<=\b{t}{'' if t.endswith('-') else ' '})|" for t in _TRIGGERS).rstrip("|")
_DETERMINERS = {"the", "a", "an", "my", "your", "his", "her", "its", "our", "their", "whose"}
_PARTS = {"early": (0, 1 / 3), "beginning": (0, 1 / 3), "start": (0, 1 / 3),
          "mid": (1 / 3, 2 / 3), "middle": (1 / 3, 2 / 3), "late": (2 / 3, 1), "end": (2 / 3, 1),
          "first half": (0, 1 / 2), "second half": (1 / 2, 1)}


def _dt(d: date | datetime) -> datetime:
    return d if isinstance(d, datetime) else datetime.combine(d, time(), tzinfo=UTC)


def _add_months(d: date, n: int) -> date:
    y, m = divmod(d.year * 12 + d.month - 1 + n, 12)
    return date(y, m + 1, min(d.day, calendar.monthrange(y, m + 1)[1]))


def _shift(d: date, unit: str, n: int) -> date:
    """d minus n units; months and years move by the calendar and clamp the day (Mar 31 - 1 month
    is Feb 28 or 29)."""
    if unit in ("day", "week"):
        return d - timedelta(days=n * (7 if unit == "week" else 1))
    return _add_months(d, -n * (12 if unit == "year" else 1))


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _prev_word(text: str, pos: int) -> str:
    m = re.search(r"([a-z]+)\W*$", text[:pos].lower())
    return m.group(1) if m else ""


def _month_ok(m: re.Match[str]) -> bool:
    """"may"/"march" with no year need a preposition before them; a lowercase one needs in/on."""
    mon = m["mon"]
    if mon.lower() not in ("may", "march") or m.groupdict().get("y"):
        return True
    prev = _prev_word(m.string, m.start())
    return prev in (("in", "on", "during") if mon.islower() else _TRIGGERS + ("on",))


def _qty(text: str) -> tuple[int, int]:
    t = " ".join(text.lower().split())
    if t in _VAGUE:
        return _VAGUE[t]
    n = int(t) if t.isdigit() else _NUMS[t]
    return n, n


def _month_span(y: int, mon: int) -> _Span:
    return date(y, mon, 1), _add_months(date(y, mon, 1), 1), "month"


def _season_span(name: str, label: int) -> tuple[date, date]:
    sm = _SEASONS[name.lower()]
    start = date(label - 1 if sm == 12 else label, sm, 1)
    return start, _add_months(start, 3)


def _day_words(m: re.Match[str], d: date) -> _Span:
    w = " ".join(m[0].lower().split())
    if w == "last night":
        return d - timedelta(days=1), _dt(d) + timedelta(hours=6), "day"
    off = {"the day before yesterday": -2, "yesterday": -1, "tomorrow": 1,
           "the day after tomorrow": 2}.get(w, 0)
    return d + timedelta(days=off), d + timedelta(days=off + 1), "day"


def _calendar(unit: str, d: date, n: int) -> _Span:
    if unit == "week":
        return _monday(d) + timedelta(weeks=n), _monday(d) + timedelta(weeks=n + 1), "week"
    if unit == "weekend":
        sat = _monday(d) + timedelta(days=5 + 7 * n)
        return sat, sat + timedelta(days=2), "week"
    if unit == "month":
        first = _add_months(d.replace(day=1), n)
        return first, _add_months(first, 1), "month"
    return date(d.year + n, 1, 1), date(d.year + n + 1, 1, 1), "year"


def _this_last_next(m: re.Match[str], d: date) -> _Span:
    return _calendar(m["u"].lower(), d, {"last": -1, "this": 0, "next": 1}[m["rel"].lower()])


def _before_last(m: re.Match[str], d: date) -> _Span:
    return _calendar(m["u"].lower(), d, -2 if m["x"].lower().startswith("before") else 2)


def _weekday(m: re.Match[str], d: date) -> _Span | None:
    wd, rel = _WEEKDAYS[m["wd"].lower()], m["rel"].lower().split()[-1]
    if rel == "this":
        day = _monday(d) + timedelta(days=wd)
    elif rel == "next":
        day = d + timedelta(days=(wd - d.weekday()) % 7 or 7)
        return day, day + timedelta(days=8), "relative"
    else:  # last, on, past, this past
        day = d - timedelta(days=(d.weekday() - wd) % 7 or 7)
    return day, day + timedelta(days=1), "day"


def _ago(m: re.Match[str], d: date) -> _Span:
    lo, hi = _qty(m["q"])
    u = m["u"].lower()
    w = timedelta(days=_HALF[u])
    return _shift(d, u, hi) - w, _shift(d, u, lo) + w + timedelta(days=1), "relative"


def _rolling(m: re.Match[str], d: date) -> _Span:
    return _shift(d, m["u"].lower(), _qty(m["q"] or "1")[1]), d + timedelta(days=1), "relative"


def _recently(m: re.Match[str], d: date) -> _Span:
    return d - timedelta(days=30), d + timedelta(days=1), "relative"


def _season_rel(m: re.Match[str], d: date) -> _Span:
    rel = m["rel"].lower().split()[-1]
    cands = [_season_span(m["s"], y) for y in range(d.year - 2, d.year + 3)]
    if rel in ("last", "past"):
        s, e = max(c for c in cands if c[1] <= d)
    elif rel == "next":
        s, e = min(c for c in cands if c[0] > d)
    else:
        s, e = min(cands, key=lambda c: 0 if c[0] <= d < c[1] else min(
            abs((c[0] - d).days), abs((d - c[1]).days)))
    return s, e, "season"


def _season_year(m: re.Match[str], d: date) -> _Span:
    return *_season_span(m["s"], int(m["y"])), "season"


def _dated(m: re.Match[str], d: date) -> _Span | None:
    if not _month_ok(m):
        return None
    mon, day = _MONTHS.get(m["mon"].lower().rstrip(".")) or int(m["mon"]), int(m["d"])
    years = [int(m["y"])] if m["y"] else range(d.year, d.year - 9, -1)
    for y in years:
        try:
            found = date(y, mon, day)
        except ValueError:
            continue
        if m["y"] or found <= d:
            return found, found + timedelta(days=1), "day"
    return None


def _month_year(m: re.Match[str], d: date) -> _Span | None:
    mon = _MONTHS.get(m["mon"].lower().rstrip(".")) or int(m["mon"])
    return _month_span(int(m["y"]), mon) if 1 <= mon <= 12 and int(m["y"]) > 0 else None


def _bare_month(m: re.Match[str], d: date) -> _Span | None:
    mon = _MONTHS[m["mon"].lower()]
    return _month_span(d.year - (mon > d.month), mon) if _month_ok(m) else None


def _rel_month(m: re.Match[str], d: date) -> _Span | None:
    mon, rel = _MONTHS[m["mon"].lower()], m["rel"].lower()
    if m["mon"].islower() and mon in (3, 5):
        return None  # "this may take a while"
    if rel == "last":
        return _month_span(d.year - (mon >= d.month), mon)
    return _month_span(d.year + (rel == "next" and mon <= d.month), mon)


_COUNTED = re.compile(
    r"\s*(?:%|(?!(?:as|is|was|has|his|its|this|does|yes|us|plus|unless)\b)[a-z]+s\b|"
    r"(?:people|feet|km|kg|lb|mi)\b)")


def _bare_year(m: re.Match[str], d: date) -> _Span | None:
    y = int(m["y"])
    if not 1900 <= y <= 2199 or _COUNTED.match(m.string, m.end()):
        return None
    return date(y, 1, 1), date(y + 1, 1, 1), "year"


def _anchored(m: re.Match[str], d: date) -> _Span | None:
    a = _parse_day(m["date"], d)
    rel = " ".join(m["rel"].lower().split())
    if a is None or (m["conn"].lower() == "of") != (rel == "the week"):
        return None
    if m["q"]:
        return _ago(m, a)
    unit = rel.split()[-1]
    if unit == "day":
        return a - timedelta(days=1), a, "day"
    if m["conn"].lower() == "of":
        return _calendar("week", a, 0)
    if unit == "week":
        return _monday(a) - timedelta(weeks=1), a, "relative"
    if unit == "weekend":
        return _calendar("weekend", a, -1)
    day = a - timedelta(days=(a.weekday() - _WEEKDAYS[unit]) % 7 or 7)
    return day, day + timedelta(days=1), "day"


def _p(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern, re.I)


_ISO_DAY = _p(r"\b(?P<y>\d{4})-(?P<mon>\d{1,2})-(?P<d>\d{1,2})\b")
_DMY = _p(rf"\b(?:(?:{_WD}),?\s+)?(?:the\s+)?(?P<d>\d{{1,2}})(?:st|nd|rd|th)?(?:\s+of)?\s+"
          rf"(?P<mon>(?:{_MON})\b\.?)(?:,?\s*(?P<y>\d{{4}})\b)?")
_MDY = _p(rf"\b(?:(?:{_WD}),?\s+)?(?P<mon>(?:{_MON})\b\.?)\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?\b"
          rf"(?!:)(?:,?\s*(?P<y>\d{{4}})\b)?")
_DAY_PATTERNS = (_ISO_DAY, _DMY, _MDY)
_ANY_DAY = "|".join(re.sub(r"\(\?P<\w+>", "(?:", p.pattern) for p in _DAY_PATTERNS)


def _parse_day(text: str, d: date) -> date | None:
    for pattern in _DAY_PATTERNS:
        if (m := pattern.fullmatch(text)) and (span := _dated(m, d)):
            return span[0]  # type: ignore[return-value]
    return None


# (pattern, handler, resolved against the reference?). Overlaps go to the longest match.
_PATTERNS: list[tuple[re.Pattern[str], _Handler, bool]] = [
    (_ISO_DAY, _dated, False),
    (_DMY, _dated, False),
    (_MDY, _dated, False),
    (_p(r"\b(?P<y>\d{4})-(?P<mon>\d{2})\b(?!-\d)"), _month_year, False),
    (_p(rf"\b(?P<mon>(?:{_MON})\b\.?),?\s+(?:of\s+)?(?P<y>\d{{4}})\b"), _month_year, False),
    (_p(rf"(?:{_AFTER_TRIGGER})(?P<mon>{_FULL_MON})\b"), _bare_month, True),
    (_p(rf"\b(?P<rel>last|this|next)\s+(?P<mon>{_FULL_MON})\b"), _rel_month, True),
    (_p(rf"(?:{_AFTER_TRIGGER})(?P<y>\d{{4}})\b"), _bare_year, False),
    (_p(rf"\b(?:the\s+)?(?P<s>{_SEASON})(?:\s+of)?,?\s+(?P<y>\d{{4}})\b"), _season_year, False),
    (_p(rf"\b(?P<rel>last|this\s+past|past|this|next)\s+(?P<s>{_SEASON})\b"), _season_rel, True),
    (_p(r"\b(?:the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|"
        r"tonight|tomorrow|last\s+night|this\s+(?:morning|afternoon|evening))\b"), _day_words, True),
    (_p(r"\b(?P<rel>last|this|next)\s+(?P<u>week|weekend|month|year)\b(?!\s+of\b)"),
     _this_last_next, True),
    (_p(r"\bthe\s+(?P<u>week|month|year)\s+(?P<x>before\s+last|after\s+next)\b"),
     _before_last, True),
    (_p(rf"\b(?P<rel>last|on|this\s+past|past|this|next)\s+(?P<wd>{_WD})\b"), _weekday, True),
    (_p(rf"\b(?P<q>{_QTY})\s+{_UNIT}\s+(?:ago|back)\b"), _ago, True),
    (_p(rf"\b(?:the|these|this)\s+(?:last|past)\s+(?:(?P<q>{_QTY})\s+)?{_UNIT}\b(?!\s+of\b)"),
     _rolling, True),
    (_p(r"\b(?:recently|lately)\b"), _recently, True),
    (_p(rf"\b(?P<rel>(?:the|last)\s+(?:day|week|weekend|{_WD})|(?P<q>{_QTY})\s+{_UNIT})\s+"
        rf"(?P<conn>before|prior\s+to|of)\s+(?P<date>{_ANY_DAY})"), _anchored, False),
]
_PART = _p(r"\b(?:(?P<p1>early|mid|late)|the\s+(?P<p2>beginning|start|middle|end|"
           r"(?:first|second)\s+half)\s+of)(?:\s+|-)$")
_PREP = _p(r"\b(?P<prep>in|on|at|during|throughout|over|from|for|since|until|till|as\s+of|by|"
           r"before|after)\s+$")
_ASKS_WHEN = _p(r"(?:^|[.?!;:]\s+)\W*when\b|\b(?:what|which)\s+(?:year|month|date|day|week|"
                r"weekend|time|season)\b|\bhow\s+(?:long|many\s+\w+)\s+ago\b|\bsince\s+when\b")


def _narrow(s: datetime, e: datetime, kind: str, part: str) -> tuple[datetime, datetime]:
    lo, hi = _PARTS[" ".join(part.lower().split())]
    if kind == "month":
        days = (e - s).days
        return s + timedelta(days=round(days * lo)), s + timedelta(days=round(days * hi))
    months = 12 if kind == "year" else 3
    return (_dt(_add_months(s.date(), round(months * lo))),
            _dt(_add_months(s.date(), round(months * hi))))


def find_time_expressions(query: str, reference: TimeLike) -> list[TimeRange]:
    """Every time expression in ``query``, in the order they appear (see the module table)."""
    ref = parse_time(reference, "reference").date()
    found: list[tuple[int, int, re.Match[str], _Handler, bool]] = []
    for pattern, handler, relative in _PATTERNS:
        for m in pattern.finditer(query):
            if handler(m, ref) is not None:
                rel = relative or handler in (_dated, _anchored) and not re.search(r"\d{4}", m[0])
                found.append((m.start(), m.end(), m, handler, rel))
    kept: list[tuple[int, int, re.Match[str], _Handler, bool]] = []
    for c in sorted(found, key=lambda c: (c[0] - c[1], c[0])):
        if all(c[1] <= k[0] or c[0] >= k[1] for k in kept):
            kept.append(c)
    kept.sort(key=lambda c: c[0])
    anchors = {c[2][0] for c in kept if c[3] is _dated and not c[4]}
    anchor = _parse_day(anchors.pop(), ref) if len(anchors) == 1 else None
    asks = _ASKS_WHEN.search(query)
    out = []
    for s, e, m, handler, rel in kept:
        span = handler(m, anchor if rel and anchor else ref)
        assert span is not None
        start, end, kind = _dt(span[0]), _dt(span[1]), span[2]
        if (pm := _PART.search(query, 0, s)) and kind in ("year", "season", "month"):
            start, end = _narrow(start, end, kind, pm["p1"] or pm["p2"])
            s, kind = pm.start(), "part"
        if pm := _PREP.search(query, 0, s):
            s, prep = pm.start(), " ".join(pm["prep"].lower().split())
            if prep in ("since", "after"):
                start = start if prep == "since" else end
                start, end, kind = start, max(end, _dt(ref + timedelta(days=1))), "since"
            elif prep in ("until", "till", "by", "as of", "before"):
                start, end, kind = ALL_START, start if prep == "before" else end, "until"
        out.append(TimeRange(start, end, query[s:e], kind, asks is not None))
    if asks and not out:
        out.append(TimeRange(ALL_START, ALL_END, asks[0].strip(" .?!;:"), "question", True))
    return out


def parse_time_expression(query: str, reference: TimeLike) -> TimeRange | None:
    """The first time range ``query`` names, else a "question" range if it asks when, else None.

    ``reference`` (aware, or a date or ISO string: see :func:`hmem.timeparse.parse_time`) is the
    time the query is asked at; relative phrases ("last week") count from its UTC day.
    """
    found = find_time_expressions(query, reference)
    return found[0] if found else None
