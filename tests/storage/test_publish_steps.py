"""A shared writer publishes in steps (hmem/storage/checkpoints.py): each call holds the writer
lock for a share of the time other writers wait for it, keeps the parts it wrote, and the next
goes on from them; the checkpoint on disk stays the last whole one until a call writes the
manifest, and a part is written again only when its namespace changed since."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from hmem.storage import checkpoints as checkpoints_module
from projections import checkpoint, checkpoint_part
from projections.checkpoint import CHECKPOINT_FILE
from replay.verify import state_rows
from tests.storage.test_namespace_loading import (
    assert_a_reader_holds_the_replay,
    close,
    fill,
    replayed,
    store,
    written,
)

NAMESPACES = ("ana", "ben", "cy", "dee", "eve")


@pytest.fixture
def part_writes(monkeypatch) -> list[str]:
    """The namespace of every part written (by its file's prefix), in order."""
    writes: list[str] = []
    real = checkpoint_part.write

    def write(tmp: Path, *args: object, **kwargs: object) -> bytes:
        owner = [ns for ns in NAMESPACES
                 if tmp.name.startswith(checkpoint.part_prefix(CHECKPOINT_FILE, ns))]
        writes.extend(owner)
        return real(tmp, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(checkpoint_part, "write", write)
    return writes


def passed_over(path: Path):
    """Shared writers ``a`` and ``b`` of a store of NAMESPACES; ``b`` changed every namespace
    but ``ana`` after ``a`` opened, ``a`` wrote ``ana`` after them (so it passed over the
    others' events), and ``a``'s publish is timed by a clock that jumps an hour a read: each
    step stops after the first part it writes."""
    written(path, NAMESPACES, 3)
    a, b = store(path, shared=True), store(path, shared=True)
    fill(a, "ana", 1, "juice", changes=False)
    for ns in NAMESPACES[1:]:
        fill(b, ns, 1, "coffee", changes=False)
    fill(a, "ana", 1, "milk", changes=False)
    hours = itertools.count(0.0, 3600.0)
    a.store.checkpoints.clock = lambda: next(hours)
    return a, b


def publish_step(m) -> int:
    return m.store.checkpoints.publish(m.store.projector, m.store.log, step=True)


def publish_to_the_end(a) -> int:
    """Steps of ``a``'s publish until one writes the manifest; how many it took."""
    for calls in range(1, 2 * len(NAMESPACES) + 2):
        if publish_step(a) == a.store.projector.last_seq:
            return calls
    raise AssertionError("the publish never wrote its manifest")


def passed_over_written(a, part_writes: list[str]) -> str:
    """Steps of ``a``'s publish until one wrote a namespace it passed over; that namespace."""
    for _ in NAMESPACES:
        if set(part_writes) - {"ana"}:
            break
        publish_step(a)
    (first,) = set(part_writes) - {"ana"}
    return first


def test_each_step_writes_a_part_and_the_last_one_the_manifest(tmp_path, part_writes):
    path = tmp_path / "s"
    a, b = passed_over(path)
    part_writes.clear()  # the store's first checkpoint's
    ck = path / CHECKPOINT_FILE
    before = checkpoint.read_stamp(ck)
    changed = len(a.store.projector.changed())
    assert changed == 4
    for step in range(changed):  # ana's (held) first, then one passed over a step
        publish_step(a)
        assert checkpoint.read_stamp(ck) == before  # readers still open the last whole one
        with store(path, read_only=True) as r:
            assert r.notes == []
            assert len(r.in_namespace("dee").recall("coffee").hits) == 1
        assert len(part_writes) == step + 1
    assert publish_step(a) == a.store.projector.last_seq
    assert checkpoint.read_stamp(ck) != before
    assert sorted(part_writes) == sorted(NAMESPACES)  # each written once: none again
    assert a.notes == [] and a.verify().ok
    close(b)
    close(a)
    assert_a_reader_holds_the_replay(path)


def test_a_namespace_changed_between_steps_is_written_again(tmp_path, part_writes):
    path = tmp_path / "s"
    a, b = passed_over(path)
    part_writes.clear()  # the store's first checkpoint's
    first = passed_over_written(a, part_writes)
    fill(b, first, 1, "cocoa", changes=False)
    fill(a, "ana", 1, "tea", changes=False)  # a catches up past it
    publish_to_the_end(a)
    assert part_writes.count(first) == 2 and part_writes.count("ana") == 2
    assert a.verify().ok
    close(b)
    close(a)
    with store(path, read_only=True) as r:
        assert r.notes == []
        assert {h.text for h in r.in_namespace(first).recall("cocoa").hits} == {
            f"{first} likes cocoa 0"}
        assert state_rows(r.store.projector) == replayed(path)


def test_a_publish_that_keeps_stopping_is_finished_in_one_call(tmp_path, part_writes,
                                                              monkeypatch):
    monkeypatch.setattr(checkpoints_module, "MAX_STEPS", 2)
    path = tmp_path / "s"
    a, b = passed_over(path)
    part_writes.clear()  # the store's first checkpoint's
    assert publish_step(a) == publish_step(a) != a.store.projector.last_seq
    assert publish_step(a) == a.store.projector.last_seq  # the third writes the rest
    assert sorted(part_writes) == sorted(NAMESPACES)
    close(b)
    close(a)


def test_an_erasure_after_a_step_leaves_no_part_holding_what_it_erased(tmp_path, part_writes):
    """An erasure waits for every other process of the store to close: the steps' parts of a
    writer that closed before its publish ended are on disk, and the erasure removes them."""
    path = tmp_path / "s"
    a, b = passed_over(path)
    part_writes.clear()  # the store's first checkpoint's
    first = passed_over_written(a, part_writes)
    close(a)

    def holding(text: str) -> list[str]:
        return [p.name for p in path.iterdir()
                if p.name.startswith(CHECKPOINT_FILE) and text.encode() in p.read_bytes()]

    assert holding(f"{first} likes coffee")
    b.in_namespace(first).erase(namespace=first, reason="asked")
    assert holding(f"{first} likes") == []
    a = store(path, shared=True)
    fill(a, "ana", 1, "tea", changes=False)
    assert a.store.checkpoints.publish(a.store.projector, a.store.log, step=True) == (
        a.store.projector.last_seq)
    assert holding(f"{first} likes") == []
    assert a.notes == [] and a.verify().ok
    close(b)
    close(a)
    with store(path, read_only=True) as r:
        assert r.notes == []
        assert not r.in_namespace(first).recall("coffee").hits
        assert state_rows(r.store.projector) == replayed(path)


def test_a_close_finishes_the_publish_its_steps_began(tmp_path, part_writes):
    """A process that writes once and closes (a CLI write) would never reach a next step."""
    path = tmp_path / "s"
    a, b = passed_over(path)
    part_writes.clear()  # the store's first checkpoint's
    publish_step(a)
    last = a.store.projector.last_seq
    close(a)
    assert checkpoint.read_stamp(path / CHECKPOINT_FILE)[0] == last
    assert sorted(part_writes) == sorted(NAMESPACES)  # the close went on from the step's part
    close(b)
    assert_a_reader_holds_the_replay(path)


def test_the_namespaces_a_writer_holds_loaded_are_published_in_steps_too(tmp_path,
                                                                         part_writes):
    """A long-lived writer (an MCP server) keeps the namespaces it wrote to loaded."""
    path = tmp_path / "s"
    written(path, NAMESPACES, 3)
    a = store(path, shared=True)
    for ns in NAMESPACES:
        fill(a, ns, 1, "juice", changes=False)
    hours = itertools.count(0.0, 3600.0)
    a.store.checkpoints.clock = lambda: next(hours)
    part_writes.clear()  # the store's first checkpoint's
    assert publish_to_the_end(a) == len(NAMESPACES)
    assert sorted(part_writes) == sorted(NAMESPACES)
    close(a)
    assert_a_reader_holds_the_replay(path)
