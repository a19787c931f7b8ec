"""Batches, checks and bulk folds in more than one part, held against the reference fold."""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from eventlog.events import (
    EpisodeRecorded,
    FactForgotten,
    FactRemembered,
    FactRevised,
    FactsErased,
)
from projections.errors import FactNotFound, FactSuperseded, InvalidInput, ProjectionError
from projections.fold import check, fold, fold_all
from tests.projections.reference_fold import FactState
from tests.projections.test_fold import assert_same_state, stamp

WORLD = datetime(2027, 1, 1, tzinfo=timezone.utc)
LATER = datetime(2027, 6, 1, tzinfo=timezone.utc)


def remembered(seq: int, text: str = "Maya lives in London", **kw) -> FactRemembered:
    return stamp(FactRemembered(subject="maya", text=text, **kw), seq, seq)


def episode(seq: int) -> EpisodeRecorded:
    return stamp(EpisodeRecorded(session_id="s1", turn=0, role="user", text="hi"), seq, seq)


def reference(events) -> FactState:
    state = FactState()
    for ev in events:
        state.apply(ev)
    return state


def test_a_bulk_fold_makes_facts_only_of_the_seqs_that_made_one():
    """Past 16 events the seq -> slot map grows: the seqs of episodes and forgets in the new
    room are still not facts."""
    evs = [remembered(s, f"Maya note {s}") for s in range(1, 17)]
    evs += [episode(17), stamp(FactForgotten(fact_id=1), 18, 18), remembered(19), episode(20)]
    cols = fold_all(evs)
    assert [s for s in range(1, 21) if s in cols.facts] == [*range(1, 17), 19]
    with pytest.raises(FactNotFound):
        check([FactForgotten(fact_id=17)], cols)


@pytest.mark.parametrize("batch", ["passes", "refused", "carries old seqs"])
def test_checking_a_batch_leaves_the_state_as_it_was(batch):
    """check() folds nothing: the facts read the same after it, and the next event folded (one
    that makes no fact) does not become a fact."""
    cols = fold_all([remembered(1), remembered(2, "Tom likes tea")])
    before = [cols.fact(1), cols.fact(2)]
    evs = {
        "passes": [FactRemembered(subject="a", text="A b"), FactRemembered(subject="c", text="C d"),
                   FactRevised(fact_id=2, text="Tom likes coffee")],
        "refused": [FactRevised(fact_id=9, text="Tom likes coffee")],
        "carries old seqs": [remembered(1, "Sam likes jam"), remembered(2, "Kim likes rum"),
                             stamp(FactForgotten(fact_id=1), 2, 2)],
    }[batch]
    try:
        check(evs, cols)
    except FactNotFound:
        assert batch == "refused"
    assert [cols.fact(1), cols.fact(2)] == before
    fold([episode(3)], cols)
    assert list(cols.facts) == [1, 2] and 3 not in cols.facts


def test_each_event_of_a_checked_batch_sees_the_state_before_the_batch():
    """A fact or an episode one event of a batch makes is not there for the others."""
    cols = fold_all([remembered(1)])
    with pytest.raises(FactNotFound):
        check([FactRemembered(subject="tom", text="Tom likes tea"), FactForgotten(fact_id=2)], cols)
    with pytest.raises(InvalidInput):
        check([EpisodeRecorded(session_id="s1", turn=0, role="user", text="hi"),
               FactRemembered(subject="tom", text="Tom likes tea", derived_from=(2,))], cols)


def test_a_second_revise_of_a_fact_replaced_in_the_same_batch_is_refused_naming_the_first():
    """16 facts fill the fact table's room; the batch world-changes fact 16, then revises it
    again: refused as superseded (head: the first revise) in a bulk fold as in check()."""
    base = [remembered(s, f"Maya note {s}") for s in range(1, 17)]
    first = stamp(FactRevised(fact_id=16, text="Maya lives in Paris", valid_from=WORLD), 17, 17)
    again = stamp(FactRevised(fact_id=16, text="Maya lives in Rome"), 18, 18)
    state = reference([*base, first])
    with pytest.raises(ProjectionError) as want:
        state.apply(again)
    cols = fold_all(base)
    with pytest.raises(ProjectionError) as got:
        fold([first, again], cols)
    assert str(got.value) == str(want.value)
    assert_same_state(cols, state, "folded before the refusal")
    with pytest.raises(FactSuperseded) as refused:
        check([first, again], fold_all(base))
    assert refused.value.head_id == 17


def test_a_bulk_fold_onto_a_state_revises_its_own_new_facts_as_the_reference_does():
    """A second part (base slot and row above 0) world-changes two of its own facts and
    corrects one without a subject (it keeps the old subject)."""
    evs = [remembered(1), remembered(2, "Tom likes tea"), remembered(3, "Sam likes jam"),
           stamp(FactRevised(fact_id=2, text="Tom likes coffee", valid_from=WORLD), 4, 4),
           stamp(FactRevised(fact_id=3, text="Sam likes honey", valid_from=LATER), 5, 5),
           stamp(FactRevised(fact_id=4, text="Tom likes cocoa"), 6, 6)]
    cols = fold_all(evs[:1])
    fold_all(evs[1:], into=cols)
    assert_same_state(cols, reference(evs), "in two parts")
    assert cols.fact(6).subject == "maya"


def test_an_erasure_may_list_an_episode_of_its_namespace():
    evs = [episode(1), remembered(2, derived_from=(1,)),
           stamp(FactsErased(scope="episode", fact_ids=(2,), episode_ids=(1,)), 3, 3)]
    check([FactsErased(scope="episode", fact_ids=(2,), episode_ids=(1,))], fold_all(evs[:2]))
    cols = fold_all(evs)
    assert_same_state(cols, reference(evs), "erased an episode")


def test_a_namespace_without_facts_has_no_current_beliefs_however_many_others_have():
    evs = [stamp(FactRemembered(subject="maya", text="Maya likes tea", namespace=name), s, s)
           for s, name in enumerate(["a", "b", "c"], 1)]
    cols = fold_all(evs)
    assert not cols.current_mask("d").any() and cols.current_texts("d") == []
    assert cols.current_texts("c") == [(3, "Maya likes tea")]
