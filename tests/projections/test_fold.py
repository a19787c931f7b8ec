"""The fold (projections/fold.py) equals the reference fold, however it is fed.

For random histories of remember / revise (world change and correction) / forget / embedding /
episode / erasure events (and embeddings read back erased) across two namespaces, valid and not: the
fold fed one event at a time, all at once or in two parts, and the reference fold
(tests/projections/reference_fold.py: an object per fact, written from the rules; the store is held
to the naive model by tests/stateful/test_stateful.py) hold the same facts, field by field and row
by row; every event the reference refuses, the fold refuses with the same error, and the write
path's check (``check``) refuses it with the same type."""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import msgspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.events import (
    EmbeddingRecorded,
    EpisodeRecorded,
    FactForgotten,
    FactRemembered,
    FactRevised,
    FactsErased,
    decode,
    encode,
)
from eventlog.sealing import ERASED
from projections import checkpoint
from projections.checkpoint import CHECKPOINT_FILE
from projections.errors import HmemError, ProjectionError
from projections.fold import check, fold, fold_all, touched_facts
from projections.fold_state import FactColumns
from projections.index_tokens import (
    Postings,
    kept_postings_hold,
    namespace_postings,
    set_tokens,
    token_counts,
)
from projections.kept_entities import kept_entity_runs_hold, namespace_entity_runs
from projections.kept_turns import kept_turns_hold, namespace_turns
from projections.projector import Projector, index_counts
from projections.records import Fact
from replay.verify import state_rows
from tests.conftest import examples
from tests.projections.reference_fold import FactState

UTC = timezone.utc
START = datetime(2026, 1, 1, tzinfo=UTC)
NAMESPACES = ["default", "other"]
SEAL = checkpoint.Seal(b"k" * 32, 3)  # a sealed store's: its MAC key and erasure record
DATES = [None, datetime(2024, 1, 1, tzinfo=UTC), datetime(2025, 6, 1, tzinfo=UTC), START,
         START + timedelta(hours=3), START + timedelta(hours=3, microseconds=1),
         datetime(2027, 1, 1, tzinfo=UTC)]

dates = st.sampled_from(DATES)
mostly_none = st.none() | st.none() | dates
# A target: any seq (a fact, an episode, a vector, nothing), or 1000+k: the k-th newest fact in
# its own namespace (an episode, in derived_from), or 2000+k: that fact in the drawn namespace.
near = st.integers(1000, 1003)
ids = st.integers(-1, 24) | near | near | near | st.integers(1000, 1010) | st.integers(2000, 2002)
names = st.none() | st.sampled_from(["chat", "s1:t3"])
ns = st.sampled_from(NAMESPACES)
texts = st.sampled_from(["Maya lives in London", "tom likes tea", "The office moved to Acme",
                         "x"])
lineage = dict(
    derived_from=st.just(()) | st.just(()) | st.lists(ids, max_size=2).map(tuple),
    extractor=st.none() | st.just("gpt-x"),
    prompt_version=st.none() | st.just("v1"),
    category=st.none() | st.sampled_from(["semantic", "episodic"]),
    importance=st.none() | st.sampled_from([1, 10, 200]),  # 200: refused on write, kept by a fold
)
# source refs: turns next to each other, in two sessions, and refs that name no turn
refs = st.none() | st.sampled_from(["chat", "s1:t3", "s1:t2", "s1:t4", "s2:9"])
common = dict(namespace=ns, source_agent=names, source_ref=refs)
requests = st.none() | st.none() | st.sampled_from(["r1", "r2"])  # the same id in two events too
statement = dict(request_id=requests,
    text=texts, valid_from=mostly_none, valid_to=mostly_none,
    confidence=st.sampled_from([1.0, 0.5, 0.0]),
    entities=st.sampled_from([(), ("Paris",), ("acme", "Acme's")]), **lineage, **common,
)
remembers = st.builds(FactRemembered, subject=st.sampled_from(["maya", "Tom ", ""]), **statement)
revisions = st.builds(
    FactRevised, fact_id=ids, subject=st.sampled_from([None, "", "tom"]),
    reason=st.none() | st.just("moved"),
    **(statement | {"valid_from": st.none() | st.sampled_from(DATES[3:])}),
)
events = st.one_of(
    remembers, revisions, remembers, revisions,
    st.builds(FactForgotten, fact_id=ids, reason=st.none() | st.just("asked"),
              request_id=requests, **common),
    st.builds(EmbeddingRecorded, fact_id=ids, model=st.sampled_from(["m", "n"]),
              dims=st.sampled_from([2, 3]), vector=st.just(b""),
              sealed=st.sampled_from([b"", b"", ERASED]), **common),
    st.builds(FactsErased, scope=st.sampled_from(["fact", "subject"]),
              fact_ids=st.lists(ids, min_size=1, max_size=3).map(tuple),
              episode_ids=st.just(()) | st.lists(ids, max_size=1).map(tuple),
              recall_ids=st.just(()) | st.just((1,)), **common),
    st.builds(EpisodeRecorded, session_id=st.sampled_from(["s1", "s2"]), turn=st.integers(0, 3),
              role=st.sampled_from(["user", "assistant"]), text=texts, speaker=names,
              observed_at=dates, **common),
)
histories = st.lists(st.tuples(events, st.integers(0, 90)), min_size=4, max_size=40)


def stamp(ev, seq: int, minutes: int):
    """``ev`` as the log would hand it back: stamped, encoded and decoded."""
    fields = {"seq": seq, "tx_at": START + timedelta(minutes=minutes)}
    if isinstance(ev, EmbeddingRecorded) and not ev.sealed:  # an erased one has no vector
        fields["vector"] = bytes(4 * ev.dims)
    return decode(encode(msgspec.structs.replace(ev, **fields)))


def error_of(call) -> type | None:
    try:
        call()
    except HmemError as e:
        return type(e)
    return None


def assert_same_state(cols: FactColumns, state: FactState, what: str) -> None:
    assert cols.last_seq == state.last_seq, what
    assert cols.ids().tolist() == sorted(state.facts), what
    for fid, want in state.facts.items():
        got = cols.fact(fid)
        if got != want:
            diff = [f"  {name}: columns {getattr(got, name)!r} fold {getattr(want, name)!r}"
                    for name in Fact.__struct_fields__ if getattr(got, name) != getattr(want, name)]
            raise AssertionError(f"{what}: fact {fid} differs\n" + "\n".join(diff))
    # read together (each column gathered once for many slots), and past the last fact
    assert cols.facts.many([*state.facts, cols.last_seq + 1]) == state.facts, what
    for slot in range(cols.tokened):  # a projector's fold: the facts' index tokens too
        fact = cols.fact_at(slot)
        assert token_counts(cols, slot) == index_counts(fact.subject, fact.text), (what, fact.id)
    assert cols.vectors == state.vectors, what
    assert cols.vector_dims == state.vector_dims, what
    assert cols.episodes == state.episodes, what
    assert cols.sessions == state.sessions, what
    for name in NAMESPACES:
        assert cols.ids_in(name).tolist() == [f.id for f in state.in_namespace(name)]
        facts = list(state.in_namespace(name))
        assert cols.counts(name) == {
            "facts": len(facts),
            "current": sum(f.superseded_by is None and f.forgotten_seq is None for f in facts),
            "superseded": sum(f.superseded_by is not None for f in facts),
            "forgotten": sum(f.forgotten_seq is not None for f in facts),
            "subjects": len({f.subject_key for f in facts}),
        }, what
        assert cols.current_texts(name) == [
            (f.id, f.text) for f in facts if f.superseded_by is None and f.forgotten_seq is None
        ], what
        current = cols.ids()[cols.current_mask(name)].tolist()
        assert current == [f.id for f in state.in_namespace(name)
                           if f.superseded_by is None and f.forgotten_seq is None]


def resolve(ev, state: FactState):
    """``ev`` with its targets of 1000+k and 2000+k resolved against ``state``."""
    fields = {}
    fact_id = getattr(ev, "fact_id", 0)
    if fact_id >= 1000 and state.facts:
        newest = sorted(state.facts, reverse=True)
        fields["fact_id"] = fid = newest[fact_id % 1000 % len(newest)]
        if fact_id < 2000:
            fields["namespace"] = state.facts[fid].namespace
    if isinstance(ev, FactsErased) and state.facts:  # 1000+k: the k-th newest fact, any ns
        newest = sorted(state.facts, reverse=True)
        fields["fact_ids"] = tuple(dict.fromkeys(
            newest[i % 1000 % len(newest)] if i >= 1000 else i for i in ev.fact_ids))
        if ev.fact_ids[0] >= 1000 and ev.fact_ids[0] < 2000:
            fields["namespace"] = state.facts[fields["fact_ids"][0]].namespace
    derived = getattr(ev, "derived_from", ())
    if any(seq >= 1000 for seq in derived):
        namespace = fields.get("namespace", ev.namespace)
        turns = sorted((e.seq for e in state.episodes_in(namespace)), reverse=True) or [0]
        fields["derived_from"] = tuple(
            turns[seq % 1000 % len(turns)] if seq >= 1000 else seq for seq in derived
        )
    return msgspec.structs.replace(ev, **fields) if fields else ev


def replay(history):
    """Apply the history to FactState and FactColumns event by event, each event stamped with
    the next seq; returns the two, the accepted events and the refused ones (as stamped)."""
    state, cols = FactState(), FactColumns()
    accepted, refused = [], []
    for ev, minutes in history:
        ev = stamp(resolve(ev, state), state.last_seq + 1, minutes)
        want = error_of(lambda e=ev: state.check_applies(e))
        got = error_of(lambda e=ev: check([e], cols))
        assert got is want, f"check of {ev}: fold {got}, reference {want}"
        if isinstance(ev, EmbeddingRecorded):
            batches: tuple[dict, dict] = ({}, {})
            assert error_of(lambda e=ev, b=batches: cols.check_dims(e, b[0])) is error_of(
                lambda e=ev, b=batches: state.check_dims(e, b[1]))
            assert batches[0] == batches[1]
        try:
            changed = state.apply(ev)
        except ProjectionError as e:
            with pytest.raises(ProjectionError) as info:
                fold([ev], cols)
            assert str(info.value) == str(e)
            refused.append(ev)
            continue
        fold([ev], cols)
        assert touched_facts([ev]) == set(changed)  # the facts it created or changed
        accepted.append(ev)
    return state, cols, accepted, refused


@settings(max_examples=examples(dev=300, ci=3000))
@given(histories)
def test_incremental_and_bulk_columns_equal_the_fold(history):
    state, cols, accepted, _ = replay(history)
    assert_same_state(cols, state, "incremental")
    assert_same_state(fold_all(accepted), state, "bulk")


@settings(max_examples=examples(dev=150, ci=300))
@given(histories, st.integers(0, 40))
def test_the_state_saved_in_a_checkpoint_and_loaded_back_equals_the_fold(history, cut):
    """What a reopen or a reader does (projections/checkpoint.py): the state a projector folded
    (the first ``cut`` events at once, as replay does), saved to a checkpoint and loaded back,
    holds the same facts, index tokens and event columns; and folding on from the loaded state
    (a reader's tail) matches the projector that folded everything one event at a time."""
    state, _, accepted, _ = replay(history)
    cut = min(cut, len(accepted))
    projector = Projector()
    projector.apply_all(accepted[:cut], bulk=True)
    one_by_one = Projector()
    for ev in accepted[:cut]:
        one_by_one.apply(ev)
    assert_same_spaces(projector, one_by_one, f"bulk fold of {cut}")
    loaded = through_checkpoint(projector)
    assert_same_spaces(loaded, projector, f"checkpoint at {cut}")
    assert_same_events(loaded, projector, f"checkpoint at {cut}")
    for _, space in loaded.spaces():  # the index state each part kept, as its facts make it
        assert kept_turns_hold(space.state) and kept_entity_runs_hold(space.state)
        assert space.state.entity_runs is not None and space.state.turns is not None
    for ev in accepted[cut:]:
        loaded.apply(ev)
        one_by_one.apply(ev)
    assert_same_spaces(loaded, one_by_one, "folded on from the checkpoint")
    assert_same_events(loaded, one_by_one, "folded on from the checkpoint")
    assert loaded.last_seq == len(accepted)
    for namespace in NAMESPACES:  # each space is its namespace's part of the reference fold
        space = loaded.space(namespace)
        assert space.state.tokened == space.state.n
        assert_same_state(space.state, restricted(state, accepted, namespace), namespace)
        # the postings its part kept, the later facts' merged in: what a sort of all makes
        slots = space.state.namespace_slots(namespace)
        merged = namespace_postings(space.state, slots)
        assert kept_postings_hold(space.state)
        space.state.postings = None
        assert_same_postings(namespace_postings(space.state, slots), merged)
        # and so its turn links, the later facts' positions read and all linked again
        linked = namespace_turns(space.state, slots)[:2]
        assert kept_turns_hold(space.state)
        space.state.turns = None
        assert all(map(np.array_equal, namespace_turns(space.state, slots)[:2], linked))
        # and so its entities' documents
        runs = namespace_entity_runs(space.state, slots)
        assert kept_entity_runs_hold(space.state)
        space.state.entity_runs = None
        assert all(map(np.array_equal, namespace_entity_runs(space.state, slots)[:3], runs[:3]))
        names = space.state.namespaces.values
        mine = [ev for ev in accepted if ev.namespace == namespace]
        assert space.events.seq.tolist() == [ev.seq for ev in mine]
        assert {names[c] for c in space.events.namespace} <= {namespace}
        for request_id in ("r1", "r2"):  # each request id's events, however it was loaded
            assert loaded.request_seqs(namespace, request_id) == [
                ev.seq for ev in mine if getattr(ev, "request_id", None) == request_id
            ]


def restricted(state: FactState, accepted: list, namespace: str) -> FactState:
    """The reference fold's state of ``namespace`` alone, at its last event (with the length
    of each fact's document, which a projector's fold sets)."""
    out = FactState()
    out.facts = {
        fid: msgspec.structs.replace(f, doc_len=sum(index_counts(f.subject, f.text).values()))
        for fid, f in state.facts.items() if f.namespace == namespace}
    out.vectors = [v for v in state.vectors if v.namespace == namespace]
    out.vector_dims = {k: d for k, d in state.vector_dims.items() if k[0] == namespace}
    out.episodes = {s: e for s, e in state.episodes.items() if e.namespace == namespace}
    out.sessions = {k: s for k, s in state.sessions.items() if k[0] == namespace}
    out.last_seq = max((ev.seq for ev in accepted if ev.namespace == namespace), default=0)
    return out


def assert_same_spaces(got: Projector, want: Projector, what: str) -> None:
    """The two hold the same namespaces, each with the same fold state (index tokens too)."""
    assert got.last_seq == want.last_seq, what
    assert sorted(got.namespaces()) == sorted(want.namespaces()), what
    for namespace in want.namespaces():
        state = got.space(namespace).state
        assert state.tokened == state.n, what
        assert_same_state(state, want.space(namespace).state, f"{what}, {namespace}")


def assert_same_events(got: Projector, want: Projector, what: str) -> None:
    """The two hold the same event rows, as every namespace's SQL tables show them."""
    assert state_rows(got) == state_rows(want), what
    assert list(got.tx_times) == list(want.tx_times), what


def save(path: Path, projector: Projector, stamp_: checkpoint.Stamp) -> None:
    checkpoint.save(path, projector, stamp_, SEAL)


def assert_same_postings(want: Postings, got: Postings) -> None:
    assert got[0] == want[0]
    for have, expected in zip(got[1:], want[1:], strict=True):
        assert have.tolist() == expected.tolist()


def through_checkpoint(projector: Projector) -> Projector:
    """The projector's state saved to a checkpoint and loaded back (a file is refused for
    another stamp, another key or another erasure record)."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / CHECKPOINT_FILE
        stamp_ = (projector.last_seq, "ab")
        save(path, projector, stamp_)
        assert checkpoint.read_stamp(path) == stamp_
        for stamp_2, seal in [((stamp_[0] + 1, stamp_[1]), SEAL), ((stamp_[0], "ab0"), SEAL),
                              (stamp_, checkpoint.Seal(b"k" * 32, 3)),
                              (stamp_, checkpoint.Seal(b"j" * 32, 3)),
                              (stamp_, checkpoint.Seal(None))]:
            if (stamp_2, seal) != (stamp_, SEAL):
                with pytest.raises(checkpoint.Refused):
                    checkpoint.load(path, stamp_2, seal)
        return checkpoint.load(path, stamp_, SEAL)


def test_a_part_named_for_another_namespace_is_refused(tmp_path):
    """A part is read only as the namespace whose state it holds (a manifest that named a's
    part for b would otherwise serve a's facts in b)."""
    projector = Projector()
    projector.apply_all([
        stamp(FactRemembered(subject="maya", text="Maya likes tea", namespace=ns), seq, 0)
        for seq, ns in enumerate(["a", "b", "a"], 1)
    ])
    path = tmp_path / CHECKPOINT_FILE
    save(path, projector, (3, "ab"))
    _, parts = checkpoint.authentic_parts(path, (3, "ab"), SEAL)
    assert checkpoint.read_part(path, parts["a"])[0].n == 2
    with pytest.raises(checkpoint.Refused, match="another namespace"):
        checkpoint.read_part(path, msgspec.structs.replace(parts["a"], namespace="b"))


@settings(max_examples=examples(dev=60, ci=300))
@given(histories, st.integers(0, 2), st.floats(0, 1), st.integers(0, 7))
def test_a_damaged_checkpoint_is_refused_never_misread(history, which, where, bit):
    """Any flipped bit of any of its files (the manifest, a namespace's part): the load is
    refused, or (a flip in padding) the state loaded is still the fold."""
    _, _, accepted, _ = replay(history)
    projector = Projector()
    projector.apply_all(accepted)
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / CHECKPOINT_FILE
        stamp_ = (projector.last_seq, "ab")
        save(path, projector, stamp_)
        files = [f for f in (path, *checkpoint.part_files(path)) if f.stat().st_size]
        hit = files[which % len(files)]  # (no event: the tx times' file is empty)
        raw = bytearray(hit.read_bytes())
        raw[min(int(where * len(raw)), len(raw) - 1)] ^= 1 << bit
        hit.write_bytes(bytes(raw))
        try:
            loaded = checkpoint.load(path, stamp_, SEAL)
        except checkpoint.Refused:
            loaded = None
    if loaded is not None:
        back = loaded
        assert_same_spaces(back, projector, "loaded despite a flipped bit")
        assert_same_events(back, projector, "loaded despite a flipped bit")


@settings(max_examples=examples(dev=100, ci=300))
@given(histories, st.integers(0, 40))
def test_a_refused_event_in_a_bulk_replay_leaves_the_events_before_it_folded(history, pick):
    """Replay of a log holding an event the fold refuses: the projector raises its
    ProjectionError, and holds every event before it (and nothing after)."""
    _, _, accepted, refused = replay(history)
    if not refused:
        return
    bad = refused[pick % len(refused)]
    before = accepted[: bad.seq - 1]
    projector = Projector()
    with pytest.raises(ProjectionError):
        projector.apply_all([*before, bad, *accepted[bad.seq - 1:]], bulk=True)
    assert projector.last_seq == len(before)
    assert sum(len(s.events) for _, s in projector.spaces()) == len(before)
    want = Projector()
    for ev in before:
        want.apply(ev)
    assert_same_spaces(projector, want, "folded before the refusal")
    assert_same_events(projector, want, "folded before the refusal")


@settings(max_examples=examples(dev=200, ci=2000))
@given(histories, st.integers(0, 40))
def test_bulk_fold_in_two_parts(history, cut):
    state, cols, accepted, _ = replay(history)
    cut = min(cut, len(accepted))
    two = fold_all(accepted[:cut])
    fold_all(accepted[cut:], into=two)
    assert_same_state(two, state, f"bulk in two parts at {cut}")


@settings(max_examples=examples(dev=200, ci=2000))
@given(histories, st.integers(0, 40))
def test_bulk_fold_refuses_what_the_fold_refuses(history, pick):
    """A refused event put back into the log at its seq: the bulk fold raises FactState's
    error there, with every event before it folded."""
    _, _, accepted, refused = replay(history)
    if not refused:
        return
    bad = refused[pick % len(refused)]
    before = accepted[: bad.seq - 1]
    log = [*before, bad, *accepted[bad.seq - 1:]]
    state = FactState()
    for ev in before:
        state.apply(ev)
    with pytest.raises(ProjectionError) as want:
        state.apply(bad)
    cols = FactColumns()
    with pytest.raises(ProjectionError) as got:
        fold_all(log, into=cols)
    assert str(got.value) == str(want.value)
    assert_same_state(cols, state, "bulk up to the refused event")


def test_out_of_step_seqs_are_refused_in_bulk_as_one_by_one():
    evs = [stamp(FactRemembered(subject="maya", text="Maya likes tea"), seq, 0)
           for seq in (1, 2, 4)]
    cols, state = FactColumns(), FactState()
    with pytest.raises(ProjectionError) as got:
        fold_all(evs, into=cols)
    for ev in evs[:2]:
        state.apply(ev)
    with pytest.raises(ProjectionError) as want:
        state.apply(evs[2])
    assert str(got.value) == str(want.value)
    assert_same_state(cols, state, "before the gap")


def test_doc_len_and_odd_values_round_trip():
    ev = stamp(FactRemembered(subject="maya", text="Maya likes tea", importance=2**40), 1, 0)
    cols, state = fold_all([ev]), FactState()
    state.apply(ev)
    state.facts[1].doc_len = 3
    set_tokens(cols, 0, [{"maya": 1, "like": 1, "tea": 1}])
    assert cols.fact(1) == state.facts[1] and cols.fact(1).importance == 2**40


@pytest.mark.parametrize("world", [False, True])
def test_forgetting_a_replaced_version(world):
    """A corrected fact has no open row left (forget closes none); a fact replaced by a world
    change keeps an open row for its earlier period (forget closes it)."""
    change = datetime(2027, 1, 1, tzinfo=UTC) if world else None
    evs = [
        stamp(FactRemembered(subject="maya", text="Maya lives in London"), 1, 0),
        stamp(FactRevised(fact_id=1, text="Maya lives in Paris", valid_from=change), 2, 5),
        stamp(FactForgotten(fact_id=1, reason="asked"), 3, 10),
    ]
    state, cols = FactState(), FactColumns()
    for ev in evs:
        fold([ev], cols)
        assert touched_facts([ev]) == set(state.apply(ev))
    assert [r.tx_to_seq for r in state.facts[1].rows] == ([2, 3] if world else [2])
    assert_same_state(cols, state, "one by one")
    assert_same_state(fold_all(evs), state, "bulk")


def test_a_refusal_in_one_namespace_leaves_the_others_folded_once():
    """Namespaces fold apart: a refused event stops the projector at the seq before it, but a
    later event of another namespace in the same batch is folded, and the log's next read from
    the refused event (the same events again) folds it no second time."""
    events = [
        stamp(FactRemembered(namespace="a", subject="maya", text="Maya likes tea"), 1, 1),
        stamp(FactRemembered(namespace="b", subject="tom", text="Tom likes chess"), 2, 2),
        stamp(FactForgotten(namespace="a", fact_id=2), 3, 3),  # fact 2 is b's: not found in a
        stamp(FactRemembered(namespace="b", subject="tom", text="Tom likes go"), 4, 4),
    ]
    projector = Projector()
    for _ in range(2):
        with pytest.raises(ProjectionError, match="logged event 3 does not apply"):
            projector.apply_all(events[projector.last_seq:])
        assert projector.last_seq == 2
        assert projector.space("a").state.ids().tolist() == [1]
        assert projector.space("b").state.ids().tolist() == [2, 4]
        assert projector.space("b").events.seq.tolist() == [2, 4]
