"""The one write path: events appended as one atomic batch, with one transaction time.

Every write of the facade, the LLM layer, the CLI and the benchmarks goes through a
:class:`Transaction` (``with memory.transaction() as t: ...``): it holds the store's lock, stamps
every event with the transaction's time and the Memory's namespace, validates the batch as a
whole, and takes every new id from the log's own answer (``t.seq(position)`` after commit).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timezone

import msgspec
import numpy as np

from eventlog.events import EPOCH, EmbeddingRecorded, Event, EventBase
from eventlog.protocol import Log
from hmem.embedders import Embedder
from hmem.errors import EmbedderUnavailable, InvalidTime
from hmem.storage.store import Store

__all__ = ["Clock", "Transaction", "transaction_time", "utc_now"]

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


def transaction_time(clock: Clock, log: Log) -> datetime:
    """The clock's time in UTC, never before the log's last transaction time."""
    now = clock()
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise InvalidTime("the clock must return an aware datetime (e.g. in UTC)")
    try:
        now = now.astimezone(timezone.utc)
    except OverflowError:
        raise InvalidTime(f"the clock returned {now!r}, outside the years 1-9999") from None
    last = log.last_tx_at
    return now if now > last else last


class Transaction:
    """Events to append as one write: all of them or none.

    ``append`` returns the event's position in the batch; ``seq(position)`` is the seq the log
    gave it (after commit). Events are stamped with :attr:`time` and :attr:`namespace`.
    """

    def __init__(
        self,
        store: Store,
        namespace: str,
        clock: Clock,
        embedder: Embedder | None = None,
        *,
        durable: bool = True,
    ) -> None:
        self.store = store
        self.durable = durable  # False: written at once, fsynced with the next durable write
        self.namespace = namespace
        self.clock = clock
        self.embedder = embedder
        self.time: datetime = EPOCH  # set on entering: the clock, read under the lock
        self._events: list[EventBase] = []
        self._links: dict[int, int] = {}
        self._checked: set[int] = set()  # positions whose own fields the caller checked
        self._stamped: list[Event] | None = None

    def __enter__(self) -> Transaction:
        """Hold the store's lock and fix the transaction time (never before the log's last)."""
        self.store.lock.acquire()
        try:
            self.time = transaction_time(self.clock, self.store.log)
        except BaseException:
            self.store.lock.release()
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """Commit when the block ended without an error; nothing is appended if it raised."""
        try:
            if kind is None:
                self.commit()
        finally:
            self.store.lock.release()

    def __len__(self) -> int:
        return len(self._events)

    @property
    def events(self) -> tuple[EventBase, ...]:
        """The events added so far (not yet stamped with seqs)."""
        return tuple(self._events)

    def append(self, event: EventBase, *, of: int | None = None, checked: bool = False) -> int:
        """Add ``event``; returns its position. ``of`` is the position of a fact this
        transaction creates: the event (an ``EmbeddingRecorded``) becomes that fact's vector.
        ``checked``: the caller ran ``check_fields(event, at_tx=False)`` on it (before an
        embedder saw its text, say), so only the check that needs the tx time is left."""
        if self._stamped is not None:
            raise RuntimeError("this transaction is already committed")
        position = len(self._events)
        if of is not None:
            self._links[position] = of
        if checked:
            self._checked.add(position)
        self._events.append(
            msgspec.structs.replace(event, tx_at=self.time, namespace=self.namespace)
        )
        return position

    def vector(
        self, vector: np.ndarray, fact_id: int = 0, *, source_agent: str | None = None
    ) -> EmbeddingRecorded:
        """An ``EmbeddingRecorded`` of the configured embedder's ``vector`` for ``fact_id``
        (leave it 0 and ``append(..., of=position)`` for a fact of this transaction)."""
        if self.embedder is None:
            raise EmbedderUnavailable("no embedder is configured for this Memory")
        return EmbeddingRecorded(
            tx_at=self.time, namespace=self.namespace, fact_id=fact_id,
            model=self.embedder.model, dims=self.embedder.dims,
            vector=np.asarray(vector, dtype="<f4").tobytes(), source_agent=source_agent,
        )

    def commit(self) -> list[Event]:
        """Validate and append every event as one write; returns them stamped with seqs."""
        if self._stamped is None:
            events, links = self._events, self._links
            self._stamped = (
                self.store.append_batch(events, links, durable=self.durable,
                                        checked=self._checked) if events else []
            )
        return self._stamped

    def seq(self, position: int) -> int:
        """The seq the log gave the event at ``position`` (after commit)."""
        if self._stamped is None:
            raise RuntimeError("seqs are known only after commit")
        return self._stamped[position].seq
