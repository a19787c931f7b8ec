"""A process loads a namespace's state when it first uses it (projections/projector.py,
hmem/storage/checkpoints.py): from its part of the checkpoint, with its events of the log after
it; a writer's publish writes only the parts of the namespaces that changed."""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path

from hmem import Memory
from hmem.adapters.demo import StepClock
from hmem.storage.checkpoints import Checkpoints
from hmem.storage.store import Store
from projections import checkpoint
from projections.checkpoint import CHECKPOINT_FILE
from projections.timeutil import to_us
from replay.verify import state_rows

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
NAMESPACES = ("ana", "ben", "cy")


def store(path: Path, *, every: int = 10**6, read_only: bool = False, shared: bool = False
          ) -> Memory:
    s = Store(path, fsync="never", checkpoint_every=every, read_only=read_only, shared=shared)
    return Memory(store=s, clock=StepClock(START), embedder=None)


def fill(m: Memory, namespace: str, n: int, word: str = "tea", *, changes: bool = True
         ) -> list[int]:
    """``n`` facts of ``namespace`` about ``word``; with ``changes``, the first revised and
    the second forgotten."""
    view = m.in_namespace(namespace)
    ids = [int(view.remember(namespace, f"{namespace} likes {word} {i}")) for i in range(n)]
    if changes:
        view.revise(ids[0], f"{namespace} likes {word} again")
        view.forget(ids[1])
    return ids


def written(path: Path, namespaces: tuple[str, ...], n: int) -> None:
    """A store at ``path`` whose writer filled each of ``namespaces`` with ``n`` facts (and a
    revision and a forget), closed: its checkpoint published."""
    w = store(path)
    for ns in namespaces:
        fill(w, ns, n)
    close(w)


def namespace_part_files(ck: Path) -> list[Path]:
    """The namespaces' parts beside the manifest ``ck`` (not the tx times')."""
    return [p for p in checkpoint.part_files(ck) if ".tx-" not in p.name]


def namespace_parts(ck: Path) -> set[str]:
    return {p.name for p in namespace_part_files(ck)}


def close(m: Memory) -> None:
    store_ = m.store
    m.close()
    store_.close()


def replayed(path: Path) -> dict[str, list[tuple[object, ...]]]:
    """Every table's rows of the log folded from seq 1 (the checkpoint moved aside)."""
    ck = path / CHECKPOINT_FILE
    files = [ck, *checkpoint.part_files(ck)]
    for f in files:
        f.rename(f.with_name(f.name + ".aside"))
    try:
        with store(path, read_only=True) as r:
            return state_rows(r.store.projector)
    finally:
        for f in files:
            f.with_name(f.name + ".aside").rename(f)


def assert_a_reader_holds_the_replay(path: Path) -> None:
    """A reader opened now finds nothing to note, and holds what a replay of the log makes."""
    with store(path, read_only=True) as r:
        assert r.notes == []
        assert state_rows(r.store.projector) == replayed(path)


def test_a_reader_loads_only_the_namespaces_it_reads(tmp_path):
    path = tmp_path / "s"
    written(path, NAMESPACES, 5)
    with store(path, read_only=True) as r:
        projector = r.store.projector
        assert [ns for ns, _ in projector.loaded()] == []
        assert sorted(projector.namespaces()) == sorted(NAMESPACES)
        hits = r.in_namespace("ben").recall("tea").hits
        assert hits and all(h.text.startswith("ben likes tea") for h in hits)
        assert [ns for ns, _ in projector.loaded()] == ["ben"]
        assert state_rows(projector) == replayed(path)  # every namespace, loaded on asking
        assert r.notes == []


def test_a_namespace_loaded_late_holds_the_events_logged_after_the_checkpoint(tmp_path):
    """A reader opened from a checkpoint, then the writer goes on (without publishing) and
    another writer's publish replaces the parts the reader was opened with."""
    path = tmp_path / "s"
    written(path, NAMESPACES, 4)
    with store(path, read_only=True) as r:
        w = store(path)
        fill(w, "cy", 3, "coffee", changes=False)
        before = namespace_parts(path / CHECKPOINT_FILE)
        w.store.checkpoints.publish(w.store.projector, w.store.log)
        after = namespace_parts(path / CHECKPOINT_FILE)
        assert len(before - after) == 1  # cy's part replaced; ana's and ben's kept as they were
        fill(w, "ana", 2, "juice", changes=False)  # after every checkpoint: from the log alone
        assert r.in_namespace("ana").last_seq == w.last_seq  # caught up: ana, cy passed over
        assert [ns for ns, _ in r.store.projector.loaded()] == []
        assert {h.text for h in r.in_namespace("cy").recall("coffee").hits} == {
            f"cy likes coffee {i}" for i in range(3)}
        assert {h.text for h in r.in_namespace("ana").recall("juice").hits} == {
            f"ana likes juice {i}" for i in range(2)}
        assert r.notes == []
        close(w)
        assert r.verify().ok
        assert state_rows(r.store.projector) == replayed(path)


def test_a_writer_publishes_only_the_parts_of_the_namespaces_that_changed(tmp_path):
    path = tmp_path / "s"
    written(path, NAMESPACES, 4)
    ck = path / CHECKPOINT_FILE
    first = {p.name: p.stat().st_mtime_ns for p in namespace_part_files(ck)}
    w = store(path)
    fill(w, "ben", 2, "coffee")
    close(w)  # publishes at close
    then = {p.name: p.stat().st_mtime_ns for p in namespace_part_files(ck)}
    kept = set(first) & set(then)
    assert len(kept) == 2 and all(first[n] == then[n] for n in kept)  # ana's and cy's, as were
    assert len(set(then) - set(first)) == 1  # ben's new part; its old one is gone
    with store(path, read_only=True) as r:
        assert state_rows(r.store.projector) == replayed(path)
        assert r.verify().ok


def test_a_shared_writer_that_passed_over_a_namespace_publishes_it_whole(tmp_path):
    """Two shared writers of different namespaces: each publish holds the other's events."""
    path = tmp_path / "s"
    written(path, ("ana", "ben"), 3)
    a, b = store(path, shared=True), store(path, shared=True)
    fill(a, "ana", 2, "juice", changes=False)
    fill(b, "ben", 2, "coffee", changes=False)
    fill(a, "ana", 2, "milk", changes=False)  # a catches up past ben's events, not loading ben
    assert [ns for ns, _ in a.store.projector.loaded()] == ["ana"]
    a.store.checkpoints.publish(a.store.projector, a.store.log)
    close(b)
    close(a)
    with store(path, read_only=True) as r:
        assert r.notes == []
        assert state_rows(r.store.projector) == replayed(path)
        assert {h.text for h in r.in_namespace("ben").recall("coffee").hits} == {
            "ben likes coffee 0", "ben likes coffee 1"}


def test_a_shared_writer_publishes_the_namespaces_it_passed_over_without_keeping_them(
        tmp_path):
    """Its publish loads each, writes its part and drops it; the writer loads one from that
    part (and the log after it) when it is next used, and each later publish starts there."""
    path = tmp_path / "s"
    written(path, NAMESPACES, 3)
    a, b = store(path, shared=True), store(path, shared=True)
    fill(a, "ana", 1, "juice", changes=False)
    fill(b, "ben", 2, "coffee", changes=False)
    fill(b, "cy", 1, "coffee", changes=False)
    fill(a, "ana", 1, "milk", changes=False)  # a catches up past ben's and cy's events
    projector = a.store.projector
    a.store.checkpoints.publish(projector, a.store.log)
    assert [ns for ns, _ in projector.loaded()] == ["ana"]
    assert projector.changed() == []
    fill(b, "ben", 1, "cocoa", changes=False)
    fill(a, "ana", 1, "tea", changes=False)
    assert projector.changed() == ["ben"]  # cy has no event since the publish
    assert {h.text for h in a.in_namespace("ben").recall("coffee cocoa").hits} == {
        "ben likes coffee 0", "ben likes coffee 1", "ben likes cocoa 0"}
    assert sorted(ns for ns, _ in projector.loaded()) == ["ana", "ben"]
    a.store.checkpoints.publish(projector, a.store.log)
    assert a.notes == [] and a.verify().ok
    close(b)
    close(a)
    assert_a_reader_holds_the_replay(path)


def test_an_erasure_folds_again_only_the_namespace_it_erased(tmp_path):
    path = tmp_path / "s"
    written(path, NAMESPACES, 4)
    ck = path / CHECKPOINT_FILE
    first = {p.name: p.read_bytes() for p in namespace_part_files(ck)}
    with Memory(path, namespace="ben", embedder=None) as m:
        receipt = m.erase(namespace="ben", reason="asked")
        assert len(receipt.fact_ids) == 5  # four facts and a revision
        assert [ns for ns, _ in m.store.projector.loaded()] == ["ben"]
        assert not m.recall("tea").hits
    then = {p.name: p.read_bytes() for p in namespace_part_files(ck)}
    assert len(set(first) & set(then)) == 2  # ana's and cy's parts, untouched
    assert all(first[n] == then[n] for n in set(first) & set(then))
    assert not [n for n, data in then.items() if b"ben likes tea" in data]
    with store(path, read_only=True) as r:
        assert r.notes == []
        assert state_rows(r.store.projector) == replayed(path)
        assert {h.text for h in r.in_namespace("ana").recall("tea").hits} >= {"ana likes tea 2"}


def test_facts_folded_after_a_part_leave_its_columns_unmade(tmp_path):
    """A namespace loaded with new facts after its part (none revised or forgotten) appends to
    the part's columns without making them whole (a 1M-fact namespace's: ~64 MiB)."""
    path = tmp_path / "s"
    written(path, ("ana",), 3000)
    with store(path, read_only=True) as r:
        w = store(path)
        w.in_namespace("ana").remember_many(
            [{"subject": "ana", "text": f"ana likes juice {i}"} for i in range(300)])
        assert r.in_namespace("ana").last_seq == w.last_seq
        state = r.store.projector.space("ana").state
        assert {"superseded_by", "superseded_at", "subject"} <= set(state.table.deferred())
        assert {"tx_to", "tx_to_seq"} <= set(state.rows.deferred())
        assert len(r.in_namespace("ana").recall("juice", limit=400).hits) == 300
        close(w)
        assert state_rows(r.store.projector) == replayed(path)


def test_a_memory_bound_drops_the_least_recently_used_namespaces_and_loses_nothing(tmp_path):
    path = tmp_path / "s"
    written(path, NAMESPACES, 30)
    s = Store(path, fsync="never", memory_mb=1)
    s.projector.budget = 1  # a byte: only the namespace in use stays loaded
    with Memory(store=s, clock=StepClock(START), embedder=None) as m:
        for round_ in range(2):
            for ns in NAMESPACES:
                view = m.in_namespace(ns)
                view.remember(ns, f"{ns} likes cocoa {round_}")
                assert [n for n, _ in s.projector.loaded()] == [ns]
                assert {h.text for h in view.recall("cocoa").hits} == {
                    f"{ns} likes cocoa {r}" for r in range(round_ + 1)}
        assert m.verify().ok
    s.close()
    assert_a_reader_holds_the_replay(path)


def test_tx_times_are_read_when_time_travel_asks_and_a_damaged_block_is_read_from_the_log(
        tmp_path):
    """A reader opens without reading the checkpoint's tx times (8 bytes an event of the whole
    store); as_of by a time reads the blocks it needs, each checked: one changed on disk is
    never believed, its times are read from the log, and a note says so."""
    path = tmp_path / "s"
    w = store(path)
    n = len(w.remember_many([{"subject": "ana", "text": f"ana likes tea {i}"}
                             for i in range(3000)]))
    times = [w.store.log.get(seq).tx_at for seq in (11, 2501)]
    close(w)
    with store(path, read_only=True) as r:
        want = [r.as_of(t) for t in times]
        assert r.notes == []
    (tx_file,) = path.glob(CHECKPOINT_FILE + ".tx-*.part")
    raw = bytearray(tx_file.read_bytes())
    assert len(raw) == 8 * n
    raw[8 * 10 + 2] ^= 1  # seq 11's tx time, in the first block
    tx_file.write_bytes(bytes(raw))
    with store(path, read_only=True) as r:
        assert r.store.checkpoints.seq == r.last_seq and r.notes == []  # opened from it
        assert [r.as_of(t) for t in times] == want
        assert any("tx times of seqs 1-2048 failed their digest" in n for n in r.notes)
        assert list(r.store.projector.tx_times) == [
            to_us(ev.tx_at) for ev in r.store.log.read_raw()]


def test_a_namespace_folded_again_from_seqs_not_all_its_own_reads_the_whole_log(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        m.in_namespace("b").remember("x", "another namespace's fact")
        m.remember("alice", "one")
        m.remember("alice", "two")
        log, last = m.store.log, m.last_seq
        by_seqs = Checkpoints.replayed(log, "default", last, [2, 3])
        wrong = Checkpoints.replayed(log, "default", last, [1, 3])  # seq 1 is b's
        whole = Checkpoints.replayed(log, "default", last)
        for space in (by_seqs, wrong, whole):
            assert space.events.seqs_in("default").tolist() == [2, 3]
            assert space.state.n == 2
