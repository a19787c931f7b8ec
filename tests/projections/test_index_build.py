"""The recall indexes built in bulk (from the fold state and its index tokens, on first use)
equal the indexes built one event at a time, field by field, for any history."""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path
from unittest.mock import patch

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st

from eventlog.events import FactRemembered
from hmem import Memory
from hmem.adapters.demo import StepClock
from projections import source_positions as source_positions_module
from projections.arrays import NONE
from projections.fold import fold_all
from projections.index_build import build_indexes
from projections.index_tokens import set_tokens
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


def played_one_by_one(root: Path, history, cut: int) -> dict[str, dict[str, object]]:
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
        want = played_one_by_one(Path(tmp) / "one", history, cut)
        clock = StepClock(START, STEP)
        with Memory(Path(tmp) / "two", clock=clock, embedder=None) as m:
            play(m, history[:cut])
        with Memory(Path(tmp) / "two", clock=clock, embedder=None) as m:
            for ns in ("a", "b"):
                m.store.projector.indexes.build_now(ns)  # in bulk, from the columns
            play(m, history[cut:])
            got = {ns: fields(ix) for ns, ix in m.store.projector.indexes.items()}
    assert got == want
