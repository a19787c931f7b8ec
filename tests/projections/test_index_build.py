"""The recall indexes built in bulk (from the fold state and its index tokens, on first use)
equal the indexes built one event at a time, field by field, for any history."""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from unittest.mock import patch

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from eventlog.events import FactRemembered
from hmem import Memory
from hmem.adapters.demo import StepClock
from projections import source_positions as source_positions_module
from projections.arrays import NONE
from projections.fold import fold_all
from projections.index_build import build_indexes
from projections.index_tokens import first_postings, set_tokens
from projections.kept_entities import first_entity_runs, kept_entity_runs_hold
from projections.kept_turns import first_turns, kept_turns_hold
from projections.recall_index import NamespaceIndex, source_position
from projections.source_positions import source_positions
from projections.string_columns import Texts
from projections.turn_links import link_turns
from tests.conftest import examples
from tests.projections.test_fold import stamp

WORDS = ["Maya", "lives", "in", "London", "the", "is", "tea", "cafés", "ran", "running", "1"]
WORLD = datetime(2030, 1, 1, tzinfo=timezone.utc)

texts = st.lists(st.sampled_from(WORDS), min_size=0, max_size=8).map(" ".join).filter(str.strip)
remember = st.tuples(
    st.just("remember"),
    st.sampled_from(["a", "b"]),  # namespace
    st.sampled_from(["Maya", "maya  ", "Tom", "the London office"]),
    texts,
    st.lists(st.sampled_from(["Maya", "London", "Tom"]), max_size=2),
    st.sampled_from([None, "s1:t1", "s1:t2", "s1:t3", "D2:7", "x"]),
)
change = st.tuples(
    st.sampled_from(["correct", "world", "forget", "embed"]), st.integers(0, 10**6), texts
)
histories = st.lists(st.one_of(remember, change), min_size=1, max_size=25)



# The stores' clock: a step forward each time it is read.
START, STEP = datetime(2025, 1, 1, tzinfo=timezone.utc), timedelta(minutes=1)


def play(m: Memory, history: list[tuple[object, ...]]) -> None:
    heads: dict[str, list[int]] = {"a": [], "b": []}
    for op in history:
        if op[0] == "remember":
            _, ns, subject, text, entities, ref = op
            mem = m.in_namespace(str(ns))
            heads[str(ns)].append(
                mem.remember(str(subject), str(text), entities=list(entities), source_ref=ref,
                             dedup=False)  # each remember is a new fact the history may change
            )
            continue
        kind, pick, text = op
        live = [(ns, i) for ns, ids in heads.items() for i in ids]
        if not live:
            continue
        ns, fid = live[int(pick) % len(live)]
        mem = m.in_namespace(ns)
        if kind == "embed":
            mem.record_embedding(fid, "hash", [float(pick % 7), 1.0, float(fid)])
            continue
        heads[ns].remove(fid)
        if kind == "forget":
            mem.forget(fid)
        else:
            valid_from = WORLD + timedelta(minutes=m.last_seq) if kind == "world" else None
            heads[ns].append(mem.revise(fid, str(text), valid_from=valid_from))


def fields(index: NamespaceIndex) -> dict[str, object]:
    """Every field of an index, as comparable values (what verify compares), and each fact's
    document found by its id."""
    return {**index.fields(), "doc": [index.doc(i) for i in index.fact_ids]}


@settings(max_examples=examples(dev=40, ci=300))
@given(history=histories)
def test_bulk_built_indexes_equal_incrementally_built_ones(history):
    with tempfile.TemporaryDirectory() as tmp:
        with Memory(Path(tmp) / "s", clock=StepClock(START, STEP), embedder=None) as m:
            projector = m.store.projector
            for ns in ("a", "b"):  # built now: every event below goes through add()
                assert len(projector.indexes.build_now(ns)) == 0
            play(m, history)
            incremental = {ns: fields(ix) for ns, ix in projector.indexes.items()}
            bulk = {}
            for _, space in projector.spaces():
                bulk |= build_indexes(space.state)
                for vec in space.state.vectors:
                    bulk[vec.namespace].set_vector(
                        vec.fact_id, vec.model, np.frombuffer(vec.vector, dtype="<f4")
                    )
            assert {ns: fields(ix) for ns, ix in bulk.items()} == incremental
        with Memory(Path(tmp) / "s", read_only=True, embedder=None) as r:
            reader = {ns: fields(ix) for ns, ix in r.store.projector.indexes.items()}
            assert reader == incremental  # a reader opened from the checkpoint builds the same


def _fresh_pairs(index: NamespaceIndex, which: str) -> tuple[list[int], list[int]]:
    links = np.frombuffer(index.prev_doc if which == "prev" else index.next_doc, dtype=np.int64)
    docs = np.flatnonzero(links >= 0)
    return docs.tolist(), links[docs].tolist()


@settings(max_examples=examples(dev=30, ci=150), deadline=None)
@given(refs=st.lists(st.sampled_from(["s1:1", "s1:2", "s1:3", "s1:5", "s2:1", "s2:2", None]),
                     min_size=1, max_size=12))
def test_link_pairs_follow_every_new_turn(refs):
    """The neighbour links recall reads are cached; every write that links a turn (in order,
    out of order, a turn seen twice) is seen at the next read."""
    with tempfile.TemporaryDirectory() as tmp, Memory(
        Path(tmp) / "s", embedder=None, clock=StepClock(START, STEP)
    ) as m:
        for i, ref in enumerate(refs):
            m.remember("maya", f"turn {i} about tea", source_ref=ref)
            m.recall("tea")  # reads (and caches) the pairs between writes
            index = m.store.projector.indexes["default"]
            for which in ("prev", "next"):
                docs, other = index.link_pairs(which, len(index))
                assert (docs.tolist(), other.tolist()) == _fresh_pairs(index, which)


# A version row as (tx_from_seq, tx_to_seq or None, valid_from, valid_to or None); a fact of
# one to three of them, superseded at some seq or not. The fold makes only some of these (a
# second row only at a world change, so the head periods never come in two pieces): the bulk
# build must agree with the per-fact one on all of them, irregular facts included.
seqs = st.integers(1, 12)
version_rows = st.tuples(seqs, st.none() | seqs, st.integers(0, 3), st.none() | st.integers(0, 3))
shapes = st.lists(
    st.tuples(st.lists(version_rows, min_size=1, max_size=3), st.none() | seqs), min_size=1,
    max_size=8,
)


def _columns_with_rows(facts):
    """The fold's columns of one fact per shape, with that shape's version rows and
    superseding seq written over what the fold made."""
    cols = fold_all([
        stamp(FactRemembered(subject="maya", text="tea"), seq, 0)
        for seq in range(1, len(facts) + 1)
    ])
    r, f = cols.rows, cols.table
    for slot, (rows, superseded) in enumerate(facts):
        f.superseded_by[slot] = NONE if superseded is None else superseded
        first = r.extend({
            "slot": [slot] * len(rows),
            "tx_from_seq": [row[0] for row in rows],
            "tx_to_seq": [NONE if row[1] is None else row[1] for row in rows],
            "valid_from": [row[2] for row in rows],
            "valid_to": [NONE if row[3] is None else row[3] for row in rows],
        })
        chain = list(range(first, first + len(rows)))
        f.first_row[slot], f.last_row[slot] = chain[0], chain[-1]
        for row, nxt in zip(chain, [*chain[1:], -1], strict=True):
            r.next[row] = nxt
    set_tokens(cols, 0, [{} for _ in facts])
    return cols


@settings(max_examples=examples(dev=300, ci=3000))
@given(shapes)
def test_bulk_visibility_equals_the_per_fact_one_for_any_rows(facts):
    cols = _columns_with_rows(facts)
    bulk = build_indexes(cols)["default"]
    one_by_one = NamespaceIndex()
    one_by_one.add_documents([cols.fact_at(slot) for slot in range(len(facts))])
    for index in (bulk, one_by_one):
        index.visible_mask(np.arange(len(index)), 1, None)  # fills heads / rows
    assert list(bulk.heads) == list(one_by_one.heads)
    assert list(bulk.rows) == list(one_by_one.rows)
    assert sorted(bulk.irregular) == sorted(one_by_one.irregular)
    assert bytes(bulk.current) == bytes(one_by_one.current)


@settings(max_examples=examples(dev=200, ci=1500))
@given(shapes)
def test_the_shown_rows_periods_are_the_per_fact_ones_for_any_rows(facts):
    """Recall's time factor reads the valid period of the row a hit shows (``visible_row`` or
    the last row) from the index's arrays: the same as each fact's rows say, irregular facts
    (more rows than the arrays hold, head periods in pieces) included."""
    cols = _columns_with_rows(facts)
    one_by_one = NamespaceIndex()
    one_by_one.add_documents([cols.fact_at(slot) for slot in range(len(facts))])
    docs = np.arange(len(facts))
    for index in (build_indexes(cols)["default"], one_by_one):
        for seq in range(14):
            for valid_at in (None, 0, 1, 2, 3, 4):
                got = index.shown_periods(docs, seq, valid_at)
                want = []
                for slot in range(len(facts)):
                    fact = cols.fact_at(slot)
                    row = fact.visible_row(seq, valid_at) or fact.rows[-1]
                    want.append((row.valid_from, NONE if row.valid_to is None else row.valid_to))
                assert list(zip(got[0].tolist(), got[1].tolist(), strict=True)) == want


def _linked_one_by_one(n, positions):
    """What NamespaceIndex.add_documents does for each document in turn (the model)."""
    prev_doc, next_doc, first = [-1] * n, [-1] * n, {}
    for doc, (session, turn) in positions:
        known = first.setdefault(session, {})
        known.setdefault(turn, doc)
        before, after = known.get(turn - 1), known.get(turn + 1)
        if before is not None:
            prev_doc[doc], next_doc[before] = before, doc
        if after is not None:
            next_doc[doc], prev_doc[after] = after, doc
    return prev_doc, next_doc, first


@settings(max_examples=examples(dev=300, ci=3000))
@given(st.lists(st.none() | st.tuples(
    st.sampled_from(["a", "b", "c", "d", "e", "f"]),
    st.integers(-2, 6) | st.sampled_from([10**18 - 2, 10**18 - 1, 2**62]),
), max_size=30))
# (session, turn) as one integer would overflow: session e's turn 0 would sort with a's turn 4
@example([("a", 4), ("a", 5), ("b", 0), ("c", 0), ("d", 0), ("e", 0), ("e", 1), ("a", 2**62)])
def test_turns_linked_in_bulk_equal_turns_linked_one_by_one(places):
    """Repeated turns, turns arriving before or after their neighbours, several sessions, turn
    numbers too far apart to sort as one integer with their session."""
    positions = [(doc, place) for doc, place in enumerate(places) if place is not None]
    docs = np.array([d for d, _ in positions], dtype=np.int64)
    names = sorted({p[0] for _, p in positions})
    prev_doc, next_doc, first_docs = link_turns(
        len(places), docs, np.array([names.index(p[0]) for _, p in positions], dtype=np.int64),
        names, np.array([p[1] for _, p in positions], dtype=np.int64),
    )
    want = _linked_one_by_one(len(places), positions)
    assert (prev_doc.tolist(), next_doc.tolist(), first_docs()) == want


def test_a_turn_number_too_long_for_int64_is_no_position():
    assert source_position("s1:t" + "9" * 18) == ("s1:t", 10**18 - 1)
    assert source_position("s1:t" + "9" * 19) is None
    assert source_position("s1:" + "1" * 40) is None


refs = st.text(alphabet=st.sampled_from(list("ab:s0123456789\n٣é:\x00")), max_size=30) | (
    st.from_regex(r"\A[A-Za-z]{0,3}\d{0,3}:[a-z]{0,2}\d{0,22}\Z")
) | st.from_regex(r"\A[a-z]{60,68}:t\d{1,3}\Z")  # sessions of 63-72 bytes: at the width limit


@settings(max_examples=examples(dev=300, ci=700))
@given(st.lists(refs, max_size=20))
def test_source_positions_read_in_bulk_equal_one_by_one(values):
    """ASCII refs read from their bytes, others (Unicode digits, newlines) by the regex: the
    same (session, turn) or none as source_position gives each."""
    texts = Texts()
    texts.extend(values)
    got_index, sessions, names, turns = source_positions(
        texts.blob, texts.starts[: texts.n], texts.ends[: texts.n]
    )
    assert len(set(names)) == len(names)
    got = {i: (names[s], t) for i, s, t in zip(got_index.tolist(), sessions.tolist(),
                                               turns.tolist(), strict=True)}
    want = {i: p for i, v in enumerate(values) if (p := source_position(v)) is not None}
    assert got == want
    with patch.object(source_positions_module, "_CHUNK", 3):  # read a few refs at a time
        chunked = source_positions(texts.blob, texts.starts[: texts.n], texts.ends[: texts.n])
    assert all(np.array_equal(a, b) for a, b in zip(chunked, (got_index, sessions, names, turns),
                                                     strict=True))


def _played_one_by_one(root: Path, history, cut: int) -> dict[str, dict[str, object]]:
    """The indexes of a writer whose indexes saw every event, the history played in two calls
    (a call's changes pick among the facts it made) as the stores compared with it are."""
    with Memory(root, clock=StepClock(START, STEP), embedder=None) as m:
        for ns in ("a", "b"):
            m.store.projector.indexes.build_now(ns)
        play(m, history[:cut])
        play(m, history[cut:])
        return {ns: fields(ix) for ns, ix in m.store.projector.indexes.items()}


@settings(max_examples=examples(dev=30, ci=100))
@given(history=histories, cut=st.integers(0, 25))
def test_an_index_built_in_bulk_then_added_to_equals_one_built_one_by_one(history, cut):
    """The writer reopens (its indexes built in bulk from the columns, the turns' first
    documents and the time-travel arrays made only when an add or a change needs them) and
    goes on writing: the same index as a writer whose indexes saw every event."""
    cut = min(cut, len(history))
    with tempfile.TemporaryDirectory() as tmp:
        want = _played_one_by_one(Path(tmp) / "one", history, cut)
        clock = StepClock(START, STEP)
        with Memory(Path(tmp) / "two", clock=clock, embedder=None) as m:
            play(m, history[:cut])
        with Memory(Path(tmp) / "two", clock=clock, embedder=None) as m:
            for ns in ("a", "b"):
                m.store.projector.indexes.build_now(ns)  # in bulk, from the columns
            play(m, history[cut:])
            got = {ns: fields(ix) for ns, ix in m.store.projector.indexes.items()}
    assert got == want


@settings(max_examples=examples(dev=30, ci=100), deadline=None)
@given(history=histories, cut=st.integers(0, 25))
def test_a_reader_merges_its_parts_kept_postings_with_the_facts_logged_after(history, cut):
    """A reader opens from a checkpoint of the first ``cut`` steps while a writer has logged
    the rest and not yet published them: its indexes (the postings its parts kept, the later
    facts' merged in) equal those of a writer that saw every event one by one."""
    cut = min(cut, len(history))
    with tempfile.TemporaryDirectory() as tmp:
        want = _played_one_by_one(Path(tmp) / "one", history, cut)
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
