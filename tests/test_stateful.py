"""The crown jewel: the real store and a naive model, driven side by side by hypothesis.

The model (tests/model.py) computes everything a user can read. After every step, in both
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
from datetime import datetime, timedelta, timezone

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
from hmem.embedders import HashEmbedder
from hmem.hits import PastVersion
from hmem.llm import Usage
from hmem.llm.extractor import Candidate, ExtractorOutput
from hmem.views import FactView, Version
from tests.conftest import examples
from tests.model import US, Model, Op, subject_key

NAMESPACES = ["default", "o'ther\"; DROP TABLE facts; --"]
# The Memory of each namespace: the default one has no source_agent (so a revise inherits the
# old fact's), the other one its own.
AGENTS = {NAMESPACES[0]: None, NAMESPACES[1]: "agent-2"}
SUBJECTS = ["maya", "Maya", "tom", "the office", "  maya "]
WORDS = ["lives", "london", "paris", "likes", "tea", "works", "at", "acme", "London", "Acme",
         "The"]
START = datetime(2026, 1, 1, tzinfo=timezone.utc)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
DATES = [
    datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=timezone.utc),  # -1us since the epoch
    datetime(2024, 1, 1, tzinfo=timezone.utc),
    datetime(2025, 1, 1, tzinfo=timezone.utc),
    datetime(2025, 6, 1, tzinfo=timezone.utc),
    datetime(2026, 1, 1, tzinfo=timezone.utc),
    datetime(2026, 1, 1, 12, tzinfo=timezone.utc),
    datetime(2026, 6, 1, tzinfo=timezone.utc),
    datetime(2027, 1, 1, tzinfo=timezone.utc),
]

texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=4).map(
    lambda w: "fact " + " ".join(w)
)
padded_texts = texts | texts.map(lambda t: f"  {t} ")
# Valid times: fixed dates, a microsecond after one, or "now" (the clock) and a microsecond
# after it, so periods start and end exactly at, or just beside, each other and tx times.
opt_dates = (
    st.none()
    | st.sampled_from(DATES)
    | st.sampled_from(DATES).map(lambda d: d + US)
    | st.sampled_from(["now", "now+1us"])
)
# Ends: a date as above, or a length after the period's start (so most periods are valid).
opt_ends = opt_dates | st.sampled_from([US, timedelta(days=1), timedelta(days=40)])
namespaces = st.sampled_from(NAMESPACES)


@st.composite
def periods(draw):
    """A valid period for a fact remembered at START: from a date (or from then), to a later
    date, a microsecond later, or open."""
    valid_from = draw(st.none() | st.sampled_from(DATES), label="valid_from")
    start = valid_from or START
    ends = [d for d in DATES if d > start] + [start + US]
    return valid_from, draw(st.none() | st.sampled_from(ends), label="valid_to")


# Calls on a fact are made in its own namespace, or (a quarter of the time) in the other one.
elsewhere = st.sampled_from([False, False, False, True])
confidences = st.sampled_from([1.0, 0.5, 0.0])
entity_args = st.sampled_from([(), ("Paris",), ("  ",), ("Acme's", "acme", " New  York ")])
agents = st.none() | st.just("chat")
refs = st.none() | st.sampled_from(["s1:t3", "D2:4"])
reasons = st.none() | st.just("moved")
ALL = dict(limit=10_000, max_tokens=10**9)
# Every fact also gets a vector, so recall's dense path is held to the same visibility rules.
EMBEDDER = HashEmbedder(16)
TAGS = {"remembered": "remember", "revised": "revise", "forgotten": "forget",
        "embedding": "embed", "episode": "episode"}

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


# ---------------------------------------------------------------------- readable comparisons


def _us(t: datetime | None) -> int | None:
    return None if t is None else (t - EPOCH) // US


def _t(t: datetime | None) -> str:
    if t is None:
        return "inf"
    s = t.strftime("%Y-%m-%dT%H:%M:%S")
    return s + (f".{t.microsecond:06d}" if t.microsecond else "")


def _version(v: Version) -> str:
    return (f"valid [{_t(v.valid_from)}, {_t(v.valid_to)}) x tx seq [{v.tx_from_seq}, "
            f"{v.tx_to_seq if v.tx_to_seq is not None else 'inf'}) "
            f"({_t(v.tx_from)} .. {_t(v.tx_to)})")


def _show(name: str, value: object) -> str:
    if name == "versions":
        return "\n      " + "\n      ".join(_version(v) for v in value)  # type: ignore[attr-defined]
    return repr(_plain(value))


def assert_same_view(got: FactView, want: FactView, what: str) -> None:
    if got == want:
        return
    lines = [f"{what}: the store's fact {got.id} differs from the model's fact {want.id}"]
    for name in FactView.__struct_fields__:
        g, w = getattr(got, name), getattr(want, name)
        if g != w:
            lines.append(f"  {name}:\n    store {_show(name, g)}\n    model {_show(name, w)}")
    raise AssertionError("\n".join(lines))


def _plain(x: object) -> object:
    """``x`` with datetimes as short strings, for failure messages."""
    if isinstance(x, datetime):
        return _t(x)
    if isinstance(x, (list, tuple)):
        return type(x)(_plain(v) for v in x) if type(x) in (list, tuple) else x
    if isinstance(x, dict):
        return {k: _plain(v) for k, v in x.items()}
    if isinstance(x, PastVersion):
        return ("past", x.id, x.text, _t(x.valid_from), _t(x.valid_to), x.revision)
    return x


def assert_same(got: object, want: object, what: str) -> None:
    if got != want:
        raise AssertionError(f"{what}:\n  store {_plain(got)!r}\n  model {_plain(want)!r}")


def raises_exactly(expected: str, call) -> None:
    """``call()`` raises exactly ``errors.<expected>`` (not a subclass, not a sibling)."""
    cls = getattr(errors, expected)
    with pytest.raises(errors.HmemError) as info:
        call()
    assert type(info.value) is cls, (
        f"expected {cls.__name__}, got {type(info.value).__name__}: {info.value}"
    )


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
        self.generation = 0  # bumped by every reopen, crash and rebuild
        self.verified: tuple[int, int] | None = None  # (generation, last_seq) last verified
        self.swept = 0  # seqs before this were swept by fresh_time_travel_matches_model
        self.why_checked = (0, 0)  # (generation, last_seq) when why was last asked

    @initialize(target=facts, flush_every=st.sampled_from([1, 2, 5, 256]), seeds=st.lists(
        st.tuples(namespaces, st.sampled_from(SUBJECTS), texts, periods(), agents),
        max_size=3,
    ))
    def open_store(self, flush_every: int, seeds):
        """Open the store and remember a few facts, so most steps have something to change."""
        self.flush_every = flush_every
        self.mem = Memory(self.dir, clock=self.clock, flush_every=flush_every, embedder=EMBEDDER)
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

    # ------------------------------------------------------------------ what the model says

    def want_view(self, fid: int, facts=None) -> FactView:
        """The FactView ``get(fid)`` must return."""
        model = self.model
        f = (facts or model.facts())[fid]
        tx = model.tx_of
        return FactView(
            id=f.id, namespace=f.namespace, subject=f.subject, text=f.text,
            confidence=f.confidence, source_agent=f.source_agent, source_ref=f.source_ref,
            entities=f.entities, recorded_at=tx(f.created_seq), supersedes=f.supersedes,
            revision=f.revision, reason=f.reason, superseded_by=f.superseded_by,
            superseded_at=None if f.superseded_by is None else tx(f.superseded_by),
            forgotten_at=None if f.forgotten_seq is None else tx(f.forgotten_seq),
            forget_reason=f.forget_reason,
            versions=tuple(
                Version(
                    valid_from=r.valid_from, valid_to=r.valid_to, tx_from=tx(r.tx_from_seq),
                    tx_to=None if r.tx_to_seq is None else tx(r.tx_to_seq),
                    tx_from_seq=r.tx_from_seq, tx_to_seq=r.tx_to_seq,
                )
                for r in f.rows
            ),
            derived_from=f.derived_from, extractor=f.extractor,
            prompt_version=f.prompt_version, category=f.category, importance=f.importance,
        )

    def want_beliefs(self, ns: str, seq: int, valid_at: datetime | None) -> list[tuple]:
        """as_of(seq, valid_at) as (id, subject, text, valid_from, valid_to, recorded_at,
        confidence, superseded, source_agent, source_ref), by id."""
        facts = self.model.facts()
        out = []
        for fid, vf, vt, superseded, since in self.model.as_of(ns, seq, valid_at):
            f = facts[fid]
            out.append((fid, f.subject, f.text, vf, vt, self.model.tx_of(since),
                        f.confidence, superseded, f.source_agent, f.source_ref))
        return out

    def want_hits(self, ns: str, seq: int | None, valid_at: datetime | None) -> dict[int, tuple]:
        """recall(as_of=seq, valid_at=valid_at): the visible facts, each as its hit shows it."""
        model = self.model
        at = model.last_seq if seq is None else seq
        facts, then = model.facts(), model.snapshot(at)
        out = {}
        for fid in model.visible(ns, seq, valid_at):
            f, b = facts[fid], then[fid]
            history, kind = [], f.revision
            for p in model.predecessors(fid):  # each as believed at the query's seq
                history.append(PastVersion(p, facts[p].text, then[p].valid_from,
                                           then[p].valid_to, kind or "world"))
                kind = facts[p].revision
            superseded_by = f.superseded_by if f.superseded_by is not None and (
                f.superseded_by <= at) else None
            out[fid] = (f.text, f.subject, b.valid_from, b.valid_to,
                        model.tx_of(f.created_seq), f.confidence, f.source_agent, f.source_ref,
                        superseded_by, tuple(history))
        return out

    # ------------------------------------------------------------------ checks used by rules

    def check_as_of(self, ns: str, tx: int | datetime, valid_at: datetime | None) -> None:
        seq = tx if isinstance(tx, int) else self.model.seq_at(tx)
        got = [
            (b.id, b.subject, b.text, b.valid_from, b.valid_to, b.recorded_at, b.confidence,
             b.superseded, b.source_agent, b.source_ref)
            for b in self.m(ns).as_of(tx, valid_at=valid_at)
        ]
        assert_same(got, self.want_beliefs(ns, seq, valid_at),
                    f"as_of({tx!r}, valid_at={valid_at}) in {ns!r} (seq {seq})")

    def check_recall(self, ns: str, tx: int | datetime | None, valid_at: datetime | None,
                     subject: str | None = None) -> None:
        seq = tx if tx is None or isinstance(tx, int) else self.model.seq_at(tx)
        hits = self.m(ns).recall(
            "fact", as_of=tx, valid_at=valid_at, subject=subject, **ALL
        ).hits
        got = {
            h.id: (h.text, h.subject, h.valid_from, h.valid_to, h.recorded_at, h.confidence,
                   h.source_agent, h.source_ref, h.superseded_by, h.history)
            for h in hits
        }
        want = self.want_hits(ns, seq, valid_at)
        if subject is not None:  # only facts about it (case and spacing ignored)
            want = {f: w for f, w in want.items() if subject_key(w[1]) == subject_key(subject)}
        what = (f"recall(as_of={tx!r}, valid_at={valid_at}, subject={subject!r}) in {ns!r} "
                f"(seq {seq})")
        assert_same(sorted(got), sorted(want), what + ": visible ids")
        for fid in got:
            assert_same(got[fid], want[fid], f"{what}: hit {fid}")

    # ------------------------------------------------------------------ writes

    @rule(target=facts, ns=namespaces, subject=st.sampled_from(SUBJECTS), text=padded_texts,
          valid_from=opt_dates, valid_to=opt_ends, confidence=confidences,
          entities=entity_args, source_agent=agents, source_ref=refs)
    def remember(self, ns, subject, text, valid_from, valid_to, confidence, entities,
                 source_agent, source_ref):
        vf, now = self._time(valid_from), self.tx_now()
        vt = self._time(valid_to, start=vf or now)

        def call():
            return self.m(ns).remember(
                subject, text, valid_from=vf, valid_to=vt, confidence=confidence,
                entities=entities, source_agent=source_agent, source_ref=source_ref,
            )

        expected = self.model.remember_error(now, vf, vt)
        if expected is not None:
            self._refused(expected, call)
            return multiple()
        fid = call()
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

    @rule(fact=facts, other=elsewhere, reason=reasons)
    def forget(self, fact, other, reason):
        ns, fid = self.ns_for(fact, other), fact[1]
        expected = self.model.forget_error(ns, fid)
        if expected is not None:
            self._refused(expected, lambda: self.m(ns).forget(fid, reason=reason))
            return
        seq = self.m(ns).forget(fid, reason=reason)
        event("forget: " + ("superseded fact" if self.model.snapshot()[fid].superseded
                            else "head"))
        self._logged(Op("forget", seq, self.tx_now(), ns, fid, reason=reason))

    @rule(fact=facts, other=elsewhere)
    def embed(self, fact, other):
        ns, fid = self.ns_for(fact, other), fact[1]

        def call():
            return self.m(ns).record_embedding(fid, "hash-4", [0.5, -1.0, 0.25, float(fid)])

        expected = self.model.lookup_error(ns, fid)
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
          flush_every=st.sampled_from([1, 3, 256]))
    def restart(self, how, flush_every):
        """reopen: close and open again. crash: the process dies after logging but before the
        projection batch is written. rebuild: replay the whole log into the projection."""
        if how == "reopen":
            self.mem.close()
            self.mem = Memory(self.dir, clock=self.clock, flush_every=flush_every,
                              embedder=EMBEDDER)
            assert self.mem.notes == []
        elif how == "crash":
            store = self.mem.store
            store.db.close()
            store.log.close()  # the old Memory is dropped unclosed, as a dead process leaves it
            self.mem = Memory(self.dir, clock=self.clock, flush_every=self.flush_every,
                              embedder=EMBEDDER)
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

    # ------------------------------------------------------------------ time-travel checks

    def draw_tx(self, data, label: str):
        """A transaction point: a seq next to an event's, a tx time a microsecond around an
        event's, or any time around the history."""
        model = self.model
        return data.draw(
            st.sampled_from(model.tx_points())
            | (st.sampled_from(model.tx_times()) if model.ops else st.nothing())
            | st.datetimes(min_value=datetime(2025, 12, 1), max_value=datetime(2028, 1, 1),
                           timezones=st.just(timezone.utc)),
            label=label,
        )

    def draw_valid_at(self, data, ns: str):
        """None, or a world time at the edge of a row of this namespace."""
        points = self.model.valid_points(ns)
        return data.draw(st.none() | st.sampled_from(points or DATES), label="valid_at")

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

    def as_of_matches_model(self, ns, data):
        """as_of at a seq or time next to an event's, valid at the edge of a row."""
        self.check_as_of(ns, self.draw_tx(data, "as_of"), self.draw_valid_at(data, ns))

    def recall_matches_model(self, ns, data):
        """recall: which facts are visible, and each hit's period, links and history, at a seq
        or time next to an event's (or now), valid at the edge of a row (or any time)."""
        tx = None if data.draw(st.booleans(), label="now") else self.draw_tx(data, "as_of")
        valid_at = self.draw_valid_at(data, ns)
        subject = data.draw(st.none() | st.sampled_from(SUBJECTS), label="subject")
        self.check_recall(ns, tx, valid_at, subject)

    def diff_matches_model(self, ns, data):
        points = self.model.tx_points()
        since = data.draw(st.sampled_from(points), label="since")
        until = data.draw(st.sampled_from([p for p in points if p >= since]), label="until")
        d = self.m(ns).diff(since, until)
        added, revised, forgotten = self.model.diff(ns, since, until)
        facts = self.model.facts()
        what = f"diff({since}, {until}) in {ns!r}"
        assert_same(([f.id for f in d.added], [(r.old.id, r.new.id, r.kind) for r in d.revised],
                     [f.id for f in d.forgotten]), (added, revised, forgotten), what)
        for view in (*d.added, *d.forgotten, *(r.new for r in d.revised),
                     *(r.old for r in d.revised)):
            assert_same_view(view, self.want_view(view.id, facts), what)
        assert (d.since_seq, d.until_seq) == (since, until)

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

    def replay_equals_incremental(self):
        """Skipped when nothing was written, reopened or rebuilt since the last check (reads
        change neither the log nor the projection)."""
        if self.mem is None:
            return
        now = (self.generation, self.model.last_seq)
        if self.verified == now:
            return
        report = self.mem.verify()
        assert report.ok, report.examples
        self.verified = now

    def records_match_model(self):
        """get, history and why of every fact of every namespace: every field, every row."""
        if self.mem is None:
            return
        model = self.model
        facts = model.facts()
        views = {fid: self.want_view(fid, facts) for fid in facts}
        # why reads the log and the events table: asked again for every chain an event touched
        # since the last step, and for all of them after a reopen, crash or rebuild.
        since = self.why_checked[1] if self.why_checked[0] == self.generation else 0
        touched = {c for op in model.ops[since:] if op.kind != "episode"
                   for c in model.chain(op.fact)}
        self.why_checked = (self.generation, model.last_seq)
        for ns in NAMESPACES:
            m = self.m(ns)
            mine = sorted(fid for fid, f in facts.items() if f.namespace == ns)
            for fid in mine:
                assert_same_view(m.get(fid), views[fid], f"get({fid}) in {ns!r}")
            for key in sorted({subject_key(s) for s in SUBJECTS}):
                got = m.history(key.upper())
                assert_same([f.id for f in got], model.history(ns, key), f"history({key!r}) ids")
                for view in got:
                    assert_same_view(view, views[view.id], f"history({key!r}) in {ns!r}")
            done: set[int] = set()
            for fid in mine:
                if fid in done or fid not in touched:
                    continue
                chain = model.chain(fid)
                done.update(chain)
                why = m.why(fid)
                assert_same_view(why.fact, views[fid], f"why({fid}).fact in {ns!r}")
                assert_same([v.id for v in why.chain], chain, f"why({fid}).chain")
                for view in why.chain:
                    assert_same_view(view, views[view.id], f"why({fid}).chain in {ns!r}")
                got_events = [(e.seq, TAGS[e.__struct_config__.tag]) for e in why.events]
                assert_same(got_events, model.events_of(ns, chain), f"why({fid}).events")
                turns = sorted({s for c in chain for s in facts[c].derived_from})
                assert_same([e.seq for e in why.episodes], turns, f"why({fid}).episodes")
            for session in (None, *SESSIONS):
                got = [(e.seq, e.session_id, e.turn, e.text, e.observed_at, e.recorded_at,
                        e.source_agent) for e in m.episodes(session)]
                assert_same(got, model.episodes(ns, session), f"episodes({session!r}) in {ns!r}")

    def fresh_refusals_match_model(self):
        """Every fact the step replaced or forgot can no longer be revised (forgotten is said
        first), a forgotten one not forgotten again; in the other namespace none is found."""
        model = self.model
        start = min(self.swept, model.last_seq + 1)
        for op in model.ops[max(start - 1, 0):]:
            if op.kind not in ("revise", "forget"):
                continue
            fid = op.target if op.kind == "revise" else op.fact
            for ns in NAMESPACES:
                m = self.m(ns)
                expected = model.revise_error(ns, fid, None, None)
                self._refused(expected, lambda m=m, fid=fid: m.revise(fid, "fact again"))
                if ns != op.namespace or model.snapshot()[fid].forgotten:
                    self._refused(model.forget_error(ns, fid),
                                  lambda m=m, fid=fid: m.forget(fid))

    def fresh_time_travel_matches_model(self):
        """as_of and recall at every seq the last step added (and the one before), with valid
        times at the edges of the rows that began or ended there."""
        if self.mem is None:
            return
        model = self.model
        last = model.last_seq
        if self.swept > last:
            return
        facts = model.facts()
        for seq in range(max(self.swept - 1, 0), last + 1):
            edges: dict[str, set[datetime]] = {ns: set() for ns in NAMESPACES}
            exact: set[datetime] = set()
            for f in facts.values():
                for r in f.rows:
                    if seq in (r.tx_from_seq, r.tx_to_seq, (r.tx_to_seq or 0) - 1):
                        for e in (r.valid_from, r.valid_to):
                            if e is not None:
                                edges[f.namespace] |= {e - US, e}
                                exact.add(e)
            for ns in NAMESPACES:
                near = [model.ops[s - 1].namespace for s in (seq, seq + 1) if 1 <= s <= last]
                if seq != last and ns not in near:
                    continue  # no event of this namespace at seq or just after it
                self.check_as_of(ns, seq, None)
                self.check_recall(ns, seq, None)
                for valid_at in sorted(edges[ns]):
                    self.check_recall(ns, seq, valid_at)
                    if valid_at in exact:  # as_of shows the periods: the edges suffice
                        self.check_as_of(ns, seq, valid_at)
        # as_of a transaction *time*: each new event's, and a microsecond before it
        for t in sorted({op.tx for op in model.ops[max(self.swept - 1, 0):]}):
            for ns in {op.namespace for op in model.ops if op.tx == t}:
                self.check_as_of(ns, t, None)
                self.check_as_of(ns, t - US, None)
        self.swept = last + 1

    def rows_are_never_rewritten_or_removed(self):
        """The projection's version rows, as written incrementally, are the model's rows (times
        in microseconds); no row ever disappears and no tx_from ever changes."""
        con = self.mem.store.connection()
        got = con.execute(
            "SELECT fact_id, row_no, namespace, epoch_us(valid_from), epoch_us(valid_to), "
            "tx_from_seq, epoch_us(tx_from), tx_to_seq, epoch_us(tx_to) FROM fact_versions "
            "ORDER BY fact_id, row_no"
        ).fetchall()
        assert len(got) >= self.rows_seen
        self.rows_seen = len(got)
        for fid, row_no, _, _, _, seq, tx_us, _, _ in got:
            key = (fid, row_no)
            assert self.seen_tx_from.setdefault(key, (seq, tx_us)) == (seq, tx_us), key
        tx = self.model.tx_of
        want = [
            (fid, i, f.namespace, _us(r.valid_from), _us(r.valid_to), r.tx_from_seq,
             _us(tx(r.tx_from_seq)), r.tx_to_seq,
             None if r.tx_to_seq is None else _us(tx(r.tx_to_seq)))
            for fid, f in sorted(self.model.facts().items()) for i, r in enumerate(f.rows)
        ]
        assert_same(got, want, "table fact_versions (times in microseconds since the epoch)")
        n_facts = con.execute("SELECT count(*) FROM facts").fetchone()[0]
        assert n_facts == len(self.model.snapshot())
        backwards = con.execute(
            "SELECT count(*) FROM facts WHERE superseded_by IS NOT NULL AND superseded_by <= id"
        ).fetchone()[0]
        assert backwards == 0

    def current_recall_matches_model(self):
        """recall of current beliefs (no as_of, no valid_at: the in-memory current flags)."""
        if self.mem is None:
            return
        for ns in NAMESPACES:
            self.check_recall(ns, None, None)

    def namespace_wall_in_sql_reads(self, ns):
        m = self.m(ns)
        mine = self.model.facts_in(ns)
        assert {b.id for b in m.as_of(self.model.last_seq)} <= mine
        stats = m.stats()
        snap = self.model.snapshot()
        assert stats.facts == len(mine)
        assert stats.superseded == sum(snap[f].superseded for f in mine)
        assert stats.forgotten == sum(snap[f].forgotten for f in mine)
        diff = m.diff(0)
        assert {f.id for f in diff.added} | {r.new.id for r in diff.revised} == mine
        # the snapshot relation holds the belief set of now, with its chain columns
        facts = self.model.facts()
        got = [(r[0], r[2], r[3], r[4], r[5], r[6], r[7], r[9], r[10], r[11], r[12], r[13],
                tuple(r[14])) for r in m.snapshot().order("id").fetchall()]
        want = [(fid, subj, text, conf, vf, vt, since, sup, facts[fid].supersedes,
                 facts[fid].revision, agent, ref, facts[fid].entities)
                for fid, subj, text, vf, vt, since, conf, sup, agent, ref
                in self.want_beliefs(ns, self.model.last_seq, None)]
        assert_same(got, want, f"snapshot() in {ns!r}")
        for fid in self.model.facts_in(NAMESPACES[0] if ns != NAMESPACES[0] else NAMESPACES[1]):
            raises_exactly("FactNotFound", lambda fid=fid: m.why(fid))


MemoryMachine.TestCase.settings = settings(
    max_examples=examples(dev=20, ci=100), stateful_step_count=30, deadline=None,
    # No "explain" phase: tracing every replay made shrinking a failure take minutes; the
    # failure message names the call and the shrunk steps say how the store got there.
    phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink],
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
