"""The projector's spaces (projections/projector.py): one namespace's state each, deferred until
first used, dropped again past a memory budget, and the log's own bookkeeping (seqs, tx times,
erasure receipts) kept whatever is loaded."""

from __future__ import annotations

from array import array
from datetime import datetime, timedelta, timezone
from types import SimpleNamespace

import msgspec
import numpy as np
import pytest

from eventlog.events import (
    EmbeddingRecorded,
    Event,
    FactForgotten,
    FactRemembered,
    FactsErased,
    decode,
    encode,
)
from projections.errors import ProjectionError
from projections.fold import fold
from projections.fold_state import FactColumns
from projections.index_build import build_index
from projections.projector import Projector, Space

START = datetime(2026, 1, 1, tzinfo=timezone.utc)


def stamp(ev: object, seq: int) -> Event:
    """``ev`` as the log hands it back: stamped, encoded and decoded."""
    return decode(encode(msgspec.structs.replace(
        ev, seq=seq, tx_at=START + timedelta(minutes=seq))))  # type: ignore[type-var]


def remember(namespace: str, seq: int, text: str = "") -> Event:
    return stamp(FactRemembered(namespace=namespace, subject=namespace,
                                text=text or f"{namespace} fact {seq}"), seq)


def erase(namespace: str, seq: int, fact: int) -> Event:
    return stamp(FactsErased(namespace=namespace, scope="fact", fact_ids=(fact,)), seq)


def forget(namespace: str, seq: int, fact: int) -> Event:
    return stamp(FactForgotten(namespace=namespace, fact_id=fact), seq)


class Lazy:
    """A projector opened at seq ``at`` of ``log`` (a list of events) with ``deferred``
    namespaces named, not loaded, as a checkpoint leaves them; its loader folds a namespace's
    events of the log up to the seq asked (and counts its calls)."""

    def __init__(self, log: list[Event], at: int, deferred: list[str]) -> None:
        self.log, self.loads = log, []
        full = Projector()
        full.apply_all(log[:at])
        loaded = {ns: (s.state, s.events) for ns, s in full.spaces() if ns not in deferred}
        parts = {ns: SimpleNamespace(seq=full.space(ns).last_seq) for ns in deferred}
        receipts = {ns: full.space(ns).events.seqs_of("erased") for ns in deferred}
        self.projector = Projector(loaded, array("q", full.tx_times), parts, receipts)
        self.projector.loader = self.load

    def apply(self, events: list[Event]) -> None:
        """Log ``events`` (the ones not logged yet) and fold them."""
        self.log += [ev for ev in events if ev.seq > len(self.log)]
        self.projector.apply_all(events)

    def load(self, namespace: str, part: object, upto: int) -> Space:
        self.loads.append(namespace)
        space = Space()
        space.fold([ev for ev in self.log if ev.namespace == namespace and ev.seq <= upto])
        return space


def loaded(projector: Projector) -> list[str]:
    return sorted(ns for ns, _ in projector.loaded())


@pytest.fixture
def ten_bytes_a_fact(monkeypatch: pytest.MonkeyPatch) -> None:
    """A space's size for the budget: 10 bytes a fact (known sizes, whatever the columns)."""
    monkeypatch.setattr(Space, "nbytes", lambda self: 10 * self.state.n)


def test_many_new_facts_folded_into_a_built_index_equal_an_index_built_from_the_columns():
    projector = Projector()
    projector.apply_all([remember("a", seq) for seq in range(1, 4)])
    assert projector.indexes["a"] is not None  # built now: what follows goes into it
    projector.apply_all([remember("a", seq, f"word{seq} again") for seq in range(4, 44)])
    state = projector.space("a").state
    assert projector.indexes["a"].fields() == build_index(state, "a").fields()


def test_the_least_recently_used_namespace_is_the_one_dropped(ten_bytes_a_fact):
    lazy = Lazy([remember(ns, seq) for seq, ns in enumerate("abc", 1)], 3, ["a", "b", "c"])
    projector = lazy.projector
    projector.budget = 20  # two namespaces of one fact
    for ns in "aba":
        projector.space(ns)
    assert loaded(projector) == ["a", "b"]
    projector.space("c")
    assert loaded(projector) == ["a", "c"]  # b was read longest ago


@pytest.mark.parametrize("facts, budget, kept", [
    ({"a": 1, "b": 1}, 20, ["a", "b"]),  # exactly the budget: nothing dropped
    ({"a": 1, "b": 1, "c": 1}, 25, ["b", "c"]),  # one over: only the oldest dropped
    ({"a": 1, "b": 1, "c": 2}, 25, ["c"]),  # the oldest two dropped to fit the newest
])
def test_a_budget_drops_as_few_namespaces_as_it_must(ten_bytes_a_fact, facts, budget, kept):
    log, seq = [], 0
    for ns, n in facts.items():
        for _ in range(n):
            seq += 1
            log.append(remember(ns, seq))
    projector = Lazy(log, seq, list(facts)).projector
    projector.budget = budget
    for ns in facts:
        projector.space(ns)
    assert loaded(projector) == kept


def test_a_namespace_made_since_the_checkpoint_is_kept_and_the_ones_after_it_dropped(
    ten_bytes_a_fact
):
    lazy = Lazy([remember("a", 1), remember("b", 2)], 2, ["a", "b"])
    projector = lazy.projector
    lazy.apply([remember("new", 3)])  # no part: it cannot be loaded again
    projector.budget = 25
    projector.space("a")
    projector.space("b")
    assert loaded(projector) == ["b", "new"]
    assert projector.space("a").state.ids().tolist() == [1]  # loaded again on asking
    assert lazy.loads == ["a", "b", "a"]


def test_a_dropped_namespace_unchanged_since_its_part_is_published_from_its_part(
    ten_bytes_a_fact
):
    lazy = Lazy([remember("a", 1), remember("b", 2)], 2, ["a", "b"])
    projector = lazy.projector
    projector.budget = 10
    projector.space("a")
    projector.space("b")  # drops a, which has no event since its part
    assert loaded(projector) == ["b"] and list(projector.deferred()) == ["a"]
    lazy.apply([remember("b", 3)])
    projector.space("a")  # drops b, which has an event since its part: it is loaded to publish
    assert list(projector.deferred()) == [] and projector.changed() == ["b"]
    assert lazy.loads == ["a", "b", "a"]


def test_a_rebase_loads_each_namespace_from_the_parts_it_is_given():
    lazy = Lazy([remember("a", 1), remember("b", 2)], 2, ["a", "b"])
    projector = lazy.projector
    projector.space("a")
    lazy.apply([remember("a", 3), remember("b", 4), erase("b", 5, 2)])
    assert projector.changed() == ["b"]
    with pytest.raises(ValueError, match="every namespace changed"):
        projector.rebase({"a": SimpleNamespace(seq=3)}, lazy.load)
    parts = {"a": SimpleNamespace(seq=3), "b": SimpleNamespace(seq=5, receipts=(5,))}
    seen: list[object] = []

    def load(namespace: str, part: object, upto: int) -> Space:
        seen.append(part)
        return lazy.load(namespace, part, upto)

    projector.rebase(parts, load)
    assert projector.changed() == [] and projector.seqs_of("erased") == [5]
    projector.budget = 0
    assert projector.space("b").state.ids().tolist() == [2, 4]  # drops a, at its new part
    assert seen == [parts["b"]] and loaded(projector) == ["b"] and projector.changed() == []
    assert list(projector.deferred()) == ["a"] and projector.deferred()["a"] is parts["a"]


def test_events_of_a_deferred_namespace_pass_it_over_and_its_receipts_are_kept():
    lazy = Lazy([remember("a", 1), remember("b", 2)], 2, ["a"])
    projector = lazy.projector
    lazy.apply([remember("a", 3), erase("a", 4, 1), remember("b", 5)])
    assert loaded(projector) == ["b"] and lazy.loads == []
    assert projector.space("b").state.ids().tolist() == [2, 5]  # after a's, in one batch
    assert projector.seqs_of("erased") == [4]
    assert projector.namespace_of_receipt(4) == "a"
    assert projector.last_seq == 5 and len(projector.tx_times) == 5
    # a refused event of b before a's next receipt: the receipt is noted once, however often
    # the log is read again from the refused event
    batch = [forget("b", 6, 99), erase("a", 7, 3)]
    for _ in range(2):
        with pytest.raises(ProjectionError, match="logged event 6 "):
            projector.apply_all(batch)
        assert projector.last_seq == 5 and projector.seqs_of("erased") == [4]
    lazy.apply([remember("b", 6), erase("a", 7, 3)])
    assert projector.seqs_of("erased") == [4, 7]
    assert projector.space("a").events.seqs_of("erased") == [4, 7]  # loaded: the log's
    assert projector.seqs_of("erased") == [4, 7]  # not listed twice once a is loaded


def test_the_receipts_of_a_dropped_namespace_are_still_known(ten_bytes_a_fact):
    lazy = Lazy([remember("a", 1), erase("a", 2, 1), remember("a", 3), remember("b", 4)], 4,
                ["a", "b"])
    projector = lazy.projector
    projector.budget = 10
    projector.space("a")
    projector.space("b")  # drops a
    assert loaded(projector) == ["b"]
    assert projector.seqs_of("erased") == [2]
    lazy.apply([remember("a", 5), erase("a", 6, 3)])
    assert projector.seqs_of("erased") == [2, 6]
    assert projector.space("a").state.ids().tolist() == [1, 3, 5]


def test_the_first_of_two_refusals_in_one_batch_stops_the_log():
    projector = Projector()
    projector.apply_all([remember("a", 1), remember("b", 2)])
    with pytest.raises(ProjectionError, match="logged event 3 does not apply"):
        projector.apply_all([forget("b", 3, 99), forget("a", 4, 99)])
    assert projector.last_seq == 2


def test_an_event_out_of_step_is_refused_saying_so():
    projector = Projector()
    projector.apply_all([remember("a", 1), remember("a", 2), remember("a", 3)])
    with pytest.raises(ProjectionError, match=r"event seq 6 applied after seq 4; the "
                       r"projection is out of step with the log"):
        projector.apply_all([remember("a", 4), remember("b", 6)])
    assert projector.last_seq == 4 and projector.space("a").state.ids().tolist() == [1, 2, 3, 4]
    state = FactColumns()
    fold([remember("a", 3)], state, gaps=True)
    for bad in ([remember("a", 3)], [remember("a", 5), remember("a", 5)]):
        with pytest.raises(ProjectionError, match="out of step"):
            fold(bad, state, gaps=True)


def test_slots_of_ids_that_are_no_facts_are_minus_one():
    state = FactColumns()
    assert FactColumns().slots([1]).tolist() == [-1]
    fold([remember("a", 1), remember("a", 2)], state)
    assert state.slots([2, 1, 99, 0, -3]).tolist() == [1, 0, -1, -1, -1]
    assert [state.slot(x) for x in ("1", 1.0, None, 0, 3, 2)] == [-1, -1, -1, -1, -1, 1]


def test_events_of_any_kind_are_listed_across_namespaces_in_order():
    lazy = Lazy([remember("a", 1), remember("b", 2), remember("a", 3)], 3, ["a", "b"])
    assert lazy.projector.seqs_of("remembered") == [1, 2, 3]


def test_a_deferred_namespace_replaced_is_held_as_given():
    lazy = Lazy([remember("a", 1), erase("a", 2, 1), remember("b", 3)], 3, ["a"])
    projector = lazy.projector
    space = Space()
    space.fold([remember("a", 1), erase("a", 2, 1)])
    projector.replace("a", space)
    assert projector.deferred() == {} and lazy.loads == []
    lazy.apply([remember("a", 4)])
    assert projector.space("a") is space and space.state.ids().tolist() == [1, 4]
    assert projector.seqs_of("erased") == [2]
    assert projector.changed() == [] and lazy.loads == []


def test_a_fold_into_a_built_index_sets_the_new_vectors_only():
    """A vector of another length is left out and counted once, however many folds follow."""

    def vector(seq: int, fact: int, values: list[float]) -> Event:
        raw = np.array(values, dtype="<f4").tobytes()
        return stamp(EmbeddingRecorded(namespace="a", fact_id=fact, model="m",
                                       dims=len(values), vector=raw), seq)

    projector = Projector()
    projector.apply_all([remember("a", 1), vector(2, 1, [1, 0, 0]), remember("a", 3),
                         vector(4, 3, [0, 1])])
    assert projector.indexes["a"] is not None
    projector.apply_all([remember("a", 5)])
    projector.apply_all([remember("a", 6), vector(7, 6, [0, 0, 1])])
    space = projector.space("a")
    want = build_index(space.state, "a")
    for vec in space.state.vectors:
        want.set_vector(vec.fact_id, vec.model, np.frombuffer(vec.vector, dtype="<f4"))
    assert projector.indexes["a"].fields() == want.fields()
