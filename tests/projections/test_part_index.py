"""A namespace's index state kept in its checkpoint part (postings, turn links, entity runs):
a reader takes it as it is, adds the facts logged after the part to it, and what it holds equals
an index built one event at a time; ``verify``'s checks fail on kept state the facts do not
make."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hmem import Memory
from hmem.adapters.demo import StepClock
from projections.index_tokens import first_postings
from projections.kept_entities import first_entity_runs, kept_entity_runs_hold
from projections.kept_turns import first_turns, kept_turns_hold
from tests.conftest import examples
from tests.projections.test_index_build import (
    START,
    STEP,
    fields,
    histories,
    play,
    played_one_by_one,
)


@settings(max_examples=examples(dev=30, ci=100), deadline=None)
@given(history=histories, cut=st.integers(0, 25))
def test_a_reader_merges_its_parts_kept_postings_with_the_facts_logged_after(history, cut):
    """A reader opens from a checkpoint of the first ``cut`` steps while a writer has logged
    the rest and not yet published them: its indexes (the postings its parts kept, the later
    facts' merged in) equal those of a writer that saw every event one by one."""
    cut = min(cut, len(history))
    with tempfile.TemporaryDirectory() as tmp:
        want = played_one_by_one(Path(tmp) / "one", history, cut)
        clock, two = StepClock(START, STEP), Path(tmp) / "two"
        with Memory(two, clock=clock, embedder=None) as m:
            play(m, history[:cut])
        earlier = _checkpoint_files(two)
        with Memory(two, clock=clock, embedder=None) as m:
            play(m, history[cut:])
        _restore_checkpoint(two, earlier)  # the log goes on past the checkpoint
        with Memory(two, read_only=True, embedder=None) as r:
            got = {ns: fields(ix) for ns, ix in r.store.projector.indexes.items()}
    assert got == want


def _checkpoint_files(root: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in root.glob("checkpoint*")}


def _restore_checkpoint(root: Path, files: dict[str, bytes]) -> None:
    for path in root.glob("checkpoint*"):
        path.unlink()
    for name, data in files.items():
        (root / name).write_bytes(data)


def test_a_namespace_loaded_from_its_part_adds_the_few_facts_after_it(tmp_path):
    """The part's postings are loaded as they are and the few facts logged after it are added
    to the text index one by one (no posting is copied); a part written next holds all."""
    clock, root = StepClock(START, STEP), tmp_path / "s"
    with Memory(root, clock=clock, embedder=None) as m:
        for i in range(5):
            m.remember("Maya", f"Maya likes tea {i}", dedup=False)
    earlier = _checkpoint_files(root)
    with Memory(root, clock=clock, embedder=None) as m:
        for i in range(3):
            m.remember("Maya", f"Maya runs to the cafés {i}", dedup=False)
    _restore_checkpoint(root, earlier)
    with Memory(root, read_only=True, embedder=None) as r:
        state = r.store.projector.space("default").state
        assert state.postings is not None and state.postings.docs == 5  # the part's
        assert state.n == 8
        index = r.store.projector.indexes["default"]
        assert state.postings.docs == 5  # the part's, as they were
        assert first_postings(state).docs == 8  # what the next part keeps
        docs, tfs = index.text.postings("run")
        assert docs.tolist() == [5, 6, 7] and tfs.tolist() == [1.0, 1.0, 1.0]
        assert index.text.postings("tea")[0].tolist() == [0, 1, 2, 3, 4]
        assert index.text.postings("maya")[0].tolist() == list(range(8))


def test_a_namespace_loaded_from_its_part_takes_its_turn_links_and_links_the_facts_after_it(
    tmp_path,
):
    """The part keeps its facts' source positions and turn links; a reader with no fact after
    the part takes the links as kept; facts after it are read and every turn linked again (a
    later turn links an earlier document): what adding them one by one makes."""
    clock, root = StepClock(START, STEP), tmp_path / "s"
    refs = ["s1:t1", "s1:t2", "s2:t1", None, "s1:t4"]
    with Memory(root, clock=clock, embedder=None) as m:
        for i, ref in enumerate(refs):
            m.remember("Maya", f"Maya likes tea {i}", source_ref=ref, dedup=False)
    earlier = _checkpoint_files(root)
    with Memory(root, read_only=True, embedder=None) as r:
        state = r.store.projector.space("default").state
        assert state.turns is not None and state.turns.docs == 5
        index = r.store.projector.indexes["default"]
        assert list(index.prev_doc) == [-1, 0, -1, -1, -1]
        assert list(index.next_doc) == [1, -1, -1, -1, -1]
        assert index.turns == {"s1:t": {1: 0, 2: 1, 4: 4}, "s2:t": {1: 2}}
    with Memory(root, clock=clock, embedder=None) as m:
        m.remember("Maya", "Maya runs to the cafés", source_ref="s1:t3", dedup=False)
    _restore_checkpoint(root, earlier)
    with Memory(root, read_only=True, embedder=None) as r:
        state = r.store.projector.space("default").state
        assert state.n == 6
        index = r.store.projector.indexes["default"]
        assert list(index.prev_doc) == [-1, 0, -1, -1, 5, 1]
        assert list(index.next_doc) == [1, 5, -1, -1, -1, 4]
        assert state.turns is not None and state.turns.docs == 6  # what the next part keeps


def test_a_namespace_loaded_from_its_part_merges_the_entities_of_the_facts_after_it(tmp_path):
    """The part's entity runs are kept as they are and the facts after it sorted alone and
    merged in: the same runs as one sort of every naming, which the next part keeps."""
    clock, root = StepClock(START, STEP), tmp_path / "s"
    with Memory(root, clock=clock, embedder=None) as m:
        for text in ("Maya met Tom in Paris", "Tom flew to Oslo", "Maya likes tea"):
            m.remember("Maya", text, dedup=False)
    earlier = _checkpoint_files(root)
    with Memory(root, clock=clock, embedder=None) as m:
        for text in ("Oslo is cold, Tom says", "Ann met Maya", "Paris again with Ann"):
            m.remember("Maya", text, dedup=False)
    _restore_checkpoint(root, earlier)
    with Memory(root, read_only=True, embedder=None) as r:
        state = r.store.projector.space("default").state
        assert state.entity_runs is not None and state.entity_runs.docs == 3  # the part's
        index = r.store.projector.indexes["default"]
        assert state.entity_runs.docs == 6 and kept_entity_runs_hold(state)  # merged: all
        assert index.entity_docs.get("tom").tolist() == [0, 1, 3]
        assert index.entity_docs.get("ann").tolist() == [4, 5]
        assert index.entity_docs.get("maya").tolist() == list(range(6))  # every subject


def test_facts_after_the_part_link_to_the_first_kept_document_of_each_neighbouring_turn(
    tmp_path,
):
    """Two kept documents share a turn; facts after the part at the turn between link to the
    first of each neighbouring turn and it to the last of them to arrive, as adding them one
    by one does, and the links kept next are the ones the refs make."""
    clock, root = StepClock(START, STEP), tmp_path / "s"
    with Memory(root, clock=clock, embedder=None) as m:
        for ref in ("s1:t1", "s1:t1", "s1:t3", "s1:t3", "s2:t2"):
            m.remember("Maya", f"Maya at {ref}", source_ref=ref, dedup=False)
    earlier = _checkpoint_files(root)
    with Memory(root, clock=clock, embedder=None) as m:
        for ref in ("s1:t2", "s1:t2", "s2:t1"):
            m.remember("Maya", f"Maya later at {ref}", source_ref=ref, dedup=False)
    _restore_checkpoint(root, earlier)
    with Memory(root, read_only=True, embedder=None) as r:
        state = r.store.projector.space("default").state
        assert state.turns is not None and state.turns.docs == 5  # the part's
        index = r.store.projector.indexes["default"]
        assert list(index.prev_doc) == [-1, -1, 6, -1, 7, 0, 0, -1]
        assert list(index.next_doc) == [6, -1, -1, -1, -1, 2, 2, 4]
        assert state.turns.docs == 8 and kept_turns_hold(state)


def test_turn_links_kept_that_the_source_refs_do_not_make_fail_the_check(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        for ref in ("s1:t1", "s1:t2", "s1:t3"):
            m.remember("Maya", f"Maya at {ref}", source_ref=ref, dedup=False)
        state = m.store.projector.space("default").state
        first_turns(state)
        assert kept_turns_hold(state)
        kept = state.turns
        assert kept is not None
        for changed in (kept._replace(next_doc=np.array([-1, 2, -1])),
                        kept._replace(turn=np.array([1, 2, 4])),
                        kept._replace(sessions=["s9:t"])):
            state.turns = changed
            assert not kept_turns_hold(state)


@pytest.mark.parametrize("first_turn, sessions, every_fact", [
    (0, 3, False),
    (130, 3, False),  # turns stored as unsigned bytes
    (40_000, 200, True),  # unsigned 16-bit turns; no fact without a turn: no -1 anywhere
])
def test_index_state_kept_in_a_large_part_reads_back_as_it_was_made(
    tmp_path, first_turn, sessions, every_fact
):
    """A part keeps long columns narrower (signed or not) or as their exceptions: the turn
    links and entity runs of a namespace of hundreds of facts (and of one whose facts name no
    turn) read back as made, and the index built from them is the one built fact by fact."""
    root = tmp_path / "s"
    refs = [f"s{i % sessions}:t{first_turn + i // sessions}" if i % 5 or every_fact else None
            for i in range(300)]
    with Memory(root, embedder=None) as m:
        for ns in ("a", "b"):
            m.store.projector.indexes.build_now(ns)  # built now: every fact goes through add()
        a, b = m.in_namespace("a"), m.in_namespace("b")
        for i, ref in enumerate(refs):
            a.remember("Maya", f"Maya said {i} to Tom in Paris" if i % 4 else f"Maya said {i}",
                       source_ref=ref, dedup=False)
            if i % 3 == 0:
                b.remember("Tom", f"Tom said {i}", dedup=False)
        want = {ns: fields(m.store.projector.indexes[ns]) for ns in ("a", "b")}
    with Memory(root, read_only=True, embedder=None) as r:
        for ns in ("a", "b"):
            state = r.store.projector.space(ns).state
            assert state.turns is not None and state.turns.docs == state.n
            assert state.entity_runs is not None and state.entity_runs.docs == state.n
            assert kept_turns_hold(state) and kept_entity_runs_hold(state)
            assert fields(r.store.projector.indexes[ns]) == want[ns]
        assert not [note for note in r.notes if "not used" in note]  # no part refused


def test_entity_runs_kept_that_the_facts_do_not_make_fail_the_check(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        for text in ("Maya met Tom", "Tom went to Paris", "Maya stayed home"):
            m.remember("note", text, dedup=False)
        state = m.store.projector.space("default").state
        first_entity_runs(state)
        assert kept_entity_runs_hold(state)
        kept = state.entity_runs
        assert kept is not None
        for changed in (kept._replace(documents=kept.documents[::-1].copy()),
                        kept._replace(codes=kept.codes + 1),
                        kept._replace(docs=2)):
            state.entity_runs = changed
            assert not kept_entity_runs_hold(state)
