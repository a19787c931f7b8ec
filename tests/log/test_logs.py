"""One suite over every log (eventlog/protocol.py): the file log as the store's only writer and
as one of many, and the PostgreSQL log. Each appends, numbers and stamps alike
(eventlog/stamping.py), reads back what it was given through its hash chain, and refuses what it
must; so a store does not care which it holds."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from eventlog.errors import ReadOnlyStore, RecordRejected
from eventlog.events import EmbeddingRecorded, Event, FactRemembered
from eventlog.format import MAX_RECORD_BYTES, ZERO_CHAIN
from eventlog.log import EventLog
from eventlog.protocol import Log

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
KINDS = ["file", "file-shared", "postgres"]


def fact(text: str, at: datetime = T0) -> FactRemembered:
    return FactRemembered(tx_at=at, subject="maya", text=text)


@pytest.fixture(params=KINDS)
def logs(request: pytest.FixtureRequest) -> Iterator[tuple[Any, Any]]:
    """(a writer, a function opening a reader of the same log)."""
    if request.param == "postgres":
        from eventlog.pg_log import PgLog
        from tests.support.pg_support import drop_store, fresh_store_url

        url = fresh_store_url()
        writer = PgLog(url)
        try:
            yield writer, lambda: PgLog(url, read_only=True)
        finally:
            writer.close()
            drop_store(url)
        return
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "log"
        writer = EventLog(path, shared=request.param == "file-shared")
        try:
            yield writer, lambda: EventLog(path, read_only=True)
        finally:
            writer.close()


def test_every_log_is_a_log(logs: tuple[Log, Any]) -> None:
    writer, _ = logs
    names = {n for n in vars(Log) if not n.startswith("_")} | set(Log.__annotations__)
    assert len(names) > 15
    for name in names:
        assert hasattr(writer, name), name


def test_appends_are_numbered_without_a_gap_and_read_back_through_the_chain(
    logs: tuple[Log, Any]
) -> None:
    writer, open_reader = logs
    assert writer.append_many([]) == []
    first = writer.append(fact("one"))
    batch = writer.append_many([fact("two"), fact("three")])
    assert [first.seq, *(e.seq for e in batch)] == [1, 2, 3] and writer.last_seq == 3
    reader = open_reader()
    try:
        events = list(reader.read())
        assert [e.text for e in events] == ["one", "two", "three"]  # type: ignore[union-attr]
        for e in events:
            assert reader.get(e.seq) == e
        assert reader.head().seq == 3
        assert reader.chain_at(3) == writer.chain_at(3) == bytes.fromhex(reader.head().hash)
        assert reader.chain_at(0) == ZERO_CHAIN
    finally:
        reader.close()


def test_events_read_by_their_seqs_are_those_read_in_order(logs: tuple[Log, Any]) -> None:
    writer, open_reader = logs
    writer.append(fact("zero"))
    writer.append_many([fact(f"n{i}") for i in range(11)])
    reader = open_reader()
    try:
        every = list(reader.read_raw())
        for seqs in ([], [1], [3, 4, 9], list(range(1, 13)), [12]):
            assert list(reader.read_raw_seqs(seqs)) == [every[s - 1] for s in seqs]
    finally:
        reader.close()


def test_links_and_then_see_the_stamped_events(logs: tuple[Log, Any]) -> None:
    writer, _ = logs
    seen: list[list[Event]] = []
    stamped = writer.append_many(
        [fact("a fact"), EmbeddingRecorded(tx_at=T0, fact_id=0, model="m", dims=1,
                                           vector=b"\0\0\x80?")],
        {1: 0}, then=seen.append,
    )
    assert stamped[1].fact_id == stamped[0].seq == 1  # type: ignore[union-attr]
    assert seen == [stamped]


def test_transaction_time_never_goes_backwards(logs: tuple[Log, Any]) -> None:
    writer, _ = logs
    writer.append(fact("now", T0 + timedelta(hours=1)))
    late = writer.append(fact("a clock behind", T0))
    assert late.tx_at == T0 + timedelta(hours=1) == writer.last_tx_at


def test_a_reader_refuses_appends_and_follows_the_writer(logs: tuple[Log, Any]) -> None:
    writer, open_reader = logs
    writer.append(fact("one"))
    reader = open_reader()
    try:
        with pytest.raises(ReadOnlyStore):
            reader.append(fact("refused"))
        writer.append(fact("two"))
        assert reader.refresh() == 2
        assert [e.text for e in reader.read(2)] == ["two"]  # type: ignore[union-attr]
    finally:
        reader.close()


def test_an_event_past_the_record_limit_is_refused_and_nothing_is_written(
    logs: tuple[Log, Any]
) -> None:
    writer, _ = logs
    with pytest.raises(RecordRejected, match="record limit"):
        writer.append_many([fact("kept?"), fact("x" * (MAX_RECORD_BYTES + 1))])
    assert writer.last_seq == 0
    assert writer.append(fact("written")).seq == 1
