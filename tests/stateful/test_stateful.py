"""The crown jewel: the real store and a naive model, driven side by side by hypothesis.

The model (tests/stateful/model.py) computes everything a user can read. After every step, in both
namespaces (one named like an SQL injection), one invariant compares with it:

* ``get`` / ``history`` / ``why`` of every fact: text, subject, confidence, source agent and
  ref, entities, recorded_at, chain links (supersedes, superseded_by and _at, revision kind,
  reason, forgotten_at, forget_reason), lineage, and every version row (valid_from/valid_to,
  tx_from/tx_to and their seqs); why's chain, events and episodes; the episodes;
* the projection's ``fact_versions`` table, and that no row is ever rewritten or removed;
* ``as_of`` and recall (which ids are visible; each hit's period, superseded_by and history)
  at every seq the step added and the one before, with valid times a microsecond before and at
  the edges of every row that began or ended there; recall of current beliefs;
* the incremental projection against a replay of the log into a fresh database.

Rules write (remember, both kinds of revise, forget, embeddings, extraction), move the clock
(also backwards), reopen, crash and rebuild, and read ``as_of`` / recall / ``diff`` /
``snapshot`` at the points the model finds interesting: an event's seq -1/0/+1, a tx time
-1us/0/+1us, a row's valid_from / valid_to -1us/0/+1us. Every refused call must raise exactly
the error the model names (not a subclass or a sibling) and append nothing.
"""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime, timedelta

import pytest
from hypothesis import HealthCheck, Phase, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    initialize,
    invariant,
    multiple,
    precondition,
    rule,
)

from hmem import Memory, errors
from hmem.llm.extractor import Candidate
from tests.conftest import examples
from tests.stateful.model import US, Model, Op
from tests.stateful.stateful_checks import ModelChecks
from tests.stateful.stateful_erase import EraseRules
from tests.stateful.stateful_retry import RetryRules
from tests.stateful.stateful_support import (
    AGENTS,
    DATES,
    EMBEDDER,
    NAMESPACES,
    SESSIONS,
    START,
    SUBJECTS,
    Clock,
    StubExtractor,
    agents,
    confidences,
    elsewhere,
    entity_args,
    namespaces,
    opt_dates,
    opt_ends,
    padded_texts,
    periods,
    raises_exactly,
    reasons,
    refs,
    texts,
)


class MemoryMachine(ModelChecks, EraseRules, RetryRules, RuleBasedStateMachine):
    facts = Bundle("facts")

    def __init__(self) -> None:
        super().__init__()
        self.dir = tempfile.mkdtemp(prefix="hmem-stateful-")
        self.clock = Clock()
        self.model = Model()
        self.checkpoint_every = 1000
        self.mem: Memory | None = None
        self.seen_tx_from: dict[tuple[int, int], tuple[int, object]] = {}
        self.rows_seen = 0
        self.generation = 0  # bumped by every reopen, crash and rebuild
        self.verified: tuple[int, int] | None = None  # (generation, last_seq) last verified
        self.swept = 0  # seqs before this were swept by fresh_time_travel_matches_model
        self.why_checked = (0, 0)  # (generation, last_seq) when why was last asked

    @initialize(target=facts, checkpoint_every=st.sampled_from([1, 2, 5, 1000]), seeds=st.lists(
        st.tuples(namespaces, st.sampled_from(SUBJECTS), texts, periods(), agents),
        max_size=3,
    ))
    def open_store(self, checkpoint_every: int, seeds):
        """Open the store and remember a few facts, so most steps have something to change."""
        self.checkpoint_every = checkpoint_every
        self.mem = Memory(self.dir, clock=self.clock, checkpoint_every=checkpoint_every,
                          embedder=EMBEDDER, embed_mode="inline")
        out = []
        for ns, subject, text, (valid_from, valid_to), agent in seeds:
            got = self.remember(ns, subject, text, valid_from, valid_to, 1.0, (), agent, None)
            if isinstance(got, tuple):
                out.append(got)
        return multiple(*out)

    def m(self, ns: str) -> Memory:
        assert self.mem is not None
        if ns == NAMESPACES[0]:
            return self.mem
        return self.mem.in_namespace(ns, source_agent=AGENTS[ns])

    def teardown(self) -> None:
        if self.mem is not None:
            self.mem.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    def tx_now(self) -> datetime:
        """The transaction time of a write now: the clock's, never before the last one."""
        return max([self.clock.now] + [op.tx for op in self.model.ops[-1:]])

    def _time(self, value: datetime | timedelta | str | None,
              start: datetime | None = None) -> datetime | None:
        """A drawn valid time: "now" is the clock's; a length counts from ``start``."""
        if value == "now":
            return self.clock.now
        if value == "now+1us":
            return self.clock.now + US
        if isinstance(value, timedelta):
            assert start is not None
            return start + value
        return value  # type: ignore[return-value]

    def _logged(self, op: Op) -> None:
        self.model.ops.append(op)
        assert self.mem is not None
        if op.kind in ("remember", "revise"):  # the fact's vector is logged right after it
            self.model.ops.append(Op("embed", op.seq + 1, op.tx, op.namespace, op.fact))
        assert self.mem.last_seq == self.model.last_seq
        assert self.m(op.namespace).tx_time(op.seq) == op.tx

    def _refused(self, expected: str, call) -> None:
        before = self.mem.last_seq
        raises_exactly(expected, call)
        assert self.mem.last_seq == before, "a refused call appended events"

    # ------------------------------------------------------------------ writes

    @rule(target=facts, ns=namespaces, subject=st.sampled_from(SUBJECTS), text=padded_texts,
          valid_from=opt_dates, valid_to=opt_ends, confidence=confidences,
          entities=entity_args, source_agent=agents, source_ref=refs, request=st.booleans())
    def remember(self, ns, subject, text, valid_from, valid_to, confidence, entities,
                 source_agent, source_ref, request=False):
        vf, now, rid = self._time(valid_from), self.tx_now(), self.request_id(request)
        vt = self._time(valid_to, start=vf or now)

        def call():
            # repeats are stored too: tests/facade/test_dedup.py models dedup
            return self.m(ns).remember(
                subject, text, valid_from=vf, valid_to=vt, confidence=confidence,
                entities=entities, source_agent=source_agent, source_ref=source_ref,
                dedup=False, request_id=rid,
            )

        expected = self.model.remember_error(now, vf, vt)
        if expected is not None:
            self._refused(expected, call)
            return multiple()
        fid = call()
        self.was_sent(ns, rid, "remember", call, fid)
        self._logged(Op("remember", fid, now, ns, fid, subject=subject, text=text,
                        valid_from=vf, valid_to=vt, confidence=confidence, entities=entities,
                        source_agent=source_agent, agent_default=AGENTS[ns],
                        source_ref=source_ref))
        return (ns, fid)

    def ns_for(self, fact: tuple[str, int], other: bool) -> str:
        ns, _ = fact
        return NAMESPACES[1 - NAMESPACES.index(ns)] if other else ns

    @rule(target=facts, fact=facts, other=elsewhere, text=padded_texts, valid_from=opt_dates,
          valid_to=opt_ends, subject=st.none() | st.sampled_from(SUBJECTS),
          confidence=confidences, entities=entity_args, reason=reasons, source_agent=agents,
          source_ref=refs)
    def revise(self, fact, other, text, valid_from, valid_to, subject, confidence, entities,
               reason, source_agent, source_ref):
        """A revise with valid times from a fixed list (a world change or a correction)."""
        ns, fid = self.ns_for(fact, other), fact[1]
        vf = self._time(valid_from)
        old = self.model.snapshot()[fid]
        vt = self._time(valid_to, start=vf or old.valid_from)
        return self._revise(fid, ns, text, vf, vt, subject, confidence, entities, reason,
                            source_agent, source_ref)

    @rule(target=facts, fact=facts, kind=st.sampled_from(["world", "correction", "after end"]),
          text=padded_texts, data=st.data(), reason=reasons)
    def revise_at_edges(self, fact, kind, text, data, reason):
        """A revise of the newest version of a chain: a change in the world (at, or just
        before or after, the end of the old fact's period if it has one), or a correction,
        with valid_from / valid_to at the edges of the old fact's period or of other periods
        (a microsecond before, at, after)."""
        ns, fid = fact[0], self.model.chain(fact[1])[-1]
        old = self.model.snapshot()[fid]
        now = self.clock.now
        # its start itself is refused; a microsecond after it leaves the old fact a tiny period
        near_start = {old.valid_from, old.valid_from + US, now, now + US}
        near_end = set()  # a change just before, at, or after the old fact ended
        if old.valid_to is not None:
            near_end = {old.valid_to - US, old.valid_to, old.valid_to + US,
                        old.valid_to + timedelta(days=1)}
        own = near_start | near_end
        others = [p for p in self.model.valid_points(ns) if p > old.valid_from] or [now + US]
        vf = None
        if kind == "after end" and near_end:
            vf = data.draw(st.sampled_from(sorted(near_end)), label="valid_from")
        elif kind != "correction":
            vf = data.draw(st.sampled_from(sorted(near_start)) | st.sampled_from(others),
                           label="valid_from")
        start = old.valid_from if vf is None else vf
        ends = sorted(p for p in own | set(others) | {start + US} if p > start)
        vt = data.draw(st.none() | st.sampled_from(ends), label="valid_to")
        return self._revise(fid, ns, text, vf, vt, None, 1.0, (), reason, None, None)

    def _revise(self, fid, ns, text, vf, vt, subject, confidence, entities, reason,
                source_agent, source_ref):
        def call():
            return self.m(ns).revise(
                fid, text, valid_from=vf, valid_to=vt, subject=subject, confidence=confidence,
                entities=entities, reason=reason, source_agent=source_agent,
                source_ref=source_ref,
            )

        expected = self.model.revise_error(ns, fid, vf, vt)
        if expected is not None:
            event(f"revise refused: {expected}")
            self._refused(expected, call)
            return multiple()
        new = call()
        event("revise: " + ("world change" if vf is not None else "correction")
              + (", after the old fact ended" if vf is not None
                 and (old_to := self.model.snapshot()[fid].valid_to) is not None
                 and old_to < vf else ""))
        self._logged(Op("revise", new, self.tx_now(), ns, new, target=fid, subject=subject,
                        text=text, valid_from=vf, valid_to=vt, confidence=confidence,
                        entities=entities, source_agent=source_agent,
                        agent_default=AGENTS[ns], source_ref=source_ref, reason=reason))
        return (ns, new)

    @rule(fact=facts, other=elsewhere, reason=reasons, request=st.booleans())
    def forget(self, fact, other, reason, request):
        ns, fid, rid = self.ns_for(fact, other), fact[1], self.request_id(request)
        expected = self.model.forget_error(ns, fid)
        if expected is not None:
            self._refused(expected, lambda: self.m(ns).forget(fid, reason=reason, request_id=rid))
            return
        seq = self.m(ns).forget(fid, reason=reason, request_id=rid)
        self.was_sent(ns, rid, "forget", lambda: self.m(ns).forget(fid, reason=reason,
                                                                   request_id=rid), seq)
        event("forget: " + ("superseded fact" if self.model.snapshot()[fid].superseded
                            else "head"))
        self._logged(Op("forget", seq, self.tx_now(), ns, fid, reason=reason))

    @rule(fact=facts, other=elsewhere)
    def embed(self, fact, other):
        ns, fid = self.ns_for(fact, other), fact[1]

        def call():
            return self.m(ns).record_embedding(fid, "hash-4", [0.5, -1.0, 0.25, float(fid)])

        expected = self.model.lookup_error(ns, fid)
        if expected is None and fid in self.model.erased():
            expected = "InvalidInput"  # nothing about an erased fact is written
        if expected is not None:
            self._refused(expected, call)
            return
        seq = call()
        self._logged(Op("embed", seq, self.tx_now(), ns, fid))

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
            assert type(info.value) is errors.ExtractionFailed
            assert info.value.episode_seqs == tuple(range(first, first + len(turns)))
        else:
            result = m.add([{"role": "user", "content": t} for t in turns], session_id=session,
                           extractor=extractor, similar=0)
            assert result.episode_seqs == tuple(range(first, first + len(turns)))
        for i, text in enumerate(turns):
            self.model.ops.append(Op("episode", first + i, self.tx_now(), ns, first + i,
                                     text=text, session=session, agent_default=AGENTS[ns]))
        return result

    def _extracted(self, ns, episode_seqs, lineage) -> dict:
        """The fields the extraction plan gives an extracted fact (the Memory's agent, as is)."""
        category, importance = lineage
        return dict(
            source_agent=AGENTS[ns], inherit_agent=False, derived_from=episode_seqs,
            extractor="stub-model", prompt_version="stub-v1", category=category,
            importance=importance,
        )

    @rule(target=facts, ns=namespaces, session=st.sampled_from(SESSIONS),
          turns=st.lists(texts, min_size=1, max_size=2),
          mode=st.sampled_from(["none", "fail", "new"]),
          lineage=st.sampled_from([(None, None), ("semantic", 7)]))
    def add_turns(self, ns, session, turns, mode, lineage):
        """Memory.add: the turns are always stored; then one new fact, none, or a failure."""
        text = f"fact extracted {self.model.last_seq}"  # unique: never a duplicate
        cands = [Candidate(text=text, subject="maya", category=lineage[0],
                           importance=lineage[1])] if mode == "new" else []
        result = self._add_turns(ns, session, turns, cands, fail=mode == "fail")
        if mode != "new":
            assert self.mem.last_seq == self.model.last_seq  # turns only: no fact
            return multiple()
        (fid,) = result.added
        self._logged(Op("remember", fid, self.tx_now(), ns, fid, subject="maya", text=text,
                        **self._extracted(ns, result.episode_seqs, lineage)))
        return (ns, fid)

    @rule(target=facts, fact=facts, other=elsewhere, session=st.sampled_from(SESSIONS),
          turns=st.lists(texts, min_size=1, max_size=2),
          lineage=st.sampled_from([(None, None), ("semantic", 7)]))
    def add_turns_superseding(self, fact, other, session, turns, lineage):
        """An extracted fact that supersedes a bundle fact: a revise when that fact is current
        in this namespace, else ignored (and the fact is added)."""
        ns, target = self.ns_for(fact, other), fact[1]
        text = f"fact extracted {self.model.last_seq}"
        cand = Candidate(text=text, subject="maya", supersedes=[target], category=lineage[0],
                         importance=lineage[1])
        result = self._add_turns(ns, session, turns, [cand], fail=False)
        old = self.model.snapshot().get(target)
        now = self.tx_now()
        extracted = self._extracted(ns, result.episode_seqs, lineage)
        if old is not None and old.namespace == ns and old.believed and not old.superseded:
            (revision,) = result.revised
            assert revision.old_id == target and result.added == ()
            fid = revision.new_id
            # a change in the world when the new fact starts after the old one, else a correction
            change = now if now > old.valid_from else None
            self._logged(Op("revise", fid, now, ns, fid, target=target, subject="maya",
                            text=text, valid_from=change,
                            reason="superseded by extraction (stub-model)", **extracted))
        else:
            assert [i.fact_id for i in result.ignored_supersedes] == [target]
            (fid,) = result.added
            self._logged(Op("remember", fid, now, ns, fid, subject="maya", text=text,
                            **extracted))
        return (ns, fid)

    @rule(seconds=st.sampled_from([0, 0, 1, 3600, 86400 * 40, -86400]))
    def advance_clock(self, seconds):
        """Time passes (or not); the clock may also step back a day, and the store must then
        stamp writes with its last transaction time."""
        self.clock.now += timedelta(seconds=seconds)

    @precondition(lambda self: self.model.last_seq > 0)
    @rule(how=st.sampled_from(["reopen", "crash", "rebuild"]),
          checkpoint_every=st.sampled_from([1, 3, 1000]))
    def restart(self, how, checkpoint_every):
        """reopen: close and open again. crash: the process dies after logging, its state not
        saved since the last checkpoint. rebuild: fold the whole log again."""
        if how == "reopen":
            self.mem.close()
            self.mem = Memory(self.dir, clock=self.clock, checkpoint_every=checkpoint_every,
                              embedder=EMBEDDER, embed_mode="inline")
            assert self.mem.notes == []
        elif how == "crash":
            # the old Memory is dropped unclosed, as a dead process leaves it: its files and
            # locks let go, no checkpoint published
            self.mem.store.backend.close()
            self.mem = Memory(self.dir, clock=self.clock, checkpoint_every=self.checkpoint_every,
                              embedder=EMBEDDER, embed_mode="inline")
        else:
            assert self.mem.rebuild() == self.model.last_seq
        self.generation += 1

    @rule(ns=namespaces, fact=facts, case=st.integers(0, 23))
    def invalid_operation(self, ns, fact, case):
        """A refused call raises exactly the error the model names and appends nothing."""
        m = self.m(ns)
        model = self.model
        _, fid = fact
        last = model.last_seq
        foreign = fid if model.namespace_of(fid) != ns else 10**9
        # the latest forgotten fact of ns (replaced ones first), the latest replaced one
        now = model.snapshot()
        mine = [(b.superseded, f) for f, b in now.items() if b.namespace == ns]
        forgotten = max([x for x in mine if now[x[1]].forgotten], default=(0, 10**9))[1]
        replaced = max([f for sup, f in mine if sup and not now[f].forgotten], default=10**9)
        naive = "2025-01-01T10:00"
        cases = [
            ("InvalidInput", lambda: m.remember("maya", "   ")),
            ("InvalidInput", lambda: m.remember("", "fact text")),
            ("InvalidInput", lambda: m.remember("maya", "fact x", confidence=1.5)),
            ("InvalidInput", lambda: m.remember("maya", "fact x", confidence=float("nan"))),
            ("InvalidTime", lambda: m.remember("maya", "fact x", valid_from="2025-01-01",
                                               valid_to="2024-01-01")),
            ("InvalidTime", lambda: m.remember("maya", "fact x", valid_from=naive)),
            ("InvalidInput", lambda: m.remember("maya", "fact \ud800")),
            (model.revise_error(ns, foreign, None, None), lambda: m.revise(foreign, "fact y")),
            (model.forget_error(ns, 10**9), lambda: m.forget(10**9)),
            ("InvalidTime", lambda: m.recall("fact", as_of="yesterday-ish")),
            (model.seq_error(last + 1), lambda: m.as_of(last + 1)),
            (model.seq_error(-1), lambda: m.as_of(-1)),
            (model.seq_error(last + 1), lambda: m.recall("fact", as_of=last + 1)),
            (model.lookup_error(ns, foreign), lambda: m.get(foreign)),
            (model.lookup_error(ns, foreign), lambda: m.why(foreign)),
            (model.lookup_error(ns, foreign),
             lambda: m.record_embedding(foreign, "hash-4", [1.0, 2.0, 3.0, 4.0])),
            ("InvalidTime", lambda: m.as_of(0, valid_at=naive)),
            ("InvalidTime" if last >= 1 else model.seq_error(1), lambda: m.diff(1, 0)),
            ("InvalidTime", lambda: m.revise(fid, "fact y", valid_from=naive)),
            ("InvalidTime", lambda: m.remember("maya", "fact x", valid_to=naive)),
            # an unknown id is not found before its empty text is refused
            (model.lookup_error(ns, fid) or "InvalidInput", lambda: m.revise(fid, "   ")),
            # forgotten (even when also replaced) before replaced
            (model.revise_error(ns, forgotten, None, None), lambda: m.revise(forgotten, "fact y")),
            (model.forget_error(ns, forgotten), lambda: m.forget(forgotten)),
            (model.revise_error(ns, replaced, None, None), lambda: m.revise(replaced, "fact y")),
        ]
        expected, call = cases[case]
        assert expected is not None
        event(f"refused: {expected}")
        self._refused(expected, call)

    @precondition(lambda self: self.model.last_seq > 0)
    @rule(ns=namespaces, read=st.sampled_from(["as_of", "recall", "diff", "wall"]),
          data=st.data())
    def reads_match_model(self, ns, read, data):
        """as_of, recall or diff at points the model finds interesting; or the SQL reads of
        one namespace (stats, diff, snapshot) see nothing of the other."""
        if read == "wall":
            self.namespace_wall_in_sql_reads(ns)
        else:
            getattr(self, f"{read}_matches_model")(ns, data)

    # ------------------------------------------------------------------ invariants

    @invariant()
    def store_matches_model(self):
        """After every step, in this order (the first to fail explains best): every fact's
        record, the version rows of the projection, as_of and recall at the new seqs, recall of
        current beliefs, and the incremental projection against a replay of the log."""
        if self.mem is None:
            return
        self.records_match_model()
        self.rows_are_never_rewritten_or_removed()
        self.fresh_refusals_match_model()
        self.fresh_time_travel_matches_model()
        self.current_recall_matches_model()
        self.replay_equals_incremental()


MemoryMachine.TestCase.settings = settings(
    max_examples=examples(dev=20, ci=100), stateful_step_count=30, deadline=None,
    # No "explain" phase: tracing every replay made shrinking a failure take minutes; the
    # failure message names the call and the shrunk steps say how the store got there.
    phases=[p for p in settings.default.phases if p is not Phase.explain],
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],  # as in ci
)
TestMemoryMachine = MemoryMachine.TestCase


def test_model_self_check():
    """The oracle itself on the README's scenarios."""
    model = Model()
    t0 = START
    model.ops.append(Op("remember", 1, t0, "default", 1, subject="maya", text="London",
                        valid_from=DATES[1]))
    model.ops.append(Op("revise", 2, t0 + timedelta(1), "default", 2, target=1, text="Paris",
                        valid_from=DATES[5]))
    assert model.current("default") == {2}
    assert model.current("default", 1) == {1}
    assert {x[0] for x in model.as_of("default", 2, DATES[2])} == {1}
    rows = model.facts()[1].rows
    assert [(r.valid_from, r.valid_to, r.tx_from_seq, r.tx_to_seq) for r in rows] == [
        (DATES[1], None, 1, 2), (DATES[1], DATES[5], 2, None)
    ]
    # A world change after the old fact had already ended keeps the old end.
    model.ops.append(Op("remember", 3, t0, "default", 3, subject="tom", text="a",
                        valid_from=DATES[0], valid_to=DATES[2]))
    model.ops.append(Op("revise", 4, t0, "default", 4, target=3, text="b", valid_from=DATES[5]))
    assert model.facts()[3].rows[-1].valid_to == DATES[2]
    assert [x[0] for x in model.as_of("default", 4, DATES[1] + US)] == [1, 3]
    # A correction takes over the old period; the old fact is believed no more.
    model.ops.append(Op("revise", 5, t0, "default", 5, target=2, text="c"))
    assert model.facts()[5].rows[0].valid_from == DATES[5]
    assert 2 not in model.current("default") and 5 in model.current("default")
    assert model.revise_error("default", 2, None, None) == "FactSuperseded"
