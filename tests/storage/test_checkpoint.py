"""Every process opens from the writer's published checkpoint and folds only the log's tail.

The checkpoint (projections/checkpoint.py) is the one persisted form of the derived state, and
it is disposable: a reader that opens from it holds exactly what a reader that replays the whole
log holds, and a checkpoint that is damaged, from another log or of another layout is skipped
with a note.
"""

from __future__ import annotations

import os
import random
import shutil
import stat
import struct
import tempfile
import zlib
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hmem import Memory
from hmem.adapters.demo import StepClock
from hmem.storage.store import Store
from projections import checkpoint
from projections.checkpoint import CHECKPOINT_FILE, read_stamp
from replay.verify import state_rows
from tests.storage.checkpoint_forgery import (
    a_part,
    another_tokenizer,
    flipped_column,
    rewrite,
    stamped_seq_0,
    with_unreadable_extra,
)

# The stores' clock: a step forward each time it is read.
START, STEP = datetime(2025, 1, 1, tzinfo=timezone.utc), timedelta(minutes=1)


WORLD = datetime(2030, 1, 1, tzinfo=timezone.utc)  # world changes, later than every tx time


def write_history(m: Memory, n: int, seed: int = 0) -> None:
    """Remember, revise (world changes and corrections), forget and embed, deterministically."""
    rng = random.Random(seed)
    heads: list[int] = []
    for i in range(n):
        r = rng.random()
        if heads and r < 0.15:
            old = heads.pop(rng.randrange(len(heads)))
            when = WORLD + timedelta(minutes=m.last_seq) if r < 0.07 else None
            heads.append(m.revise(old, f"fact {i} revised from {old}", valid_from=when))
        elif heads and r < 0.2:
            m.forget(heads.pop(rng.randrange(len(heads))), reason=f"wrong {i}")
        elif heads and r < 0.3:
            m.record_embedding(rng.choice(heads), "hash", [rng.random(), rng.random()])
        else:
            heads.append(m.remember(f"subject {i % 7}", f"fact {i} about topic {i % 11}"))


def writer(path: Path, every: int) -> Memory:
    store = Store(path, fsync="never", checkpoint_every=every)
    return Memory(store=store, clock=StepClock(START, STEP), embedder=None)


def close(m: Memory) -> None:
    store = m.store
    m.close()
    store.close()


def state_of(m: Memory) -> tuple[object, ...]:
    """Everything a reader answers from: every table row, the fold, the tx times."""
    p = m.store.projector
    spaces = sorted(p.spaces())
    return (
        state_rows(p), [dict(s.state.facts) for _, s in spaces],
        [list(s.state.vectors) for _, s in spaces], [dict(s.state.episodes) for _, s in spaces],
        list(p.tx_times), p.last_seq,
    )


def replayed(path: Path) -> tuple[object, ...]:
    """What a reader holds when it replays the whole log (the checkpoint moved away)."""
    ck = path / CHECKPOINT_FILE
    aside = path / "aside.columns"
    os.replace(ck, aside)
    try:
        with Memory(path, read_only=True, embedder=None) as r:
            assert r.store.checkpoints.seq == 0
            return state_of(r)
    finally:
        os.replace(aside, ck)


@pytest.mark.parametrize("every", [1, 7, 40])
def test_a_reader_opens_from_the_checkpoint_and_holds_what_a_replay_holds(tmp_path, every):
    path = tmp_path / "s"
    w = writer(path, every)
    w.store.checkpoints.clock = lambda: 0.0  # publishing takes no time
    write_history(w, 120, seed=every)
    published = w.store.checkpoints.seq
    assert 0 < published <= w.last_seq  # published while writing, not only on close
    assert w.last_seq - published < max(every, w.last_seq // 100)  # the tail stays short
    with Memory(path, read_only=True, embedder=None) as r:
        assert r.store.checkpoints.seq == published  # opened from it, folded only the tail
        assert r.notes == []
        assert state_of(r) == state_of(w) == replayed(path)
        assert r.verify().ok
        top = [h.id for h in w.recall("fact topic 3", limit=10)]
        assert [h.id for h in r.recall("fact topic 3", limit=10)] == top
        w.remember("late", "a fact after the reader opened")
        assert r.get(w.last_seq).text == "a fact after the reader opened"  # still follows the log
    close(w)


def test_the_writer_publishes_on_close_so_a_reader_folds_nothing(tmp_path):
    path = tmp_path / "s"
    w = writer(path, 10**6)
    write_history(w, 30)
    assert w.store.checkpoints.seq == 0  # below the threshold: not yet
    last = w.last_seq
    close(w)
    assert read_stamp(path / CHECKPOINT_FILE)[0] == last
    assert stat.S_IMODE(os.stat(path / CHECKPOINT_FILE).st_mode) == 0o600  # owner's eyes only
    with Memory(path, read_only=True, embedder=None) as r:
        assert r.store.checkpoints.seq == last
        assert state_of(r) == replayed(path)


def test_a_store_without_a_checkpoint_gets_one_when_its_writer_opens(tmp_path):
    path = tmp_path / "s"
    w = writer(path, 10**6)
    write_history(w, 20)
    close(w)
    os.remove(path / CHECKPOINT_FILE)  # e.g. a store written before checkpoints
    with Memory(path, read_only=True, embedder=None) as r:
        assert r.store.checkpoints.seq == 0 and r.stats().facts > 0  # replays, as before
    w = writer(path, 5)  # the whole log is the tail: published at open
    assert w.store.checkpoints.seq == w.last_seq
    close(w)


def test_a_checkpoint_from_another_log_is_skipped(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    for path, seed in ((one, 1), (two, 2)):
        w = writer(path, 10**6)
        write_history(w, 40, seed=seed)
        close(w)
    shutil.copy(one / CHECKPOINT_FILE, two / CHECKPOINT_FILE)
    with Memory(two, read_only=True, embedder=None) as r:
        assert r.store.checkpoints.seq == 0
        assert any("different log" in n for n in r.notes)
        report = r.verify()
        assert report.ok  # the state that answers is the log's
        assert any("different log" in n for n in report.notes)  # and the report says why


def test_a_checkpoint_ahead_of_a_cut_log_is_skipped(tmp_path):
    """A checkpoint holding more than the log (the log was cut by `hmem log repair`, or a
    backup of the log was restored beside a newer checkpoint) is not used."""
    path, old = tmp_path / "s", tmp_path / "old"
    w = writer(path, 10**6)
    write_history(w, 20)
    old_last, old_chain = w.last_seq, w.store.log.chain_at(w.last_seq).hex()
    close(w)
    shutil.copytree(path, old)
    w = writer(path, 10**6)
    write_history(w, 20, seed=9)
    close(w)
    shutil.copy(path / CHECKPOINT_FILE, old / CHECKPOINT_FILE)
    with Memory(old, read_only=True, embedder=None) as r:
        assert r.store.checkpoints.seq == 0
        assert any("different log" in n for n in r.notes)
        assert r.verify().ok
    w = writer(old, 10**6)  # the writer does not count it as published either
    assert w.store.checkpoints.seq == 0
    close(w)
    assert read_stamp(old / CHECKPOINT_FILE) == (old_last, old_chain)


def test_a_checkpoint_of_another_layout_version_is_skipped(tmp_path):
    path = tmp_path / "s"
    w = writer(path, 10**6)
    write_history(w, 20)
    close(w)
    ck = path / CHECKPOINT_FILE
    data = bytearray(ck.read_bytes())
    data[8:12] = struct.pack("<I", 2)  # an earlier hmem's layout
    ck.write_bytes(bytes(data))
    with Memory(path, read_only=True, embedder=None) as r:
        assert r.store.checkpoints.seq == 0
        assert any("layout" in n for n in r.notes)
        assert state_of(r) == replayed(path)


FLIPS = 8


def damage(path: Path, how: str, rng: random.Random) -> None:
    data = bytearray(path.read_bytes())
    if how == "garbage":
        data = bytearray(b"not a database at all" * 100)
    elif how == "truncated":
        data = data[: rng.randrange(1, len(data))]
    else:
        for _ in range(FLIPS):
            i = rng.randrange(len(data))
            data[i] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("how", ["garbage", "truncated", "flipped"])
@pytest.mark.parametrize("seed", range(4))
def test_a_reader_never_answers_from_a_damaged_checkpoint(tmp_path, how, seed):
    path = tmp_path / "s"
    w = writer(path, 10**6)
    write_history(w, 60, seed=seed)
    close(w)
    expected = replayed(path)
    damage(path / CHECKPOINT_FILE, how, random.Random(seed))
    with Memory(path, read_only=True, embedder=None) as r:
        # Either the damage was in padding no column uses, or the checkpoint was skipped.
        assert state_of(r) == expected
        if r.store.checkpoints.seq == 0:
            assert any("checkpoint" in n for n in r.notes)
    w = writer(path, 10**6)  # the writer replaces it on its next publish
    w.remember("x", "one more")
    close(w)
    with Memory(path, read_only=True, embedder=None) as r:
        assert r.store.checkpoints.seq == r.last_seq and r.notes == []


def test_a_publish_cut_short_leaves_the_last_checkpoint_in_place(tmp_path):
    path = tmp_path / "s"
    w = writer(path, 10**6)
    write_history(w, 20)
    close(w)
    last = read_stamp(path / CHECKPOINT_FILE)
    (path / (CHECKPOINT_FILE + ".tmp")).write_bytes(b"half a copy")  # a crash mid-copy
    with Memory(path, read_only=True, embedder=None) as r:
        assert r.store.checkpoints.seq == last[0] and r.notes == []
    w = writer(path, 10**6)
    w.remember("x", "one more")
    close(w)
    assert read_stamp(path / CHECKPOINT_FILE)[0] == last[0] + 1
    assert not (path / (CHECKPOINT_FILE + ".tmp")).exists()


def test_a_failed_publish_is_a_note_not_a_lost_write(tmp_path, monkeypatch):
    path = tmp_path / "s"
    w = writer(path, 1)

    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("projections.checkpoint.save", full_disk)
    a = w.remember("maya", "Maya likes tea")
    assert w.get(a).text == "Maya likes tea"
    assert any("not published" in n for n in w.notes)
    monkeypatch.undo()
    close(w)
    with Memory(path, read_only=True, embedder=None) as r:
        assert r.get(a).text == "Maya likes tea"


def test_two_readers_open_at_once_in_one_process(tmp_path):
    path = tmp_path / "s"
    w = writer(path, 5)
    write_history(w, 30)
    with (
        Memory(path, read_only=True, embedder=None) as r1,
        Memory(path, read_only=True, embedder=None) as r2,
    ):
        assert r1.store.checkpoints.seq == r2.store.checkpoints.seq > 0
        assert state_of(r1) == state_of(r2)
    close(w)


def test_a_reader_makes_no_copy_of_the_store(tmp_path, monkeypatch):
    """A reader loads the checkpoint into memory: it writes no file anywhere (nothing a later
    erasure would have to find), and follows the writer as it publishes."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    path = tmp_path / "s"
    w = writer(path, 5)
    write_history(w, 30)
    before_files = sorted(p for p in path.rglob("*") if p.is_file())
    with Memory(path, read_only=True, embedder=None) as r:
        before = r.stats().facts
        write_history(w, 30, seed=5)  # the writer publishes over the checkpoint meanwhile
        assert r.stats().facts == w.stats().facts != before
        assert state_of(r)[1] == replayed(path)[1]
        assert not list((tmp_path / "tmp").iterdir())
    close(w)
    after = {p for p in path.rglob("*") if p.is_file()}
    kept = {p for p in before_files if "readers" not in p.parts and p.suffix != ".part"}
    assert kept <= after  # (a publish replaces the parts of the namespaces that changed)


@pytest.mark.parametrize("every", [1, 40])
def test_readers_and_the_writers_reopen_fold_only_the_tail(tmp_path, every):
    path = tmp_path / "s"
    w = writer(path, every)
    write_history(w, 90, seed=every)
    close(w)
    expected = replayed(path)
    with Memory(path, read_only=True, embedder=None) as r:
        assert r.store.checkpoints.seq == r.last_seq  # opened from it, nothing to fold
        assert state_of(r) == expected
    w = writer(path, every)  # closed cleanly: the state is at the checkpoint's seq
    assert w.store.checkpoints.seq == w.last_seq
    assert state_of(w) == expected
    w.remember("late", "one more")
    close(w)
    with Memory(path, read_only=True, embedder=None) as r:
        assert state_of(r) == replayed(path)


@pytest.mark.parametrize("how", ["garbage", "truncated", "flipped", "stale"])
def test_a_damaged_or_stale_checkpoint_is_replaced_by_a_replay(tmp_path, how):
    path = tmp_path / "s"
    w = writer(path, 10**6)
    write_history(w, 60, seed=3)
    close(w)
    ck = path / CHECKPOINT_FILE
    if how == "stale":  # from an earlier point of the same log: used, and the tail folded
        old = ck.read_bytes()
        w = writer(path, 10**6)
        w.remember("x", "one more")
        close(w)
        ck.write_bytes(old)
    else:
        damage(ck, how, random.Random(7))
    expected = replayed(path)
    with Memory(path, read_only=True, embedder=None) as r:
        assert state_of(r) == expected
        report = r.verify()
        assert report.ok
        if how != "stale":
            assert any("folds the log instead" in n for n in report.notes)  # refusal named


@pytest.mark.parametrize("damage, sealed, why", [
    ("a column's bytes", True, "not used: it is damaged (column {column} fails its digest)"),
    ("its extra", False, "not used: its part {column} cannot be read (DecodeError: "),
    ("its MAC", True, "not used: it is not authentic (not written with this store's key "
                      "file, or changed since)"),
    ("its MAC", False, "not used: it is damaged (its digest fails)"),
    ("its stamp: seq 0", True, "(seq 0) was published from a different log"),
    ("its tokenizer", False, "not used: its index tokens were made by another tokenizer "
                             "(another hmem or stemmer)"),
    ("a part elsewhere", False, "not used: its manifest names a part it cannot hold "
                                "({column})"),
    ("a part without a name", False, "not used: its manifest names a part it cannot hold "
                                     "({column})"),
    ("a part newer than it", False, "not used: its manifest names a part it cannot hold "
                                    "({column})"),
])
def test_a_refused_checkpoint_is_noted_saying_why(tmp_path, damage, sealed, why):
    """A manifest that cannot be used: the open replays the log. A namespace's part that cannot
    be used: that namespace's events are replayed when it is first read (the rest is loaded)."""
    path = tmp_path / "s"
    w = Memory(store=Store(path, fsync="never", checkpoint_every=10**6, seal=sealed),
               clock=StepClock(START, STEP), embedder=None)
    write_history(w, 20)
    if damage in ("a part without a name", "a part newer than it"):  # beside a sound part
        w.in_namespace("other").remember("maya", "Maya lives in Leeds")
    close(w)
    expected = replayed(path)
    ck = path / CHECKPOINT_FILE
    column = {
        "a column's bytes": lambda: flipped_column(ck),
        "its MAC": lambda: rewrite(ck, mac=bytes(32)),
        "its extra": lambda: with_unreadable_extra(ck),
        "its stamp: seq 0": lambda: rewrite(ck, stamped_seq_0),
        "its tokenizer": lambda: rewrite(ck, another_tokenizer),
        "a part elsewhere": lambda: a_part(ck, lambda name: "../" + name[3:]),
        "a part without a name": lambda: a_part(ck, lambda name: ""),
        "a part newer than it": lambda: a_part(ck, newer=True, at=-1),  # the last of two
    }[damage]()
    with Memory(path, read_only=True, embedder=None) as r:
        part = damage in ("a column's bytes", "its extra")
        assert r.notes == [] if part else len(r.notes) == 1
        assert r.store.checkpoints.seq == (20 if part else 0) and state_of(r) == expected
        assert len(r.notes) == 1
        note = r.notes[0]
    if damage == "its stamp: seq 0":
        assert note == f"checkpoint {why}; replayed the log"
    elif part:
        assert note.startswith("the checkpoint's part of namespace 'default' not used: ")
        assert why.format(column=column) in note and note.endswith("; replayed its events")
    else:
        assert note.startswith(f"checkpoint {ck} {why.format(column=column)}")
        assert note.endswith("; replayed the log")


def test_loading_a_checkpoint_of_another_point_or_layout_is_refused_saying_so(tmp_path):
    """What an open finds when the file is replaced between reading its stamp and loading it."""
    path = tmp_path / "s"
    w = writer(path, 10**6)
    write_history(w, 20)
    close(w)
    ck = path / CHECKPOINT_FILE
    with Memory(path, read_only=True, embedder=None) as r:
        seal = r.store.checkpoints.seal(r.store.log)
    seq, chain = read_stamp(ck)
    with pytest.raises(checkpoint.Refused) as refused:
        checkpoint.load(ck, (seq + 1, chain), seal)
    assert str(refused.value) == f"it holds seq {seq}, not the log's point {seq + 1}"
    data = bytearray(ck.read_bytes())
    data[8:12] = struct.pack("<I", 2)  # an earlier hmem's layout
    ck.write_bytes(bytes(data))
    with pytest.raises(checkpoint.Refused) as refused:
        checkpoint.load(ck, (seq, chain), seal)
    assert str(refused.value) == "it is unreadable or of another layout"


def test_a_reader_of_a_key_file_made_by_an_earlier_hmem_replays_saying_why(tmp_path, monkeypatch):
    """A version-1 key file has no secret to check the checkpoint's MAC with until a writer
    opens the store and gives it one."""
    monkeypatch.delenv("HMEM_KEY_FILE", raising=False)
    path = tmp_path / "s"
    w = writer(path, 10**6)
    write_history(w, 20)
    close(w)
    expected = replayed(path)
    keys = path / "keys.hmk"
    data = bytearray(keys.read_bytes())
    magic, _, flags, erased, scrubbed, file_id, _ = struct.unpack_from("<8sHHQQ16s16s", data)
    head = struct.pack("<8sHHIQQ16s12x", magic, 1, flags, 0, erased, scrubbed, file_id)
    data[:64] = head + struct.pack("<I", zlib.crc32(head))
    keys.write_bytes(bytes(data))
    with Memory(path, read_only=True, embedder=None) as r:
        assert r.store.checkpoints.seq == 0 and state_of(r) == expected
        assert r.notes == [
            f"checkpoint {path / CHECKPOINT_FILE} not used: the key file has no secret yet (it "
            f"was made by an earlier hmem): open the store as its writer once; replayed the log"
        ]
