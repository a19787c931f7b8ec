"""Dedup at write: remembering what a current fact already says returns that fact's id and
writes nothing; ``dedup=False`` stores it anyway. Held to a naive model for any sequence of
remembers, revisions and forgets."""

from __future__ import annotations

import json
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from hmem import Memory
from hmem.adapters.demo import StepClock
from hmem.dedup import normalise
from hmem.embedders import HashEmbedder
from projections.records import subject_key
from tests.conftest import examples

START = datetime(2025, 1, 1, tzinfo=timezone.utc)
STEP = timedelta(minutes=1)


def memory(path: Path, **kw) -> Memory:
    return Memory(path, clock=StepClock(START, STEP), embedder=None, **kw)


def test_a_repeat_returns_the_first_id_and_writes_nothing(tmp_path):
    with memory(tmp_path / "s") as m:
        first = m.remember("Maya", "Maya likes green tea.")
        seq = m.last_seq
        for again in ("Maya likes green tea.", "maya LIKES green-tea", "  Maya likes  green tea"):
            assert m.remember("maya", again) == first
            assert m.remember(" MAYA ", again) == first
        assert m.last_seq == seq and m.stats().facts == 1
        assert m.duplicate_of("Maya", "maya likes green tea") == first
        assert m.remember("Maya", "Maya likes green tea.", dedup=False) == seq + 1
        assert m.stats().facts == 2
        # the repeat stored on purpose is current too: a new repeat names the newest
        assert m.remember("Maya", "Maya likes green tea") == seq + 1


def test_what_is_not_a_repeat(tmp_path):
    with memory(tmp_path / "s") as m:
        first = m.remember("maya", "Maya likes tea", valid_from="2024-01-01")
        assert m.remember("sam", "Maya likes tea") != first  # another subject
        assert m.remember("maya", "Maya likes teas") != first  # other words
        later = m.remember("maya", "Maya likes tea", valid_from="2024-02-01")
        assert later != first
        assert m.remember("maya", "Maya likes tea", valid_to="2030-01-01") not in (first, later)
        # without valid_from a fact only says it is (still) true: a repeat of the newest
        assert m.remember("maya", "Maya likes tea") == later
        assert m.remember("maya", "Maya likes tea", valid_from="2024-01-01") == first
        assert m.in_namespace("other").remember("maya", "Maya likes tea") != first


def test_a_forgotten_or_revised_fact_is_no_longer_repeated(tmp_path):
    with memory(tmp_path / "s") as m:
        a = m.remember("maya", "Maya lives in London")
        m.forget(a, reason="moved")
        b = m.remember("maya", "Maya lives in London")
        assert b != a
        c = m.revise(b, "Maya lives in Paris")
        assert m.remember("maya", "Maya lives in London") not in (a, b, c)
        assert m.remember("maya", "maya lives in paris") == c


def test_repeats_within_one_batch(tmp_path):
    with memory(tmp_path / "s") as m:
        old = m.remember("maya", "Maya likes tea")
        ids = m.remember_many([
            {"subject": "sam", "text": "Sam runs"},
            {"subject": "maya", "text": "maya likes tea!"},
            {"subject": "Sam", "text": "sam runs."},
            {"subject": "sam", "text": "Sam swims"},
        ])
        assert ids[1] == old and ids[2] == ids[0] and len(set(ids)) == 3
        assert m.stats().facts == 3
        assert m.remember_many([{"subject": "sam", "text": "Sam runs"}] * 2, dedup=False) == [
            m.last_seq - 1, m.last_seq
        ]


def test_texts_without_index_words_are_compared_too(tmp_path):
    with memory(tmp_path / "s") as m:
        a = m.remember("maya", "The!")  # only a stopword: no index token
        assert m.remember("maya", "the") == a
        assert m.remember("maya", "it is") != a


def test_an_inline_embedder_embeds_only_what_is_stored(tmp_path):
    emb = HashEmbedder(dims=16)
    with Memory(tmp_path / "s", clock=StepClock(START, STEP), embedder=emb,
                embed_mode="inline") as m:
        a = m.remember("maya", "Maya likes tea")
        ids = m.remember_many([{"subject": "maya", "text": "maya likes tea"},
                               {"subject": "maya", "text": "Maya likes coffee"}])
        assert ids[0] == a
        assert m.stats().vectors == 2 == m.stats().facts


# ----------------------------------------------------------------------------- the model

SUBJECTS = ["maya", "Maya", "sam", "Maya Lee", "The"]  # "The": no index token
# the same index tokens under other words (tea tea; likes_tea; lee), other counts, none (the)
TEXTS = ["likes tea", "Likes tea!", "likes  TEA", "runs", "the", "likes coffee", "tea likes",
         "likes tea tea", "likes_tea", "likes tea’", "Lee likes tea", "...", "runs runs"]
ops = st.lists(
    st.one_of(
        st.just(("reopen",)),
        st.tuples(st.just("remember"), st.sampled_from(SUBJECTS), st.sampled_from(TEXTS),
                  st.booleans()),
        st.tuples(st.just("forget"), st.integers(0, 20)),
        st.tuples(st.just("revise"), st.integers(0, 20), st.sampled_from(TEXTS)),
        st.tuples(st.just("batch"), st.lists(st.tuples(st.sampled_from(SUBJECTS),
                                                       st.sampled_from(TEXTS)),
                                             min_size=1, max_size=5)),
    ),
    max_size=25,
)


@settings(max_examples=examples(dev=60, ci=120), deadline=None)
@given(ops)
def test_dedup_equals_a_naive_model(history):
    """The model: a remember repeats the newest current fact with the same subject key and
    normalised text (no valid times given here), else it is new; an item of a batch does the
    same, the batch's earlier new items counted as current. Reopened, the store finds the facts
    its checkpoint part brought through the part's postings, and the later ones by hash."""
    current: dict[int, tuple[str, str]] = {}  # id -> (subject key, normalised text)
    with tempfile.TemporaryDirectory() as tmp:
        m = memory(Path(tmp) / "s")
        for op in history:
            if op[0] == "reopen":
                m.close()
                m = memory(Path(tmp) / "s")
            elif op[0] == "remember":
                _, subject, text, dedup = op
                key = (subject_key(subject), normalise(text))
                same = [fid for fid, k in current.items() if k == key]
                before = m.last_seq
                got = m.remember(subject, text, dedup=dedup)
                if dedup and same:
                    assert got == max(same) and m.last_seq == before
                else:
                    assert got == before + 1
                    current[got] = key
            elif op[0] == "batch":
                want, new_id = [], m.last_seq + 1
                for subject, text in op[1]:
                    key = (subject_key(subject), normalise(text))
                    same = [fid for fid, k in current.items() if k == key]
                    if same:
                        want.append(max(same))
                    else:
                        want.append(new_id)
                        current[new_id] = key
                        new_id += 1
                items = [{"subject": subject, "text": text} for subject, text in op[1]]
                assert m.remember_many(items) == want
            elif current:
                fid = sorted(current)[op[1] % len(current)]
                if op[0] == "forget":
                    m.forget(fid)
                    del current[fid]
                else:
                    new = m.revise(fid, op[2])
                    subject = current.pop(fid)[0]
                    current[new] = (subject, normalise(op[2]))
        assert {b.id for b in m.beliefs()} == set(current)
        m.close()


def test_the_cli_says_when_a_remember_repeats(tmp_path, capsys):
    from hmem.adapters.cli import main

    path = ["--path", str(tmp_path / "s")]
    assert main([*path, "remember", "maya", "Maya likes tea"]) == 0
    first = capsys.readouterr().out.strip()
    assert main([*path, "remember", "Maya", "maya likes tea!"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(first) and "already remembered" in out
    assert main([*path, "--json", "remember", "maya", "Maya likes tea", "--no-dedup"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["repeat"] is False and f"#{got['id']}" != first


def test_a_batch_dedups_as_one_by_one_and_the_future_is_no_repeat(tmp_path):
    """Found by review: an item without valid_from repeats an earlier item of its batch that is
    true now, as it would repeat the stored fact; a fact true only from 2030 is not repeated by
    one that says "true now"."""
    items = [{"subject": "maya", "text": "Maya likes tea", "valid_from": "2024-01-01"},
             {"subject": "maya", "text": "maya likes tea"}]
    with memory(tmp_path / "batch") as m:
        assert m.remember_many(items) == [1, 1]
    with memory(tmp_path / "one") as m:
        assert [m.remember(**item) for item in items] == [1, 1]
    with memory(tmp_path / "future") as m:
        later = m.remember("maya", "Maya lives in Paris", valid_from="2030-01-01")
        assert m.duplicate_of("maya", "Maya lives in Paris") is None
        now = m.remember("maya", "Maya lives in Paris")
        assert now != later
        assert m.remember("maya", "Maya lives in Paris", valid_from="2030-01-01") == later
        assert m.remember_many([{"subject": "sam", "text": "Sam sails",
                                 "valid_from": "2031-01-01"},
                                {"subject": "sam", "text": "Sam sails"}]) == [now + 1, now + 2]


def test_repeats_are_found_among_thousands_of_facts_and_in_their_namespace_only(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        other = m.in_namespace("other")
        first = m.remember_many([{"subject": f"s{i % 7}", "text": f"Fact number {i}."}
                                 for i in range(3000)])  # past the keys' merges
        assert m.remember("S3 ", "fact NUMBER 10") == first[10]
        assert m.remember("s2", "fact number 2998") == first[2998]
        assert other.remember("s3", "fact number 10") != first[10]  # another namespace
        late = m.remember_many([{"subject": "s1", "text": f"late fact {i}"} for i in range(50)])
        again = m.remember_many([{"subject": "s1", "text": "Late fact 49!"},
                                 {"subject": "s3", "text": "fact number 10"}])
        assert again == [late[49], first[10]]
        m.forget(first[10])
        assert m.remember("s3", "fact number 10") != first[10]  # no longer believed


def test_a_repeat_is_found_past_a_newer_same_text_fact_that_is_no_longer_current(tmp_path):
    """Two facts say the same (the second kept with ``dedup=False``) and the newer is
    forgotten: a repeat names the older one, still current, alone or in a batch."""
    with memory(tmp_path / "s") as m:
        first = m.remember("maya", "Maya likes tea")
        second = m.remember("maya", "Maya likes tea", dedup=False)
        m.forget(second)
        assert m.remember("maya", "maya likes tea") == first
        assert m.remember_many([{"subject": "maya", "text": "Maya likes tea!"}]) == [first]


def test_a_fact_that_started_at_this_very_instant_is_true_now(tmp_path):
    """With a clock that stands still, a fact stored without a valid_from starts at the next
    write's own time: "true now" includes that instant, so the next remember repeats it."""
    with Memory(tmp_path / "s", clock=StepClock(START, timedelta(0)), embedder=None) as m:
        first = m.remember("maya", "Maya likes tea")
        assert m.remember("maya", "Maya likes tea") == first
        assert m.remember_many([{"subject": "maya", "text": "Maya likes tea"}]) == [first]


def test_batch_items_with_a_valid_from_repeat_only_an_item_of_the_same_start(tmp_path):
    items = [{"subject": "sam", "text": "Sam sails", "valid_from": "2024-01-01"},
             {"subject": "sam", "text": "Sam sails", "valid_from": "2024-01-01"},
             {"subject": "sam", "text": "Sam sails", "valid_from": "2024-06-01"},
             {"subject": "sam", "text": "Sam sails", "valid_from": "2024-06-01"}]
    with memory(tmp_path / "batch") as m:
        batch = m.remember_many(items)
    with memory(tmp_path / "one") as m:
        one_by_one = [m.remember(**item) for item in items]
    assert batch == one_by_one == [1, 1, 2, 2]


def test_repeats_of_the_facts_a_checkpoint_part_brought_are_found_in_its_postings(tmp_path):
    """Reopened, a store finds repeats of the facts its part brought (searched through the
    part's postings: the rarest word as often, as many words, or none at all) in their own
    namespace only."""
    with memory(tmp_path / "s") as m:
        m.remember("sam", "Sam walks")  # "sam" in two facts: "run", twice here, is the rarest
        runs = m.remember("sam", "Sam runs runs")
        bare = m.remember("The", "the")  # no index token at all
        tea = m.remember("maya", "likes tea")
        elsewhere = m.in_namespace("x").remember("maya", "likes tea")
    with memory(tmp_path / "s") as m:
        seq = m.last_seq
        assert m.remember("SAM", "sam runs, runs!") == runs
        assert m.remember("the", "The.") == bare
        assert m.remember("Maya", "Likes tea") == tea
        assert m.in_namespace("x").remember("maya", "likes TEA") == elsewhere
        assert m.last_seq == seq
        assert m.remember("sam", "Sam runs") == seq + 1  # as many words, one fewer "runs"
        assert m.remember("sam", "Sam runs runs runs") == seq + 2
