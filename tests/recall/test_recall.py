"""recall's vectorized filters and lazy ranking: time travel on a hand-built history, the filter
against Fact.visible_row on a grid, tie order, and hits found past the first sorted block."""

from __future__ import annotations

import itertools
import random
from datetime import datetime, timedelta, timezone

import numpy as np
import pytest

from hmem import Memory
from hmem.errors import InvalidInput
from hmem.recall.ranking import RecallConfig, ranked_order
from projections.fold_state import FactColumns
from projections.recall_index import NamespaceIndex
from projections.records import Fact, Row
from projections.timeutil import to_us

UTC = timezone.utc
T0 = datetime(2026, 1, 1, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def d(s: str) -> datetime:
    return datetime.fromisoformat(s).replace(tzinfo=UTC)


def ids(result) -> list[int]:  # type: ignore[no-untyped-def]
    return sorted(h.id for h in result)


@pytest.fixture
def history(tmp_path):
    """seq 1: A; 2: B; 3: A -> A2 (world change); 4: B -> B2 (correction); 5: forget A
    (superseded, still believed for its earlier period); 6: C; 7: forget C."""
    clock = Clock()
    with Memory(tmp_path / "store", clock=clock, fsync="never") as m:
        a = m.remember("maya", "maya drinks tea", valid_from="2025-01-01")
        b = m.remember("tom", "tom drinks tea", valid_from="2025-01-01", valid_to="2025-12-01")
        clock.now += timedelta(days=1)
        a2 = m.revise(a, "maya drinks green tea", valid_from="2025-06-01")
        b2 = m.revise(b, "tom drinks black tea")
        m.forget(a)
        c = m.remember("ana", "ana drinks tea", valid_from="2024-01-01")
        m.forget(c)
        assert (a, b, a2, b2, c, m.last_seq) == (1, 2, 3, 4, 6, 7)
        yield m


ALL = dict(limit=100, max_tokens=10**6)


def test_as_of_believed_heads(history):
    m = history
    expected = {0: [], 1: [1], 2: [1, 2], 3: [2, 3], 4: [3, 4], 5: [3, 4], 6: [3, 4, 6], 7: [3, 4]}
    for seq, want in expected.items():
        assert ids(m.recall("tea", as_of=seq, **ALL)) == want, seq
    assert ids(m.recall("tea", **ALL)) == [3, 4]


@pytest.mark.parametrize(
    ("seq", "valid_at", "want"),
    [
        (7, "2025-03-01", [4]),  # A's earlier period was forgotten at 5; B was corrected
        (4, "2025-03-01", [1, 4]),  # A's second row: true until the world changed
        (2, "2025-03-01", [1, 2]),
        (4, "2025-08-01", [3, 4]),
        (7, "2026-01-01", [3]),  # B2 ended 2025-12-01
        (6, "2024-06-01", [6]),
        (7, "2024-06-01", []),
        (0, "2025-03-01", []),
        (None, "2025-03-01", [4]),
    ],
)
def test_valid_at(history, seq, valid_at, want):
    assert ids(history.recall("tea", as_of=seq, valid_at=valid_at, **ALL)) == want


def test_valid_at_shows_the_row_visible_then(history):
    m = history
    (then,) = [h for h in m.recall("tea", as_of=2, valid_at="2025-03-01", **ALL) if h.id == 1]
    assert then.valid_to is None and then.superseded_by is None
    (later,) = [h for h in m.recall("tea", as_of=4, valid_at="2025-03-01", **ALL) if h.id == 1]
    assert later.valid_to == d("2025-06-01") and later.superseded_by == 3


def test_subject_filter(history):
    m = history
    assert ids(m.recall("tea", subject=" TOM ", **ALL)) == [4]
    assert ids(m.recall("tea", subject="nobody", **ALL)) == []
    assert ids(m.recall("tea", as_of=2, subject="maya", **ALL)) == [1]


def _grid(facts: list[Fact]) -> tuple[list[int], list[int | None]]:
    seqs = sorted({s for f in facts for r in f.rows for s in (r.tx_from_seq, r.tx_to_seq or 0)})
    seqs = sorted({max(s + k, 0) for s in seqs for k in (-1, 0, 1)})
    times = {t for f in facts for r in f.rows for t in (r.valid_from, r.valid_to) if t is not None}
    return seqs, [None, *sorted({t + k for t in times for k in (-1, 0, 1)})]


def _brute(fact: Fact, seq: int, valid_at: int | None) -> bool:
    return fact.visible_row(seq, valid_at) is not None and (
        valid_at is not None or fact.is_head_at(seq)
    )


def _check_grid(index: NamespaceIndex, facts: list[Fact]) -> None:
    docs = np.array([index.doc_at(f.id) for f in facts], dtype=np.int64)
    seqs, times = _grid(facts)
    for seq, valid_at in itertools.product(seqs, times):
        got = index.visible_mask(docs, seq, valid_at).tolist()
        assert got == [_brute(f, seq, valid_at) for f in facts], (seq, valid_at)


def test_visible_mask_matches_fact_rows_on_a_grid(history):
    projector = history.store.projector
    facts = sorted(projector.space("default").state.facts.values(), key=lambda f: f.id)
    _check_grid(projector.indexes["default"], facts)


def test_visible_mask_random_histories(tmp_path):
    """Both kinds of revise, forgets of heads and of superseded facts, valid periods; the index
    kept up to date event by event (built before the first write, synced now and then)."""
    rng = random.Random(7)
    clock = Clock()
    dates = [d(f"20{y}-0{m}-01") for y in (24, 25, 26) for m in (1, 6)]
    with Memory(tmp_path / "store", clock=clock, fsync="never") as m:
        projector = m.store.projector
        # built now, so every later event goes through add() and update()
        assert len(projector.indexes.build_now("default")) == 0
        heads: list[tuple[int, datetime]] = []
        alive: list[int] = []
        for step in range(300):
            if step % 25 == 0:  # time travel now and then: later changes update written arrays
                m.recall("tea", as_of=m.last_seq)
            clock.now += timedelta(hours=rng.choice([0, 1, 24 * 40]))
            r = rng.random()
            if r < 0.5 or not heads:
                vf = rng.choice([None, *dates])
                start = vf or clock.now
                vt = rng.choice([None, *dates])
                vt = vt if vt is not None and vt > start else None
                fid = m.remember("s", "tea", valid_from=vf, valid_to=vt, dedup=False)
                heads.append((fid, start))
                alive.append(heads[-1][0])
            elif r < 0.8:
                k = rng.randrange(len(heads))
                fid, start = heads[k]
                if rng.random() < 0.5:
                    vf = start + timedelta(days=rng.choice([1, 100, 400]))
                    heads[k] = (m.revise(fid, "tea", valid_from=vf), vf)
                else:
                    heads[k] = (m.revise(fid, "tea"), start)
                alive.append(heads[k][0])
            elif alive:
                fid = alive.pop(rng.randrange(len(alive)))
                m.forget(fid)
                heads = [h for h in heads if h[0] != fid]
        facts = sorted(projector.space("default").state.facts.values(), key=lambda f: f.id)
        assert any(len(f.rows) == 2 and f.forgotten_seq for f in facts)
        _check_grid(projector.indexes["default"], facts)


@pytest.mark.parametrize("superseded_by", [None, 4, 9])
def test_irregular_fact_is_checked_row_by_row(superseded_by):
    """A fact the arrays cannot describe (three rows; a gap in belief) falls back to its rows;
    superseded, it is a head only before its successor (without valid_at) but stays visible
    for its believed rows (with valid_at)."""
    rows = [
        Row(to_us(d("2025-01-01")), None, 1, 0, 3, 0),
        Row(to_us(d("2025-01-01")), to_us(d("2025-06-01")), 3, 0, 5, 0),
        Row(to_us(d("2025-02-01")), None, 8, 0),
    ]
    odd = Fact(1, "default", "s", "tea", 1.0, None, None, (), 0, rows,
               superseded_by=superseded_by)
    plain = Fact(2, "default", "s", "tea", 1.0, None, None, (), 0,
                 [Row(to_us(d("2025-01-01")), None, 2, 0)])
    index = NamespaceIndex()
    index.add(odd, ["tea"])
    index.add(plain, ["tea"])
    _check_grid(index, [odd, plain])
    assert set(index.irregular) == {0}
    odd.rows.pop()
    index.update(odd)
    assert not index.irregular
    _check_grid(index, [odd, plain])


# ---------------------------------------------------------------------------------- ranking


@pytest.mark.parametrize("n", [0, 1, 5, 31, 32, 33, 40, 200, 1000])
@pytest.mark.parametrize("top", [1, 4, 32, 40])
def test_ranked_is_a_full_lexsort(n, top):
    rng = np.random.default_rng(n * 100 + top)
    for distinct in (1, 3, 50):
        score = rng.integers(0, distinct, n).astype(np.float64) / 7.0
        fact_ids = rng.permutation(n * 3)[:n].astype(np.int64) + 1
        want = np.lexsort((-fact_ids, -score)).tolist()
        assert list(ranked_order(score, fact_ids, top)) == want


def _facts_with_ties(m: Memory, n: int) -> list[int]:
    return [m.remember("s", "coffee beans", valid_from="2025-01-01", dedup=False)
            for _ in range(n)]


def test_ties_rank_newer_fact_first(tmp_path):
    with Memory(tmp_path / "store", clock=Clock(), fsync="never") as m:
        tied = _facts_with_ties(m, 45)  # more than the 32 sorted up front
        weaker = m.remember("s", "coffee beans and more words", valid_from="2025-01-01")
        res = m.recall("coffee", limit=1)
        assert [h.id for h in res] == [tied[-1]] and res.omitted == 45
        res = m.recall("coffee", limit=46, max_tokens=10**6)
        assert [h.id for h in res] == tied[::-1] + [weaker]
        assert len({h.score for h in res.hits[:45]}) == 1 and res.omitted == 0


def test_budget_skips_long_hits_past_the_first_block(tmp_path):
    """The hits that fit the budget can lie beyond the first max(4 * limit, 32) candidates."""
    with Memory(tmp_path / "store", clock=Clock(), fsync="never") as m:
        long = [m.remember("s", "tea " + "x" * 300, valid_from="2025-01-01", dedup=False)
                for _ in range(40)]
        short = m.remember("s", "tea and filler filler filler", valid_from="2025-01-01",
                           confidence=0.1)
        tiny = m.remember("s", "tea y", valid_from="2025-01-01", confidence=0.05)
        full = m.recall("tea", limit=100, max_tokens=10**6)
        assert [h.id for h in full][:40] == long[::-1]  # the short ones rank last
        assert {h.id for h in full.hits[40:]} == {short, tiny}
        budget = max(len(h.render()) for h in full.hits if h.id in (short, tiny)) // 4 + 1
        res = m.recall("tea", limit=1, max_tokens=budget)
        assert [h.id for h in res] == [full.hits[40].id]
        assert res.omitted == 41 and res.tokens <= budget
        res = m.recall("tea", limit=5, max_tokens=budget)
        assert len(res) == 1 and res.omitted == 41
        assert len(m.recall("tea", limit=3, max_tokens=1)) == 0
        assert m.recall("tea", limit=3, max_tokens=1).omitted == 42


def test_limit_k_returns_k_hits_however_long_unless_a_budget_is_given(tmp_path):
    """The budget is explicit: no max_tokens (and none in RecallConfig) means ``limit`` hits."""
    with Memory(tmp_path / "store", clock=Clock(), fsync="never", log_recalls=True) as m:
        for i in range(12):
            m.remember("s", f"tea note {i} " + "long words " * 80, dedup=False)
        res = m.recall("tea", limit=10)
        assert len(res) == 10 and res.tokens > 1000
        assert len(m.recall("tea", limit=10, max_tokens=1000)) == 4
        budgeted = Memory(store=m.store, recall_config=RecallConfig(max_tokens=1000))
        assert len(budgeted.recall("tea", limit=10)) == 4
        assert [r.max_tokens for r in m.recalls()] == [None, 1000]  # as logged (m's only)
        for bad in (0, 2**31, True):
            with pytest.raises(InvalidInput, match="max_tokens must be an integer from 1"):
                m.recall("tea", max_tokens=bad)
        with pytest.raises(InvalidInput, match="RecallConfig.max_tokens must be None"):
            RecallConfig(max_tokens=0)


def test_feedback_finds_a_document_through_the_words_of_the_top_hit(tmp_path):
    """Pseudo-relevance feedback: the top hit names the dog, so the turn about the dog that
    shares no word with the query is found; without feedback it is not; forgotten facts are
    never used as feedback. (Found, not returned: it has no evidence of its own, so only a
    recall that does not require any returns it: hmem.recall.evidence.)"""
    from hmem.recall.request import RecallConfig

    off = RecallConfig(feedback_docs=0)
    with Memory(tmp_path / "s", embedder=None, recall_config=off) as m:
        m.remember("maya", "Maya adopted a puppy called Biscuit")
        about_dog = m.remember("sam", "Biscuit chewed the sofa cushions yesterday")
        m.remember("sam", "The weather is sunny today")
        plain = m.recall("what did maya adopt")
        assert about_dog not in {h.id for h in plain}
        with Memory(tmp_path / "s", embedder=None, read_only=True,
                    recall_config=RecallConfig(feedback_docs=1, feedback_terms=3,
                                                require_evidence=False)) as fb:
            hits = fb.recall("what did maya adopt")
            assert [h.text for h in hits][:2] == [
                "Maya adopted a puppy called Biscuit", "Biscuit chewed the sofa cushions yesterday"]
        m.forget(1)
        with Memory(tmp_path / "s", embedder=None, read_only=True,
                    recall_config=RecallConfig(feedback_docs=1, feedback_terms=3,
                                                require_evidence=False)) as fb:
            assert about_dog not in {h.id for h in fb.recall("what did maya adopt")}


@pytest.mark.parametrize("bad", [{"feedback_docs": -1}, {"feedback_terms": 1.5},
                                 {"feedback_weight": float("nan")}, {"half_life_days": 0},
                                 {"limit": True}])
def test_bad_recall_config_is_a_typed_error(bad):
    from hmem.errors import InvalidInput
    from hmem.recall.request import RecallConfig

    with pytest.raises(InvalidInput, match="RecallConfig"):
        RecallConfig(**bad)


def test_top_hits_whose_words_the_index_lacks_add_no_feedback_terms(tmp_path, monkeypatch):
    """A derived index out of step with the facts' texts (every word of the top hits unknown
    to it, idf 0) leaves the query as it was: a recall still answers."""
    with Memory(tmp_path / "s", embedder=None) as m:
        m.remember("maya", "Maya lives in London")
        m.remember("tom", "Tom lives in Leeds")
        monkeypatch.setattr(FactColumns, "term_counts",
                            lambda self, ids: [{"zzqx": 1} for _ in ids])
        assert {h.text for h in m.recall("lives").hits} == {
            "Maya lives in London", "Tom lives in Leeds"
        }
