"""What the log says of each event besides its texts, one row per event, and every logged recall.

The fold (projections/fold.py) keeps the state of facts; this keeps one row per event: its
seq, kind, tx time, namespace, the fact it is about, provenance, reason and request, so that time
travel by time, ``diff``, ``why``, ``events()`` and the SQL tables are answered from memory, and
a retried write is found by its request key (projections/request_keys.py). Logged recalls
(``RecallServed``: reads, not beliefs, so the fold leaves them) are kept whole here, without
their query vector. String columns are codes into the fact columns' string tables (namespaces,
agents, reasons), so the two are saved and loaded together (projections/checkpoint.py).

Rows are in seq order and found by seq (:meth:`EventColumns.rows`), never by position: the
columns of a state that holds some namespaces hold only their events.
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Iterable, Sequence

import msgspec
import numpy as np
import numpy.typing as npt

from eventlog.events import (
    EVENT_TAGS,
    EVENT_TYPES,
    EpisodeRecorded,
    Event,
    FactRemembered,
    FactRevised,
    FactsErased,
    RecallServed,
)
from projections.arrays import NONE, Deferred
from projections.fold_state import FactColumns
from projections.request_keys import event_request_key, key_rows, request_key
from projections.string_columns import UniqueStrings

__all__ = ["EventColumns", "KIND_CODES", "event_fields"]

KIND_CODES = {tag: code for code, tag in enumerate(EVENT_TAGS)}  # "remembered" -> 0, ...
_KIND = {cls: code for code, cls in enumerate(EVENT_TYPES)}  # the same codes, by class
_DTYPES = {"q": "<i8", "i": "<i4", "b": "i1"}  # array typecode -> numpy dtype


def event_fields(ev: Event) -> tuple[int, int, str | None]:
    """(the fact the event is about, the fact a revise replaced or NONE, its reason): a
    remember, revise, episode, recall or erasure is about itself (its own seq)."""
    if isinstance(ev, (FactRemembered, EpisodeRecorded, RecallServed)):
        return ev.seq, NONE, None
    if isinstance(ev, FactRevised):
        return ev.seq, ev.fact_id, ev.reason
    if isinstance(ev, FactsErased):
        return ev.seq, NONE, ev.reason
    return ev.fact_id, NONE, getattr(ev, "reason", None)


class EventColumns(Deferred):
    """One row per event, in seq order (see the module docstring)."""

    ARRAYS = {  # name -> array typecode
        "seq": "q", "tx": "q", "namespace": "i", "request_key": "q", "kind": "b", "fact": "q",
        "target": "q", "agent": "i", "ref": "i", "reason": "i", "request": "i",
    }

    def __init__(self, facts: FactColumns) -> None:
        self.facts = facts  # whose string tables the codes point into
        self.seq = array("q")  # each row's seq, increasing
        self.tx = array("q")  # tx time, microseconds
        self.namespace = array("i")  # codes into facts.namespaces
        self.request_key = array("q")  # projections/request_keys.py; 0 for none
        self.kind = array("b")  # position of the event's tag in EVENT_TAGS
        self.fact = array("q")  # event_fields
        self.target = array("q")
        self.agent = array("i")  # codes into facts.agents, -1 for None
        self.ref = array("i")  # codes into refs
        self.refs = UniqueStrings()
        self.reason = array("i")  # codes into facts.reasons
        self.request = array("i")  # codes into requests (the request ids themselves)
        self.requests = UniqueStrings()
        self.recalls: dict[int, RecallServed] = {}  # seq -> the logged recall, no vector

    def __len__(self) -> int:
        return len(self.tx)

    def add(self, events: Sequence[Event], txs: Sequence[int]) -> None:
        """Rows for ``events`` (the log's next ones, ``txs`` their tx times)."""
        if not events:
            return
        last = self.seq[-1] if self.seq else 0
        if events[0].seq <= last:
            raise ValueError(f"event {events[0].seq} recorded after {last}")
        facts = self.facts
        fields = [event_fields(ev) for ev in events]
        rows = {name: array(code) for name, code in self.ARRAYS.items()}
        rows["seq"].extend(ev.seq for ev in events)
        rows["tx"].extend(txs)
        rows["namespace"].frombytes(
            facts.namespaces.encode([ev.namespace for ev in events]).tobytes())
        rows["request_key"].extend(map(event_request_key, events))
        rows["kind"].extend(_KIND[type(ev)] for ev in events)
        rows["fact"].extend(f[0] for f in fields)
        rows["target"].extend(f[1] for f in fields)
        rows["agent"].frombytes(facts.agents.encode([ev.source_agent for ev in events]).tobytes())
        rows["ref"].frombytes(self.refs.encode([ev.source_ref for ev in events]).tobytes())
        rows["reason"].frombytes(facts.reasons.encode([f[2] for f in fields]).tobytes())
        rows["request"].frombytes(self.requests.encode(
            [getattr(ev, "request_id", None) for ev in events]).tobytes())
        later = self.__dict__.get("_later") or {}
        for name, more in rows.items():
            make = later.get(name)
            if make is None:
                getattr(self, name).extend(more)
            else:  # loaded from a part and not read yet: appended to when it is made
                later[name] = make.then(more) if isinstance(make, _Appended) else (
                    _Appended(make, more))
        for ev in events:
            if isinstance(ev, RecallServed):
                self.recalls[ev.seq] = msgspec.structs.replace(ev, query_vector=b"")

    # ------------------------------------------------------------------ reads

    def column(self, name: str) -> npt.NDArray[np.int64]:
        """A column as a numpy array (no copy), by row (:meth:`rows`)."""
        dtype = _DTYPES[self.ARRAYS[name]]
        arr: npt.NDArray[np.int64] = np.frombuffer(getattr(self, name), dtype=dtype)
        return arr

    def rows(self, seqs: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
        """The rows of the events ``seqs``; KeyError names a seq this holds no row for."""
        column = self.column("seq")
        at = np.minimum(np.searchsorted(column, seqs), max(len(column) - 1, 0))
        wrong = np.flatnonzero(column[at] != seqs) if len(column) else np.arange(len(seqs))
        if len(wrong):
            raise KeyError(f"no event row for seq {int(np.asarray(seqs)[wrong[0]])}")
        return at.astype(np.int64)

    def row(self, seq: int) -> int:
        """The row of event ``seq`` (:meth:`rows` of one)."""
        return int(self.rows(np.array([seq], dtype=np.int64))[0])

    def _bounds(self, since: int, until: int | None) -> tuple[int, int]:
        """The rows of the events with ``since < seq <= until``, as a range."""
        column = self.column("seq")
        lo = int(np.searchsorted(column, since, side="right"))
        hi = len(column) if until is None else int(np.searchsorted(column, until, side="right"))
        return lo, hi

    def namespace_code(self, namespace: str) -> int:
        """The namespace's code (-2: a namespace without events)."""
        return self.facts.namespaces.codes.get(namespace, -2)

    def seqs_in(self, namespace: str, since: int = 0, until: int | None = None,
                kinds: Iterable[str] = ()) -> npt.NDArray[np.int64]:
        """Seqs of the namespace's events with ``since < seq <= until``, of ``kinds`` if given."""
        lo, hi = self._bounds(since, until)
        if hi <= lo:
            return np.zeros(0, dtype=np.int64)
        mine = self.column("namespace")[lo:hi] == self.namespace_code(namespace)
        wanted = [KIND_CODES[k] for k in kinds]
        if wanted:
            mine &= np.isin(self.column("kind")[lo:hi], wanted)
        seqs: npt.NDArray[np.int64] = self.column("seq")[lo:hi][mine]
        return seqs

    def seqs_of(self, kind: str) -> list[int]:
        """Seqs of every event of ``kind`` (a tag of EVENT_TAGS), in order."""
        seqs: list[int] = self.column("seq")[self.column("kind") == KIND_CODES[kind]].tolist()
        return seqs

    def namespace_of(self, seq: int) -> str:
        """The namespace of event ``seq``."""
        return self.facts.namespaces.values[self.namespace[self.row(seq)]]

    def namespace_events(self, namespace: str) -> tuple[int, int | None, int | None]:
        """(events in ``namespace``, the first one's and the last one's tx time in
        microseconds, None without events)."""
        mine = self.column("namespace") == self.namespace_code(namespace)
        times = self.column("tx")[mine]
        if not len(times):
            return 0, None, None
        return len(times), int(times.min()), int(times.max())

    def request_seqs(self, namespace: str, request_id: str) -> list[int]:
        """Seqs of the events that may carry ``request_id`` in ``namespace`` (read them back to
        be sure: keys are hashes)."""
        seqs: list[int] = self.column("seq")[
            key_rows(self.request_key, request_key(namespace, request_id))].tolist()
        return seqs

    def recalls_in(self, namespace: str) -> list[RecallServed]:
        """The namespace's logged recalls, oldest first."""
        return [r for r in self.recalls.values() if r.namespace == namespace]

    def nbytes(self) -> int:
        """Bytes of the columns (the logged recalls not counted)."""
        per_event = sum(array(code).itemsize for code in self.ARRAYS.values())
        return per_event * len(self.tx) + self.refs.nbytes() + self.requests.nbytes()


class _Appended:
    """A deferred event column and the rows added after it was loaded: made, the column with
    those rows after it (a reader folding a few events after a checkpoint part does not make
    every event column of the part)."""

    __slots__ = ("make", "more")

    def __init__(self, make: Callable[[], array[int]], more: array[int]) -> None:
        self.make, self.more = make, more

    def then(self, more: array[int]) -> _Appended:
        self.more.extend(more)
        return self

    def __call__(self) -> array[int]:
        made = self.make()
        made.extend(self.more)
        return made
