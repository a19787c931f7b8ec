"""Properties of the event log: codec round trip, truncation at any byte, bit flips, segments."""

from __future__ import annotations

import os
import random
import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog import format as fmt
from eventlog.events import (
    EVENT_TYPES,
    EmbeddingRecorded,
    EpisodeRecorded,
    FactForgotten,
    FactRemembered,
    FactRevised,
    FactsErased,
    RecallServed,
    decode,
    encode,
)
from eventlog.log import EventLog
from eventlog.repair import repair_log, verify_log
from hmem import Memory
from hmem.errors import LogCorrupted, StoreLocked, UnsupportedFormat
from tests.conftest import examples

UTC = timezone.utc
times = st.datetimes(
    min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
opt_times = st.none() | times
names = st.text(min_size=1, max_size=30)
opt_names = st.none() | names
common = dict(
    seq=st.integers(0, 2**62), tx_at=times, namespace=names, source_agent=opt_names,
    source_ref=opt_names, sealed=st.binary(max_size=64),
)
lineage = dict(
    derived_from=st.lists(st.integers(1, 2**62), max_size=3).map(tuple), extractor=opt_names,
    prompt_version=opt_names, category=opt_names, importance=st.none() | st.integers(1, 10),
)
EVENT_STRATEGIES = {
    FactRemembered: st.builds(FactRemembered, subject=names, text=st.text(max_size=300),
              valid_from=opt_times, valid_to=opt_times, confidence=st.floats(0, 1),
              entities=st.lists(names, max_size=3).map(tuple), **lineage, **common),
    FactRevised: st.builds(FactRevised, fact_id=st.integers(1, 2**62), text=st.text(max_size=300),
              subject=opt_names, valid_from=opt_times, valid_to=opt_times,
              confidence=st.floats(0, 1), entities=st.lists(names, max_size=3).map(tuple),
              reason=opt_names, **lineage, **common),
    FactForgotten: st.builds(FactForgotten, fact_id=st.integers(1, 2**62), reason=opt_names,
                             **common),
    EmbeddingRecorded: st.builds(EmbeddingRecorded, fact_id=st.integers(1, 2**62), model=names,
              dims=st.integers(1, 64), vector=st.binary(max_size=256), **common),
    EpisodeRecorded: st.builds(EpisodeRecorded, session_id=names, turn=st.integers(0, 2**31),
              role=names, text=st.text(max_size=300), speaker=opt_names,
              observed_at=opt_times, **common),
    RecallServed: st.builds(RecallServed, query=st.text(max_size=300),
              limit=st.integers(1, 2**31), max_tokens=st.integers(1, 2**31),
              as_of_seq=st.none() | st.integers(0, 2**62), valid_at=opt_times,
              subject=opt_names, reference_time=opt_times, config=st.text(max_size=100),
              model=opt_names, query_vector=st.binary(max_size=256),
              hits=st.lists(st.integers(1, 2**62), max_size=5).map(tuple),
              scores=st.lists(st.floats(allow_nan=False), max_size=5).map(tuple), **common),
    FactsErased: st.builds(FactsErased, scope=names,
              fact_ids=st.lists(st.integers(1, 2**62), max_size=5).map(tuple),
              episode_ids=st.lists(st.integers(1, 2**62), max_size=3).map(tuple),
              recall_ids=st.lists(st.integers(1, 2**62), max_size=3).map(tuple),
              reason=opt_names, chain_head=st.text(max_size=50), **common),
}
events = st.one_of(*EVENT_STRATEGIES.values())


@settings(max_examples=examples(dev=300, ci=5000))
@given(events)
def test_codec_round_trip(ev):
    assert decode(encode(ev)) == ev


def test_every_event_type_is_covered_by_the_strategy():
    assert set(EVENT_STRATEGIES) == set(EVENT_TYPES)


# ---------------------------------------------------------------------------------- helpers

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def write_events(directory: Path, n: int, seed: int, **kw) -> list:
    rng = random.Random(seed)
    with EventLog(directory, **kw) as log:
        batch = []
        for i in range(n):
            text = " ".join(
                rng.choice(["maya", "paris", "tea", "é", "🙂", "x" * 40])
                for _ in range(rng.randint(1, 6))
            )
            batch.append(FactRemembered(tx_at=T0 + timedelta(seconds=i), subject="s", text=text))
            if rng.random() < 0.5:
                log.append_many(batch)
                batch = []
        log.append_many(batch)
        return list(log.read())


def only_segment(directory: Path) -> Path:
    (seg,) = sorted(directory.glob("*.hlog"))
    return seg


@pytest.fixture
def tmp(tmp_path):
    return tmp_path


# ---------------------------------------------------------------------------------- truncation

@settings(max_examples=examples(dev=100, ci=3000))
@given(n=st.integers(0, 12), seed=st.integers(0, 2**32), cut=st.floats(0, 1))
def test_truncating_at_any_byte_yields_a_prefix(n, seed, cut):
    with tempfile.TemporaryDirectory() as d:
        directory = Path(d) / "log"
        written = write_events(directory, n, seed)
        seg = only_segment(directory)
        size = seg.stat().st_size
        offset = int(cut * size)
        os.truncate(seg, offset)
        with EventLog(directory) as log:
            got = list(log.read())
            assert got == written[: len(got)]
            # Every record wholly before the cut survives.
            ends = _record_ends(written, size)
            assert len(got) == sum(1 for e in ends if e <= offset)
            # A cut on a record boundary is a clean log; anywhere else is a reported torn tail.
            assert log.recovery.clean == (offset in {fmt.SEGMENT_HEADER_SIZE, *ends})
            # And the log accepts writes again, continuing the chain.
            log.append(FactForgotten(tx_at=T0 + timedelta(days=1), fact_id=1))
        with EventLog(directory, read_only=True) as log:
            assert list(log.read())[:-1] == got


def _record_ends(events, size):
    ends, pos = [], fmt.SEGMENT_HEADER_SIZE
    for ev in events:
        pos += fmt.RECORD_HEADER_SIZE + len(encode(ev))
        ends.append(pos)
    assert pos == size
    return ends


@settings(max_examples=examples(dev=100, ci=2000))
@given(n=st.integers(1, 10), seed=st.integers(0, 2**32), data=st.data())
def test_a_flipped_bit_anywhere_is_detected(n, seed, data):
    with tempfile.TemporaryDirectory() as d:
        directory = Path(d) / "log"
        written = write_events(directory, n, seed)
        seg = only_segment(directory)
        raw = bytearray(seg.read_bytes())
        offset = data.draw(st.integers(0, len(raw) - 1), label="offset")
        raw[offset] ^= 1 << data.draw(st.integers(0, 7), label="bit")
        seg.write_bytes(bytes(raw))
        with pytest.raises(LogCorrupted) as info:
            EventLog(directory)
        assert info.value.segment == str(seg)
        assert "hmem" in str(info.value) and "log repair" in str(info.value)
        report = verify_log(directory)
        assert not report.ok
        # repair keeps a backup and leaves exactly the records before the damage
        rep = repair_log(directory, Path(d) / "backups")
        assert rep.backup and Path(rep.backup).exists()
        with EventLog(directory) as log:
            kept = list(log.read())
        assert kept == written[: len(kept)]
        ends = _record_ends(written, len(raw))
        intact = sum(1 for e in ends if e <= offset) if offset >= fmt.SEGMENT_HEADER_SIZE else 0
        assert len(kept) == intact  # exactly the records before the damaged one
        assert verify_log(directory).ok


@settings(max_examples=examples(dev=40, ci=400))
@given(seed=st.integers(0, 2**32), cut=st.floats(0, 1), flush_every=st.sampled_from([1, 3, 1000]))
def test_truncated_store_reopens_to_the_projection_of_the_prefix(seed, cut, flush_every):
    """The projection may be ahead of or behind the cut; either way it equals a replay."""
    rng = random.Random(seed)
    with tempfile.TemporaryDirectory() as d:
        clock = iter(T0 + timedelta(minutes=i) for i in range(10**6))
        with Memory(d, clock=lambda: next(clock), flush_every=flush_every) as m:
            ids = []
            for _ in range(rng.randint(1, 12)):
                r = rng.random()
                live = [i for i in ids if m.get(i).current]
                if r < 0.6 or not live:
                    ids.append(m.remember("maya", f"maya likes {rng.choice(['tea', 'jazz'])}"))
                elif r < 0.85:
                    ids.append(m.revise(rng.choice(live), "maya likes coffee"))
                else:
                    m.forget(rng.choice(live))
            full = list(m.store.log.read())
        seg = only_segment(Path(d) / "log")
        os.truncate(seg, int(cut * seg.stat().st_size))
        with Memory(d, clock=lambda: next(clock)) as m:
            got = list(m.store.log.read())
            assert got == full[: len(got)]
            assert m.last_seq == len(got)
            assert m.verify().ok


# ---------------------------------------------------------------------------------- segments

def test_segments_roll_over_and_a_missing_middle_segment_is_corruption(tmp):
    directory = tmp / "log"
    written = write_events(directory, 40, seed=1, segment_bytes=400)
    segs = sorted(directory.glob("*.hlog"))
    assert len(segs) > 3
    with EventLog(directory, read_only=True) as log:
        assert list(log.read()) == written
        assert log.get(17) == written[16]
    segs[1].unlink()
    with pytest.raises(LogCorrupted) as info:
        EventLog(directory, read_only=True)
    assert "missing" in str(info.value)


def test_truncation_inside_the_last_segment_of_many(tmp):
    directory = tmp / "log"
    written = write_events(directory, 40, seed=2, segment_bytes=400)
    last = sorted(directory.glob("*.hlog"))[-1]
    os.truncate(last, last.stat().st_size - 3)
    with EventLog(directory) as log:
        assert list(log.read()) == written[:-1]
        assert not log.recovery.clean


def test_a_torn_new_segment_header_is_dropped(tmp):
    directory = tmp / "log"
    written = write_events(directory, 5, seed=3)
    (directory / "00000000000000000006.hlog").write_bytes(fmt.MAGIC[:5])
    with EventLog(directory, read_only=True) as log:  # a reader ignores it
        assert list(log.read()) == written
    with EventLog(directory) as log:  # the writer removes it
        assert log.recovery.removed_segments
        log.append(FactForgotten(tx_at=T0 + timedelta(days=1), fact_id=1))
    assert list(EventLog(directory, read_only=True).read())[:5] == written


def test_a_newer_format_version_is_refused(tmp):
    directory = tmp / "log"
    write_events(directory, 2, seed=4)
    seg = only_segment(directory)
    raw = bytearray(seg.read_bytes())
    header = fmt.pack_segment_header(1, fmt.ZERO_CHAIN)
    body = bytearray(header[:-4])
    body[8:10] = (fmt.FORMAT_VERSION + 1).to_bytes(2, "little")
    import zlib

    raw[: len(header)] = bytes(body) + zlib.crc32(bytes(body)).to_bytes(4, "little")
    seg.write_bytes(bytes(raw))
    with pytest.raises(UnsupportedFormat, match="Upgrade hmem"):
        EventLog(directory)


def test_an_unknown_event_type_is_refused_as_newer_format(tmp):
    directory = tmp / "log"
    directory.mkdir()
    seg = directory / "00000000000000000001.hlog"
    payload = msgspec.msgpack.encode({"type": "from_the_future", "seq": 1})
    record, _ = fmt.frame(payload, fmt.ZERO_CHAIN)
    seg.write_bytes(fmt.pack_segment_header(1, fmt.ZERO_CHAIN) + record)
    with pytest.raises(UnsupportedFormat, match="newer hmem"):
        EventLog(directory, read_only=True)


# ---------------------------------------------------------------------------------- writers/readers

def test_one_writer_at_a_time(tmp):
    with EventLog(tmp / "log"):
        with pytest.raises(StoreLocked, match="open for writing"):
            EventLog(tmp / "log")
    with EventLog(tmp / "log"):
        pass


def test_a_reader_follows_the_writer_and_stops_at_an_unfinished_record(tmp):
    directory = tmp / "log"
    with EventLog(directory) as writer:
        writer.append(FactRemembered(tx_at=T0, subject="s", text="one"))
        reader = EventLog(directory, read_only=True)
        assert reader.last_seq == 1
        writer.append_many([FactRemembered(tx_at=T0, subject="s", text=str(i)) for i in range(3)])
        assert reader.refresh() == 4
        # Simulate a write in progress: half a record at the end of the file.
        record, _ = fmt.frame(encode(FactRemembered(tx_at=T0, subject="s", text="x")), b"\0" * 16)
        with open(only_segment(directory), "ab") as f:
            f.write(record[:10])
        assert reader.refresh() == 4
        assert [e.seq for e in reader.read()] == [1, 2, 3, 4]
        reader.close()


def test_fsync_failure_is_fatal_for_the_handle(tmp, monkeypatch):
    from hmem.errors import LogWriteFailed

    directory = tmp / "log"
    log = EventLog(directory)
    log.append(FactRemembered(tx_at=T0, subject="s", text="kept"))

    def broken(fd):
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fdatasync", broken)
    with pytest.raises(LogWriteFailed, match="fsync"):
        log.append(FactRemembered(tx_at=T0, subject="s", text="maybe"))
    monkeypatch.undo()
    with pytest.raises(LogWriteFailed, match="refuses writes"):
        log.append(FactRemembered(tx_at=T0, subject="s", text="never"))
    log.close()
    with EventLog(directory) as log:
        assert [e.text for e in log.read()][0] == "kept"


def test_a_failed_write_leaves_no_partial_record(tmp, monkeypatch):
    from hmem.errors import LogWriteFailed

    directory = tmp / "log"
    log = EventLog(directory)
    log.append(FactRemembered(tx_at=T0, subject="s", text="kept"))
    real_write = os.write

    def short_then_enospc(fd, data):
        real_write(fd, bytes(data)[:7])
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", short_then_enospc)
    with pytest.raises(LogWriteFailed, match="No space"):
        log.append_many([FactRemembered(tx_at=T0, subject="s", text="lost")] * 3)
    monkeypatch.undo()
    log.close()
    with EventLog(directory) as log:
        assert [e.text for e in log.read()] == ["kept"]
        assert log.recovery.clean


def test_tx_time_never_goes_backwards(tmp):
    """An event stamped before the log's last tx time is logged at it (as on the server)."""
    with EventLog(tmp / "log") as log:
        log.append(FactRemembered(tx_at=T0, subject="s", text="a"))
        late = log.append(FactRemembered(tx_at=T0 - timedelta(seconds=1), subject="s", text="b"))
        assert (late.seq, late.tx_at) == (2, T0)
    with EventLog(tmp / "log", read_only=True) as log:
        assert [e.tx_at for e in log.read()] == [T0, T0]


def test_repair_backs_up_what_it_cuts(tmp):
    directory = tmp / "log"
    written = write_events(directory, 6, seed=5)
    seg = only_segment(directory)
    raw = bytearray(seg.read_bytes())
    ends = _record_ends(written, len(raw))
    raw[ends[2] + 30] ^= 0xFF  # inside the 4th record
    seg.write_bytes(bytes(raw))
    report = repair_log(directory, tmp / "backups")
    assert report.events_kept == 3
    assert (Path(report.backup) / seg.name).read_bytes() == bytes(raw)
    shutil.rmtree(tmp / "backups")
