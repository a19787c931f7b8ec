"""Time expressions in recall queries: the valid-time range a question names, if any.

``parse_time_expression("what did we do last summer?", ref)`` gives a :class:`TimeRange`, a
half-open ``[start, end)`` range of aware UTC datetimes. ``ref`` is when the query is asked
(benchmarks pass the question's date) and d its UTC day. Case-insensitive, anywhere in a query:

==================================  ===========================================================
yesterday, today, tomorrow, the     d-1, d, d+1, d-2 (day); last night: d-1 to d 06:00
 day before yesterday, last night
this / last / next week, weekend    ISO weeks (Monday first) (week); the week before last
this / last / next month, year      calendar months (month) and years (year)
last / this / next summer, winter,  meteorological seasons (season): last = the latest ended by
 spring, fall, autumn; summer 2022   d (in August: last year's), this = the one holding d, else
                                    the nearest; winter 2023 = Dec 2022 - Feb 2023
March 2023, 2023-03; in March       that month; the latest March starting by d (month); last /
                                    this / next March: before d's month / d's year / after it
8 May 2023, May 8 2023, 2023-05-08  that day; 8 May: the latest 8 May by d (day)
in 2022, the year 2022              that year (year)
early / mid / late X, the first     thirds / halves of the year, season or month X (part)
 half of X, the end of X
last / on Tuesday; this; next       the latest Tuesday before d (never d) (day); the Tuesday of
                                    d's week (day); the next two Tuesdays (relative)
two years ago, 3 days back          d - N units +- half a unit: 1, 3, 15, 182 days (relative); a
                                    few: 2-5, a couple: 2-3, several: 3-7; calendar months, years
(in) the past / last N days         d - N units through d (relative); "last week": calendar
recently, lately                    d-30 through d (relative)
the week / day / Tuesday / N days   counted from date D, not d; the week before D: from the
 before (after) D; the week of D    Monday of the week before D's up to D
since X; after X                    X's start through d (X's end to all time) (since)
until / by / as of X; before X      all time up to X's end (X's start) (until)
between X and Y, from X to Y        X's start to Y's end (relative)
when ..., what year, how long ago   marker: all of time, ``asks_when`` (question)
==================================  ===========================================================

A query naming one full date resolves relative phrases against it ("last Friday, on 23 January
2022"; "last week, as mentioned on 6 November 2023"). A query asking for a time ("when",
"what year", "how long ago") also yields a marker range of kind "question" spanning all of time
with ``asks_when=True``: it names no period, but recall should prefer facts with explicit dates.

Conservative, since a wrong time filter hurts recall more than a missed one: "may", "march"
and "Jan" need a year, a day before them or a preposition ("in May", "on Jan 2"; lowercase
"may": in/on/during), and "this may" is a verb; a number is a year (1900-2199) only after a
preposition and not before a plural noun ("in 2000 steps"); "her last fall" is a noun; bare
seasons and weekdays and 5/8/2023 give nothing.
"""

from __future__ import annotations

import bisect
import calendar
import functools
import re
from collections.abc import Callable
from datetime import date, datetime, time, timedelta, timezone

import msgspec

from hmem.time.iso import TimeLike, parse_time
from hmem.time.scan import asks_when, before, first_from, joins_from, prev_word

__all__ = [
    "ALL_END", "ALL_START", "NUMBER_WORDS", "WEEKDAYS", "TimeRange", "find_time_expressions",
    "parse_time_expression",
]

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
WEEKDAYS = {n.lower(): i for i, n in enumerate(calendar.day_name)}
_WD = "|".join(WEEKDAYS)
_SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}
_SEASON = "|".join(_SEASONS)
NUMBER_WORDS = {w: i for i, w in enumerate(  # counts spelled out, as "two years ago" says them
    "one two three four five six seven eight nine ten eleven twelve".split(), 1)}
NUMBER_WORDS |= {"a": 1, "an": 1}
_VAGUE = {"a few": (2, 5), "few": (2, 5), "a couple of": (2, 3), "a couple": (2, 3),
          "couple of": (2, 3), "several": (3, 7)}
_QTY = r"\d{1,3}|a\s+few|a\s+couple(?:\s+of)?|couple\s+of|few|several|" + "|".join(NUMBER_WORDS)
_UNIT = r"(?P<u>day|week|month|year)s?"
_HALF = {"day": 1, "week": 3, "month": 15, "year": 182}
_TRIGGERS = ("in", "during", "throughout", "since", "until", "till", "by", "before", "after",
             "of", "from", "for", "between", "early", "late", "mid", "mid-")
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


def _near(d: date, wd: int, after: bool = False) -> date:
    """The weekday wd (Monday 0) closest before d (after d), never d itself."""
    return d + timedelta(days=(wd - d.weekday()) % 7 or 7) if after else d - timedelta(
        days=(d.weekday() - wd) % 7 or 7)


def _month_ok(m: re.Match[str]) -> bool:
    """"may", "march" and abbreviations ("Jan") with no year need a preposition before them."""
    mon, name = m["mon"], m["mon"].lower().rstrip(".")
    if name in _FULL_MON.split("|") and name not in ("may", "march") or m.groupdict().get("y"):
        return True
    if re.search(r"\d(?:st|nd|rd|th)\b|\bof\b", m[0], re.I) or m.re is _DMY and mon[0].isupper():
        return True  # "8th May", "8 of May" and "8 May" are dates
    prev = prev_word(m.string, m.start())
    return prev in (("in", "on", "during") if mon.islower() else _TRIGGERS + ("on",))


def _qty(text: str) -> tuple[int, int]:
    t = " ".join(text.lower().split())
    if t in _VAGUE:
        return _VAGUE[t]
    n = int(t) if t.isdigit() else NUMBER_WORDS[t]
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
    rel = m["rel"].lower()
    n = {"last": -1, "this": 0, "next": 1}.get(rel, -2 if rel.startswith("before") else 2)
    return _calendar(m["u"].lower(), d, n)


def _weekday(m: re.Match[str], d: date) -> _Span:
    wd, rel = WEEKDAYS[m["wd"].lower()], m["rel"].lower().split()[-1]
    if rel == "next":
        return _near(d, wd, True), _near(d, wd, True) + timedelta(days=8), "relative"
    day = _monday(d) + timedelta(days=wd) if rel == "this" else _near(d, wd)  # last, on, past
    return day, day + timedelta(days=1), "day"


def _ago(m: re.Match[str], d: date, sign: int = 1) -> _Span:
    """N units before d (sign -1: after d), widened by half a unit each side."""
    (lo, hi), u = _qty(m["q"]), m["u"].lower()
    w = timedelta(days=_HALF[u])
    first, last = sorted((_shift(d, u, sign * hi), _shift(d, u, sign * lo)))
    return first - w, last + w + timedelta(days=1), "relative"


def _rolling(m: re.Match[str], d: date) -> _Span | None:
    if not (m["the"] or m["q"]):
        return None  # "last week" is the calendar week
    return _shift(d, m["u"].lower(), _qty(m["q"] or "1")[1]), d + timedelta(days=1), "relative"


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


def _named_month(m: re.Match[str], d: date) -> _Span | None:
    mon = _MONTHS.get(m["mon"].lower().rstrip(".")) or int(m["mon"])
    rel, y = (m.groupdict().get("rel") or "").lower(), m.groupdict().get("y")
    if y:  # "March 2023", "2023-03"
        return _month_span(int(y), mon) if 1 <= mon <= 12 and int(y) > 0 else None
    if not rel:  # "in March"
        return _month_span(d.year - (mon > d.month), mon) if _month_ok(m) else None
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
    a, rel, conn = _parse_day(m["date"], d), " ".join(m["rel"].lower().split()), m["conn"].lower()
    if a is None or conn == "of" and rel != "the week":
        return None
    if conn == "of":
        return _calendar("week", a, 0)
    back, unit, one = conn != "after", rel.split()[-1], timedelta(days=1)
    if m["q"]:
        return _ago(m, a, 1 if back else -1)
    if unit == "day":
        return (a - one, a, "day") if back else (a + one, a + 2 * one, "day")
    if unit == "week":
        return (_monday(a) - 7 * one, a, "relative") if back else (
            a + one, _monday(a) + 14 * one, "relative")
    if unit == "weekend":
        sat = _monday(a) - 2 * one if back else _near(a, 5, True)
        return sat, sat + 2 * one, "week"
    day = _near(a, WEEKDAYS[unit], not back)
    return day, day + one, "day"


_p = functools.partial(re.compile, flags=re.I)
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
            return span[0]
    return None


# (pattern, handler, resolved against the reference?). Overlaps go to the longest match.
_PATTERNS: list[tuple[re.Pattern[str], _Handler, bool]] = [
    (_ISO_DAY, _dated, False),
    (_DMY, _dated, False),
    (_MDY, _dated, False),
    (_p(r"\b(?P<y>\d{4})-(?P<mon>\d{2})\b(?!-\d)"), _named_month, False),
    (_p(rf"\b(?P<mon>(?:{_MON})\b\.?),?\s+(?:of\s+)?(?P<y>\d{{4}})\b"), _named_month, False),
    (_p(rf"(?:{_AFTER_TRIGGER})(?P<mon>{_FULL_MON})\b"), _named_month, True),
    (_p(rf"\b(?P<rel>last|this|next)\s+(?P<mon>{_FULL_MON})\b"), _named_month, True),
    (_p(rf"(?:{_AFTER_TRIGGER}|\bthe\s+year\s+)(?P<y>\d{{4}})\b"), _bare_year, False),
    (_p(rf"\b(?:the\s+)?(?P<s>{_SEASON})(?:\s+of)?,?\s+(?P<y>\d{{4}})\b"),
     lambda m, d: (*_season_span(m["s"], int(m["y"])), "season"), False),
    (_p(rf"\b(?P<rel>last|this\s+past|past|this|next)\s+(?P<s>{_SEASON})\b"), _season_rel, True),
    (_p(r"\b(?:the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|yesterday|today|"
        r"tonight|tomorrow|last\s+night|this\s+(?:morning|afternoon|evening))\b"),
     _day_words, True),
    (_p(r"\b(?P<rel>last|this|next)\s+(?P<u>week|weekend|month|year)\b(?!\s+of\b)"),
     _this_last_next, True),
    (_p(r"\bthe\s+(?P<u>week|month|year)\s+(?P<rel>before\s+last|after\s+next)\b"),
     _this_last_next, True),
    (_p(rf"\b(?P<rel>last|on|this\s+past|past|this|next)\s+(?P<wd>{_WD})\b"), _weekday, True),
    (_p(rf"\b(?P<q>{_QTY})\s+{_UNIT}\s+(?:ago|back)\b"), _ago, True),
    (_p(rf"\b(?P<the>(?:the|these|this)\s+)?(?:last|past)\s+(?:(?P<q>{_QTY})\s+)?{_UNIT}\b"
        r"(?!\s+of\b)"), _rolling, True),
    (_p(r"\b(?:between|from)\s+(?P<y>\d{4})\s*(?:and|to|-|–)\s*(?P<y2>\d{4})\b"),
     lambda m, d: (date(int(m["y"]), 1, 1), date(int(m["y2"]) + 1, 1, 1), "relative")
     if 1900 <= int(m["y"]) <= int(m["y2"]) <= 2199 else None, False),
    (_p(r"\b(?:recently|lately)\b"),
     lambda m, d: (d - timedelta(days=30), d + timedelta(days=1), "relative"), True),
    (_p(rf"\b(?P<rel>(?:the|last)\s+(?:day|week|weekend|{_WD})|(?P<q>{_QTY})\s+{_UNIT})\s+"
        rf"(?P<conn>before|prior\s+to|after|of)\s+(?P<date>{_ANY_DAY})"), _anchored, False),
]
_PART = _p(r"\b(?:(?P<p1>early|mid|late)|the\s+(?P<p2>beginning|start|middle|end|"
           r"(?:first|second)\s+half)\s+of)(?:\s+|-)$")
_PREP = _p(r"\b(?P<prep>in|on|at|during|throughout|over|from|for|since|until|till|as\s+of|by|"
           r"before|after)\s+$")
_RELATIVE_WORDS = _p(r"(?:last|this|next|past|yesterday|today|tomorrow|tonight|recently|lately)\b"
                     r"|.*\b(?:ago|back)$")
_BETWEEN = _p(r"\s*(?:and|to|until|till|through|-|–)\s*")


def _narrow(s: datetime, e: datetime, kind: str, part: str) -> tuple[datetime, datetime]:
    lo, hi = _PARTS[" ".join(part.lower().split())]
    if kind == "month":
        days = (e - s).days
        return s + timedelta(days=round(days * lo)), s + timedelta(days=round(days * hi))
    months = 12 if kind == "year" else 3
    return (_dt(_add_months(s.date(), round(months * lo))),
            _dt(_add_months(s.date(), round(months * hi))))


def _resolve(handler: _Handler, m: re.Match[str], d: date) -> _Span | None:
    if re.match(r"(?:last|this|next|past)\b", m[0], re.I) and (
            prev_word(m.string, m.start()) in _DETERMINERS):
        return None  # "her last fall", "the last Tuesday of the month"
    try:
        return handler(m, d)
    except (ValueError, OverflowError):  # dates beyond year 1-9999
        return None


def _find(query: str, reference: TimeLike) -> list[tuple[TimeRange, bool]]:
    """(range, whether it was counted from the reference) for each expression, in text order."""
    ref = parse_time(reference, "reference").date()
    found: list[tuple[int, int, re.Match[str], _Handler, bool]] = []
    for pattern, handler, relative in _PATTERNS:
        for m in pattern.finditer(query):
            if _resolve(handler, m, ref) is not None:
                rel = relative or handler in (_dated, _anchored) and not re.search(r"\d{4}", m[0])
                found.append((m.start(), m.end(), m, handler, rel))
    kept: list[tuple[int, int, re.Match[str], _Handler, bool]] = []
    starts: list[int] = []  # of kept (disjoint) matches, sorted; ends sorted with them
    ends: list[int] = []
    for c in sorted(found, key=lambda c: (c[0] - c[1], c[0])):
        i = bisect.bisect_left(starts, c[1])  # kept matches before i start before c ends
        if i and ends[i - 1] > c[0]:
            continue  # overlaps the last of them, the only one that could
        kept.append(c)
        starts.insert(i, c[0])
        ends.insert(i, c[1])
    kept.sort(key=lambda c: c[0])
    anchors = {c[2][0] for c in kept if c[3] is _dated and not c[4]}
    anchor = _parse_day(anchors.pop(), ref) if len(anchors) == 1 else None
    asks = asks_when(query)
    from_at = first_from(query)  # "from " anywhere before a range joins it (scan.FROM)
    spans: list[tuple[int, int, datetime, datetime, str, bool]] = []
    for s, e, m, handler, rel in kept:
        span = _resolve(handler, m, anchor if rel and anchor else ref)
        if span is None:
            continue
        start, end, kind = _dt(span[0]), _dt(span[1]), span[2]
        if (pm := before(_PART, query, s)) and kind in ("year", "season", "month"):
            start, end = _narrow(start, end, kind, pm["p1"] or pm["p2"])
            s, kind = pm.start(), "part"
        prev = spans[-1] if spans else None
        if prev and _BETWEEN.fullmatch(query, prev[1], s) and prev[2] < end and (
                (bs := joins_from(query, prev[0], from_at)) is not None):
            spans[-1] = (min(bs, prev[0]), e, prev[2], end, "relative",
                         prev[5] or rel and not anchor)
            continue  # between X and Y
        pm = before(_PREP, query, s)
        prep = " ".join(pm["prep"].lower().split()) if pm else ""
        if prep == "since":
            end, kind = max(end, _dt(ref + timedelta(days=1))), "since"
        elif prep == "after":
            start, end, kind = end, ALL_END, "since"
        elif prep in ("until", "till", "by", "as of", "before"):
            start, end, kind = ALL_START, start if prep == "before" else end, "until"
        elif _RELATIVE_WORDS.match(query, s, e):
            pm = None  # "participate in recently": the preposition belongs to the verb
        spans.append((pm.start() if pm else s, e, start, end, kind, rel and not anchor))
    if asks:  # "when did ...": a marker, in text order among the ranges
        s = query.find(text := asks[1].strip(" .?!;:"), asks[0])
        spans.append((s, s + len(text), ALL_START, ALL_END, "question", True))
        spans.sort(key=lambda sp: sp[0])
    return [(TimeRange(a, b, query[s:e], k, k == "question"), r) for s, e, a, b, k, r in spans]


def find_time_expressions(query: str, reference: TimeLike) -> list[TimeRange]:
    """Every time range in ``query`` in text order, with the "question" marker if it asks when."""
    return [r for r, _ in _find(query, reference)]


def parse_time_expression(query: str, reference: TimeLike) -> TimeRange | None:
    """The time range ``query`` names, else the "question" marker if it asks when, else None.

    A when-question that names a period gives that period ("When did she go camping in June?":
    June, ``asks_when`` False); the marker is only returned when no period is named. Of several
    ranges, the first one fixed by the query itself (a date, a month, a year, or a
    phrase counted from a date the query names) wins over phrases counted from ``reference``
    ("recently in May 2022" gives May 2022). ``reference`` (aware, or a date or ISO string: see
    :func:`hmem.time.arguments.parse_time`) is when the query is asked; relative phrases ("last
    week") count from its UTC day.
    """
    found = _find(query, reference)
    named = [(r, counted) for r, counted in found if r.kind != "question"]
    fixed = [r for r, counted in named if not counted]
    return fixed[0] if fixed else named[0][0] if named else found[0][0] if found else None
