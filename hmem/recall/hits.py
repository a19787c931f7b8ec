"""What recall returns: hits in rank order, each with its history and (optionally) context."""

from __future__ import annotations

from datetime import datetime

import msgspec

from replay.views import pretty_text

__all__ = ["ContextTurn", "Hit", "PastVersion", "RecallResult"]


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
