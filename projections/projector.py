"""Applies logged events to the fold state, the in-memory recall indexes and (in batches) DuckDB."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Iterable

from eventlog.events import EmbeddingRecorded, Event, FactRemembered, FactRevised
from projections.duck import DuckProjection, EventRow
from projections.hot import NamespaceIndex
from projections.state import Vector
from projections.text import tokenize
from projections.timeutil import to_us

__all__ = ["Projector", "BULK_FLUSH_EVENTS"]

BULK_FLUSH_EVENTS = 20_000


class Projector:
    """The projection of one store: fold state + recall indexes in memory, tables in DuckDB.

    Events are applied to memory at once and written to DuckDB in batches of ``flush_every``
    events (and whenever a reader needs the tables: call :meth:`flush`). The cursor is written
    in the same transaction as the rows, so a crash between batches only means the next open
    catches up from the log.
    """

    def __init__(
        self,
        db: DuckProjection,
        chain_at: Callable[[int], bytes],
        *,
        flush_every: int = 256,
    ) -> None:
        self.db = db
        self.chain_at = chain_at
        self.flush_every = flush_every
        self.state = db.load_state()
        self._db_seq = self.state.last_seq
        self.indexes: dict[str, NamespaceIndex] = {}
        self.tx_times = array("q", db.tx_times().tobytes())
        self._events: list[EventRow] = []
        self._dirty: set[int] = set()
        self._new: list[tuple[int, dict[str, int]]] = []
        self._new_vectors: list[Vector] = []
        for fact in sorted(self.state.facts.values(), key=lambda f: f.id):
            self._index(fact.namespace).add(fact, tokenize(fact.text))

    @property
    def last_seq(self) -> int:
        return self.state.last_seq

    @property
    def pending(self) -> int:
        """Events applied in memory but not yet written to DuckDB."""
        return self.state.last_seq - self._db_seq

    def _index(self, namespace: str) -> NamespaceIndex:
        index = self.indexes.get(namespace)
        if index is None:
            index = self.indexes[namespace] = NamespaceIndex()
        return index

    def apply(self, ev: Event) -> None:
        """Fold one event (validated against the state first; a bad event raises, changing nothing)."""
        changed = self.state.apply(ev)
        self.tx_times.append(to_us(ev.tx_at))
        self._events.append(_event_row(ev))
        if isinstance(ev, (FactRemembered, FactRevised)):
            fact = self.state.facts[ev.seq]
            tokens = tokenize(fact.text)
            fact.doc_len = len(tokens)
            index = self._index(fact.namespace)
            for fid in changed:
                if fid != fact.id:
                    index.update(self.state.facts[fid])
            index.add(fact, tokens)
            self._new.append((fact.id, dict(Counter(tokens))))
        elif isinstance(ev, EmbeddingRecorded):
            self._new_vectors.append(self.state.vectors[-1])
        else:
            for fid in changed:
                other = self.state.facts[fid]
                self._index(other.namespace).update(other)
        self._dirty.update(changed)
        if self.pending >= self.flush_every:
            self.flush()

    def apply_all(self, events: Iterable[Event], *, bulk: bool = False) -> int:
        """Apply events in order; ``bulk`` writes DuckDB in large batches (replay, catch-up)."""
        n = 0
        saved = self.flush_every
        if bulk:
            self.flush_every = max(saved, BULK_FLUSH_EVENTS)
        try:
            for ev in events:
                self.apply(ev)
                n += 1
        finally:
            self.flush_every = saved
        return n

    def flush(self) -> None:
        """Write everything applied so far to DuckDB, with the cursor, in one transaction."""
        seq = self.state.last_seq
        if seq == self._db_seq:
            return
        self.db.write(
            self.state, self._dirty, self._events, self._new, self._new_vectors, seq,
            self.chain_at(seq),
        )
        self._db_seq = seq
        self._dirty = set()
        self._events = []
        self._new = []
        self._new_vectors = []


def _event_row(ev: Event) -> EventRow:
    if isinstance(ev, FactRemembered):
        fact_id, target, reason = ev.seq, None, None
    elif isinstance(ev, FactRevised):
        fact_id, target, reason = ev.seq, ev.fact_id, ev.reason
    else:
        fact_id, target, reason = ev.fact_id, None, getattr(ev, "reason", None)
    return EventRow(
        ev.seq, ev.__struct_config__.tag, to_us(ev.tx_at), ev.namespace, fact_id, target,  # type: ignore[arg-type]
        ev.source_agent, ev.source_ref, reason,
    )
