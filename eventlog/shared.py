"""The shared-writer half of :class:`eventlog.log.EventLog` (``shared=True``): many processes
append to one log, each holding the writer lock for one write transaction only."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager

from eventlog.events import Event, EventBase
from eventlog.lock import WriterLock
from eventlog.segments import Segments

__all__ = ["SharedWriting"]


class SharedWriting:
    """Write transactions of a shared log (mixed into ``EventLog``)."""

    shared: bool
    lock_wait: float
    fsync_policy: str
    segments: Segments
    _held: int
    _mutex: threading.RLock
    _lock: WriterLock | None
    _fd: int | None
    _unsynced: int
    _failed: str | None

    def _check_writable(self) -> None:
        raise NotImplementedError

    def _read_last_tx(self) -> None:
        raise NotImplementedError

    def _open_for_append(self) -> None:
        raise NotImplementedError

    def _sync(self) -> None:
        raise NotImplementedError

    def _close_fd(self) -> None:
        raise NotImplementedError

    def _append_locked(
        self, events: Sequence[EventBase], links: Mapping[int, int], durable: bool
    ) -> list[Event]:
        raise NotImplementedError

    def _shared_append(
        self, events: Sequence[EventBase], links: Mapping[int, int], durable: bool
    ) -> list[Event]:
        """One append of a shared log, in a :meth:`writing` block of its own unless the caller
        holds one."""
        with self.writing():
            return self._append_locked(events, links, durable)

    @contextmanager
    def writing(self) -> Iterator[None]:
        """A shared log's write transaction: take the writer lock, take in what other writers
        appended (cutting off a torn tail a dead one left); appends inside need no other lock;
        at the end, sync and let go. Reentrant; a no-op on a lifetime writer."""
        if not self.shared or self._held:
            self._held += 1
            try:
                yield
            finally:
                self._held -= 1
            return
        with self._mutex:
            self._check_writable()
            assert self._lock is not None
            self._lock.acquire(wait=self.lock_wait)
            self._held = 1
            try:
                segments = self.segments
                segments.read_only = False
                try:
                    segments.refresh()
                finally:
                    segments.read_only = True
                self._read_last_tx()
                self._open_for_append()
                yield
                if self._unsynced and self.fsync_policy != "never" and not self._failed:
                    self._sync()  # before another writer appends after it
            finally:
                self._held = 0
                self._close_fd()
                self._lock.release()
