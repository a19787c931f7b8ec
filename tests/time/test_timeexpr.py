"""Table-driven tests of the query time-expression parser (hmem.time.expressions)."""

from __future__ import annotations

from datetime import datetime, timezone

import msgspec
import pytest

from hmem.errors import InvalidTime
from hmem.time.expressions import (
    ALL_END,
    ALL_START,
    TimeRange,
    find_time_expressions,
    parse_time_expression,
)

UTC = timezone.utc
REF = datetime(2023, 8, 16, 12, 0, tzinfo=UTC)  # a Wednesday, in the middle of summer
JAN = datetime(2024, 1, 3, 9, 0, tzinfo=UTC)  # a Wednesday, early January
LEAP = datetime(2024, 2, 29, 18, 0, tzinfo=UTC)  # a Thursday, Feb 29 of a leap year
SUN = datetime(2023, 5, 7, 23, 30, tzinfo=UTC)  # Sunday night...
MON = datetime(2023, 5, 8, 0, 30, tzinfo=UTC)  # ...and the Monday an hour later


def _t(text: str) -> datetime:
    return {"ALL_START": ALL_START, "ALL_END": ALL_END}.get(text) or datetime.fromisoformat(
        text).replace(tzinfo=UTC)


CASES = [
    # days
    ("What did I eat yesterday?", REF, "2023-08-15", "2023-08-16", "day"),
    ("what is on today", REF, "2023-08-16", "2023-08-17", "day"),
    ("Plans for TOMORROW?", REF, "2023-08-17", "2023-08-18", "day"),
    ("who called the day before yesterday", REF, "2023-08-14", "2023-08-15", "day"),
    ("Where did we go last night?", REF, "2023-08-15", "2023-08-16T06:00", "day"),
    # calendar weeks (ISO, Monday first), months, years
    ("what happened this week", REF, "2023-08-14", "2023-08-21", "week"),
    ("What did Joanna find last week?", REF, "2023-08-07", "2023-08-14", "week"),
    ("meetings next week", REF, "2023-08-21", "2023-08-28", "week"),
    ("the week before last", REF, "2023-07-31", "2023-08-07", "week"),
    ("What event did John volunteer at last weekend?", REF, "2023-08-12", "2023-08-14", "week"),
    ("what did I buy last month", REF, "2023-07-01", "2023-08-01", "month"),
    ("goals this month", REF, "2023-08-01", "2023-09-01", "month"),
    ("What city for the team trip next month?", REF, "2023-09-01", "2023-10-01", "month"),
    ("books read this year", REF, "2023-01-01", "2024-01-01", "year"),
    ("Where did John explore on a road trip last year?", REF, "2022-01-01", "2023-01-01", "year"),
    ("next year", REF, "2024-01-01", "2025-01-01", "year"),
    # seasons: in August, last summer is last year's
    ("What did we do last summer?", REF, "2022-06-01", "2022-09-01", "season"),
    ("this summer", REF, "2023-06-01", "2023-09-01", "season"),
    ("last winter", REF, "2022-12-01", "2023-03-01", "season"),
    ("last spring", REF, "2023-03-01", "2023-06-01", "season"),
    ("Last Fall", REF, "2022-09-01", "2022-12-01", "season"),
    ("last autumn", REF, "2022-09-01", "2022-12-01", "season"),
    ("next winter", REF, "2023-12-01", "2024-03-01", "season"),
    ("What state did Joanna visit in summer 2021?", REF, "2021-06-01", "2021-09-01", "season"),
    ("in the fall of 2022", REF, "2022-09-01", "2022-12-01", "season"),
    ("winter 2023", REF, "2022-12-01", "2023-03-01", "season"),
    # months
    ("What happened in March 2023?", REF, "2023-03-01", "2023-04-01", "month"),
    ("setback in October, 2023", REF, "2023-10-01", "2023-11-01", "month"),
    ("2023-05", REF, "2023-05-01", "2023-06-01", "month"),
    ("Which spot did Joanna visit in May?", REF, "2023-05-01", "2023-06-01", "month"),
    ("What did we do in September", REF, "2022-09-01", "2022-10-01", "month"),
    ("in august", REF, "2023-08-01", "2023-09-01", "month"),
    ("last March", REF, "2023-03-01", "2023-04-01", "month"),
    ("next March", REF, "2024-03-01", "2024-04-01", "month"),
    ("last August", REF, "2022-08-01", "2022-09-01", "month"),
    ("31 February 2023", REF, "2023-02-01", "2023-03-01", "month"),  # impossible day
    # days by date
    ("What did Caroline do on 8 May 2023?", REF, "2023-05-08", "2023-05-09", "day"),
    ("dinner on May 3, 2023", REF, "2023-05-03", "2023-05-04", "day"),
    ("on 1 February, 2023", REF, "2023-02-01", "2023-02-02", "day"),
    ("book finished on 8th December, 2023", REF, "2023-12-08", "2023-12-09", "day"),
    ("picture shared on December 1,2023", REF, "2023-12-01", "2023-12-02", "day"),
    ("on Monday, 8 May 2023", REF, "2023-05-08", "2023-05-09", "day"),
    ("on 8 May", REF, "2023-05-08", "2023-05-09", "day"),
    ("the 8th of May", REF, "2023-05-08", "2023-05-09", "day"),
    ("on September 3", REF, "2022-09-03", "2022-09-04", "day"),
    ("what happened June 5", REF, "2023-06-05", "2023-06-06", "day"),
    ("2023-05-08", REF, "2023-05-08", "2023-05-09", "day"),
    ("on 29 February", REF, "2020-02-29", "2020-03-01", "day"),
    # years and parts
    ("How many times has Melanie gone to the beach in 2023?", REF, "2023-01-01", "2024-01-01",
     "year"),
    ("in the year 2022", REF, "2022-01-01", "2023-01-01", "year"),
    ("early 2023", REF, "2023-01-01", "2023-05-01", "part"),
    ("in mid-2023", REF, "2023-05-01", "2023-09-01", "part"),
    ("late 2023", REF, "2023-09-01", "2024-01-01", "part"),
    ("the first half of September 2022", REF, "2022-09-01", "2022-09-16", "part"),
    ("in the beginning of November 2022", REF, "2022-11-01", "2022-11-11", "part"),
    ("late summer 2022", REF, "2022-08-01", "2022-09-01", "part"),
    # weekdays: the latest before the reference day, never that day
    ("What did he cook last Tuesday?", REF, "2023-08-15", "2023-08-16", "day"),
    ("on Tuesday", REF, "2023-08-15", "2023-08-16", "day"),
    ("last Wednesday", REF, "2023-08-09", "2023-08-10", "day"),
    ("this past Friday", REF, "2023-08-11", "2023-08-12", "day"),
    ("this Friday", REF, "2023-08-18", "2023-08-19", "day"),
    ("next Tuesday", REF, "2023-08-22", "2023-08-30", "relative"),
    # ago: d - N units, widened by half a unit each side
    ("Where did Caroline move from two years ago?", REF, "2021-02-15", "2022-02-15", "relative"),
    ("2 years ago", REF, "2021-02-15", "2022-02-15", "relative"),
    ("a year ago", REF, "2022-02-15", "2023-02-15", "relative"),
    ("three weeks ago", REF, "2023-07-23", "2023-07-30", "relative"),
    ("a few days ago", REF, "2023-08-10", "2023-08-16", "relative"),
    ("5 days ago", REF, "2023-08-10", "2023-08-13", "relative"),
    ("two months ago", REF, "2023-06-01", "2023-07-02", "relative"),
    ("a hike a few years back", REF, "2018-02-15", "2022-02-15", "relative"),
    # rolling windows and recently
    ("in the past week", REF, "2023-08-09", "2023-08-17", "relative"),
    ("over the last 3 months", REF, "2023-05-16", "2023-08-17", "relative"),
    ("in the last 2 years", REF, "2021-08-16", "2023-08-17", "relative"),
    ("what did I eat these past 3 days", REF, "2023-08-13", "2023-08-17", "relative"),
    ("these past few weeks", REF, "2023-07-12", "2023-08-17", "relative"),
    ("What did Maria start recently?", REF, "2023-07-17", "2023-08-17", "relative"),
    # anchored on an explicit date (LoCoMo phrasing)
    ("the week before August 3, 2023", REF, "2023-07-24", "2023-08-03", "relative"),
    ("two weeks before August 11, 2023", REF, "2023-07-25", "2023-08-01", "relative"),
    ("the Sunday before October 25, 2022", REF, "2022-10-23", "2022-10-24", "day"),
    ("last weekend before April 10, 2023", REF, "2023-04-08", "2023-04-10", "week"),
    ("the day before 8 May 2023", REF, "2023-05-07", "2023-05-08", "day"),
    ("the week of 23 August 2023", REF, "2023-08-21", "2023-08-28", "week"),
    ("What did Joanna finish last Friday on 23 January, 2022?", REF, "2022-01-21", "2022-01-22",
     "day"),
    ("Tim's issue last week, as mentioned on November 6, 2023?", REF, "2023-10-30", "2023-11-06",
     "week"),
    ("Where was John between August 11 and August 15 2023?", REF, "2023-08-11", "2023-08-16",
     "relative"),
    ("from 2020 to 2022", REF, "2020-01-01", "2023-01-01", "relative"),
    ("from May 2023 to July 2023", REF, "2023-05-01", "2023-08-01", "relative"),
    ("between August and November 2023", REF, "2023-08-01", "2023-12-01", "relative"),
    ("the Saturday after October 28, 2023", REF, "2023-11-04", "2023-11-05", "day"),
    ("the weekend after Wednesday, 1 November 2023", REF, "2023-11-04", "2023-11-06", "week"),
    ("two days after 8 May 2023", REF, "2023-05-09", "2023-05-12", "relative"),
    # a range fixed by the query wins over one counted from the reference
    ("the cake she made recently in May 2022", REF, "2022-05-01", "2022-06-01", "month"),
    ("What did Maria start recently, as mentioned on 3 June, 2023?", REF, "2023-05-04",
     "2023-06-04", "relative"),
    # open ranges
    ("since March 2023", REF, "2023-03-01", "2023-08-17", "since"),
    ("since last week", REF, "2023-08-07", "2023-08-17", "since"),
    ("after 2020", REF, "2021-01-01", "ALL_END", "since"),
    ("How many pets did Andrew have, as of September 2023?", REF, "ALL_START", "2023-10-01",
     "until"),
    ("before 2020", REF, "ALL_START", "2020-01-01", "until"),
    ("until yesterday", REF, "ALL_START", "2023-08-16", "until"),
    # early January: month and year arithmetic across the boundary
    ("last month", JAN, "2023-12-01", "2024-01-01", "month"),
    ("next month", JAN, "2024-02-01", "2024-03-01", "month"),
    ("last week", JAN, "2023-12-25", "2024-01-01", "week"),
    ("last year", JAN, "2023-01-01", "2024-01-01", "year"),
    ("last winter", JAN, "2022-12-01", "2023-03-01", "season"),
    ("this winter", JAN, "2023-12-01", "2024-03-01", "season"),
    ("in December", JAN, "2023-12-01", "2024-01-01", "month"),
    ("a month ago", JAN, "2023-11-18", "2023-12-19", "relative"),
    ("3 days ago", JAN, "2023-12-30", "2024-01-02", "relative"),
    ("last Sunday", JAN, "2023-12-31", "2024-01-01", "day"),
    ("8 May", JAN, "2023-05-08", "2023-05-09", "day"),
    # Feb 29 of a leap year
    ("yesterday", LEAP, "2024-02-28", "2024-02-29", "day"),
    ("tomorrow", LEAP, "2024-03-01", "2024-03-02", "day"),
    ("this month", LEAP, "2024-02-01", "2024-03-01", "month"),
    ("on Feb 29", LEAP, "2024-02-29", "2024-03-01", "day"),
    ("a year ago", LEAP, "2022-08-30", "2023-08-30", "relative"),  # Feb 28 2023 +- 182 days
    ("a month ago", LEAP, "2024-01-14", "2024-02-14", "relative"),
    ("late February", LEAP, "2024-02-20", "2024-03-01", "part"),
    ("the last year", LEAP, "2023-02-28", "2024-03-01", "relative"),
    # Sunday / Monday boundary
    ("this week", SUN, "2023-05-01", "2023-05-08", "week"),
    ("this week", MON, "2023-05-08", "2023-05-15", "week"),
    ("last week", SUN, "2023-04-24", "2023-05-01", "week"),
    ("last week", MON, "2023-05-01", "2023-05-08", "week"),
    ("last weekend", SUN, "2023-04-29", "2023-05-01", "week"),
    ("this weekend", SUN, "2023-05-06", "2023-05-08", "week"),
    ("last weekend", MON, "2023-05-06", "2023-05-08", "week"),
    ("last Sunday", SUN, "2023-04-30", "2023-05-01", "day"),
    ("last Sunday", MON, "2023-05-07", "2023-05-08", "day"),
    ("last night", MON, "2023-05-07", "2023-05-08T06:00", "day"),
]


@pytest.mark.parametrize("query,ref,start,end,kind", CASES)
def test_time_expressions(query, ref, start, end, kind):
    found = parse_time_expression(query, ref)
    assert found is not None, query
    assert (found.start, found.end, found.kind) == (_t(start), _t(end), kind)
    assert found.text.lower() in query.lower()
    assert found.start.tzinfo is UTC and found.end.tzinfo is UTC


NEGATIVES = [
    "May I ask what you like to read?",
    "You may want to march in the parade",
    "this may take a while",
    "Did they march to the city hall?",
    "May 2 people join the class?",
    "I met Jan 2 times",
    "those 2 may come too",
    "Did she fall down the stairs?",
    "Her last fall was a bad one",
    "the last summer we spent together",
    "I have 2 cats",
    "We walked 2000 steps in 2000 seconds",
    "He scored 1500 points in 1999 games",
    "Is it 2023?",
    "the second time we met",
    "What is Caroline's favorite book?",
    "What are Melanie's plans for the summer?",
    "He works on Tuesdays",
    "the last year of his life",
    "How long has Caroline had her current group of friends?",
    "Who did she spend the day with?",
    "What happened in 1066?",
    "Meet me at 5/8/2023",
    "",
]


@pytest.mark.parametrize("query", NEGATIVES)
def test_no_time_expression(query):
    assert parse_time_expression(query, REF) is None
    assert find_time_expressions(query, REF) == []


@pytest.mark.parametrize(
    "query",
    [
        "When did Caroline go to the LGBTQ support group?",
        "when Jon has lost his job as a banker?",
        "What year did John start surfing?",
        "In which month's game did John achieve a career-high score?",
        "Which week did Tim visit the UK?",
        "How long ago was Caroline's 18th birthday?",
        "Thanks. When was that?",
    ],
)
def test_when_questions_span_all_time(query):
    found = parse_time_expression(query, REF)
    assert found == TimeRange(ALL_START, ALL_END, found.text, "question", asks_when=True)
    assert found.strip(query) == query


def test_when_question_naming_a_period_gives_the_period():
    query = "When did Melanie go camping in June?"
    found = parse_time_expression(query, REF)
    assert (found.start, found.end, found.kind) == (_t("2023-06-01"), _t("2023-07-01"), "month")
    assert not found.asks_when
    marker, june = find_time_expressions(query, REF)
    assert (marker.kind, marker.text, marker.asks_when, june) == ("question", "When", True, found)


def test_find_returns_every_expression_in_order():
    query = "what happened in mid-2023 and late 2021, and yesterday?"
    found = find_time_expressions(query, REF)
    assert [(r.text, r.kind) for r in found] == [
        ("in mid-2023", "part"), ("late 2021", "part"), ("yesterday", "day")]
    assert parse_time_expression(query, REF) == found[0]


@pytest.mark.parametrize(
    "query,text,stripped",
    [
        ("What did we do last summer?", "last summer", "What did we do?"),
        ("What did Caroline do on 8 May 2023?", "on 8 May 2023", "What did Caroline do?"),
        ("Tim's issue last week, as mentioned", "last week", "Tim's issue, as mentioned"),
        ("Recently, what did Maria start?", "Recently", "what did Maria start?"),
        ("What did Jolene participate in recently?", "recently", "What did Jolene participate in?"),
        ("Where did Caroline move from 4 years ago?", "4 years ago",
         "Where did Caroline move from?"),
        ("What did he do in early March 2023?", "in early March 2023", "What did he do?"),
    ],
)
def test_strip_removes_the_phrase(query, text, stripped):
    found = parse_time_expression(query, REF)
    assert found.text == text
    assert found.strip(query) == stripped


def test_range_is_half_open_and_frozen():
    found = parse_time_expression("yesterday", REF)
    assert found.contains(_t("2023-08-15")) and found.contains(_t("2023-08-15T23:59"))
    assert not found.contains(_t("2023-08-16"))
    with pytest.raises(AttributeError):
        found.kind = "week"  # type: ignore[misc]
    assert msgspec.json.decode(msgspec.json.encode(found), type=TimeRange) == found


def test_reference_must_be_aware():
    with pytest.raises(InvalidTime):
        parse_time_expression("yesterday", datetime(2023, 8, 16))
    other_zone = datetime(2023, 8, 16, 1, 0, tzinfo=timezone.utc).astimezone(
        timezone(__import__("datetime").timedelta(hours=5)))
    assert parse_time_expression("today", other_zone).start == _t("2023-08-16")
    assert parse_time_expression("today", "2023-08-16").start == _t("2023-08-16")
