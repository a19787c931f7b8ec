"""A naive in-memory model of hmem's semantics: the oracle for the property tests.

Written from the specification (README "Two kinds of revise", "Times", "What forget does" and
the rules in the docstring of ``projections.fold``), not from the code that implements it: it
keeps a plain list of operations and answers every question by folding that list from the start.
Slow and obviously right is the point.

It answers twice, in two independent ways, and the stateful test holds the store to both:

* :meth:`Model.snapshot` folds the operations up to a seq into a *one-dimensional* picture: for
  each fact, is it believed then, for which valid period, since when, and was it replaced. No
  version rows. ``as_of`` and ``recall`` visibility are answered from it.
* :meth:`Model.facts` folds all operations into the *record* a user reads with ``get``,
  ``history`` and ``why``: every field of every fact and its version rows (the rectangles of
  the bi-temporal plane, as the spec draws them).

If the two disagree with each other the store cannot agree with both, so a slip in either half
of the model shows up as a failing test too.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

US = timedelta(microseconds=1)

# Words that only start a sentence or stand for a noun: a run of capitalised words loses them
# at its start when entities are found in a text ("The London office" names "london office").
COMMON_WORDS = frozenset({"the", "a", "an", "this", "that", "i", "we", "you", "my", "our"})


@dataclass
class Op:
    """One logged event, as the caller asked for it (the model applies every default)."""

    kind: str  # remember | revise | forget | embed | episode | erase
    seq: int
    tx: datetime
    namespace: str
    fact: int  # the new fact for remember/revise; the target for forget/embed; episode: seq
    target: int | None = None  # the revised fact
    subject: str | None = None  # revise: None keeps the old subject
    text: str = ""
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    session: str = ""  # episode: its session (the text is in ``text``)
    confidence: float = 1.0
    entities: tuple[str, ...] = ()  # as the caller gave them (empty: found in the text)
    source_agent: str | None = None  # as the caller gave it
    agent_default: str | None = None  # the Memory's source_agent
    inherit_agent: bool = True  # revise: fall back to the old fact's agent (Memory.revise)
    source_ref: str | None = None
    reason: str | None = None  # revise / forget
    derived_from: tuple[int, ...] = ()
    extractor: str | None = None
    prompt_version: str | None = None
    category: str | None = None
    importance: int | None = None
    erased: tuple[int, ...] = ()  # erase: the fact versions it erased (``fact``: the one named)


# ---------------------------------------------------------------------- the record of a fact


@dataclass
class ModelRow:
    """A rectangle: valid_from <= world time < valid_to, tx_from_seq <= seq < tx_to_seq."""

    valid_from: datetime
    valid_to: datetime | None
    tx_from_seq: int
    tx_to_seq: int | None = None

    def believed_at(self, seq: int) -> bool:
        return self.tx_from_seq <= seq and (self.tx_to_seq is None or seq < self.tx_to_seq)

    def valid_at(self, t: datetime) -> bool:
        return self.valid_from <= t and (self.valid_to is None or t < self.valid_to)


@dataclass
class ModelRecord:
    """Everything ``get(id)`` shows about a fact (times as seqs; the test maps them to times)."""

    id: int
    namespace: str
    subject: str
    text: str
    confidence: float
    source_agent: str | None
    source_ref: str | None
    entities: tuple[str, ...]
    created_seq: int
    rows: list[ModelRow]
    supersedes: int | None = None
    revision: str | None = None  # "world" or "correction": how this fact replaced `supersedes`
    reason: str | None = None
    superseded_by: int | None = None
    forgotten_seq: int | None = None
    forget_reason: str | None = None
    derived_from: tuple[int, ...] = ()
    extractor: str | None = None
    prompt_version: str | None = None
    category: str | None = None
    importance: int | None = None


# ---------------------------------------------------------------------- the one-dimensional view


@dataclass
class Belief:
    """What was believed about one fact at one seq (the snapshot, no version rows)."""

    namespace: str
    valid_from: datetime
    valid_to: datetime | None
    since_seq: int  # when the current belief about it began
    believed: bool = True
    superseded: bool = False
    forgotten: bool = False

    def valid_at(self, t: datetime) -> bool:
        return self.valid_from <= t and (self.valid_to is None or t < self.valid_to)


def normalize_entity(name: str) -> str:
    name = " ".join(name.split()).casefold()
    for suffix in ("'s", "\u2019s"):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
    return name


def text_entities(text: str) -> list[str]:
    """Proper nouns: runs of capitalised words, without the common words that start them.

    (The texts the stateful test writes are plain words separated by spaces.)"""
    runs: list[list[str]] = [[]]
    for word in text.split():
        if word[:1].isascii() and word[:1].isupper():
            runs[-1].append(word)
        elif runs[-1]:
            runs.append([])
    out = []
    for run in runs:
        while run and run[0].casefold() in COMMON_WORDS:
            run = run[1:]
        if run:
            out.append(normalize_entity(" ".join(run)))
    return out


def entities_of(subject: str, text: str, given: tuple[str, ...]) -> tuple[str, ...]:
    """The subject, then the caller's names, or the text's proper nouns when none are given."""
    given = tuple(g for g in given if g.strip())
    names = [normalize_entity(subject)]
    names += [normalize_entity(g) for g in given] if given else text_entities(text)
    return tuple(dict.fromkeys(n for n in names if n))


def subject_key(subject: str) -> str:
    return " ".join(subject.split()).casefold()


@dataclass
class Model:
    ops: list[Op] = field(default_factory=list)  # only ever appended to
    # Folds already made, for as long as no operation is appended (callers never change them).
    _memo: dict = field(default_factory=dict, repr=False)
    _memo_len: int = field(default=-1, repr=False)

    def _memoized(self, key, fold):
        if self._memo_len != len(self.ops):
            self._memo, self._memo_len = {}, len(self.ops)
        if key not in self._memo:
            self._memo[key] = fold()
        return self._memo[key]

    @property
    def last_seq(self) -> int:
        return len(self.ops)

    def tx_of(self, seq: int) -> datetime:
        return self.ops[seq - 1].tx

    # ------------------------------------------------------------------ the snapshot fold

    def snapshot(self, upto: int | None = None) -> dict[int, Belief]:
        """Each fact as believed after the events up to seq ``upto`` (default: all)."""
        upto = self.last_seq if upto is None else upto
        return self._memoized(("snapshot", upto), lambda: self._snapshot(upto))

    def _snapshot(self, upto: int) -> dict[int, Belief]:
        facts: dict[int, Belief] = {}
        for op in self.ops[:upto]:
            if op.kind == "remember":
                facts[op.fact] = Belief(
                    op.namespace, op.valid_from or op.tx, op.valid_to, op.seq
                )
            elif op.kind == "revise":
                old = facts[op.target]
                old.superseded = True
                if op.valid_from is not None:  # the world changed: old stays true until then
                    if old.valid_to is None or op.valid_from < old.valid_to:
                        old.valid_to = op.valid_from
                    old.since_seq = op.seq
                    vf, vt = op.valid_from, op.valid_to
                else:  # a correction: old is no longer believed at all
                    old.believed = False
                    vf = old.valid_from
                    vt = op.valid_to if op.valid_to is not None else old.valid_to
                facts[op.fact] = Belief(op.namespace, vf, vt, op.seq)
            elif op.kind == "forget":
                facts[op.fact].believed = False
                facts[op.fact].forgotten = True
            elif op.kind == "erase":  # the receipt ends belief in every version it erased
                for fid in op.erased:
                    facts[fid].believed = False
                    facts[fid].forgotten = True
        return facts

    def as_of(self, namespace: str, seq: int, valid_at: datetime | None) -> list[tuple]:
        """(id, valid_from, valid_to, superseded, since_seq) believed at seq and valid at
        valid_at, by id."""
        out = []
        for fid, f in sorted(self.snapshot(seq).items()):
            if f.namespace != namespace or not f.believed:
                continue
            if valid_at is not None and not f.valid_at(valid_at):
                continue
            out.append((fid, f.valid_from, f.valid_to, f.superseded, f.since_seq))
        return out

    def current(self, namespace: str, seq: int | None = None) -> set[int]:
        """Ids recall returns without valid_at (as of seq): believed and not replaced."""
        return {
            fid
            for fid, f in self.snapshot(seq).items()
            if f.namespace == namespace and f.believed and not f.superseded
        }

    def visible(self, namespace: str, seq: int | None, valid_at: datetime | None) -> set[int]:
        """Ids recall returns: current beliefs (as of seq), or with valid_at everything believed
        at seq (default now) and true at valid_at, replaced versions included; never an erased
        fact, at any seq (its words are gone)."""
        if valid_at is None:
            return self.current(namespace, seq) - self.erased()
        return {x[0] for x in self.as_of(namespace, self.last_seq if seq is None else seq,
                                         valid_at)} - self.erased()  # no words: never found

    # ------------------------------------------------------------------ the record fold

    def facts(self) -> dict[int, ModelRecord]:
        """Every fact with every field a user can read and its version rows."""
        return self._memoized("facts", self._facts)

    def _facts(self) -> dict[int, ModelRecord]:
        out: dict[int, ModelRecord] = {}
        for op in self.ops:
            if op.kind == "remember":
                start = op.valid_from or op.tx  # valid_from defaults to the moment recorded
                out[op.fact] = self._record(op, op.subject or "", [
                    ModelRow(start, op.valid_to, op.seq)
                ], op.source_agent or op.agent_default)
            elif op.kind == "revise":
                old = out[op.target]
                (open_row,) = [r for r in old.rows if r.tx_to_seq is None]
                open_row.tx_to_seq = op.seq  # the old belief ends here, in either kind
                old.superseded_by = op.seq
                if op.valid_from is not None:  # the world changed at valid_from
                    kept_to = op.valid_from
                    if open_row.valid_to is not None and open_row.valid_to < kept_to:
                        kept_to = open_row.valid_to
                    old.rows.append(ModelRow(open_row.valid_from, kept_to, op.seq))
                    row, kind = ModelRow(op.valid_from, op.valid_to, op.seq), "world"
                else:  # a correction takes over the old valid period
                    end = open_row.valid_to if op.valid_to is None else op.valid_to
                    row, kind = ModelRow(open_row.valid_from, end, op.seq), "correction"
                agent = op.source_agent or op.agent_default
                if agent is None and op.inherit_agent:
                    agent = old.source_agent
                new = self._record(op, op.subject or old.subject, [row], agent)
                new.supersedes, new.revision, new.reason = old.id, kind, op.reason
                out[op.fact] = new
            elif op.kind == "forget":
                f = out[op.fact]
                for r in f.rows:
                    if r.tx_to_seq is None:
                        r.tx_to_seq = op.seq
                f.forgotten_seq, f.forget_reason = op.seq, op.reason
            elif op.kind == "erase":  # texts gone (subject and entities too); belief ends
                for fid in op.erased:
                    f = out[fid]
                    for r in f.rows:
                        if r.tx_to_seq is None:
                            r.tx_to_seq = op.seq
                    if f.forgotten_seq is None:
                        f.forgotten_seq, f.forget_reason = op.seq, f"erased (receipt {op.seq})"
                    else:  # forgotten before: that forget's reason was sealed with the fact
                        f.forget_reason = None
                    f.subject, f.text, f.entities, f.reason = "", "", (), None
        return out

    @staticmethod
    def _record(op: Op, subject: str, rows: list[ModelRow], agent: str | None) -> ModelRecord:
        subject, text = subject.strip(), op.text.strip()  # arguments are taken stripped
        return ModelRecord(
            id=op.fact, namespace=op.namespace, subject=subject, text=text,
            confidence=op.confidence, source_agent=agent, source_ref=op.source_ref,
            entities=entities_of(subject, text, op.entities), created_seq=op.seq, rows=rows,
            derived_from=op.derived_from, extractor=op.extractor,
            prompt_version=op.prompt_version, category=op.category, importance=op.importance,
        )

    # ------------------------------------------------------------------ other questions

    def chain(self, fid: int) -> list[int]:
        """The whole revision chain ``fid`` belongs to, oldest first."""
        replaced = {op.fact: op.target for op in self.ops if op.kind == "revise"}
        successor = {old: new for new, old in replaced.items()}
        root = fid
        while root in replaced:
            root = replaced[root]
        out = [root]
        while out[-1] in successor:
            out.append(successor[out[-1]])
        return out

    def predecessors(self, fid: int) -> list[int]:
        """The versions ``fid`` replaced, newest first."""
        chain = self.chain(fid)
        return chain[: chain.index(fid)][::-1]

    def events_of(self, namespace: str, ids: list[int]) -> list[tuple[int, str]]:
        """(seq, kind) of the events that created or touched these facts, in log order."""
        return [
            (op.seq, op.kind) for op in self.ops
            if op.kind != "episode" and op.namespace == namespace
            and (op.fact in ids if op.kind != "erase" else not set(op.erased).isdisjoint(ids))
        ]

    def history(self, namespace: str, subject: str) -> list[int]:
        """Ids of every fact ever stored about ``subject`` (case and spacing ignored), oldest
        first."""
        key = subject_key(subject)
        return [
            fid for fid, f in sorted(self.facts().items())
            if f.namespace == namespace and subject_key(f.subject) == key
        ]

    def diff(self, namespace: str, since: int, until: int) -> tuple[list, list, list]:
        """Added ids, (old, new, kind) revisions and forgotten ids of since < seq <= until."""
        added, revised, forgotten = [], [], []
        for op in self.ops[since:until]:
            if op.namespace != namespace:
                continue
            if op.kind == "remember":
                added.append(op.fact)
            elif op.kind == "revise":
                revised.append((op.target, op.fact,
                                "world" if op.valid_from is not None else "correction"))
            elif op.kind == "forget":
                forgotten.append(op.fact)
        return added, revised, forgotten

    def own_tx(self, namespace: str, seq: int) -> datetime | None:
        """The tx time of this namespace's last event at or before ``seq`` (None before its
        first): what diff dates ``since`` and ``until`` with."""
        own = [op.tx for op in self.ops[:seq] if op.namespace == namespace]
        return own[-1] if own else None

    def episodes(self, namespace: str, session: str | None = None) -> list[tuple]:
        """(seq, session, turn, text, observed_at, recorded_at, source_agent) of the recorded
        turns, in log order; turns count per session; a turn is observed when recorded."""
        out, turns = [], {}
        for op in self.ops:
            if op.kind == "episode" and op.namespace == namespace:
                turn = turns.get(op.session, 0)
                turns[op.session] = turn + 1
                if session is None or op.session == session:
                    out.append((op.seq, op.session, turn, op.text.strip(), op.tx, op.tx,
                                op.source_agent or op.agent_default))
        return out

    def seq_at(self, t: datetime) -> int:
        """A transaction time means the last event at or before it."""
        return sum(1 for op in self.ops if op.tx <= t)

    def facts_in(self, namespace: str) -> set[int]:
        return {fid for fid, f in self.snapshot().items() if f.namespace == namespace}

    def namespace_of(self, fid: int) -> str | None:
        f = self.snapshot().get(fid)
        return None if f is None else f.namespace

    # ------------------------------------------------------------------ interesting points

    def tx_points(self) -> list[int]:
        """Seqs where answers change: every event's seq, one before and one after (in 0..last)."""
        last = self.last_seq
        return sorted({
            s for op in self.ops for s in (op.seq - 1, op.seq, op.seq + 1) if 0 <= s <= last
        } | {0, last})

    def tx_times(self) -> list[datetime]:
        """Transaction times around every event: its time, a microsecond before and after."""
        return sorted({op.tx + d for op in self.ops for d in (-US, 0 * US, US)})

    def valid_points(self, namespace: str | None = None) -> list[datetime]:
        """World times where answers change: every row's valid_from and valid_to, and a
        microsecond before and after each."""
        edges = set()
        for f in self.facts().values():
            if namespace is None or f.namespace == namespace:
                for r in f.rows:
                    edges.add(r.valid_from)
                    if r.valid_to is not None:
                        edges.add(r.valid_to)
        return sorted({e + d for e in edges for d in (-US, 0 * US, US)})

    # ------------------------------------------------------------------ validity

    def revise_error(self, namespace: str, fid: int, valid_from: datetime | None,
                     valid_to: datetime | None) -> str | None:
        """The typed error a revise must raise, by class name, or None if it is valid."""
        f = self.snapshot().get(fid)
        if f is None or f.namespace != namespace:
            return "FactNotFound"  # ids of another namespace are not resolved
        if f.forgotten:
            return "FactAlreadyForgotten"  # even when it was also superseded
        if f.superseded:
            return "FactSuperseded"
        if valid_from is not None and valid_from <= f.valid_from:
            return "InvalidTime"  # a change in the world after the old fact became true
        start = f.valid_from if valid_from is None else valid_from
        if valid_to is not None and valid_to <= start:
            return "InvalidTime"
        return None

    def remember_error(self, tx: datetime, valid_from: datetime | None,
                       valid_to: datetime | None) -> str | None:
        start = valid_from or tx
        if valid_to is not None and valid_to <= start:
            return "InvalidTime"
        return None

    def forget_error(self, namespace: str, fid: int) -> str | None:
        f = self.snapshot().get(fid)
        if f is None or f.namespace != namespace:
            return "FactNotFound"
        if f.forgotten:
            return "FactAlreadyForgotten"
        return None

    def lookup_error(self, namespace: str, fid: int) -> str | None:
        """get / why / record_embedding: only facts of this namespace are found."""
        return None if self.namespace_of(fid) == namespace else "FactNotFound"

    def erased(self) -> set[int]:
        """The fact versions an erasure erased."""
        return {fid for op in self.ops if op.kind == "erase" for fid in op.erased}

    def erase_plan(self, namespace: str, fid: int, by_subject: bool) -> tuple[str | None, list]:
        """(the error an erase of fact ``fid`` (or of its subject) must raise, or None; the
        versions it erases): whole chains, of every fact that has the subject now."""
        if self.namespace_of(fid) != namespace:
            return "FactNotFound", []
        facts = self.facts()
        if by_subject:
            key = subject_key(facts[fid].subject)
            named = [i for i, f in facts.items()
                     if f.namespace == namespace and subject_key(f.subject) == key]
        else:
            named = [fid]
        versions = {v for i in named for v in self.chain(i)} - self.erased()
        return (None if versions else "AlreadyErased"), sorted(versions)

    def seq_error(self, seq: int) -> str | None:
        """A seq given as a transaction point must be inside the log."""
        return None if 0 <= seq <= self.last_seq else "InvalidInput"
