"""The README's semantics as fixed scenarios with expectations written out by hand.

The stateful test (tests/stateful/test_stateful.py) holds the store to a model over random
histories; these few histories pin the documented answers directly, in well under a second, so a
mutation of the fold fails here first and with a message about the README's own example. Bounds: a
row is believed at seq S when ``tx_from_seq <= S < tx_to_seq`` and valid at V when ``valid_from <= V
< valid_to``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from hmem import Memory, errors
from hmem.views import Version

US = timedelta(microseconds=1)
T1 = datetime(2026, 1, 1, tzinfo=timezone.utc)
T2 = T1 + timedelta(days=1)
T3 = T1 + timedelta(days=2)


def utc(*args: int) -> datetime:
    return datetime(*args, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = T1

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def store(tmp_path):
    clock = Clock()
    with Memory(tmp_path / "store", clock=clock, embedder=None) as m:
        yield m, clock


def believed(m: Memory, seq: int, valid_at: datetime | None = None) -> list[tuple]:
    return [(b.id, b.text, b.valid_from, b.valid_to, b.superseded, b.recorded_at)
            for b in m.as_of(seq, valid_at=valid_at)]


def recalled(m: Memory, **kw) -> dict[int, tuple]:
    hits = m.recall("maya tom", limit=100, max_tokens=10**9, **kw).hits
    return {h.id: (h.valid_from, h.valid_to, h.superseded_by) for h in hits}


def raises_exactly(cls: type, call) -> None:
    with pytest.raises(errors.HmemError) as info:
        call()
    assert type(info.value) is cls, f"{type(info.value).__name__}: {info.value}"


def test_world_change_keeps_the_old_fact_for_its_earlier_period(store):
    m, clock = store
    a = m.remember("maya", "Maya lives in London", valid_from="2025-01-01")
    clock.now = T2
    b = m.revise(a, "Maya lives in Paris", valid_from="2026-03-01", reason="moved")
    london, paris = m.get(a), m.get(b)
    assert london.versions == (
        Version(utc(2025, 1, 1), None, T1, T2, 1, 2),  # believed until the revise...
        Version(utc(2025, 1, 1), utc(2026, 3, 1), T2, None, 2, None),  # ... then only until March
    )
    assert (london.superseded_by, london.superseded_at) == (b, T2)
    assert paris.versions == (Version(utc(2026, 3, 1), None, T2, None, 2, None),)
    assert (paris.text, paris.subject, paris.supersedes, paris.revision, paris.reason) == (
        "Maya lives in Paris", "maya", a, "world", "moved")
    assert paris.recorded_at == T2 and paris.entities == ("maya", "paris")
    # as_of before the revise answers exactly as it did then
    assert believed(m, 1) == [(a, "Maya lives in London", utc(2025, 1, 1), None, False, T1)]
    assert believed(m, 2) == [
        (a, "Maya lives in London", utc(2025, 1, 1), utc(2026, 3, 1), True, T2),
        (b, "Maya lives in Paris", utc(2026, 3, 1), None, False, T2),
    ]
    assert [x[0] for x in believed(m, 2, utc(2026, 3, 1) - US)] == [a]
    assert [x[0] for x in believed(m, 2, utc(2026, 3, 1))] == [b]
    assert believed(m, 2, utc(2025, 1, 1) - US) == []
    # recall: current beliefs are heads; valid_at finds the replaced version, marked as replaced
    assert recalled(m, as_of=1) == {a: (utc(2025, 1, 1), None, None)}
    assert recalled(m, as_of=2) == {b: (utc(2026, 3, 1), None, None)}
    assert recalled(m) == recalled(m, as_of=2)
    assert recalled(m, as_of=2, valid_at="2025-06-01") == {a: (utc(2025, 1, 1), utc(2026, 3, 1), b)}
    assert recalled(m, as_of=1, valid_at="2025-06-01") == {a: (utc(2025, 1, 1), None, None)}
    (hit,) = m.recall("paris", limit=1).hits
    assert [(p.id, p.valid_from, p.valid_to, p.revision) for p in hit.history] == [
        (a, utc(2025, 1, 1), utc(2026, 3, 1), "world")]


def test_world_change_after_the_old_fact_ended_keeps_its_end(store):
    m, clock = store
    a = m.remember("tom", "Tom works at Acme", valid_from="2024-01-01", valid_to="2025-01-01")
    clock.now = T2
    b = m.revise(a, "Tom works at Initech", valid_from="2026-01-01")
    assert m.get(a).versions[-1] == Version(utc(2024, 1, 1), utc(2025, 1, 1), T2, None, 2, None)
    assert [x[0] for x in believed(m, 2, utc(2025, 1, 1) - US)] == [a]
    assert believed(m, 2, utc(2025, 6, 1)) == []  # true of neither: a gap
    assert recalled(m, as_of=2, valid_at=utc(2025, 6, 1)) == {}
    assert recalled(m, as_of=2, valid_at=utc(2026, 1, 1)) == {b: (utc(2026, 1, 1), None, None)}


def test_correction_replaces_the_old_fact_for_its_whole_period(store):
    m, clock = store
    a = m.remember("maya", "Maya was born in Leeds", valid_from="1990-01-01")
    clock.now = T2
    b = m.revise(a, "Maya was born in York")
    assert m.get(a).versions == (Version(utc(1990, 1, 1), None, T1, T2, 1, 2),)  # no kept row
    york = m.get(b)
    assert york.versions == (Version(utc(1990, 1, 1), None, T2, None, 2, None),)
    assert (york.revision, york.reason, york.supersedes) == ("correction", None, a)
    assert [x[0] for x in believed(m, 2, utc(1995, 1, 1))] == [b]  # Leeds: believed no more
    assert [x[0] for x in believed(m, 1, utc(1995, 1, 1))] == [a]
    assert recalled(m, as_of=2, valid_at=utc(1995, 1, 1)) == {b: (utc(1990, 1, 1), None, None)}
    # a correction may also say when the corrected statement stopped being true
    clock.now = T3
    c = m.revise(b, "Maya was born in York, lived there until 2008", valid_to="2008-01-01")
    assert m.get(c).versions == (Version(utc(1990, 1, 1), utc(2008, 1, 1), T3, None, 3, None),)
    assert m.get(b).versions == (Version(utc(1990, 1, 1), None, T2, T3, 2, 3),)


def test_a_correction_without_valid_to_keeps_the_old_end(store):
    m, _ = store
    a = m.remember("tom", "Tom works at Acme", valid_from="2024-01-01", valid_to="2025-01-01")
    b = m.revise(a, "Tom works at Initech")
    assert m.get(b).versions == (Version(utc(2024, 1, 1), utc(2025, 1, 1), T1, None, 2, None),)


def test_forget_closes_the_open_row_and_keeps_history(store):
    m, clock = store
    a = m.remember("maya", "Maya likes tea")
    clock.now = T2
    seq = m.forget(a, reason="user asked")
    f = m.get(a)
    assert seq == 2 and f.versions == (Version(T1, None, T1, T2, 1, 2),)  # valid from tx time
    assert (f.forgotten_at, f.forget_reason, f.current) == (T2, "user asked", False)
    assert [x[0] for x in believed(m, 1)] == [a] and believed(m, 2) == []
    assert recalled(m) == {} and recalled(m, as_of=1) == {a: (T1, None, None)}
    assert [v.id for v in m.history("MAYA")] == [a]
    raises_exactly(errors.FactAlreadyForgotten, lambda: m.forget(a))
    raises_exactly(errors.FactAlreadyForgotten, lambda: m.revise(a, "Maya likes coffee"))
    assert m.last_seq == 2


def test_forget_of_a_replaced_version_closes_its_kept_row(store):
    m, clock = store
    a = m.remember("maya", "Maya lives in London", valid_from="2025-01-01")
    b = m.revise(a, "Maya lives in Paris", valid_from="2026-03-01")
    clock.now = T2
    m.forget(a)
    assert m.get(a).versions[-1] == Version(utc(2025, 1, 1), utc(2026, 3, 1), T1, T2, 2, 3)
    assert m.get(b).current
    assert [x[0] for x in believed(m, 2, utc(2025, 6, 1))] == [a]
    assert believed(m, 3, utc(2025, 6, 1)) == []
    # a forgotten, replaced version: forgotten is what the caller hears first
    raises_exactly(errors.FactAlreadyForgotten, lambda: m.revise(a, "Maya lives in Rome"))


def test_refusals_name_the_exact_error_and_append_nothing(store):
    m, _ = store
    a = m.remember("maya", "Maya lives in London", valid_from="2025-01-01")
    b = m.revise(a, "Maya lives in Paris", valid_from="2026-03-01")
    other = m.in_namespace("other")
    before = m.last_seq
    with pytest.raises(errors.FactSuperseded) as info:
        m.revise(a, "Maya lives in Rome")
    assert type(info.value) is errors.FactSuperseded and info.value.head_id == b
    raises_exactly(errors.InvalidTime, lambda: m.revise(b, "x", valid_from="2026-03-01"))
    raises_exactly(errors.InvalidTime, lambda: m.revise(b, "x", valid_to="2026-03-01"))
    raises_exactly(errors.InvalidTime, lambda: m.remember("maya", "x", valid_to="2000-01-01"))
    raises_exactly(errors.InvalidTime, lambda: m.as_of(0, valid_at="2025-01-01T10:00"))
    raises_exactly(errors.FactNotFound, lambda: other.revise(b, "x"))
    raises_exactly(errors.FactNotFound, lambda: other.get(b))
    raises_exactly(errors.FactNotFound, lambda: other.why(b))
    raises_exactly(errors.FactNotFound, lambda: other.forget(b))
    raises_exactly(errors.InvalidInput, lambda: m.as_of(before + 1))
    raises_exactly(errors.InvalidInput, lambda: m.recall("maya", as_of=-1))
    raises_exactly(errors.InvalidInput, lambda: m.remember("maya", " "))
    assert m.last_seq == before
    # a world change one microsecond after the old start is a change, not a refusal
    c = m.revise(b, "Maya lives in Rome", valid_from=utc(2026, 3, 1) + US)
    assert m.get(b).versions[-1].valid_to == utc(2026, 3, 1) + US
    assert m.why(c).chain == (m.get(a), m.get(b), m.get(c))
