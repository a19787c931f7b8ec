"""The state derived from the log, in memory: the one thing that answers queries.

A :class:`Projector` holds the fold's state (projections/fold_state.py), the event columns
(projections/event_columns.py) and the recall indexes (projections/recall_index.py), each built
for a namespace on first use. It starts empty (then the log is replayed) or from a checkpoint
(projections/checkpoint.py) and folds the log's events as they come, in any number at a time.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from contextlib import nullcontext

import numpy as np

from eventlog.events import Event, FactRemembered, FactRevised
from eventlog.sealing import check_opened
from projections.event_columns import EventColumns
from projections.fold import fold, touched_facts
from projections.fold_state import FactColumns
from projections.gc_pause import paused_gc
from projections.index_build import Indexes, build_index
from projections.index_docs import index_counts, index_runs, index_text
from projections.index_tokens import set_runs, set_tokens, token_counts
from projections.recall_index import NamespaceIndex
from projections.timeutil import to_us

__all__ = ["Projector", "index_counts", "index_text"]

_BULK = 32  # facts folded at once from which their documents are made together (index_runs)


class Projector:
    """The derived state of one store (see the module docstring)."""

    def __init__(self, loaded: tuple[FactColumns, EventColumns] | None = None) -> None:
        if loaded is None:
            state = FactColumns()
            loaded = state, EventColumns(state)
        self.state, self.events = loaded
        if self.events.facts is not self.state or len(self.events) != self.state.last_seq:
            raise ValueError("the event columns are not the fold's")
        self._indexes: Indexes | None = None
        self._vector_groups: dict[str, list[int]] = {}  # namespace -> positions in vectors
        self._grouped = 0  # vectors grouped so far

    @property
    def last_seq(self) -> int:
        return self.state.last_seq

    @property
    def tx_times(self) -> array[int]:
        """Each event's tx time in microseconds, by seq - 1."""
        return self.events.tx

    def namespace_events(self, namespace: str) -> tuple[int, int | None, int | None]:
        """(events in ``namespace``, the first one's and the last one's tx time in
        microseconds, None without events)."""
        return self.events.namespace_events(namespace)

    def request_seqs(self, namespace: str, request_id: str) -> list[int]:
        """Seqs of the events that may carry ``request_id`` in ``namespace`` (read them back to
        be sure: keys are hashes)."""
        return self.events.request_seqs(namespace, request_id)

    @property
    def indexes(self) -> Indexes:
        """Per-namespace recall indexes, each built on first use from the fold state (its
        columns and index tokens); later events update the ones built."""
        if self._indexes is None:
            self._indexes = Indexes(self._build_index, self.state.namespaces_with_facts)
        return self._indexes

    def built_indexes(self) -> dict[str, NamespaceIndex]:
        """The recall indexes built so far (none is built by asking)."""
        return {} if self._indexes is None else self._indexes.all_built()

    def _build_index(self, namespace: str) -> NamespaceIndex | None:
        if not len(self.state.namespace_slots(namespace)):
            return None
        with paused_gc():
            index = build_index(self.state, namespace)
        vectors = self.state.vectors
        for i in self._vectors_in(namespace):
            vec = vectors[i]
            index.set_vector(vec.fact_id, vec.model, _floats(vec.vector))
        return index

    def _vectors_in(self, namespace: str) -> list[int]:
        """Positions in ``state.vectors`` of this namespace's vectors, in order."""
        vectors, groups = self.state.vectors, self._vector_groups
        for i in range(self._grouped, len(vectors)):
            groups.setdefault(vectors[i].namespace, []).append(i)
        self._grouped = len(vectors)
        return groups.get(namespace, [])

    def apply(self, ev: Event) -> None:
        """Fold one event (:meth:`apply_all` of one)."""
        self.apply_all([ev])

    def apply_all(self, events: Iterable[Event], *, bulk: bool = False) -> int:
        """Fold ``events`` (the log's next ones, in order) with :func:`fold`, record their
        event rows and bring the recall indexes built so far up to date; returns how many were
        folded. ``bulk`` (replay, catch-up) pauses the cyclic garbage collector. On a refused
        event, the ones before it are folded and recorded, then its ``ProjectionError`` is
        raised."""
        with paused_gc() if bulk else nullcontext():
            batch = events if isinstance(events, list) else list(events)
            state = self.state
            base_seq, base_slot, base_vectors = state.last_seq, state.n, len(state.vectors)
            for ev in batch:
                if ev.sealed:
                    check_opened(ev)
            try:
                fold(batch, state)
            finally:
                self._record(batch[: state.last_seq - base_seq], base_slot, base_vectors)
        return len(batch)

    def _record(self, events: list[Event], base_slot: int, base_vectors: int) -> None:
        """What follows from ``events``, just folded: their event rows, the new facts' index
        tokens, the recall indexes built so far."""
        if not events:
            return
        state = self.state
        self.events.add(events, [to_us(ev.tx_at) for ev in events])
        subjects, table = state.subjects.values, state.table
        made = [ev for ev in events if isinstance(ev, (FactRemembered, FactRevised))]
        names = [subjects[code] for code in table.subject[base_slot:state.n].tolist()]
        live = self._indexes is not None and self._indexes.any_built()
        if len(made) < _BULK:  # a live write: a dict per fact (microseconds, not numpy's 100)
            counts = [index_counts(name, ev.text) for ev, name in zip(made, names, strict=True)]
            set_tokens(state, base_slot, counts)
        else:
            terms, runs, lengths = index_runs(names, [ev.text for ev in made])
            set_runs(state, base_slot, terms, runs, lengths)
            counts = [token_counts(state, slot) for slot in range(base_slot, state.n)] if live \
                else []
        if live:
            self._index(made, counts, touched_facts(events), base_vectors)

    def _index(
        self, made: list[FactRemembered | FactRevised], counts: list[dict[str, int]],
        touched: set[int], base_vectors: int,
    ) -> None:
        """Bring the built recall indexes up to the state: the new facts added (in id order,
        as they stand now), the older facts the events changed updated, the new vectors set.
        (A namespace whose index is not built yet gets all of it from the state when it is.)"""
        assert self._indexes is not None
        facts = self.state.facts
        new = {ev.seq for ev in made}
        for ev, tokens in zip(made, counts, strict=True):
            index = self._indexes.built(ev.namespace)
            if index is not None:
                index.add(facts[ev.seq], tokens)
        for fid in sorted(touched - new):
            fact = facts[fid]
            index = self._indexes.built(fact.namespace)
            if index is not None:
                index.update(fact)
        for vec in self.state.vectors[base_vectors:]:
            index = self._indexes.built(vec.namespace)
            if index is not None:
                index.set_vector(vec.fact_id, vec.model, _floats(vec.vector))


def _floats(vector: bytes) -> np.ndarray:
    return np.frombuffer(vector, dtype="<f4")
