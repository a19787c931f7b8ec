"""A naive in-memory model of hmem's semantics: the oracle for the property tests.

Written from the specification, not from ``projections.state``: it keeps a plain list of
operations and answers every question by folding that list from the start. Slow and obviously
right is the point.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime


@dataclass
class Op:
    kind: str  # remember | revise | forget | embed | episode
    seq: int
    tx: datetime
    namespace: str
    fact: int  # the new fact for remember/revise; the target for forget/embed
    target: int | None = None  # the revised fact
    subject: str = ""
    text: str = ""
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    session: str = ""  # episode: its session (the text is in ``text``)


@dataclass
class ModelFact:
    namespace: str
    subject: str
    text: str
    valid_from: datetime
    valid_to: datetime | None
    since_seq: int  # when the current belief about it began
    believed: bool = True
    superseded: bool = False
    forgotten: bool = False


@dataclass
class Model:
    ops: list[Op] = field(default_factory=list)

    @property
    def last_seq(self) -> int:
        return len(self.ops)

    def fold(self, upto: int | None = None) -> dict[int, ModelFact]:
        facts: dict[int, ModelFact] = {}
        for op in self.ops[: self.last_seq if upto is None else upto]:
            if op.kind == "remember":
                facts[op.fact] = ModelFact(
                    op.namespace, op.subject, op.text, op.valid_from or op.tx, op.valid_to, op.seq
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
                facts[op.fact] = ModelFact(
                    op.namespace, op.subject or old.subject, op.text, vf, vt, op.seq
                )
            elif op.kind == "forget":
                facts[op.fact].believed = False
                facts[op.fact].forgotten = True
        return facts

    # ------------------------------------------------------------------ questions

    def as_of(self, namespace: str, seq: int, valid_at: datetime | None) -> set[tuple]:
        """(id, valid_from, valid_to, superseded, since_seq) believed at seq, valid at valid_at."""
        out = set()
        for fid, f in self.fold(seq).items():
            if f.namespace != namespace or not f.believed:
                continue
            if valid_at is not None and not (
                f.valid_from <= valid_at and (f.valid_to is None or valid_at < f.valid_to)
            ):
                continue
            out.add((fid, f.valid_from, f.valid_to, f.superseded, f.since_seq))
        return out

    def current(self, namespace: str, seq: int | None = None) -> set[int]:
        """Ids recall returns by default (as of seq): believed heads."""
        return {
            fid
            for fid, f in self.fold(seq).items()
            if f.namespace == namespace and f.believed and not f.superseded
        }

    def predecessors(self, fid: int) -> list[int]:
        """The versions ``fid`` replaced, newest first."""
        replaced = {op.fact: op.target for op in self.ops if op.kind == "revise"}
        out = []
        while fid in replaced:
            fid = replaced[fid]
            out.append(fid)
        return out

    def episodes(self, namespace: str, session: str | None = None) -> list[tuple[int, int, str]]:
        """(seq, turn, text) of the recorded turns, in log order; turns count per session."""
        out, turns = [], {}
        for op in self.ops:
            if op.kind == "episode" and op.namespace == namespace:
                turn = turns.get(op.session, 0)
                turns[op.session] = turn + 1
                if session is None or op.session == session:
                    out.append((op.seq, turn, op.text))
        return out

    def seq_at(self, t: datetime) -> int:
        return sum(1 for op in self.ops if op.tx <= t)

    def facts_in(self, namespace: str) -> set[int]:
        return {fid for fid, f in self.fold().items() if f.namespace == namespace}

    # ------------------------------------------------------------------ validity

    def revise_error(self, namespace: str, fid: int, valid_from: datetime | None,
                     valid_to: datetime | None) -> str | None:
        """The typed error a revise must raise, by class name, or None if it is valid."""
        facts = self.fold()
        f = facts.get(fid)
        if f is None or f.namespace != namespace:
            return "FactNotFound"
        if f.forgotten:
            return "FactForgotten"
        if f.superseded:
            return "FactSuperseded"
        start = f.valid_from if valid_from is None else valid_from
        if valid_from is not None and valid_from <= f.valid_from:
            return "InvalidTime"
        if valid_to is not None and valid_to <= start:
            return "InvalidTime"
        return None

    def forget_error(self, namespace: str, fid: int) -> str | None:
        f = self.fold().get(fid)
        if f is None or f.namespace != namespace:
            return "FactNotFound"
        if f.forgotten:
            return "FactForgotten"
        return None
