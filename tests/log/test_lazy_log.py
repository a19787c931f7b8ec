"""A lazy log (a store's reader or writer): sealed segments taken from the file names at open,
their headers read and checked, and the segment scanned, when first read; the last segment,
resumed at the record a checkpoint names, checked from it on at open and before it when first
read.

It must serve exactly what the eager log serves, and damage in a sealed segment it has not read
must surface as ``LogCorrupted`` naming that segment when a record of it is read (never a wrong
event, never a silent skip); a lazy writer appends after the tail it checked, and the damage
still raises on read."""

from __future__ import annotations

import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog import format as fmt
from eventlog import segment, segments
from eventlog.log import EventLog
from eventlog.segment import Resume
from hmem.errors import LogCorrupted
from tests.conftest import examples
from tests.log.test_log_properties import write_events


@settings(max_examples=examples(dev=40, ci=300))
@given(
    n=st.integers(0, 40),
    seed=st.integers(0, 2**32),
    segment_bytes=st.integers(fmt.SEGMENT_HEADER_SIZE + 1, 900),
    data=st.data(),
)
def test_a_lazy_reader_serves_what_an_eager_one_does(n, seed, segment_bytes, data):
    with tempfile.TemporaryDirectory() as d:
        directory = Path(d) / "log"
        written = write_events(directory, n, seed, segment_bytes=segment_bytes)
        with EventLog(directory, read_only=True) as eager:
            resume = data.draw(resume_points(eager), label="resume")
        with EventLog(directory, read_only=True) as eager, \
                EventLog(directory, read_only=True, lazy=True, resume=resume) as lazy:
            assert lazy.last_seq == eager.last_seq == len(written)
            assert lazy.head() == eager.head()
            assert lazy.size_bytes == eager.size_bytes
            assert lazy.last_tx_at == eager.last_tx_at
            # chain_at first (a sealed segment's end comes from the next header), then reads
            assert [lazy.chain_at(s) for s in range(1, n + 1)] == [
                eager.chain_at(s) for s in range(1, n + 1)
            ]
            assert lazy.size_bytes == eager.size_bytes  # headers read, segments not scanned
            if n:
                middle = n // 2 + 1
                assert lazy.get(middle) == written[middle - 1]
                assert list(lazy.read(middle)) == written[middle - 1:]
            seqs = sorted(data.draw(st.sets(st.integers(1, max(n, 1))), label="seqs")) if n else []
            whole_from = segments.SPARSE_BYTES  # segments read whole, or record by record
            segments.SPARSE_BYTES = data.draw(st.sampled_from([1, 1 << 40]), label="read by")
            try:
                assert list(lazy.read_raw_seqs(seqs)) == [written[s - 1] for s in seqs]
            finally:
                segments.SPARSE_BYTES = whole_from
            assert list(lazy.read()) == written


@settings(max_examples=examples(dev=60, ci=600))
@given(seed=st.integers(0, 2**32), data=st.data())
def test_damage_in_a_sealed_segment_raises_when_it_is_read(seed, data):
    with tempfile.TemporaryDirectory() as d:
        directory = Path(d) / "log"
        written = write_events(directory, 30, seed, segment_bytes=300)
        segs = sorted(directory.glob("*.hlog"))
        assert len(segs) >= 3
        victim = data.draw(st.sampled_from(segs[:-1]), label="sealed segment")
        raw = bytearray(victim.read_bytes())
        offset = data.draw(st.integers(0, len(raw) - 1), label="offset")
        raw[offset] ^= 1 << data.draw(st.integers(0, 7), label="bit")
        victim.write_bytes(bytes(raw))
        with pytest.raises(LogCorrupted) as info:
            EventLog(directory)  # an eager writer checks every record at open
        assert info.value.segment == str(victim)
        writer = data.draw(st.booleans(), label="lazy writer")
        try:
            log = EventLog(directory, lazy=True) if writer else EventLog(
                directory, read_only=True, lazy=True)
        except LogCorrupted as e:  # a damaged header of the tail is seen at open
            assert offset < fmt.SEGMENT_HEADER_SIZE and e.segment == str(victim)
            return
        with log:
            tail = sorted(directory.glob("*.hlog"))[-1]
            first_of_tail = int(tail.name.split(".")[0])
            assert list(log.read(first_of_tail)) == written[first_of_tail - 1:]  # not touched
            if writer:  # appends after the tail it checked; the damage is still there to see
                log.append_many([written[-1]])
                assert log.last_seq == len(written) + 1
            with pytest.raises(LogCorrupted) as info:
                list(log.read())
            assert info.value.segment == str(victim)


def resume_points(log: EventLog) -> st.SearchStrategy[Resume | None]:
    """None, the place of any record of ``log``'s last segment (as a checkpoint names it), or
    one a checkpoint of another log or a damaged one might name (any seq, offset or chain)."""
    seg = log.segments.list[-1] if log.segments.list else None
    if seg is None or seg.last_seq < seg.first_seq:
        return st.none()
    right = st.integers(seg.first_seq, seg.last_seq).map(lambda seq: Resume(
        seq, log.chain_at(seq), seg.first_seq, seg.offsets[seq - seg.first_seq],
        log.chain_at(seq - 1)))
    chains = st.binary(min_size=16, max_size=16)
    wrong = st.builds(Resume, st.integers(0, seg.last_seq + 3), chains,
                      st.sampled_from([seg.first_seq, seg.first_seq + 1]),
                      st.integers(0, seg.end + 10) | st.integers(-(2**64), 2**64), chains)
    off_by = st.tuples(right, st.integers(-20, 20)).map(
        lambda r: r[0]._replace(offset=r[0].offset + r[1]))
    seq_off_by = st.tuples(right, st.integers(-3, 3)).map(
        lambda r: r[0]._replace(seq=r[0].seq + r[1]))
    before_wrong = st.tuples(right, chains).map(lambda r: r[0]._replace(before=r[1]))
    return st.none() | right | wrong | off_by | seq_off_by | before_wrong


@settings(max_examples=examples(dev=60, ci=600))
@given(seed=st.integers(0, 2**32), data=st.data())
def test_damage_before_the_resumed_record_raises_when_it_is_read(seed, data):
    """A log resumed at the record a checkpoint names checks it and the records after it at
    open, and the ones before it when one of them is first read: damage in the segment's
    header or the resumed record raises at open (the hint is then not used: the segment is
    scanned whole), damage before it on that first read, never a wrong event; the records
    from the resumed one on are served."""
    with tempfile.TemporaryDirectory() as d:
        directory = Path(d) / "log"
        written = write_events(directory, 30, seed)  # one segment
        (segment,) = sorted(directory.glob("*.hlog"))
        through = data.draw(st.integers(1, 30), label="resumed at")
        with EventLog(directory, read_only=True) as eager:
            seg = eager.segments.list[0]
            resumed_at = seg.offsets[through - 1]
            resume = Resume(through, eager.chain_at(through), 1, resumed_at,
                            eager.chain_at(through - 1))
            resumed_end = seg.offsets[through] if through < 30 else seg.end
        raw = bytearray(segment.read_bytes())
        offset = data.draw(st.integers(0, resumed_end - 1), label="offset")
        raw[offset] ^= 1 << data.draw(st.integers(0, 7), label="bit")
        segment.write_bytes(bytes(raw))
        with pytest.raises(LogCorrupted):
            EventLog(directory, read_only=True)  # an eager reader checks every record at open
        if not fmt.SEGMENT_HEADER_SIZE <= offset < resumed_at:  # where the open reads
            with pytest.raises(LogCorrupted) as info:
                EventLog(directory, read_only=True, lazy=True, resume=resume)
            assert info.value.segment == str(segment)
            return
        with EventLog(directory, read_only=True, lazy=True, resume=resume) as log:
            assert log.last_seq == 30
            assert list(log.read(through)) == written[through - 1:]
            assert log.chain_at(through) == resume.chain
            seq = data.draw(st.integers(1, through - 1), label="read")
            with pytest.raises(LogCorrupted) as info:
                log.get(seq)
            assert info.value.segment == str(segment)
            with pytest.raises(LogCorrupted):
                list(log.read())


def test_a_missing_or_swapped_sealed_segment_is_corruption_when_read(tmp_path):
    directory = tmp_path / "log"
    write_events(directory, 40, seed=1, segment_bytes=400)
    segs = sorted(directory.glob("*.hlog"))
    assert len(segs) > 3
    segs[1].unlink()
    with EventLog(directory, read_only=True, lazy=True) as log:
        with pytest.raises(LogCorrupted, match="missing"):
            list(log.read())


def test_segments_must_be_larger_than_their_header(tmp_path):
    with pytest.raises(ValueError, match="segment_bytes must exceed"):
        EventLog(tmp_path / "log", segment_bytes=fmt.SEGMENT_HEADER_SIZE)
    assert not (tmp_path / "log").exists() or not any((tmp_path / "log").glob("*.hlog"))


def test_threads_reading_a_lazy_log_at_once_scan_each_sealed_segment_once(tmp_path):
    """Four threads read a lazy log from its start together: each gets every event, none a
    false LogCorrupted from a segment scanned twice at once."""
    directory = tmp_path / "log"
    written = write_events(directory, 400, seed=3, segment_bytes=600)
    for _ in range(10):
        with EventLog(directory, read_only=True, lazy=True) as log:
            got: list[object] = []

            def read(log: EventLog = log, got: list[object] = got) -> None:
                try:
                    got.append(list(log.read()))
                except LogCorrupted as e:
                    got.append(e)

            threads = [threading.Thread(target=read) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert got == [written] * 4


def test_a_lazy_open_reads_the_tail_header_alone_and_each_sealed_one_when_read(tmp_path,
                                                                               monkeypatch):
    """An open takes the sealed segments from their files' names: its cost does not grow with
    the log's segments. Reading the log reads each header then."""
    directory = tmp_path / "log"
    written = write_events(directory, 60, seed=5, segment_bytes=500)
    files = sorted(directory.glob("*.hlog"))
    assert len(files) > 4
    read: list[str] = []
    real = segment.read_header

    def spied(path):
        read.append(path.name)
        return real(path)

    monkeypatch.setattr(segments, "read_header", spied)  # the open's reads
    monkeypatch.setattr(segment, "read_header", spied)  # a sealed one's, when it is scanned
    with EventLog(directory, read_only=True, lazy=True) as log:
        assert read == [files[-1].name] and log.last_seq == len(written)
        assert list(log.read()) == written
        assert set(read) == {f.name for f in files}


@pytest.mark.parametrize("change, why", [
    ("renamed", "segment starts at seq {first} but its name says {named}"),
    ("next renamed", "segment starts at seq {first} but its name says {named}"),
    ("chain", "the first segment's chain does not start at zero"),
    ("header", "checksum"),
])
def test_a_sealed_segment_whose_header_fails_is_corruption_when_read(tmp_path, change, why):
    directory = tmp_path / "log"
    write_events(directory, 60, seed=6, segment_bytes=500)
    files = sorted(directory.glob("*.hlog"))
    target = {"chain": files[0], "next renamed": files[2]}.get(change, files[1])
    first = int(target.name[:20])
    named = first + 1  # still before the next segment's name
    if change == "next renamed":  # found asking for the end chain of the segment before it
        target.rename(directory / f"{named:020d}.hlog")
        with EventLog(directory, read_only=True, lazy=True) as log:
            with pytest.raises(LogCorrupted, match=why.format(first=first, named=named)):
                log.chain_at(first - 1)
        with pytest.raises(LogCorrupted, match=why.format(first=first, named=named)):
            EventLog(directory, read_only=True)  # an eager open finds it too
        return
    if change == "renamed":
        target.rename(directory / f"{named:020d}.hlog")
    elif change == "chain":
        data = target.read_bytes()
        target.write_bytes(fmt.pack_segment_header(first, b"\x01" * 16)
                           + data[fmt.SEGMENT_HEADER_SIZE:])
    else:
        data = bytearray(target.read_bytes())
        data[10] ^= 1
        target.write_bytes(bytes(data))
    with EventLog(directory, read_only=True, lazy=True) as log:  # the open does not read it
        with pytest.raises(LogCorrupted, match=why.format(first=first, named=named)):
            list(log.read())


@pytest.mark.parametrize("tail", ["empty", "torn header", "missing first", "tail renamed"])
def test_a_lazy_open_of_an_odd_directory_reads_every_header_as_before(tmp_path, tail):
    """A last file that is not a whole segment (a writer died making it), or no segment at
    seq 1: the lazy open reads every header at open, and serves or refuses as the eager does."""
    directory = tmp_path / "log"
    written = write_events(directory, 60, seed=7, segment_bytes=500)
    files = sorted(directory.glob("*.hlog"))
    if tail == "tail renamed":
        named = int(files[-1].name[:20]) + 1
        files[-1].rename(directory / f"{named:020d}.hlog")
        for lazy in (True, False):
            with pytest.raises(LogCorrupted, match=f"but its name says {named}"):
                EventLog(directory, read_only=True, lazy=lazy)
        return
    if tail == "missing first":
        files[0].unlink()
        for lazy in (True, False):
            with pytest.raises(LogCorrupted, match="but seq 1 was expected"):
                EventLog(directory, read_only=True, lazy=lazy)
        return
    after = directory / f"{len(written) + 1:020d}.hlog"
    after.write_bytes(b"" if tail == "empty" else fmt.pack_segment_header(len(written) + 1,
                                                                            b"\0" * 16)[:20])
    with EventLog(directory, read_only=True, lazy=True) as log:
        assert log.last_seq == len(written) and list(log.read()) == written
