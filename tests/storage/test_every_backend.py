"""One behaviour suite, run on every backend a store can live on (tests/support/backends.py):
a directory and a PostgreSQL database answer alike. Memory (the write calls and what they
return, time travel, provenance), recall, checkpoint and reopen (writer and reader), erasure
where the backend can erase (and a typed refusal saying why where it cannot), many writers on
one store, and ``hmem copy`` to every backend: each test takes the backend as its parameter,
as eventsourcing runs one abstract suite over each recorder."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest

from hmem import Memory, errors
from hmem.storage.copy import copy_store
from tests.support.backends import BACKENDS, new_store

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def clock() -> Any:
    ticks = iter(range(10**6))
    return lambda: START + timedelta(seconds=next(ticks))


@pytest.fixture(params=BACKENDS)
def where(request: pytest.FixtureRequest) -> Iterator[str]:
    with new_store(request.param) as target:
        yield target


def memory(where: str, **kw: Any) -> Memory:
    return Memory(where, clock=kw.pop("clock", clock()), embedder=kw.pop("embedder", None), **kw)


def seen(m: Memory) -> dict[str, Any]:
    """What a caller can read of a store, by every read call."""
    return {
        "last": m.last_seq,
        "recall": [(h.id, h.text) for h in m.recall("where does maya live tea", limit=10).hits],
        "as_of": [(b.id, b.text, b.superseded) for b in m.as_of(2)],
        "valid": [b.text for b in m.beliefs(valid_at="2025-06-01")],
        "history": [(f.id, f.text, f.current) for f in m.history("maya")],
        "diff": [(r.old.id, r.new.id) for r in m.diff(0).revised],
        "events": m.sql("SELECT seq, type FROM events ORDER BY seq").fetchall(),
    }


def fill(m: Memory) -> dict[str, int]:
    a = m.remember("maya", "Maya lives in London", valid_from="2024-01-01", source_ref="s1:3")
    b = m.revise(a, "Maya lives in Paris", valid_from="2025-05-01", reason="moved")
    c = m.remember("tom", "Tom likes tea", request_id="r-1")
    m.forget(c, reason="wrong")
    return {"london": a, "paris": b, "tea": c}


def test_writes_time_travel_and_provenance(where: str) -> None:
    with memory(where) as m:
        ids = fill(m)
        assert [ids["london"].outcome, ids["paris"].outcome] == ["new", "new"]
        assert m.remember("Maya", "maya lives in paris").outcome == "repeat"
        retry = m.remember("tom", "Tom likes tea", request_id="r-1")
        assert (retry, retry.outcome) == (ids["tea"], "retry")
        london, paris = m.get(ids["london"]), m.get(ids["paris"])
        assert (london.superseded_by, paris.supersedes, paris.revision) == (
            ids["paris"], ids["london"], "world")
        assert [f.id for f in m.why(ids["paris"]).chain] == [ids["london"], ids["paris"]]
        assert [b.text for b in m.beliefs(valid_at="2024-06-01")] == ["Maya lives in London"]
        assert [b.text for b in m.as_of(1)] == ["Maya lives in London"]
        assert [f.id for f in m.diff(2).forgotten] == [ids["tea"]]
        with pytest.raises(errors.FactNotFound):
            m.in_namespace("other").get(ids["london"])
        assert m.verify().ok


def test_recall_now_then_and_at_a_world_time(where: str) -> None:
    with memory(where) as m:
        ids = fill(m)
        assert [h.id for h in m.recall("where does maya live").hits] == [ids["paris"]]
        assert [h.id for h in m.recall("where does maya live", as_of=1).hits] == [ids["london"]]
        assert [h.id for h in m.recall("maya", valid_at="2024-06-01").hits] == [ids["london"]]
        assert m.recall("tea").hits == ()  # forgotten


def test_a_writer_and_a_reader_reopen_from_the_checkpoint(where: str) -> None:
    with memory(where, checkpoint_every=5) as m:
        fill(m)
        for i in range(20):
            m.remember("sam", f"Sam visited museum number {i}")
        before = seen(m)
        assert 0 < m.store.checkpoints.seq <= m.last_seq
    with memory(where) as m:  # closed cleanly: published at close, nothing to fold
        assert m.store.checkpoints.seq == m.last_seq
        assert seen(m) == before and m.verify().ok
    with Memory(where, read_only=True, embedder=None) as r:
        assert r.store.checkpoints.seq == r.last_seq and r.notes == []
        assert seen(r) == before and r.verify().ok


def test_erase_where_the_backend_seals_and_a_reason_where_it_cannot(where: str) -> None:
    with memory(where) as m:
        ids = fill(m)
        if not m.store.backend.capabilities.erase:
            with pytest.raises(errors.ErasureUnavailable, match="clear"):
                m.erase(fact=ids["london"])
            assert m.get(ids["london"]).text == "Maya lives in London"
            return
        receipt = m.erase(subject="maya", reason="asked")
        assert set(receipt.fact_ids) == {ids["london"], ids["paris"]}
        assert m.recall("maya london paris").hits == ()
        assert m.get(ids["paris"]).text == "" and m.verify().ok


def test_many_writers_on_one_store_see_each_others_writes(where: str) -> None:
    one = memory(where, shared=True)
    two = memory(where, shared=True)
    try:
        written = []
        for i in range(6):
            writer = one if i % 2 else two
            written.append(writer.remember("maya", f"note {i} about tea"))
        assert sorted(written) == list(range(1, 7))  # gapless, one order
        for m in (one, two):
            assert [f.text for f in m.history("maya")] == [f"note {i} about tea" for i in range(6)]
            assert m.verify().ok
    finally:
        one.close()
        two.close()


@pytest.mark.parametrize("destination", BACKENDS)
def test_a_copy_to_every_backend_answers_as_the_source(where: str, destination: str) -> None:
    with memory(where) as m:
        fill(m)
    with Memory(where, read_only=True, embedder=None) as r:
        before = seen(r)
    with new_store(destination) as target:
        report = copy_store(where, target)
        assert report.events == before["last"]
        with Memory(target, read_only=True, embedder=None) as r:
            assert seen(r) == before and r.verify().ok
