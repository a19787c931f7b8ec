"""consolidate: proposals only until asked, the same proposals from the same state, each applied
proposal one forget event that why shows, and nothing left to propose once all are applied."""

from __future__ import annotations

import json
import tempfile
import tracemalloc
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from eventlog.events import FactRemembered
from hmem import Memory
from hmem.adapters.demo import StepClock
from hmem.errors import InvalidInput
from projections.timeutil import to_us
from tests.conftest import examples

START = datetime(2025, 1, 1, tzinfo=timezone.utc)
STEP = timedelta(minutes=1)


def memory(path: Path, step: timedelta = STEP, **kw) -> Memory:
    return Memory(path, clock=StepClock(START, step), embedder=None, **kw)


def test_duplicates_and_one_word_replacements_are_proposed_then_applied(tmp_path):
    with memory(tmp_path / "s") as m:
        a = m.remember("maya", "Maya likes green tea", dedup=False)
        b = m.remember("Maya", "maya likes green tea!", dedup=False)
        c = m.remember("maya", "Maya lives in London")
        d = m.remember("maya", "Maya lives in Paris")
        e = m.remember("sam", "Sam lives in London")  # another subject: nothing to compare
        seq = m.last_seq
        report = m.consolidate()
        # b repeats a over a period a's contains (both open, b starting later): b goes;
        # Paris replaces London from its own start: London is ended there, not forgotten
        assert [(p.kind, p.fact_id, p.keep_id) for p in report.proposals] == [
            ("duplicate", b, a), ("replaced", c, d),
        ]
        assert [p.id for p in report.proposals] == [f"duplicate:{b}:{a}", f"replaced:{c}:{d}"]
        assert report.proposals[1].end_us == to_us(m.get(d).versions[-1].valid_from)
        assert m.consolidate() == report and m.last_seq == seq  # proposes only, the same
        done = m.consolidate(accept=[f"replaced:{c}:{d}"])
        assert len(done.applied) == 1 and m.last_seq == seq + 1
        ended = m.last_seq
        why = m.why(ended)
        assert why.events[-1].reason.startswith("consolidate: ")
        assert why.events[-1].source_agent == "consolidate"
        assert m.get(ended).text == "Maya lives in London"
        assert m.get(ended).versions[-1].valid_to == m.get(d).versions[-1].valid_from
        assert m.consolidate(apply=True).applied
        assert m.consolidate().proposals == ()
        assert {f.id for f in m.beliefs()} == {a, d, e, ended}  # London, valid until Paris
        before_paris = m.get(d).versions[-1].valid_from - timedelta(seconds=1)
        assert [f.text for f in m.beliefs(valid_at=before_paris)
                if f.subject == "maya"] == ["Maya likes green tea", "Maya lives in London"]


def test_facts_of_different_periods_are_not_duplicates(tmp_path):
    """Found by review: London 2010-2015, Paris 2015-2020, London 2020-: nothing to propose
    (no period of either London contains the other's; Paris overlaps neither London)."""
    with memory(tmp_path / "s") as m:
        m.remember("maya", "Maya lives in London", valid_from="2010-01-01",
                   valid_to="2015-01-01")
        m.remember("maya", "Maya lives in Paris", valid_from="2015-01-01", valid_to="2020-01-01")
        m.remember("maya", "Maya lives in London", valid_from="2020-01-01")
        assert m.consolidate().proposals == ()


def test_chains_keep_one_fact(tmp_path):
    """Found by review: 0, 15 and 30 degrees with similarity 0.95 match pairwise (0-15, 15-30),
    not 0-30; the fact kept is never itself proposed, and one apply reaches the fixpoint."""
    import math

    with memory(tmp_path / "s") as m:
        ids_ = [m.remember("maya", f"Maya note {w}") for w in ("alpha", "bravo", "charlie")]
        for fid, deg in zip(ids_, (0, 15, 30), strict=True):
            rad = math.radians(deg)
            m.record_embedding(fid, "toy", [math.cos(rad), math.sin(rad)])
        report = m.consolidate()
        forgotten = {p.fact_id for p in report.proposals if p.end_us is None}
        assert report.proposals and all(p.keep_id not in forgotten for p in report.proposals)
        m.consolidate(apply=True)
        assert m.consolidate().proposals == ()
        assert len(m.beliefs()) == 3 - len(forgotten) >= 1


def test_near_duplicates_by_cosine(tmp_path):
    with memory(tmp_path / "s") as m:
        a = m.remember("maya", "Maya enjoys long walks")
        b = m.remember("maya", "Maya loves walking far")
        c = m.remember("maya", "Maya hates rain")
        for fid, vec in ((a, [1.0, 0.1, 0.0]), (b, [1.0, 0.12, 0.0]), (c, [0.0, 0.0, 1.0])):
            m.record_embedding(fid, "toy", vec)
        assert [(p.kind, p.fact_id, p.keep_id) for p in m.consolidate().proposals] == [
            ("duplicate", b, a)  # b starts later: a's period contains it
        ]
        assert m.consolidate(similarity=1.0).proposals == ()


NOTES = ["Sam plays chess", "Sam bakes bread", "Sam climbs", "Sam sings loudly"]


def test_stale_episodic_facts(tmp_path):
    with memory(tmp_path / "s", step=timedelta(days=30)) as m:
        with m.transaction() as t:
            t.append(FactRemembered(subject="maya", text="Maya ran a race", category="episodic"))
            t.append(FactRemembered(subject="maya", text="Maya is vegetarian",
                                    category="semantic"))
        old = m.last_seq - 1
        for text in NOTES:  # 120 days of the step clock
            m.remember("sam", text)
        assert [(p.kind, p.fact_id) for p in m.consolidate().proposals] == [("stale", old)]
        assert m.consolidate(stale_days=365).proposals == ()


def test_a_recall_served_from_the_log_keeps_an_episodic_fact(tmp_path):
    with memory(tmp_path / "s", step=timedelta(days=30), log_recalls=True) as m:
        with m.transaction() as t:
            t.append(FactRemembered(subject="maya", text="Maya ran a race", category="episodic"))
        for text in NOTES:
            m.remember("sam", text)
        assert m.consolidate().proposals
        assert m.recall("race").hits
        assert m.consolidate().proposals == ()


def test_bad_arguments_and_readers(tmp_path):
    with memory(tmp_path / "s") as m:
        m.remember("maya", "Maya likes tea", dedup=False)
        m.remember("maya", "Maya likes tea", dedup=False)
        for bad in ({"similarity": 0}, {"similarity": 1.5}, {"stale_days": -1},
                    {"stale_days": float("nan")}, {"accept": "duplicate:1:2"},
                    {"accept": ["duplicate:9:9"]}):
            with pytest.raises(InvalidInput):
                m.consolidate(**bad)
        seq = m.last_seq
    with Memory(tmp_path / "s", read_only=True, embedder=None) as r:
        assert [p.id for p in r.consolidate().proposals] == ["duplicate:2:1"]
        assert r.last_seq == seq


SUBJECTS = ["maya", "Maya", "sam"]
TEXTS = ["likes green tea", "likes black tea", "likes green tea!", "lives in London",
         "lives in Paris", "lives in Rome now", "runs"]
ops = st.lists(st.one_of(
    st.tuples(st.just("remember"), st.sampled_from(SUBJECTS), st.sampled_from(TEXTS)),
    st.tuples(st.just("forget"), st.integers(0, 30)),
    st.tuples(st.just("accept"), st.integers(0, 30)),
), max_size=30)


@settings(max_examples=examples(dev=40, ci=100), deadline=None)
@given(ops)
# each newer fact replaces the one before with one word changed: the oldest ends where the
# next begins, not where the newest does (the two ended ones would replace each other)
@example([("remember", "maya", "lives in London"), ("remember", "maya", "lives in Paris"),
          ("remember", "maya", "lives in Rome now")])
# a fact ended by a replacement becomes a duplicate of an ended one: forgotten instead
@example([("remember", "maya", "likes green tea")] * 3 + [("forget", 0)]
         + [("remember", "maya", "likes green tea")] * 2 + [("forget", 0)]
         + [("remember", "maya", "likes green tea"), ("remember", "maya", "likes black tea"),
            ("accept", 3)])
def test_consolidate_is_idempotent_and_reaches_a_fixpoint(history):
    """For any history: a report changes nothing and a second one equals it; each proposal
    names a current fact (and a current, newer fact it keeps); applying all leaves none."""
    with tempfile.TemporaryDirectory() as tmp, memory(Path(tmp) / "s") as m:
        for op in history:
            if op[0] == "remember":
                m.remember(op[1], op[2], dedup=False)
            elif op[0] == "forget":
                ids = sorted(f.id for f in m.beliefs())
                if ids:
                    m.forget(ids[op[1] % len(ids)])
            else:
                proposals = m.consolidate().proposals
                if proposals:
                    m.consolidate(accept=[proposals[op[1] % len(proposals)].id])
        seq = m.last_seq
        report = m.consolidate()
        assert m.consolidate() == report and m.last_seq == seq
        current = {f.id for f in m.beliefs()}
        assert len({p.fact_id for p in report.proposals}) == len(report.proposals)
        proposed = {p.fact_id for p in report.proposals}
        forgotten = {p.fact_id for p in report.proposals if p.end_us is None}
        for p in report.proposals:
            assert p.fact_id in current
            assert p.keep_id in current and p.keep_id not in forgotten
        applied = m.consolidate(apply=True)
        assert len(applied.applied) == len(report.proposals)
        assert m.consolidate().proposals == ()
        ended = {p.fact_id for p in report.proposals if p.end_us is not None}
        after = {f.id for f in m.beliefs()}
        assert after - set(applied.applied) == current - proposed  # ended ones: new versions
        assert len(after & set(applied.applied)) == len(ended)


def test_the_cli_proposes_then_applies(tmp_path, capsys):
    from hmem.adapters.cli import main

    path = ["--path", str(tmp_path / "s")]
    for text in ("Maya lives in London", "Maya lives in Paris"):
        assert main([*path, "remember", "maya", text]) == 0
    capsys.readouterr()
    assert main([*path, "consolidate"]) == 0
    out = capsys.readouterr().out
    assert "replaced:1:2" in out and "end at " in out  # London ends where Paris begins
    assert main([*path, "--json", "consolidate", "--accept", "replaced:1:2"]) == 0
    assert len(json.loads(capsys.readouterr().out)["applied"]) == 1
    assert main([*path, "consolidate"]) == 0
    assert capsys.readouterr().out.startswith("0 proposal")


def test_over_mcp_a_repeat_is_named_and_consolidate_proposes_then_applies(tmp_path):
    from tests.adapters.test_mcp import run, serve

    async def body() -> None:
        async with serve(tmp_path / "s") as c:
            r = await c.ok("remember", subject="maya", text="Maya lives in London")
            first = r["structuredContent"]["id"]
            assert r["structuredContent"]["repeat"] is False
            r = await c.ok("remember", subject="Maya", text="maya lives in london.")
            assert (r["structuredContent"]["id"], r["structuredContent"]["repeat"]) == (
                first, True)
            assert "already remembered" in r["text"]
            paris = (await c.ok("remember", subject="maya", text="Maya lives in Paris"))
            r = await c.ok("consolidate")
            ids = [p["id"] for p in r["structuredContent"]["proposals"]]
            assert ids == [f"replaced:{first}:{paris['structuredContent']['id']}"]
            r = await c.ok("consolidate", accept=ids)
            assert len(r["structuredContent"]["applied"]) == 1
            r = await c.ok("consolidate")
            assert r["structuredContent"]["proposals"] == [] and "0 proposal" in r["text"]

    run(body)


# ---------------------------------------------------------------------- bounded work (issue:
# "bounded work from one input"): a fact's one-word-changed sketches were sets of its tokens
# but one, built for each token: memory quadratic in a fact's distinct words (one fact of
# 100,000 characters ran out of memory at 5.3 GB).

def _words(n: int, seed: str) -> str:
    return " ".join(f"{seed}{i}q" for i in range(n))


def test_a_fact_of_the_longest_text_is_consolidated_in_memory_linear_in_its_words(tmp_path):
    from projections.checks import MAX_TEXT_CHARS

    text = _words(20_000, "w")[:MAX_TEXT_CHARS].rsplit(" ", 1)[0]  # ~14,000 distinct tokens
    assert len(text) > MAX_TEXT_CHARS - 10
    changed = text.rsplit(" ", 1)[0] + " zzq"  # one word changed
    with memory(tmp_path / "s", step=timedelta(days=1)) as m:
        old = m.remember("maya", text, valid_from="2025-01-01")
        new = m.remember("maya", changed, valid_from="2025-02-01")
        tracemalloc.start()
        try:
            report = m.consolidate()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 50 * 2**20, f"consolidate peaked at {peak / 2**20:.0f} MiB"
    assert [(p.kind, p.fact_id, p.keep_id) for p in report.proposals] == [
        ("replaced", int(old), int(new))]


def test_many_long_facts_are_consolidated_in_bounded_memory(tmp_path):
    """80 facts of 4,000 characters (1.4 GB before)."""
    with memory(tmp_path / "s") as m:
        m.remember_many([{"subject": "maya", "text": _words(1_000, f"f{k}x")[:4_000]}
                         for k in range(80)])
        tracemalloc.start()
        try:
            assert m.consolidate().proposals == ()
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
    assert peak < 50 * 2**20, f"consolidate peaked at {peak / 2**20:.0f} MiB"


_VOCAB = st.sampled_from(["maya", "lives", "london", "paris", "rome", "works", "atlas",
                          "berlin", "green", "tea"])


@settings(max_examples=examples(dev=25, ci=300), deadline=None)
@given(st.lists(_VOCAB, min_size=1, max_size=6), st.lists(_VOCAB, min_size=1, max_size=6))
def test_a_replacement_is_proposed_exactly_when_the_tokens_differ_by_one_word(a, b):
    """The hashed sketches find what the sets of tokens but one found: a newer fact replaces
    an older one exactly when their index tokens (three or more) differ by one on each side;
    and the sketches made are one per token of each fact in each round (linear work)."""
    from hmem import consolidate as c
    from projections.projector import index_counts

    made = [0]
    sketches = c._sketches

    def counted(x):  # type: ignore[no-untyped-def]
        for key in sketches(x):
            made[0] += 1
            yield key

    old_text, new_text = " ".join(a), " ".join(b)
    ta, tb = set(index_counts("user", old_text)), set(index_counts("user", new_text))
    expected = len(ta) == len(tb) >= 3 and len(ta & tb) == len(ta) - 1
    with tempfile.TemporaryDirectory() as tmp, memory(Path(tmp) / "s") as m:
        first = m.remember("user", old_text, valid_from="2025-01-01")
        second = m.remember("user", new_text, valid_from="2025-02-01", dedup=False)
        c._sketches = counted
        try:
            report = m.consolidate()
        finally:
            c._sketches = sketches
    replaced = [(p.fact_id, p.keep_id) for p in report.proposals if p.kind == "replaced"]
    assert replaced == ([(int(first), int(second))] if expected else [])
    assert made[0] <= c.MAX_ROUNDS * 2 * (len(ta) + len(tb))
