"""The crown jewel: the real store and a naive model, driven side by side by hypothesis.

Every step is checked: the incremental projection equals a replay of the log into a fresh
database; as_of and recall agree with the model folded to any seq; rows are never rewritten or
removed; no namespace ever sees another's facts.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    rule,
)

from hmem import Memory, errors
from hmem.embedders import HashEmbedder
from hmem.llm import Usage
from hmem.llm.extractor import Candidate, ExtractorOutput
from tests.conftest import examples
from tests.model import Model, Op

NAMESPACES = ["default", "o'ther\"; DROP TABLE facts; --"]
SUBJECTS = ["maya", "Maya", "tom", "the office"]
WORDS = ["lives", "london", "paris", "likes", "tea", "coffee", "works", "at", "acme", "berlin"]
START = datetime(2026, 1, 1, tzinfo=timezone.utc)
DATES = [
    datetime(2024, 1, 1, tzinfo=timezone.utc),
    datetime(2025, 1, 1, tzinfo=timezone.utc),
    datetime(2025, 6, 1, tzinfo=timezone.utc),
    datetime(2026, 1, 1, tzinfo=timezone.utc),
    datetime(2026, 1, 1, 12, tzinfo=timezone.utc),
    datetime(2026, 6, 1, tzinfo=timezone.utc),
    datetime(2027, 1, 1, tzinfo=timezone.utc),
]

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(lambda w: "fact " + " ".join(w))
opt_dates = st.none() | st.sampled_from(DATES)
namespaces = st.sampled_from(NAMESPACES)
ALL = dict(limit=10_000, max_tokens=10**9)
# Every fact also gets a vector, so recall's dense path is held to the same visibility rules.
EMBEDDER = HashEmbedder(16)


SESSIONS = ["s1", "s2"]


class StubExtractor:
    """Answers with the given candidates, or fails like a model that never returns valid JSON."""

    prompt_version = "stub-v1"

    def __init__(self, candidates: list[Candidate], fail: bool = False) -> None:
        self.candidates = candidates
        self.fail = fail

    def extract(self, request):
        if self.fail:
            raise errors.LLMResponseInvalid("stub: not JSON")
        return ExtractorOutput(tuple(self.candidates), "stub-model", Usage())


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> datetime:
        return self.now


class MemoryMachine(RuleBasedStateMachine):
    facts = Bundle("facts")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="hmem-stateful-")
        self.clock = Clock()
        self.model = Model()
        self.flush_every = 256
        self.mem: Memory | None = None
        self.seen_tx_from: dict[tuple[int, int], tuple[int, object]] = {}
        self.rows_seen = 0

    @initialize(flush_every=st.sampled_from([1, 2, 5, 256]))
    def open_store(self, flush_every: int) -> None:
        self.flush_every = flush_every
        self.mem = Memory(self.dir, clock=self.clock, flush_every=flush_every, embedder=EMBEDDER)

    def m(self, ns: str) -> Memory:
        assert self.mem is not None
        return self.mem if ns == "default" else self.mem.in_namespace(ns)

    def teardown(self) -> None:
        if self.mem is not None:
            self.mem.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _logged(self, op: Op) -> None:
        self.model.ops.append(op)
        assert self.mem is not None
        if op.kind in ("remember", "revise"):  # the fact's vector is logged right after it
            self.model.ops.append(Op("embed", op.seq + 1, op.tx, op.namespace, op.fact))
        assert self.mem.last_seq == self.model.last_seq
        assert self.mem.tx_time(op.seq) == op.tx

    # ------------------------------------------------------------------ writes

    @rule(target=facts, ns=namespaces, subject=st.sampled_from(SUBJECTS), text=texts,
          valid_from=opt_dates, valid_to=opt_dates)
    def remember(self, ns, subject, text, valid_from, valid_to):
        start = valid_from or self.clock.now
        if valid_to is not None and valid_to <= start:
            with pytest.raises(errors.InvalidTime):
                self.m(ns).remember(subject, text, valid_from=valid_from, valid_to=valid_to)
            return multiple()
        fid = self.m(ns).remember(subject, text, valid_from=valid_from, valid_to=valid_to)
        self._logged(Op("remember", fid, self.clock.now, ns, fid, subject=subject, text=text,
                        valid_from=valid_from, valid_to=valid_to))
        return (ns, fid)

    @rule(target=facts, fact=facts, ns=namespaces, text=texts, valid_from=opt_dates,
          valid_to=opt_dates)
    def revise(self, fact, ns, text, valid_from, valid_to):
        _, fid = fact
        expected = self.model.revise_error(ns, fid, valid_from, valid_to)
        before = self.model.last_seq
        if expected is not None:
            with pytest.raises(getattr(errors, expected)):
                self.m(ns).revise(fid, text, valid_from=valid_from, valid_to=valid_to)
            assert self.mem.last_seq == before
            return multiple()
        new = self.m(ns).revise(fid, text, valid_from=valid_from, valid_to=valid_to)
        self._logged(Op("revise", new, self.clock.now, ns, new, target=fid, text=text,
                        valid_from=valid_from, valid_to=valid_to))
        return (ns, new)

    @rule(fact=facts, ns=namespaces)
    def forget(self, fact, ns):
        _, fid = fact
        expected = self.model.forget_error(ns, fid)
        before = self.model.last_seq
        if expected is not None:
            with pytest.raises(getattr(errors, expected)):
                self.m(ns).forget(fid, reason="test")
            assert self.mem.last_seq == before
            return
        seq = self.m(ns).forget(fid, reason="test")
        self._logged(Op("forget", seq, self.clock.now, ns, fid))

    @rule(fact=facts)
    def embed(self, fact):
        ns, fid = fact
        seq = self.m(ns).record_embedding(fid, "hash-4", [0.5, -1.0, 0.25, float(fid)])
        self._logged(Op("embed", seq, self.clock.now, ns, fid))

    def _add_turns(self, ns, session, turns, candidates, fail):
        """Memory.add with a stub extractor; logs the turns in the model, returns the result."""
        m = self.m(ns)
        extractor = StubExtractor(candidates, fail)
        first = self.model.last_seq + 1
        if fail:
            with pytest.raises(errors.ExtractionFailed) as info:
                m.add([{"role": "user", "content": t} for t in turns], session_id=session,
                      extractor=extractor, similar=0)
            result = None
            assert info.value.episode_seqs == tuple(range(first, first + len(turns)))
        else:
            result = m.add([{"role": "user", "content": t} for t in turns], session_id=session,
                           extractor=extractor, similar=0)
            assert result.episode_seqs == tuple(range(first, first + len(turns)))
        for i, text in enumerate(turns):
            self.model.ops.append(Op("episode", first + i, self.clock.now, ns, first + i,
                                     text=text, session=session))
        return result

    @rule(target=facts, ns=namespaces, session=st.sampled_from(SESSIONS),
          turns=st.lists(texts, min_size=1, max_size=2),
          mode=st.sampled_from(["none", "fail", "new"]))
    def add_turns(self, ns, session, turns, mode):
        """Memory.add: the turns are always stored; then one new fact, none, or a failure."""
        text = f"fact extracted {self.model.last_seq}"  # unique: never a duplicate
        cands = [Candidate(text=text, subject="maya")] if mode == "new" else []
        result = self._add_turns(ns, session, turns, cands, fail=mode == "fail")
        if mode != "new":
            assert self.mem.last_seq == self.model.last_seq  # turns only: no fact
            return multiple()
        (fid,) = result.added
        self._logged(Op("remember", fid, self.clock.now, ns, fid, subject="maya", text=text))
        assert self.m(ns).get(fid).derived_from == result.episode_seqs
        return (ns, fid)

    @rule(target=facts, fact=facts, ns=namespaces, session=st.sampled_from(SESSIONS),
          turns=st.lists(texts, min_size=1, max_size=2))
    def add_turns_superseding(self, fact, ns, session, turns):
        """An extracted fact that supersedes a bundle fact: a revise when that fact is current
        in this namespace, else ignored (and the fact is added)."""
        _, target = fact
        text = f"fact extracted {self.model.last_seq}"
        cand = Candidate(text=text, subject="maya", supersedes=[target])
        result = self._add_turns(ns, session, turns, [cand], fail=False)
        old = self.model.fold().get(target)
        now = self.clock.now
        if old is not None and old.namespace == ns and old.believed and not old.superseded:
            (revision,) = result.revised
            assert revision.old_id == target and result.added == ()
            fid = revision.new_id
            change = now if now > old.valid_from else None
            self._logged(Op("revise", fid, now, ns, fid, target=target, subject="maya",
                            text=text, valid_from=change))
        else:
            assert [i.fact_id for i in result.ignored_supersedes] == [target]
            (fid,) = result.added
            self._logged(Op("remember", fid, now, ns, fid, subject="maya", text=text))
        return (ns, fid)

    @rule(seconds=st.sampled_from([0, 0, 1, 3600, 86400 * 40]))
    def advance_clock(self, seconds):
        self.clock.now += timedelta(seconds=seconds)

    @rule(flush_every=st.sampled_from([1, 3, 256]))
    def reopen(self, flush_every):
        self.mem.close()
        self.mem = Memory(self.dir, clock=self.clock, flush_every=flush_every, embedder=EMBEDDER)
        assert self.mem.notes == []

    @rule()
    def crash_before_projection_write(self):
        """The process dies after logging but before the projection batch is written."""
        store = self.mem.store
        store.db.close()
        store.log.close()  # the old Memory is dropped unclosed, as a dead process leaves it
        self.mem = Memory(self.dir, clock=self.clock, flush_every=self.flush_every,
                          embedder=EMBEDDER)

    @rule()
    def rebuild(self):
        assert self.mem.rebuild() == self.model.last_seq

    @rule(ns=namespaces, fact=facts, case=st.integers(0, 9))
    def invalid_operation(self, ns, fact, case):
        m = self.m(ns)
        before = self.mem.last_seq
        _, fid = fact
        foreign = fid if self.model.fold()[fid].namespace != ns else 10**9
        calls = [
            lambda: m.remember("maya", "   "),
            lambda: m.remember("", "fact text"),
            lambda: m.remember("maya", "fact x", confidence=1.5),
            lambda: m.remember("maya", "fact x", confidence=float("nan")),
            lambda: m.remember("maya", "fact x", valid_from="2025-01-01", valid_to="2024-01-01"),
            lambda: m.remember("maya", "fact x", valid_from="2025-01-01T10:00"),
            lambda: m.remember("maya", "fact \ud800"),
            lambda: m.revise(foreign, "fact y"),
            lambda: m.forget(10**9),
            lambda: m.recall("fact", as_of="yesterday-ish"),
        ]
        with pytest.raises(errors.HmemError):
            calls[case]()
        assert self.mem.last_seq == before

    # ------------------------------------------------------------------ time-travel checks

    @rule(ns=namespaces, data=st.data(), valid_at=opt_dates)
    def as_of_matches_model(self, ns, data, valid_at):
        seq = data.draw(st.integers(0, self.model.last_seq), label="seq")
        got = {
            (b.id, b.valid_from, b.valid_to, b.superseded, b.recorded_at)
            for b in self.m(ns).as_of(seq, valid_at=valid_at)
        }
        want = {
            (fid, vf, vt, sup, self.model.ops[since - 1].tx)
            for fid, vf, vt, sup, since in self.model.as_of(ns, seq, valid_at)
        }
        assert got == want

    @rule(ns=namespaces, data=st.data(), valid_at=opt_dates)
    def as_of_time_matches_model(self, ns, data, valid_at):
        """as_of at a transaction *time*: recorded times, one microsecond before them, and
        arbitrary times around the history."""
        recorded = [op.tx for op in self.model.ops]
        t = data.draw(
            st.sampled_from(recorded) if recorded and data.draw(st.booleans(), label="recorded")
            else st.datetimes(min_value=datetime(2025, 12, 1), max_value=datetime(2028, 1, 1),
                              timezones=st.just(timezone.utc)),
            label="t",
        )
        t += data.draw(st.sampled_from([timedelta(0), timedelta(microseconds=-1)]), label="dt")
        seq = self.model.seq_at(t)
        got = {(b.id, b.valid_from, b.valid_to, b.superseded)
               for b in self.m(ns).as_of(t, valid_at=valid_at)}
        assert got == {x[:4] for x in self.model.as_of(ns, seq, valid_at)}

    @rule(ns=namespaces, data=st.data(), valid_at=opt_dates)
    def recall_matches_model(self, ns, data, valid_at):
        seq = data.draw(st.none() | st.integers(0, self.model.last_seq), label="as_of")
        got = {h.id for h in self.m(ns).recall("fact", as_of=seq, valid_at=valid_at, **ALL)}
        at = self.model.last_seq if seq is None else seq
        if valid_at is None:
            assert got == self.model.current(ns, at)
        else:
            assert got == {x[0] for x in self.model.as_of(ns, at, valid_at)}

    # ------------------------------------------------------------------ invariants

    @invariant()
    def replay_equals_incremental(self):
        if self.mem is None:
            return
        report = self.mem.verify()
        assert report.ok, report.examples

    @invariant()
    def rows_are_never_rewritten_or_removed(self):
        if self.mem is None:
            return
        con = self.mem.store.connection()
        rows = con.execute(
            "SELECT fact_id, row_no, tx_from_seq, tx_from FROM fact_versions"
        ).fetchall()
        assert len(rows) >= self.rows_seen
        self.rows_seen = len(rows)
        for fid, row_no, seq, tx in rows:
            key = (fid, row_no)
            if key in self.seen_tx_from:
                assert self.seen_tx_from[key] == (seq, tx)
            self.seen_tx_from[key] = (seq, tx)
        n_facts = con.execute("SELECT count(*) FROM facts").fetchone()[0]
        assert n_facts == len(self.model.fold())
        backwards = con.execute(
            "SELECT count(*) FROM facts WHERE superseded_by IS NOT NULL AND superseded_by <= id"
        ).fetchone()[0]
        assert backwards == 0

    @invariant()
    def namespaces_never_leak(self):
        if self.mem is None:
            return
        for ns in NAMESPACES:
            m = self.m(ns)
            hits = m.recall("fact", **ALL).hits
            assert {h.id for h in hits} == self.model.current(ns)
            for h in hits:  # superseded versions appear only inside their successor's chain
                assert [p.id for p in h.history] == self.model.predecessors(h.id)
            assert {f.id for s in SUBJECTS for f in m.history(s)} == self.model.facts_in(ns)
            assert [(e.seq, e.turn, e.text) for e in m.episodes()] == self.model.episodes(ns)
            for session in SESSIONS:
                got = [(e.seq, e.turn, e.text) for e in m.episodes(session)]
                assert got == self.model.episodes(ns, session)

    @rule(ns=namespaces)
    def namespace_wall_in_sql_reads(self, ns):
        m = self.m(ns)
        mine = self.model.facts_in(ns)
        assert {b.id for b in m.as_of(self.model.last_seq)} <= mine
        assert m.stats().facts == len(mine)
        diff = m.diff(0)
        assert {f.id for f in diff.added} | {r.new.id for r in diff.revised} == mine
        assert {row[0] for row in m.snapshot().fetchall()} <= mine
        for fid in self.model.facts_in(NAMESPACES[0] if ns != NAMESPACES[0] else NAMESPACES[1]):
            with pytest.raises(errors.FactNotFound):
                m.why(fid)


MemoryMachine.TestCase.settings = settings(
    max_examples=examples(dev=20, ci=150), stateful_step_count=30, deadline=None
)
TestMemoryMachine = MemoryMachine.TestCase


def test_model_self_check():
    """The oracle itself on the issue's scenario."""
    model = Model()
    t0 = START
    model.ops.append(Op("remember", 1, t0, "default", 1, subject="maya", text="London",
                        valid_from=DATES[1]))
    model.ops.append(Op("revise", 2, t0 + timedelta(1), "default", 2, target=1, text="Paris",
                        valid_from=DATES[5]))
    assert model.current("default") == {2}
    assert model.current("default", 1) == {1}
    assert {x[0] for x in model.as_of("default", 2, DATES[2])} == {1}
