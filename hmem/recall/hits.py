"""What recall returns: hits in rank order, each with its history and (optionally) context,
and how a ranked fact becomes one."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import datetime

import msgspec
import numpy as np

from projections.recall_index import NamespaceIndex
from projections.records import Fact, Row
from projections.timeutil import from_us, from_us_opt
from replay.views import pretty_text

__all__ = ["ContextTurn", "Hit", "PastVersion", "RecallResult", "context_of", "hit_of"]


class PastVersion(msgspec.Struct, frozen=True):
    """An earlier version in a hit's revision chain, as believed at the query's as_of time."""

    id: int
    text: str
    valid_from: datetime
    valid_to: datetime | None
    revision: str  # how its successor replaced it: "world" or "correction"


class ContextTurn(msgspec.Struct, frozen=True):
    """A neighbouring turn of a hit from the same source session, shown for context."""

    id: int
    text: str
    subject: str
    source_ref: str | None
    position: int  # -1 the turn before, +1 the turn after, ...


class Hit(msgspec.Struct, frozen=True):
    id: int
    text: str
    subject: str
    score: float
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    confidence: float
    source_agent: str | None
    source_ref: str | None
    superseded_by: int | None
    history: tuple[PastVersion, ...]
    explain: dict[str, float] | None = None  # each signal's contribution (explain=True)
    context: tuple[ContextTurn, ...] = ()  # neighbouring turns (RecallConfig.context_turns)

    def render(self) -> str:
        """One line for a prompt: text, when it was true, what it replaced."""
        when = f"since {_day(self.valid_from)}"
        if self.valid_to is not None:
            when = f"{_day(self.valid_from)} to {_day(self.valid_to)}"
        parts = [when]
        for past in self.history[:3]:
            if past.revision == "correction":
                parts.append(f'corrected from "{past.text}"')
            else:
                span = f"{_day(past.valid_from)} to {_day(past.valid_to) if past.valid_to else '?'}"
                parts.append(f'replaced "{past.text}", {span}')
        line = f"- {self.text} ({'; '.join(parts)}) [#{self.id}]"
        context = [
            f"    {'before' if c.position < 0 else 'after'}: {c.subject}: {c.text} [#{c.id}]"
            for c in self.context
        ]
        return "\n".join([line, *context])


def _day(dt: datetime | None) -> str:
    return "?" if dt is None else dt.date().isoformat()


class RecallResult(msgspec.Struct, frozen=True):
    """Hits in rank order, plus what the token budget cut."""

    query: str
    hits: tuple[Hit, ...]
    tokens: int
    omitted: int  # ranked hits left out by the limit or the token budget

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i: int) -> Hit:
        return self.hits[i]

    def format_block(self) -> str:
        """The hits as a prompt block, newest first, with dates."""
        ordered = sorted(self.hits, key=lambda h: (h.valid_from, h.id), reverse=True)
        return "\n".join(h.render() for h in ordered)

    def lines(self, *, limits: str = "limit / max_tokens") -> list[str]:
        """Hits in rank order, one rendered line each, plus what ``limits`` left out."""
        if not self.hits:
            return ["(no matching facts)"]
        lines = [line for hit in self.hits for line in hit.render().split("\n")]
        if self.omitted:
            lines.append(f"({self.omitted} more left out by {limits})")
        return lines

    def __str__(self) -> str:
        return "\n".join(self.lines())

    _repr_pretty_ = pretty_text  # IPython / Jupyter show str()


def context_of(
    index: NamespaceIndex, facts: Mapping[int, Fact], fact_id: int, turns: int,
    visible: Callable[[np.ndarray], np.ndarray],
) -> tuple[ContextTurn, ...]:
    """Up to ``turns`` visible neighbouring turns on each side of the hit ``fact_id``,
    nearest first."""
    out: list[ContextTurn] = []
    doc0 = index.doc_at(fact_id)
    for links, sign in ((index.prev_doc, -1), (index.next_doc, 1)):
        doc = doc0
        for step in range(1, turns + 1):
            doc = links[doc]
            if doc < 0:
                break
            if not visible(np.array([doc], dtype=np.int64))[0]:
                continue
            other = facts[index.fact_ids[doc]]
            out.append(ContextTurn(other.id, other.text, other.subject, other.source_ref,
                                   sign * step))
    return tuple(sorted(out, key=lambda c: c.position))


def hit_of(
    facts: Mapping[int, Fact], fact: Fact, row: Row, score: float, seq: int,
    explain: dict[str, float] | None = None,
) -> Hit:
    """The hit of ``fact`` (its ``row`` as the query sees it), with its revision chain as
    believed at ``seq``."""
    history = []
    prev_id, kind = fact.supersedes, fact.revision
    while prev_id is not None:
        prev = facts[prev_id]
        believed = [r for r in prev.rows if r.tx_from_seq <= seq]
        shown = believed[-1] if believed else prev.rows[0]
        history.append(
            PastVersion(
                prev.id, prev.text, from_us(shown.valid_from), from_us_opt(shown.valid_to),
                kind or "world",
            )
        )
        prev_id, kind = prev.supersedes, prev.revision
    superseded_by = fact.superseded_by if not fact.is_head_at(seq) else None
    return Hit(
        id=fact.id,
        text=fact.text,
        subject=fact.subject,
        score=round(score, 6),
        valid_from=from_us(row.valid_from),
        valid_to=from_us_opt(row.valid_to),
        recorded_at=from_us(fact.created_at),
        confidence=fact.confidence,
        source_agent=fact.source_agent,
        source_ref=fact.source_ref,
        superseded_by=superseded_by,
        history=tuple(history),
        explain=explain,
    )
