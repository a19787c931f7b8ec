"""The time finder and the time arguments do bounded work whatever they are given (issue:
"bounded work from one input"): a 30 KB recall query took 12 s in the finder, its work growing
with the square of the query's length, and a 40 KB ``as_of`` pinned the MCP server for 23 s.

Work is counted, never timed: the Python lines the finder runs (``sys.settrace``), which grow
linearly with the query, and the regex that found "when" (quadratic on runs of punctuation and
spaces) is held equal to its linear replacement."""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import hmem.time
from hmem import Memory
from hmem.errors import InvalidInput, InvalidTime
from hmem.time.arguments import parse_when
from hmem.time.expressions import find_time_expressions, parse_time_expression
from hmem.time.iso import MAX_TIME_CHARS, parse_time
from hmem.time.scan import asks_when
from projections.checks import MAX_TEXT_CHARS
from tests.conftest import examples

REF = datetime(2024, 6, 15, 12, 0, tzinfo=timezone.utc)
TIME_DIR = os.path.dirname(hmem.time.__file__)
LINES_PER_CHAR, LINES_FIXED = 40, 10_000  # measured: at most ~19 lines a character


def lines_run(fn: Callable[[], Any]) -> int:
    """How many Python lines (calls and returns too) of hmem/time ``fn`` runs."""
    count = 0

    def trace(frame: Any, event: str, arg: Any) -> Any:
        nonlocal count
        if frame.f_code.co_filename.startswith(TIME_DIR):
            count += 1
            return trace
        return None

    sys.settrace(trace)
    try:
        fn()
    finally:
        sys.settrace(None)
    return count


# phrases that each match (or nearly match) one of the finder's patterns, repeated
FAMILIES = ["in May ", "8 May ", "May 8 ", "yesterday ", "last week and ", "in 2020 ",
            "3 days ago ", "between 2020 and 2021 ", "from 2020 to ", "the beginning of 2020 ",
            ". ", ". when ", "what year ", "her last fall ", "on Tuesday "]


@pytest.mark.parametrize("unit", FAMILIES)
def test_the_finder_does_linear_work_on_a_long_query(unit: str) -> None:
    """Doubling a query of repeated time phrases doubles the finder's work (it was four
    times: each phrase read the whole query before it again)."""
    small, large = ((unit * 4000)[:n] for n in (5_000, 10_000))
    a = lines_run(lambda: find_time_expressions(small, REF))
    b = lines_run(lambda: find_time_expressions(large, REF))
    assert b <= LINES_PER_CHAR * len(large) + LINES_FIXED
    assert b <= 2.2 * a + LINES_FIXED, (a, b)


_FRAGMENTS = st.sampled_from([
    "when", "When", "what year", "how long ago", "since when", "in", "on", "from", "between",
    "and", "to", "May", "may", "March", "8", "8th", "2023", "2019-05", "2023-05-08", "of", "the",
    "last", "this", "next", "past", "week", "month", "year", "summer", "her", "early", "the end of",
    "yesterday", "3", "a few", "days", "ago", "recently", "before", "after", "until", "as of",
    "since", "Tuesday", ".", ",", "?", ";", "-", "\"", "(", "maya", "went", "steps", " ", "\n",
    "é", "İ", "fromage", "somewhen"])
_QUERIES = st.lists(st.tuples(_FRAGMENTS, st.sampled_from([" ", "", ", ", ". ", "   "])),
                    max_size=60).map(lambda parts: "".join(a + b for a, b in parts))


@settings(max_examples=examples(dev=50, ci=1000), deadline=None)
@given(_QUERIES, st.integers(min_value=1, max_value=400))
def test_for_any_query_within_the_limit_the_finder_does_work_linear_in_it(
    query: str, repeat: int
) -> None:
    query = (query * repeat)[:MAX_TEXT_CHARS] or "x"
    ran = lines_run(lambda: parse_time_expression(query, REF))
    assert ran <= LINES_PER_CHAR * len(query) + LINES_FIXED


_ASKS_WHEN = re.compile(  # the regex the finder used: quadratic on ". . . . " and long spaces
    r"(?:^|[.?!;:]\s+)\W*when\b|\b(?:what|which)\s+(?:year|month|date|day|week|weekend|time|"
    r"season)\b|\bhow\s+(?:long|many\s+\w+)\s+ago\b|\bsince\s+when\b", re.I)


@settings(max_examples=examples(dev=200, ci=5000), deadline=None)
@given(st.lists(st.sampled_from(["when", "When", "somewhen", "what", "year", "which", "day",
                                 "how", "long", "many", "ago", "since", ".", "?", "!", ";", ":",
                                 " ", "  ", "\n", "\"", "'", "-", "x", "_", "é", "1"]),
                max_size=30))
def test_asks_when_finds_what_the_regex_found(parts: list[str]) -> None:
    query = "".join(parts)
    m = _ASKS_WHEN.search(query)
    assert asks_when(query) == (None if m is None else (m.start(), m[0]))


def test_a_question_after_a_long_run_of_punctuation_is_still_found() -> None:
    query = ". " * 20_000 + "when did maya move?"
    ran = lines_run(lambda: find_time_expressions(query, REF))
    assert ran <= LINES_PER_CHAR * len(query) + LINES_FIXED
    found = parse_time_expression(query, REF)
    assert found is not None and found.asks_when and found.text == "when"


# ---------------------------------------------------------------------- time arguments


@pytest.mark.parametrize("value", ["9" * 40_000, "2025-01-01" + " " * MAX_TIME_CHARS,
                                   "3 days ago" * 20, "x" * (MAX_TIME_CHARS + 1)])
def test_a_time_argument_longer_than_the_limit_is_refused_before_it_is_read(value: str) -> None:
    for parse in (lambda: parse_when(value, "as_of", REF), lambda: parse_time(value, "as_of")):
        with pytest.raises(InvalidTime, match=f"the limit for a time is {MAX_TIME_CHARS}"):
            assert lines_run(parse) < 100  # refused before any reading


def test_a_time_argument_at_the_limit_is_read() -> None:
    value = "3 days ago".ljust(MAX_TIME_CHARS)
    assert parse_when(value, "as_of", REF) == datetime(2024, 6, 12, 12, 0, tzinfo=timezone.utc)


HUGE = [
    "9" * 5000 + " days ago", "9" * 90 + " days ago", "99999999999 days ago",
    "99999999999 weeks ago", "99999999999 months ago", "99999999999 years ago",
    "99999999999 hours ago", "99999999999 minutes ago", "99999999999 seconds ago",
    "1000000 days ago", "10000 years ago", "120000 months ago", "in 99999999999 years",
    "-5 days ago", "-99999999999 days ago", "99999-01-01", "+99999-01-01", "10000-01-01",
    "0000-01-01", "-0001-01-01", "9999-12-31T23:00:00-05:00", "2023-" + "9" * 80,
    "8 May " + "9" * 80, "yesterday " + "9" * 80 + ":00", "9" * 80 + " am",
]


@pytest.mark.parametrize("value", HUGE)
def test_a_huge_number_in_a_time_argument_is_a_typed_error(value: str) -> None:
    """Counts in every unit, ISO years out of range, negatives: InvalidTime (an InvalidInput),
    never a raw ValueError or OverflowError (int too large, timedelta overflow)."""
    with pytest.raises(InvalidTime):
        parse_when(value, "as_of", REF)


def test_a_count_back_beyond_year_1_says_so() -> None:
    with pytest.raises(InvalidTime, match="outside the supported years 1-9999"):
        parse_when("99999999999 days ago", "valid_from", REF)


@pytest.mark.parametrize("value", ["9" * 5000 + " days ago", "9" * 40_000])
def test_every_time_argument_of_the_library_refuses_them(tmp_path: Any, value: str) -> None:
    with Memory(tmp_path / "s", embedder=None) as m:
        fid = m.remember("maya", "Maya lives in London")
        calls: list[Callable[[], Any]] = [
            lambda: m.remember("maya", "Maya lives in Paris", valid_from=value),
            lambda: m.remember("maya", "Maya lives in Paris", valid_to=value),
            lambda: m.revise(fid, "Maya lives in Rome", valid_from=value),
            lambda: m.recall("maya", as_of=value),
            lambda: m.recall("maya", valid_at=value),
            lambda: m.recall("maya", reference_time=value),
            lambda: m.as_of(value),
            lambda: m.beliefs(valid_at=value),
            lambda: m.diff(value),
            lambda: m.diff(1, value),
            lambda: m.recalls(since=value),
            lambda: m.events(since=value),
        ]
        for call in calls:
            with pytest.raises(InvalidInput):
                call()
        assert m.last_seq == int(fid)  # nothing written
