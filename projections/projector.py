"""The state derived from the log, in memory: the one thing that answers queries.

Every event belongs to one namespace and refers only to its own namespace's facts, so the state
is one :class:`Space` per namespace: the fold's state (projections/fold_state.py), the event
rows (projections/event_columns.py) and the recall index (projections/recall_index.py, built on
first use) of that namespace's events alone. A :class:`Projector` holds the spaces and what
belongs to the log as a whole: how far it has folded (``last_seq``) and each event's tx time
(time travel turns a time into a seq of the log). It starts empty (then the log is replayed)
or from a checkpoint (projections/checkpoint.py) and folds the log's events as they come, in
any number at a time, each into its namespace's space.

A projector from a checkpoint holds no namespace at first: each is *deferred* (its part named,
not read) until something asks for it, and is then loaded by :attr:`Projector.loader` (the
part, and its namespace's events of the log after it). A deferred namespace's events that come
meanwhile are passed over (noted as changes); the receipts of erasures among them are kept, so
the store's erasures are known without loading every namespace. Store-wide reads
(:meth:`Projector.spaces`) load every namespace. With a :attr:`Projector.budget`, loading a
namespace drops the least recently used ones loaded from a part while the loaded state takes
more than the budget: they are deferred again, and loaded again (the part, and the log after
it) when next used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import nullcontext
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np

from eventlog.events import Event, FactRemembered, FactRevised, FactsErased
from eventlog.sealing import check_opened
from projections.errors import ProjectionError
from projections.event_columns import EventColumns
from projections.fold import fold, touched_facts
from projections.fold_state import FactColumns
from projections.gc_pause import paused_gc
from projections.index_build import build_index
from projections.index_docs import index_counts, index_runs, index_text
from projections.index_tokens import set_runs, set_tokens, token_counts
from projections.recall_index import NamespaceIndex
from projections.timeutil import to_us
from projections.tx_times import TxTimes

__all__ = ["Projector", "Space", "index_counts", "index_text"]

_BULK = 32  # facts folded at once from which their documents are made together (index_runs)
EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)

Loaded = tuple[FactColumns, EventColumns]
# (namespace, its part as the checkpoint named it, the seq to bring it to) -> its space
Loader = Callable[[str, Any, int], "Space"]


class Space:
    """One namespace's derived state: ``state`` (its facts), ``events`` (its event rows) and
    ``index`` (its recall index once built)."""

    __slots__ = ("events", "index", "state")

    def __init__(self, loaded: Loaded | None = None) -> None:
        if loaded is None:
            state = FactColumns()
            loaded = state, EventColumns(state)
        self.state, self.events = loaded
        if self.events.facts is not self.state:
            raise ValueError("the event rows are not the fold's")
        self.index: NamespaceIndex | None = None

    @property
    def last_seq(self) -> int:
        """The seq of the last event of this namespace folded (0: none)."""
        return self.state.last_seq

    def nbytes(self) -> int:
        """Bytes of its columns and texts (the recall index not counted)."""
        state = self.state
        return state.nbytes() + self.events.nbytes() + state.texts.nbytes()

    def build_index(self, namespace: str) -> NamespaceIndex | None:
        """The recall index (built now if it is not yet); None without facts."""
        if self.index is None and len(self.state.namespace_slots(namespace)):
            with paused_gc():
                index = build_index(self.state, namespace)
            for vec in self.state.vectors:
                index.set_vector(vec.fact_id, vec.model, _floats(vec.vector))
            self.index = index
        return self.index

    def fold(self, events: list[Event], txs: list[int] | None = None) -> None:
        """Fold this namespace's next ``events`` (increasing seqs, after :attr:`last_seq`;
        ``txs`` their tx times in microseconds, if the caller has them), record their rows and
        bring the index up to date; on a refused event, the ones before it are folded and
        recorded, then its ``ProjectionError`` is raised."""
        state = self.state
        base_seq, base_slot, base_vectors = state.last_seq, state.n, len(state.vectors)
        if txs is None:
            txs = [to_us(ev.tx_at) for ev in events]
        try:
            fold(events, state, gaps=True, txs=txs)
        except ProjectionError:
            if state.last_seq != base_seq:
                done = sum(1 for ev in events if ev.seq <= state.last_seq)
                self._record(events[:done], txs[:done], base_slot, base_vectors)
            raise
        self._record(events, txs, base_slot, base_vectors)

    def _record(self, events: list[Event], txs: list[int], base_slot: int, base_vectors: int
                ) -> None:
        """What follows from ``events``, just folded: their event rows, the new facts' index
        tokens, the recall index if it is built."""
        if not events:
            return
        state = self.state
        self.events.add(events, txs)
        subject, table = state.subjects.get, state.table
        made = [ev for ev in events if isinstance(ev, (FactRemembered, FactRevised))]
        names = [subject(code) or "" for code in table.span("subject", base_slot, state.n).tolist()]
        live = self.index is not None
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
        """Bring the built index up to the state: the new facts added (in id order, as they
        stand now), the older facts the events changed updated, the new vectors set."""
        index = self.index
        assert index is not None
        facts = self.state.facts
        new = {ev.seq for ev in made}
        for ev, tokens in zip(made, counts, strict=True):
            index.add(facts[ev.seq], tokens)
        for fid in sorted(touched - new):
            index.update(facts[fid])
        for vec in self.state.vectors[base_vectors:]:
            index.set_vector(vec.fact_id, vec.model, _floats(vec.vector))


class Projector:
    """The derived state of one store (see the module docstring)."""

    def __init__(
        self, spaces: Mapping[str, Loaded] | None = None, tx: TxTimes | None = None,
        deferred: Mapping[str, Any] | None = None,
        receipts: Mapping[str, Sequence[int]] | None = None,
    ) -> None:
        """An empty state, or ``spaces`` (each namespace's loaded state) with ``tx``, every
        event's tx time in microseconds by seq - 1 (so the state is at seq ``len(tx)``); and
        the ``deferred`` namespaces: each one's part (as the checkpoint names it; for
        :attr:`loader`), with ``receipts``, the seqs of the erasure receipts of those that
        hold any."""
        self.tx_times = TxTimes() if tx is None else tx
        self._spaces: dict[str, Space] = {}
        for namespace, loaded in (spaces or {}).items():
            space = self._spaces[namespace] = Space(loaded)
            if space.last_seq > len(self.tx_times):
                raise ValueError(f"the state of namespace {namespace!r} is past the log's times")
        self._deferred = dict(deferred or {})
        # the deferred namespaces' erasure receipts (one without any: not a key)
        self._receipts = {ns: list(seqs) for ns, seqs in (receipts or {}).items() if seqs}
        self._changed: dict[str, int] = {}  # deferred namespaces with events passed over: the
        # last one's seq
        self._parts: dict[str, Any] = {}  # loaded namespaces' parts, to defer them again
        self.loader: Loader | None = None
        self.budget: int | None = None  # bytes the loaded namespaces may take (None: no limit)

    @property
    def last_seq(self) -> int:
        """The seq of the last event folded."""
        return len(self.tx_times)

    # ------------------------------------------------------------------ reads

    def space(self, namespace: str) -> Space:
        """The namespace's state (an empty one, not kept, for a namespace without events)."""
        space = self.held(namespace)
        return Space() if space is None else space

    def spaces(self) -> Iterator[tuple[str, Space]]:
        """Every namespace with events and its state, each deferred one loaded as it is reached
        (within the budget, the ones before it may be dropped again meanwhile)."""
        for namespace in self.namespaces():
            space = self.held(namespace)
            if space is not None and space.last_seq:
                yield namespace, space

    def loaded(self) -> Iterator[tuple[str, Space]]:
        """The namespaces loaded so far (with events) and their states."""
        return iter([(ns, s) for ns, s in self._spaces.items() if s.last_seq])

    def deferred(self) -> dict[str, Any]:
        """The parts of the deferred namespaces that no event has changed since their
        checkpoint (still this state's), by namespace."""
        return {ns: part for ns, part in self._deferred.items() if ns not in self._changed}

    def changed(self) -> list[str]:
        """The deferred namespaces that events have changed since their part (a publish
        loads each, writes its part and drops it again: :meth:`drop`)."""
        return [ns for ns in self._deferred if ns in self._changed]

    def changed_through(self, namespace: str) -> int | None:
        """The seq of the last event of a deferred namespace changed since its part (what a
        new part of it holds), None when it has not changed."""
        return self._changed.get(namespace)

    def namespaces(self) -> list[str]:
        """The namespaces with events (none loaded by asking)."""
        held = [ns for ns, s in self._spaces.items() if s.last_seq]
        return held + [ns for ns in self._deferred if ns not in self._spaces]

    def namespaces_with_facts(self) -> list[str]:
        """The namespaces with facts (each deferred one loaded now)."""
        return [ns for ns, space in self.spaces() if space.state.n]

    def seqs_of(self, kind: str) -> list[int]:
        """Seqs of every event of ``kind`` (a tag of EVENT_TAGS) in every namespace, in order
        (the erasure receipts without loading a namespace; another kind loads them all)."""
        if kind != "erased":
            return sorted(s for _, space in self.spaces() for s in space.events.seqs_of(kind))
        held = [s for space in self._spaces.values() for s in space.events.seqs_of(kind)]
        return sorted(held + [s for seqs in self._receipts.values() for s in seqs])

    def namespace_of(self, seq: int) -> str | None:
        """The namespace of event ``seq`` (None: not folded). A search of every namespace: for
        the rare caller without one."""
        for namespace, space in self.spaces():
            try:
                space.events.row(seq)
            except KeyError:
                continue
            return namespace
        return None

    def namespace_of_receipt(self, seq: int) -> str | None:
        """The namespace of erasure receipt ``seq`` (None: not one folded), without loading."""
        for namespace, seqs in self._receipts.items():
            if seq in seqs:
                return namespace
        for namespace, space in self._spaces.items():
            if seq in space.events.seqs_of("erased"):
                return namespace
        return None

    def replace(self, namespace: str, space: Space) -> None:
        """Hold ``space`` (at this projector's seq) as the namespace's state from now on."""
        if space.last_seq > self.last_seq:
            raise ValueError(f"namespace {namespace!r} is past the projector's seq")
        self._deferred.pop(namespace, None)
        self._parts.pop(namespace, None)
        self._receipts.pop(namespace, None)
        self._changed.pop(namespace, None)
        self._spaces[namespace] = space

    def namespace_events(self, namespace: str) -> tuple[int, int | None, int | None]:
        """(events in ``namespace``, the first one's and the last one's tx time in
        microseconds, None without events)."""
        return self.space(namespace).events.namespace_events(namespace)

    def request_seqs(self, namespace: str, request_id: str) -> list[int]:
        """Seqs of the events that may carry ``request_id`` in ``namespace`` (read them back to
        be sure: keys are hashes)."""
        return self.space(namespace).events.request_seqs(namespace, request_id)

    @property
    def indexes(self) -> Indexes:
        """Per-namespace recall indexes, each built on first use from its space; later events
        update the ones built."""
        return Indexes(self)

    def built_indexes(self) -> dict[str, NamespaceIndex]:
        """The recall indexes built so far (none is built by asking)."""
        return {ns: s.index for ns, s in self._spaces.items() if s.index is not None}

    def held(self, namespace: str) -> Space | None:
        """The namespace's space if it has one (loaded now if it is deferred; none is made by
        asking)."""
        space = self._spaces.get(namespace)
        if space is None:
            if namespace in self._deferred:
                space = self._load(namespace)
        elif self.budget is not None:  # the most recently used last
            self._spaces[namespace] = self._spaces.pop(namespace)
        return space

    def kept_space(self, namespace: str) -> Space:
        """The namespace's space, made and kept if there is none yet."""
        space = self.held(namespace)
        if space is None:
            space = self._spaces[namespace] = Space()
        return space

    def _load(self, namespace: str) -> Space:
        if self.loader is None:
            raise ValueError("a projector with deferred namespaces needs a loader")
        part = self._deferred[namespace]
        space = self.loader(namespace, part, self.last_seq)
        if space.last_seq > self.last_seq:
            raise ValueError(f"namespace {namespace!r} was loaded past the projector's seq")
        del self._deferred[namespace]
        self._receipts.pop(namespace, None)
        self._changed.pop(namespace, None)
        self._spaces[namespace] = space
        self._parts[namespace] = part
        self._evict(keep=namespace)
        return space

    def _evict(self, keep: str) -> None:
        """Defer again the least recently used namespaces loaded from a part (not ``keep``)
        while the loaded state takes more than :attr:`budget`."""
        if self.budget is None:
            return
        sizes = {ns: space.nbytes() for ns, space in self._spaces.items()}
        total = sum(sizes.values())
        for namespace in list(self._spaces):
            if total <= self.budget:
                break
            if namespace == keep or not self.drop(namespace):
                continue
            total -= sizes[namespace]

    def drop(self, namespace: str) -> bool:
        """Defer again the namespace if it was loaded from a part (its part and the log after
        it load it when it is next used); whether it was."""
        if namespace not in self._parts or namespace not in self._spaces:
            return False
        space = self._spaces.pop(namespace)
        part = self._deferred[namespace] = self._parts.pop(namespace)
        self._receipts[namespace] = space.events.seqs_of("erased")
        if space.last_seq != getattr(part, "seq", None):
            self._changed[namespace] = space.last_seq  # events since its part: to be published
        return True

    def rebase(self, parts: Mapping[str, Any], loader: Loader) -> None:
        """Take a checkpoint at this state's seq, which named ``parts`` (a part of every
        namespace with events), as the one the namespaces are loaded from by ``loader``: a
        deferred namespace is loaded (and a loaded one dropped) from its new part."""
        if self._changed.keys() - parts.keys():
            raise ValueError("a checkpoint without a part of every namespace changed")
        for namespace, part in parts.items():
            if namespace in self._deferred:
                self._deferred[namespace] = part
                self._receipts[namespace] = list(getattr(part, "receipts", ()))
            elif namespace in self._spaces:
                self._parts[namespace] = part
        self._changed.clear()
        self.loader = loader

    # ------------------------------------------------------------------ folding

    def apply(self, ev: Event) -> None:
        """Fold one event (:meth:`apply_all` of one)."""
        self.apply_all([ev])

    def apply_all(self, events: Iterable[Event], *, bulk: bool = False) -> int:
        """Fold ``events`` (the log's next ones, in order), each into its namespace's space;
        returns how many were folded. ``bulk`` (replay, catch-up) pauses the cyclic garbage
        collector. On a refused event, every event before it is folded, and so may be later
        events of other namespaces (a space folds only events after its own last seq, so the
        log's next read from the refused event folds each once); then its ``ProjectionError``
        is raised."""
        with paused_gc() if bulk else nullcontext():
            batch = events if isinstance(events, list) else list(events)
            if not batch:
                return 0
            base = self.last_seq
            seqs = np.fromiter((ev.seq for ev in batch), dtype=np.int64, count=len(batch))
            step = np.flatnonzero(seqs != np.arange(base + 1, base + 1 + len(batch)))
            out_of_step = batch[int(step[0])] if len(step) else None
            if out_of_step is not None:
                batch = batch[: int(step[0])]
            for ev in batch:
                if ev.sealed:
                    check_opened(ev)
            txs = [(ev.tx_at - EPOCH) // _US for ev in batch]  # to_us, inlined
            groups: dict[str, tuple[list[Event], list[int]]] = {}
            for ev, tx in zip(batch, txs, strict=True):
                entry = groups.get(ev.namespace)
                if entry is None:
                    entry = groups[ev.namespace] = [], []
                entry[0].append(ev)
                entry[1].append(tx)
            refused: tuple[int, ProjectionError] | None = None
            for namespace, (group, times) in groups.items():
                if namespace in self._deferred:  # passed over: loaded with the log's events
                    self._changed[namespace] = group[-1].seq
                    known = self._receipts.setdefault(namespace, [])
                    known += [ev.seq for ev in group if isinstance(ev, FactsErased)
                              and (not known or ev.seq > known[-1])]
                    continue
                space = self.kept_space(namespace)
                last = space.last_seq
                if group[0].seq <= last:  # folded already, before a refusal in a namespace
                    keep = [i for i, ev in enumerate(group) if ev.seq > last]
                    group, times = [group[i] for i in keep], [times[i] for i in keep]
                todo = group
                try:
                    space.fold(todo, times)
                except ProjectionError as e:
                    at = next(ev.seq for ev in todo if ev.seq > space.last_seq)
                    if refused is None or at < refused[0]:
                        refused = at, e
            through = len(batch) if refused is None else refused[0] - 1 - base
            self.tx_times.extend(txs[:through])
            if refused is not None:
                for namespace in groups:  # a receipt after the refused event is not folded
                    if namespace in self._deferred:
                        self._receipts[namespace] = [
                            s for s in self._receipts.get(namespace, ()) if s < refused[0]]
                raise refused[1]
            if out_of_step is not None:
                raise ProjectionError(
                    f"event seq {out_of_step.seq} applied after seq {self.last_seq}; the "
                    f"projection is out of step with the log. Rebuild it with "
                    f"`hmem replay rebuild`"
                )
        return len(batch)

    def nbytes(self) -> int:
        """Bytes of the columns of every space (texts and string tables not counted)."""
        return self.tx_times.nbytes() + sum(
            s.state.nbytes() + s.events.nbytes() for s in self._spaces.values())


class Indexes(Mapping[str, NamespaceIndex]):
    """The recall indexes of a projector's namespaces with facts (its spaces'), each built on
    first use and kept by its space; :meth:`build_now` makes an empty one for a namespace
    without facts (later events then fill it one by one)."""

    def __init__(self, projector: Projector) -> None:
        self._projector = projector

    def built(self, namespace: str) -> NamespaceIndex | None:
        """The index if it is built (none is built by asking)."""
        space = self._projector.held(namespace)
        return None if space is None else space.index

    def build_now(self, namespace: str) -> NamespaceIndex:
        space = self._projector.kept_space(namespace)
        if space.build_index(namespace) is None:
            space.index = NamespaceIndex()
        assert space.index is not None
        return space.index

    def __getitem__(self, namespace: str) -> NamespaceIndex:
        space = self._projector.held(namespace)
        index = None if space is None else space.build_index(namespace)
        if index is None:
            raise KeyError(namespace)
        return index

    def __iter__(self) -> Iterator[str]:
        return iter(self._projector.namespaces_with_facts())

    def __len__(self) -> int:
        return len(self._projector.namespaces_with_facts())


def _floats(vector: bytes) -> np.ndarray:
    return np.frombuffer(vector, dtype="<f4")
