"""Spoken and clock times wherever a time is accepted: one parser (hmem/time/arguments.py),
relative to the store's clock or an explicit reference time, ambiguous input refused with its
readings."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from hmem import Memory, errors
from hmem.time.arguments import parse_when

UTC = timezone.utc
NOW = datetime(2026, 12, 1, 10, 30, tzinfo=UTC)  # a Tuesday


@pytest.mark.parametrize(("text", "want"), [
    ("now", NOW),
    ("14:02", datetime(2026, 12, 1, 14, 2, tzinfo=UTC)),
    ("14:02:30", datetime(2026, 12, 1, 14, 2, 30, tzinfo=UTC)),
    ("2pm", datetime(2026, 12, 1, 14, tzinfo=UTC)),
    ("9:30 am", datetime(2026, 12, 1, 9, 30, tzinfo=UTC)),
    ("12am", datetime(2026, 12, 1, tzinfo=UTC)),
    ("12 p.m.", datetime(2026, 12, 1, 12, tzinfo=UTC)),
    ("14:02 UTC", datetime(2026, 12, 1, 14, 2, tzinfo=UTC)),
    ("today", datetime(2026, 12, 1, tzinfo=UTC)),
    ("Yesterday", datetime(2026, 11, 30, tzinfo=UTC)),
    ("tomorrow", datetime(2026, 12, 2, tzinfo=UTC)),
    ("  yesterday   14:02 ", datetime(2026, 11, 30, 14, 2, tzinfo=UTC)),
    ("yesterday at 2pm", datetime(2026, 11, 30, 14, tzinfo=UTC)),
    ("last tuesday 9am", datetime(2026, 11, 24, 9, tzinfo=UTC)),
    ("8 May 2023 at 2pm", datetime(2023, 5, 8, 14, tzinfo=UTC)),
    ("3 days ago", NOW - timedelta(days=3)),
    ("an hour ago", NOW - timedelta(hours=1)),
    ("90 seconds ago", NOW - timedelta(seconds=90)),
    ("two weeks ago", NOW - timedelta(weeks=2)),
    ("2 months ago", datetime(2026, 10, 1, 10, 30, tzinfo=UTC)),
    ("a year ago", datetime(2025, 12, 1, 10, 30, tzinfo=UTC)),
    ("last week", datetime(2026, 11, 23, tzinfo=UTC)),
    ("last month", datetime(2026, 11, 1, tzinfo=UTC)),
    ("March 2023", datetime(2023, 3, 1, tzinfo=UTC)),
    ("8 May 2023", datetime(2023, 5, 8, tzinfo=UTC)),
    ("summer 2022", datetime(2022, 6, 1, tzinfo=UTC)),
    ("13/04/2025", datetime(2025, 4, 13, tzinfo=UTC)),  # only one reading is a date
    ("2025-01-01", datetime(2025, 1, 1, tzinfo=UTC)),  # ISO as before
    ("2025-01-01T09:30:00+02:00", datetime(2025, 1, 1, 7, 30, tzinfo=UTC)),
])
def test_spoken_and_clock_times_read_against_the_reference(text, want):
    assert parse_when(text, "as_of", NOW) == want


@pytest.mark.parametrize(("text", "readings"), [
    ("03/04/2025", ["03 April 2025 (day/month)", "04 March 2025 (month/day)"]),
    ("tuesday", ["last Tuesday (2026-11-24)", "next Tuesday (2026-12-08)"]),
    ("march", ["March 2025", "March 2026"]),
])
def test_input_with_two_readings_is_refused_with_both(text, readings):
    with pytest.raises(errors.InvalidTime) as e:
        parse_when(text, "as_of", NOW)
    for reading in readings:
        assert reading in str(e.value)


@pytest.mark.parametrize("text", [
    "banana", "25:00", "13:61", "13pm", "7", "yesterday or today", "since yesterday",
    "last week 14:00",  # a clock time is read on a day, not on a week
    "2026-03-10T14:05", "2026-03-10 14:05",  # ISO without a zone: still refused
])
def test_what_is_no_time_is_a_typed_error_that_says_what_works(text):
    with pytest.raises(errors.InvalidTime, match="zone|ISO 8601"):
        parse_when(text, "as_of", NOW)


def test_the_clock_is_read_only_for_relative_input():
    calls = []

    def clock() -> datetime:
        calls.append(1)
        return NOW

    parse_when("2025-01-01", "as_of", clock)
    parse_when(datetime(2025, 1, 1, tzinfo=UTC), "as_of", clock)
    assert calls == []
    assert parse_when("an hour ago", "as_of", clock) == NOW - timedelta(hours=1)
    assert calls == [1]


class Clock:
    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


def test_the_library_takes_spoken_times_everywhere(tmp_path):
    clock = Clock(datetime(2026, 11, 30, 9, tzinfo=UTC))
    with Memory(tmp_path / "s", clock=clock, embedder=None) as m:
        old = m.remember("maya", "Maya lives in London", valid_from="March 2023")
        clock.now = datetime(2026, 11, 30, 15, tzinfo=UTC)
        new = m.revise(old, "Maya lives in Paris", valid_from="today 14:00")
        clock.now = datetime(2026, 12, 1, 10, 30, tzinfo=UTC)
        first, second = m.history("maya")
        assert first.versions[0].valid_from == datetime(2023, 3, 1, tzinfo=UTC)
        assert second.versions[0].valid_from == datetime(2026, 11, 30, 14, tzinfo=UTC)
        assert [b.id for b in m.as_of("yesterday 12:00") if not b.superseded] == [old]
        assert {b.id for b in m.as_of("now")} >= {new}
        changed = m.diff("yesterday 12:00")
        assert not changed.added and len(changed.revised) == 1
        assert [h.id for h in m.recall("where does maya live", as_of="yesterday 12:00")] == [old]
        assert [h.id for h in m.recall("maya", valid_at="yesterday 13:00")] == [old]
        assert [h.id for h in m.recall("maya", as_of="an hour ago",
                                       reference_time="2026-11-30T12:00:00Z")] == [old]
        with pytest.raises(errors.InvalidTime, match="last Tuesday"):
            m.as_of("tuesday")
        assert m.stats().facts == 2  # refused reads and writes changed nothing


def test_the_cli_takes_spoken_times_and_refuses_ambiguous_ones(tmp_path):
    store = str(tmp_path / "s")

    def hmem(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hmem", "--path", store, *args],
                              capture_output=True, text=True, timeout=120)

    assert hmem("remember", "maya", "Maya lives in London", "--valid-from",
                "yesterday 14:02").returncode == 0
    done = hmem("diff", "1 hour ago", "--json")
    assert done.returncode == 0, done.stderr
    assert [a["text"] for a in json.loads(done.stdout)["added"]] == ["Maya lives in London"]
    shown = hmem("history", "maya", "--json")
    valid_from = json.loads(shown.stdout)[0]["versions"][0]["valid_from"]
    yesterday = (datetime.now(UTC) - timedelta(days=1)).date()
    assert valid_from.startswith(f"{yesterday}T14:02:00")
    refused = hmem("beliefs", "--as-of", "03/04/2025")
    assert refused.returncode != 0
    assert "day/month" in refused.stderr and "month/day" in refused.stderr


def test_a_transaction_time_is_never_in_the_future_and_a_clock_time_is_its_last_one(tmp_path):
    """At 02:50, as_of="2pm" is yesterday 14:00 (what was believed then), not a moment nobody
    has seen; "tomorrow" or a later ISO time is refused, saying so. Valid times may be ahead."""
    clock = Clock(datetime(2026, 11, 30, 9, tzinfo=UTC))
    with Memory(tmp_path / "s", clock=clock, embedder=None) as m:
        london = m.remember("maya", "Maya lives in London")
        clock.now = datetime(2026, 11, 30, 15, tzinfo=UTC)
        m.revise(london, "Maya lives in Paris")
        clock.now = datetime(2026, 12, 1, 2, 50, tzinfo=UTC)
        assert parse_when("2pm", "as_of", clock, past=True) == datetime(2026, 11, 30, 14,
                                                                       tzinfo=UTC)
        assert parse_when("2pm", "valid_at", clock) == datetime(2026, 12, 1, 14, tzinfo=UTC)
        assert [b.id for b in m.beliefs("2pm")] == [london]  # yesterday 14:00
        assert [h.id for h in m.recall("maya", as_of="2pm")] == [london]
        for spoken in ("tomorrow", "next week", "in 2 days"):
            for read in (lambda t: m.beliefs(t), lambda t: m.diff(t),
                         lambda t: m.diff(0, t), lambda t: m.recall("maya", as_of=t),
                         lambda t: m.recalls(until=t)):
                try:
                    read(spoken)
                except errors.InvalidTime as e:
                    if "is not a time hmem can read" in str(e):
                        continue  # not a phrase hmem reads at all ("in 2 days")
                    assert "is in the future" in str(e), (spoken, e)
                else:
                    raise AssertionError(f"{spoken!r} was taken as a transaction time")
        assert m.beliefs("now") and m.beliefs("2026-12-01T02:50:00Z")  # now is not the future
        # an exact time after now is taken as asked (the end of a period): the latest state
        for exact in ("2026-12-01T03:00:00Z", datetime(2027, 1, 1, tzinfo=UTC)):
            assert [b.id for b in m.beliefs(exact)] == [b.id for b in m.beliefs()]
        assert m.recall("maya", valid_at="tomorrow").hits  # valid times may be in the future
        later = m.remember("tom", "Tom starts in January", valid_from="2027-01-01")
        assert m.get(later).versions[0].valid_from.year == 2027


def test_a_clock_set_back_still_reads_every_logged_time(tmp_path):
    """A transaction time up to the last event is no future, even when the clock is behind it."""
    clock = Clock(datetime(2026, 11, 30, 9, tzinfo=UTC))
    with Memory(tmp_path / "s", clock=clock, embedder=None) as m:
        fid = m.remember("maya", "Maya lives in London")
        clock.now = datetime(2026, 11, 29, 9, tzinfo=UTC)
        assert [b.id for b in m.beliefs(m.tx_time(fid))] == [fid]


def test_beliefs_before_the_first_event_say_so_in_the_cli(tmp_path):
    store = str(tmp_path / "s")

    def hmem(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hmem", "--path", store, *args],
                              capture_output=True, text=True, timeout=120)

    assert hmem("remember", "maya", "Maya lives in London").returncode == 0
    shown = hmem("beliefs", "--as-of", "2020-01-01")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("no beliefs: as_of 2020-01-01 is before the first event of "
                                   "namespace 'default' (")
    as_json = hmem("beliefs", "--as-of", "0", "--json")
    assert json.loads(as_json.stdout) == [] and "before the first event" in as_json.stderr
    with Memory(store, read_only=True) as m:
        assert m.beliefs("2020-01-01") == []  # the library: nothing was believed then
    assert "no beliefs:" not in hmem("beliefs", "--as-of", "now").stdout
