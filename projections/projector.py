"""Applies logged events to the fold state, the in-memory recall indexes and (in batches) DuckDB."""

from __future__ import annotations

from array import array
from collections import Counter
from collections.abc import Callable, Iterable
from contextlib import nullcontext

import numpy as np

from eventlog.events import (
    EpisodeRecorded,
    Event,
    FactRemembered,
    FactRevised,
    FactsErased,
    RecallServed,
)
from eventlog.sealing import check_opened
from projections.column_file import LoadedColumns
from projections.columns import EventRow
from projections.duck import DuckProjection
from projections.fact_fold import fold, touched_facts
from projections.fact_tokens import set_tokens
from projections.gc_pause import paused_gc
from projections.index_build import Indexes, build_index
from projections.recall_index import NamespaceIndex
from projections.records import Episode, Vector
from projections.requests import event_request_key, request_key, request_seqs
from projections.text import tokenize
from projections.timeutil import to_us

__all__ = ["Projector", "BULK_FLUSH_EVENTS", "index_counts", "index_text"]

BULK_FLUSH_EVENTS = 50_000


class Projector:
    """The projection of one store: fold state + recall indexes in memory, tables in DuckDB.

    The fold state is loaded from the tables, or given as ``loaded`` (read from the column file
    beside the checkpoint: projections/column_file.py) when it holds the projection's seq.

    Events are applied to memory at once and written to DuckDB in batches of ``flush_every``
    events (and whenever a reader needs the tables: call :meth:`flush`). The cursor is written
    in the same transaction as the rows, so a crash between batches only means the next open
    catches up from the log. The recall indexes are built on first use.
    """

    def __init__(
        self,
        db: DuckProjection,
        chain_at: Callable[[int], bytes],
        *,
        flush_every: int = 256,
        loaded: LoadedColumns | None = None,
    ) -> None:
        self.db = db
        self.chain_at = chain_at
        self.flush_every = flush_every
        if loaded is not None and loaded[0].last_seq != db.cursor()[0]:
            raise ValueError("the loaded columns are not the fold of this projection")
        if loaded is None:
            state = db.load_state()
            tx_times, event_namespaces, event_requests = db.event_columns(state.namespaces)
        else:
            state, tx_times, event_namespaces, event_requests = loaded
        self.state = state
        self.tx_times = array("q", tx_times.tobytes())  # by seq - 1: each event's tx_at
        # by seq - 1: each event's namespace, a code into state.namespaces
        self.event_namespaces = array("i", event_namespaces.astype(np.int32).tobytes())
        # by seq - 1: each event's request key (projections/requests.py), 0 for none
        self.event_requests = array("q", event_requests.astype(np.int64).tobytes())
        self._db_seq = self.state.last_seq
        self._indexes: Indexes | None = None
        self._vector_groups: dict[str, list[int]] = {}  # namespace -> positions in vectors
        self._grouped = 0  # vectors grouped so far
        self._events: list[EventRow] = []
        self._dirty: set[int] = set()
        self._new: list[tuple[int, dict[str, int]]] = []
        self._new_vectors: list[Vector] = []
        self._new_episodes: list[Episode] = []
        self._new_recalls: list[RecallServed] = []

    @property
    def last_seq(self) -> int:
        return self.state.last_seq

    def namespace_events(self, namespace: str) -> tuple[int, int | None, int | None]:
        """(events in ``namespace``, the first one's and the last one's tx time in
        microseconds, None without events), from the event columns."""
        code = self.state.namespaces.codes.get(namespace, -2)
        mine = np.frombuffer(self.event_namespaces, dtype=np.int32) == code
        times = np.frombuffer(self.tx_times, dtype=np.int64)[mine]
        if not len(times):
            return 0, None, None
        return len(times), int(times.min()), int(times.max())

    def request_seqs(self, namespace: str, request_id: str) -> list[int]:
        """Seqs of the events that may carry ``request_id`` in ``namespace`` (read them back to
        be sure: keys are hashes)."""
        return request_seqs(self.event_requests, request_key(namespace, request_id))

    @property
    def pending(self) -> int:
        """Events applied in memory but not yet written to DuckDB."""
        return self.state.last_seq - self._db_seq

    @property
    def indexes(self) -> Indexes:
        """Per-namespace recall indexes, each built on first use from the fold state (its
        columns and index tokens); later events update the ones built."""
        if self._indexes is None:
            self._indexes = Indexes(self._build_index, self.state.namespaces_with_facts)
        return self._indexes

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
        """Fold ``events`` (the log's next ones, in order) with :func:`fold`, bring the recall
        indexes built so far up to date and queue the tables' rows; returns how many were
        folded. ``bulk`` (replay, catch-up) writes DuckDB in large batches and pauses the cyclic
        garbage collector. On a refused event, the ones before it are folded and queued, then
        its ``ProjectionError`` is raised."""
        saved = self.flush_every
        if bulk:
            self.flush_every = max(saved, BULK_FLUSH_EVENTS)
        try:
            with paused_gc() if bulk else nullcontext():
                batch = events if isinstance(events, list) else list(events)
                self._fold(batch)
        finally:
            self.flush_every = saved
        return len(batch)

    def _fold(self, events: list[Event]) -> None:
        state = self.state
        base_seq, base_slot, base_vectors = state.last_seq, state.n, len(state.vectors)
        for ev in events:
            if ev.sealed:
                check_opened(ev)
        try:
            fold(events, state)
        finally:
            self._record(events[: state.last_seq - base_seq], base_slot, base_vectors)
        if self.pending >= self.flush_every:
            self.flush()

    def _record(self, events: list[Event], base_slot: int, base_vectors: int) -> None:
        """What follows from ``events``, just folded: each event's tx time, namespace and
        request key, the new facts' index tokens, the recall indexes built so far, the rows to
        write."""
        if not events:
            return
        state = self.state
        txs = [to_us(ev.tx_at) for ev in events]
        self.tx_times.extend(txs)
        self.event_namespaces.frombytes(
            state.namespaces.encode([ev.namespace for ev in events]).tobytes()
        )
        self.event_requests.extend(map(event_request_key, events))
        self._events.extend(map(_event_row, events, txs))
        subjects, table = state.subjects.values, state.table
        made = [ev for ev in events if isinstance(ev, (FactRemembered, FactRevised))]
        counts = [
            index_counts(subjects[code], ev.text)
            for ev, code in zip(made, table.subject[base_slot:state.n].tolist(), strict=True)
        ]
        set_tokens(state, base_slot, counts)
        self._new.extend(zip((ev.seq for ev in made), counts, strict=True))
        touched = touched_facts(events)
        self._dirty.update(touched)
        for ev in events:
            if isinstance(ev, EpisodeRecorded):
                self._new_episodes.append(state.episodes[ev.seq])
            elif isinstance(ev, RecallServed):
                self._new_recalls.append(ev)
        self._new_vectors.extend(state.vectors[base_vectors:])
        if self._indexes is not None and self._indexes.any_built():
            self._index(made, counts, touched, base_vectors)

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

    def flush(self) -> None:
        """Write everything applied so far to DuckDB, with the cursor, in one transaction."""
        seq = self.state.last_seq
        if seq == self._db_seq:
            return
        self.db.write(
            self.state, self._dirty, self._events, self._new, self._new_vectors, seq,
            self.chain_at(seq), written_seq=self._db_seq, new_episodes=self._new_episodes,
            new_recalls=self._new_recalls,
        )
        self._db_seq = seq
        self._dirty = set()
        self._events = []
        self._new = []
        self._new_vectors = []
        self._new_episodes = []
        self._new_recalls = []


def _event_row(ev: Event, tx: int) -> EventRow:
    if isinstance(ev, (FactRemembered, EpisodeRecorded, RecallServed)):
        fact_id, target, reason = ev.seq, None, None  # an episode's "fact_id" is its own seq
    elif isinstance(ev, FactRevised):
        fact_id, target, reason = ev.seq, ev.fact_id, ev.reason
    elif isinstance(ev, FactsErased):
        fact_id, target, reason = ev.seq, None, ev.reason
    else:
        fact_id, target, reason = ev.fact_id, None, getattr(ev, "reason", None)
    return EventRow(
        ev.seq, ev.__struct_config__.tag, tx, ev.namespace, fact_id, target,  # type: ignore[arg-type]
        ev.source_agent, ev.source_ref, reason, getattr(ev, "request_id", None),
    )


def index_text(subject: str, text: str) -> str:
    """What the text index (and embedders) see of a fact: its text, led by its subject when
    the text does not already contain the subject's words."""
    subject_words = set(tokenize(subject))
    if subject_words and not subject_words <= set(tokenize(text)):
        return f"{subject}: {text}"
    return text


def index_counts(subject: str, text: str) -> dict[str, int]:
    """Token counts of ``index_text(subject, text)`` (the document's postings), tokenizing the
    text once and each distinct subject once per process."""
    tokens = tokenize(text)
    subject_tokens = _subject_tokens(subject)
    if subject_tokens and not subject_tokens[1] <= set(tokens):
        tokens = subject_tokens[0] + tokens
    return Counter(tokens)


_SUBJECTS: dict[str, tuple[list[str], frozenset[str]]] = {}


def _subject_tokens(subject: str) -> tuple[list[str], frozenset[str]] | None:
    got = _SUBJECTS.get(subject)
    if got is None:
        tokens = tokenize(subject)
        got = (tokens, frozenset(tokens))
        if len(_SUBJECTS) < 100_000:
            _SUBJECTS[subject] = got
    return got if got[0] else None


def _floats(vector: bytes) -> np.ndarray:
    return np.frombuffer(vector, dtype="<f4")
