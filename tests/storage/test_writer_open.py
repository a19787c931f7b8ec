"""What a store's writer pays at open and close for what it did not change.

A shared writer (the CLI's, the MCP server's) opens like a reader: from its checkpoint it scans
only the log's last segment from the checkpoint's record on (the checkpoint names where it
lies), and takes the sealed ones from their headers. Damage in a sealed segment, or before the
checkpoint's record, is not seen at its open (nor at a reader's): it raises ``LogCorrupted``
naming the segment when a record there is read, and ``hmem log verify`` reports it. The
lifetime writer checks every record at its open. At close it publishes a checkpoint when the
log's tail after the last one is at least 1/256 of the log; a smaller tail is left for the next
open to fold. While it writes, it publishes at most its share of the time."""

from __future__ import annotations

from pathlib import Path

import pytest

from eventlog.repair import verify_log
from hmem import Memory
from hmem.errors import LogCorrupted
from hmem.storage.checkpoints import SHARE
from hmem.storage.file_backend import FileBackend
from hmem.storage.store import Store
from projections.checkpoint import CHECKPOINT_FILE, read_stamp
from tests.storage.test_checkpoint import close, writer


def _damage_a_sealed_segment(log: Path) -> Path:
    segments = sorted(log.glob("*.hlog"))
    assert len(segments) >= 3
    raw = bytearray(segments[1].read_bytes())
    raw[len(raw) // 2] ^= 0x10  # inside a record, past the header
    segments[1].write_bytes(bytes(raw))
    return segments[1]


def test_a_shared_writer_from_a_checkpoint_reads_only_the_log_tail(tmp_path):
    root = tmp_path / "s"
    store = Store(root, segment_bytes=600)
    with Memory(store=store, embedder=None) as m:
        ids = [m.remember("maya", f"maya keeps note {i} about the garden") for i in range(40)]
    store.close()  # a Memory given a store leaves it open
    victim = _damage_a_sealed_segment(root / "log")
    with pytest.raises(LogCorrupted) as info:
        Store(root, segment_bytes=600)  # the lifetime writer checks every record at open
    assert info.value.segment == str(victim)
    store = Store(root, segment_bytes=600, shared=True)
    with Memory(store=store, embedder=None) as m:
        assert m.recall("note 3 garden").hits[0].id == ids[3]  # served by the checkpoint
        new = m.remember("maya", "maya planted beans")
        assert new == ids[-1] + 1
        with pytest.raises(LogCorrupted) as info:
            m.verify()  # a replay reads every record
        assert info.value.segment == str(victim)
    store.close()
    assert not verify_log(root / "log").ok


@pytest.mark.parametrize("shared", [False, True])
def test_an_open_from_a_checkpoint_checks_the_last_segment_from_its_record_on(tmp_path, shared):
    root = tmp_path / "s"
    store = Store(root)  # one segment
    with Memory(store=store, embedder=None) as m:
        ids = [m.remember("maya", f"maya keeps note {i} about the garden") for i in range(40)]
    store.close()
    log = root / "log"
    (segment,) = sorted(log.glob("*.hlog"))
    raw = bytearray(segment.read_bytes())
    raw[200] ^= 0x10  # in the first records
    segment.write_bytes(bytes(raw))
    opened = Memory(root, shared=True, embedder=None) if shared else Memory(
        root, read_only=True, embedder=None)
    with opened as m:
        assert m.store.checkpoints.seq == m.last_seq == 40 and m.notes == []
        assert m.recall("note 3 garden").hits[0].id == ids[3]  # served by the checkpoint
        assert m.store.log.get(40).seq == 40  # the checkpoint's record, checked at open
        with pytest.raises(LogCorrupted) as info:
            m.store.log.get(1)  # before it: checked when first read
        assert info.value.segment == str(segment)
        if shared:
            assert m.remember("maya", "maya planted beans") == ids[-1] + 1
        with pytest.raises(LogCorrupted) as info:
            m.verify()  # a replay reads every record
        assert info.value.segment == str(segment)
    assert not verify_log(log).ok


@pytest.mark.parametrize("how", ["authentic", "changed", "in the clear"])
def test_only_an_authentic_checkpoint_says_where_the_log_is_read_from(tmp_path, how):
    """Where an open resumes reading the log comes from a checkpoint authenticated by the key
    file: one changed on disk (anywhere), or any of a store in the clear (anyone can write
    one), is not used, and the open checks the whole last segment."""
    root = tmp_path / "s"
    store = Store(root, seal=how != "in the clear")
    with Memory(store=store, embedder=None) as m:
        for i in range(40):
            m.remember("maya", f"maya keeps note {i} about the garden")
    store.close()
    if how == "changed":  # a byte of it, not of where it says the record lies
        ck = root / CHECKPOINT_FILE
        raw = bytearray(ck.read_bytes())
        raw[raw.index(b"tokens_id") + 12] ^= 1  # a character of the tokenizer's id
        ck.write_bytes(bytes(raw))
    for shared in (False, True):
        backend = FileBackend(root, read_only=not shared, shared=shared)
        try:
            resume = backend.log.resume
            assert (resume.seq if resume else None) == (40 if how == "authentic" else None)
            assert backend.log.last_seq == 40
        finally:
            backend.close()


def test_a_close_leaves_a_small_tail_to_the_next_open(tmp_path):
    root = tmp_path / "s"
    with Memory(root, embedder=None) as m:
        m.remember_many([{"subject": "maya", "text": f"maya keeps note {i}"} for i in range(600)])
    published = read_stamp(root / CHECKPOINT_FILE)
    assert published is not None and published[0] == 600  # a tail of all: published
    with Memory(root, embedder=None) as m:
        one = m.remember("maya", "maya planted beans")
    assert read_stamp(root / CHECKPOINT_FILE) == published  # 1 of 601: left
    with Memory(root, read_only=True, embedder=None) as r:
        assert r.recall("beans").hits[0].id == one  # folded from the log's tail
    with Memory(root, embedder=None) as m:
        m.remember("sam", "sam sowed peas")
        m.remember("sam", "sam picked peas")
    stamp = read_stamp(root / CHECKPOINT_FILE)
    assert stamp is not None and stamp[0] == 603  # a tail of 3 of 603 (over 603/256): published


def test_a_writer_spends_at_most_its_share_of_time_publishing(tmp_path):
    path = tmp_path / "s"
    w = writer(path, 5)
    checkpoints = w.store.checkpoints
    now = [0.0, 1.0]  # the publish below starts at 0 s and ends at 1 s; then the clock stays
    checkpoints.clock = lambda: now.pop(0) if len(now) > 1 else now[0]
    w.remember("s", "first fact")
    checkpoints.publish(w.store.projector, w.store.log)
    published = checkpoints.seq
    assert published == w.last_seq
    for i in range(10):
        w.remember("s", f"fact number {i}")
    assert checkpoints.seq == published  # due by count, but publishing had its share: not yet
    assert checkpoints.due(w.last_seq, closing=True)  # closing publishes (a tail over 1/256)
    now[0] = 1.0 + (1 - SHARE) / SHARE - 1e-6
    w.remember("s", "one more fact")
    assert checkpoints.seq == published
    now[0] = 1.0 + (1 - SHARE) / SHARE  # the time since is (1 - SHARE) / SHARE publishes' long
    w.remember("s", "and one more")
    assert checkpoints.seq == w.last_seq
    close(w)
