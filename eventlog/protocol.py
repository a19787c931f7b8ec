"""What a store asks of its event log: the one interface both logs implement.

:class:`~eventlog.log.EventLog` keeps the log in segment files on local disk;
:class:`~eventlog.pg_log.PgLog` in a table on a PostgreSQL server. Each module asserts that its
class is a :class:`Log` (``_: type[Log] = EventLog``), and tests/log/test_logs.py runs one suite
over both. Both stamp their appends with :func:`eventlog.stamping.stamp`.

Writers: a *lifetime* writer holds the log's writer lock from open to close (only a file log
has one); a *shared* writer (``shared``: many processes, possibly on many hosts) takes it for
one write transaction at a time (:meth:`Log.writing`), taking in what the others appended
first. A reader (``read_only``) never writes and follows the log with :meth:`Log.refresh`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

from eventlog.events import Event, EventBase
from eventlog.sealing import Sealer
from eventlog.segments import ChainHead, Recovery

__all__ = ["Log", "Then"]

Then = Callable[[list[Event]], None]  # run with the stamped events as part of an append


class Log(Protocol):
    """An append-only, hash-chained log of events, numbered 1, 2, ... without gaps."""

    sealer: Sealer | None  # seals texts on append, opens them on read; None: in the clear

    @property
    def read_only(self) -> bool:
        """Never writes (a reader)."""

    @property
    def shared(self) -> bool:
        """Appends take the writer lock per write transaction (one of many writers)."""

    @property
    def fsync_policy(self) -> str:
        """What an acknowledged append survives (see eventlog/log.py)."""

    @property
    def last_seq(self) -> int:
        """The newest event's seq as of the last refresh or append (0: empty)."""

    @property
    def last_tx_at(self) -> datetime:
        """That event's tx time (the epoch when empty)."""

    @property
    def recovery(self) -> Recovery:
        """What opening the log found at its tail and did about it."""

    @property
    def size_bytes(self) -> int:
        """Bytes the log takes where it is stored."""

    @property
    def lock_wait(self) -> float:
        """Seconds a shared writer waits for another one's writer lock before it gives up."""

    def where(self) -> str:
        """Where the log is, for messages (a directory, or a table and database)."""

    def refresh(self) -> int:
        """Take in events other writers appended; returns the last seq."""

    def writing(self) -> AbstractContextManager[None]:
        """A write transaction: the writer lock held (for a shared writer, taken now, after
        taking in what others appended), appends inside need no other lock. Reentrant; for a
        lifetime writer a no-op."""

    def append(self, event: EventBase) -> Event:
        """Append one event; returns it as logged (stamped with its seq)."""

    def append_many(
        self,
        events: Sequence[EventBase],
        links: Mapping[int, int] | None = None,
        *,
        durable: bool = True,
        then: Then | None = None,
    ) -> list[Event]:
        """Append ``events`` as one write, all or none (see :func:`eventlog.stamping.stamp`);
        returns them as logged. ``then(stamped)`` runs as part of the append: on a server, in
        its transaction (an error there rolls it back); on files, once the records are written.
        ``durable=False`` may skip the file log's fsync (the next durable append syncs it)."""

    def read(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[Event]:
        """Events with ``from_seq <= seq <= to_seq`` in order, texts opened."""

    def read_raw(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[Event]:
        """As :meth:`read`, events as stored (sealed texts stay sealed)."""

    def read_raw_seqs(self, seqs: Sequence[int]) -> Iterator[Event]:
        """The events with ``seqs`` (ascending, each in the log) as stored, in that order:
        a namespace's events found by its state, read without the others'."""

    def get(self, seq: int) -> Event:
        """The event with this seq, texts opened."""

    def get_raw(self, seq: int) -> Event:
        """The event with this seq as stored."""

    def head(self) -> ChainHead:
        """The last seq and the hash chain after it."""

    def chain_at(self, seq: int) -> bytes:
        """The hash chain after the event with this seq (identifies the whole prefix)."""

    def position(self, seq: int) -> tuple[int, int] | None:
        """Where the record of ``seq`` lies in a log of files (its segment's first seq, its
        offset there), when known without reading; None else (and for a log of rows)."""

    def sync(self) -> None:
        """Make every append so far durable now."""

    def close(self) -> None:
        """Sync and let go of files, connections and locks."""
