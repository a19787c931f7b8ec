"""Recall's passes over a whole namespace give exactly what their definitions per document give:
the cut of a ranked list found from a sample, the neighbours' loans added as shifted arrays, and
the query words a document holds looked up in the words' postings."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from hmem import Memory
from hmem.recall.loans import Words, borrow, lend, lend_from, own_words
from hmem.recall.ranking import RecallConfig
from hmem.recall.top import top, top_of
from projections.projector import index_counts
from tests.conftest import examples

VALUES = np.array([0.0, 0.25, 0.5, 1.0, 2.0, 3.5], dtype=np.float32)  # ties and zeros


@settings(max_examples=examples(dev=100, ci=400), deadline=None)
@given(
    n=st.integers(0, 2_000), depth=st.integers(1, 40), seed=st.integers(0, 2**16),
    values=st.integers(1, len(VALUES)), shown=st.sampled_from([0.1, 0.5, 1.0]),
)
def test_the_cut_found_from_a_sample_keeps_what_ranking_them_all_keeps(
    n, depth, seed, values, shown
):
    """``top_of`` ranks only the documents scoring at least a sample's ``depth``-th best:
    the same documents, scores and order as ranking every shown document scoring above 0."""
    rng = np.random.default_rng(seed)
    scores = rng.choice(VALUES[:values], n)
    mask = rng.random(n) < shown
    want = top(np.flatnonzero(mask & (scores > 0)), scores[mask & (scores > 0)], depth)
    got = top_of(scores, mask, depth)
    assert got[0].tolist() == want[0].tolist()
    assert got[1].tobytes() == want[1].tobytes()
    # told which documents may score, each named up to ``repeats`` times in any order
    repeats = int(rng.integers(1, 4))
    scoring = np.flatnonzero(scores > 0)
    among = np.concatenate([scoring, *(rng.choice(scoring, rng.integers(0, len(scoring) + 1),
                                                  replace=False) for _ in range(repeats - 1))])
    got = top_of(scores, mask, depth, rng.permutation(among), repeats)
    assert got[0].tolist() == want[0].tolist()
    assert got[1].tobytes() == want[1].tobytes()


REFS = st.sampled_from(["s1:1", "s1:2", "s1:3", "s1:5", "s2:1", "s2:2", "s2:3", None])
WORDS = ["tea", "maya", "london", "runs", "running", "garden"]


def _store(path: Path, turns: list[tuple[str | None, list[str]]]) -> Memory:
    m = Memory(path, embedder=None, fsync="never")
    for i, (ref, words) in enumerate(turns):
        m.remember("maya", " ".join([f"turn{i}", *words]), source_ref=ref)
    return m


@settings(max_examples=examples(dev=40, ci=150), deadline=None)
@given(
    turns=st.lists(st.tuples(REFS, st.lists(st.sampled_from(WORDS), max_size=3)),
                   min_size=1, max_size=25),
    seed=st.integers(0, 2**16),
    weights=st.sampled_from([(0.5, 0.4), (0.5, 0.0), (0.0, 0.4), (1.0, 1.0)]),
)
def test_a_loan_added_as_shifted_arrays_is_each_documents_neighbours_share(turns, seed, weights):
    """Turns in order, out of order, a turn seen twice, turns with no place: every document's
    score gains ``before`` times its previous turn's and ``after`` times its next turn's,
    bit for bit as adding each link's share one document at a time, whether added as shifted
    arrays or along the links of the documents that lend."""
    before, after = weights
    with tempfile.TemporaryDirectory() as tmp, _store(Path(tmp) / "s", turns) as m:
        m.recall("tea")
        index = m.store.projector.indexes["default"]
        n = len(index)
        scores = np.random.default_rng(seed).random(n).astype(np.float32)
        scores[np.random.default_rng(seed + 1).random(n) < 0.3] = 0
        want = scores.copy()
        for which, weight in (("prev", before), ("next", after)):
            if weight:
                docs, other = index.link_pairs(which, n)
                want[docs] += weight * scores[other]
        assert lend(index, scores, before, after).tobytes() == want.tobytes()
        wide = lend(index, scores, np.float64(before), np.float64(after))  # a numpy weight
        assert wide.dtype == np.float32 and wide.tobytes() == want.tobytes()
        lenders = np.flatnonzero(scores)
        lent, reached = lend_from(index, scores, lenders, before, after)
        assert lent.tobytes() == want.tobytes()  # following the lenders' links only
        assert set(np.flatnonzero(want).tolist()) <= set(reached.tolist())
        assert np.unique(reached, return_counts=True)[1].max(initial=0) <= 3
        # a query's loans: passes over all documents or along the lenders' links, the same
        lending = np.random.default_rng(seed + 2).random(n) < 0.8
        words = Words(np.zeros(n, dtype=np.float32), ())
        no_docs = np.empty(0, dtype=np.int64)
        every = borrow(index, words, scores.copy(), lending, n, no_docs, before, after)
        some = borrow(index, words, scores.copy(), lending, 0, no_docs, before, after)
        assert every.fed.tobytes() == some.fed.tobytes() == (scores * lending).tobytes()
        assert every.lexical.tobytes() == some.lexical.tobytes()
        assert set(np.flatnonzero(some.lexical).tolist()) <= set(some.scored.tolist())


@settings(max_examples=examples(dev=40, ci=150), deadline=None)
@given(
    turns=st.lists(st.tuples(REFS, st.lists(st.sampled_from(WORDS), max_size=3)),
                   min_size=1, max_size=25),
    query=st.lists(st.sampled_from([*WORDS, "absent"]), min_size=1, max_size=4),
)
def test_the_words_a_document_holds_are_the_query_words_in_its_text(turns, query):
    """``Words.held`` looks each query word up in its postings: a document holds a word
    exactly when the word is one of its index tokens (text or subject)."""
    tokens = [t for w in query for t in index_counts("", w)]
    with tempfile.TemporaryDirectory() as tmp, _store(Path(tmp) / "s", turns) as m:
        m.recall("tea")
        index = m.store.projector.indexes["default"]
        state = m.store.projector.space("default").state
        words = own_words(index, tokens)
        distinct = list(dict.fromkeys(tokens))
        docs = np.arange(len(index))
        held = words.held(docs)
        for doc in docs.tolist():
            fact = state.facts[index.fact_ids[doc]]
            have = index_counts(fact.subject, fact.text)
            want = sum(1 << j for j, t in enumerate(distinct) if t in have)
            assert int(held[doc, 0]) == want
        pairs = np.stack([docs, docs[::-1]])  # any shape of documents
        assert words.held(pairs).shape == (2, len(docs), 1)
        assert (words.held(pairs)[1] == held[::-1]).all()


@settings(max_examples=examples(dev=30, ci=100), deadline=None)
@given(seed=st.integers(0, 2**16), words=st.integers(1, 70))
def test_the_words_held_are_the_same_looked_up_or_tabled(seed, words):
    """A small namespace's ``held`` reads a table of every document, a big one's searches the
    postings: both say, per document, exactly which words' postings name it."""
    rng = np.random.default_rng(seed)
    postings = tuple(np.flatnonzero(rng.random(300) < rng.random()) for _ in range(words))
    docs = rng.integers(0, 300, size=(3, 40))
    want = np.zeros((*docs.shape, (words + 63) // 64), dtype=np.uint64)
    for j, p in enumerate(postings):
        want[..., j // 64] |= np.where(np.isin(docs, p), np.uint64(1 << (j % 64)), np.uint64(0))
    for n in (300, 70_000):  # tabled, looked up
        got = Words(np.zeros(n, dtype=np.float32), postings).held(docs)
        assert got.tolist() == want.tolist()


def test_the_masks_and_links_recall_reads_are_not_the_index_itself(tmp_path):
    """Changing a mask of every document, or holding one, changes no belief and blocks no
    write; the cached links are read-only."""
    with _store(tmp_path / "s", [("s1:1", ["tea"]), ("s1:2", ["tea"])]) as m:
        m.recall("tea")
        index = m.store.projector.indexes["default"]
        mask = index.current_mask()
        mask[:] = False
        m.remember("maya", "turn 2 tea", source_ref="s1:3")
        assert len(m.recall("tea").hits) == 3
        for which in ("prev", "next"):
            for arr in (*index.link_pairs(which, len(index)), *index.link_runs(which, len(index))):
                assert not arr.flags.writeable


def test_a_numpy_weight_scores_as_the_same_python_float(tmp_path):
    """numpy 2 widens float32 sums for a numpy scalar, not for a Python float: a weight given
    as ``np.float64`` (a float, so a valid RecallConfig value) ranks as the Python float."""
    config = RecallConfig(neighbor_weight=np.float64(0.3), feedback_weight=np.float64(0.37))
    assert type(config.neighbor_weight) is float and type(config.feedback_weight) is float
    with _store(tmp_path / "s", [("s1:1", ["tea", "maya"]), ("s1:2", ["tea"])]) as m:
        text = m.store.projector.indexes["default"].text
        plain, wide = (np.zeros(len(text), dtype=np.float32) for _ in range(2))
        text.accumulate({"tea": 0.37, "maya": 1.0}, plain)
        text.accumulate({"tea": np.float64(0.37), "maya": np.float64(1.0)}, wide)
        assert wide.tobytes() == plain.tobytes()
