"""The append-only, checksummed, hash-chained event log: the only source of truth.

Durability per fsync policy (what an acknowledged ``append`` survives):

* ``always``: every ``append``/``append_many`` returns after ``fdatasync``. Survives a process
  crash and an OS crash or power loss.
* ``batch``: data is written to the OS before ``append`` returns, and synced once
  ``batch_events`` events are pending or ``batch_interval`` seconds have passed (a background
  thread syncs an idle log). Survives a process crash; an OS crash loses at most the last
  ``batch_interval`` seconds / ``batch_events`` events, and what survives is a prefix.
* ``never``: data is written to the OS before ``append`` returns and never explicitly synced.
  Survives a process crash; an OS crash loses whatever the kernel had not written back.

Open is recovery: a torn final record (an unfinished write) is truncated and reported in
:attr:`EventLog.recovery`; a damaged record anywhere else raises :class:`LogCorrupted` naming
the segment and offset. A read-only log never modifies files and follows a writer by ``refresh``.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from typing import Literal

from eventlog import format as fmt
from eventlog.errors import (
    LogWriteFailed,
    ReadOnlyStore,
    StoreClosed,
    StoreNotFound,
)
from eventlog.events import EPOCH, Event, EventBase
from eventlog.fileio import OS, FileIO, write_all
from eventlog.lock import AppendLock, WriterKind, WriterLock
from eventlog.protocol import Log, Then
from eventlog.sealing import Sealer
from eventlog.segment import Resume, Segment, segment_name
from eventlog.segments import ChainHead, Recovery, Segments, fsync_dir
from eventlog.stamping import Head, stamp

__all__ = ["ChainHead", "EventLog", "FsyncPolicy", "Recovery", "FSYNC_POLICIES"]

FsyncPolicy = Literal["always", "batch", "never"]
FSYNC_POLICIES: tuple[str, ...] = ("always", "batch", "never")


class EventLog:
    """An append-only log of events in segment files under ``directory``.

    Open a writer with ``EventLog(dir)`` (takes the store's writer lock) or a reader with
    ``EventLog(dir, read_only=True)`` (no lock; never modifies files). With ``lazy=True`` it
    scans only the last segment at open (of it, with ``resume``, only the records from the one
    a checkpoint names on) and the rest when it first reads from them (see
    :mod:`eventlog.segments`).
    ``shared=True`` opens one of many writers: each append takes the writer lock (waiting up
    to ``lock_wait`` seconds), takes in what others appended (cutting a torn tail a dead writer
    left), appends and syncs (unless the policy is ``never``), and lets go. Appends are stamped
    by :func:`eventlog.stamping.stamp`.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        read_only: bool = False,
        fsync: FsyncPolicy = "always",
        segment_bytes: int = fmt.SEGMENT_BYTES,
        batch_events: int = 1000,
        batch_interval: float = 1.0,
        lock_label: str | None = None,
        io: FileIO = OS,
        lazy: bool = False,
        resume: Resume | None = None,
        sealer: Sealer | None = None,
        shared: bool = False,
        lock_wait: float = 10.0,
    ) -> None:
        if shared and read_only:
            raise ValueError("a log is opened shared (many writers) or read_only, not both")
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync must be one of {FSYNC_POLICIES}, not {fsync!r}")
        if segment_bytes <= fmt.SEGMENT_HEADER_SIZE:
            raise ValueError(
                f"segment_bytes must exceed a segment's {fmt.SEGMENT_HEADER_SIZE}-byte header "
                f"(the default is {fmt.SEGMENT_BYTES:,}), not {segment_bytes!r}"
            )
        self.directory = Path(directory)
        self.read_only = read_only
        self.fsync_policy: FsyncPolicy = fsync
        self.segment_bytes = segment_bytes
        self.batch_events = batch_events
        self.batch_interval = batch_interval
        self.io = io
        self.lazy = lazy
        # with lazy: the last segment's records up to this seq (a checkpoint's, which the
        # opener reads no record before) are checked when first read, not at open
        self.resume = resume
        # shared: many processes write this log, each taking the writer lock for one append
        # (waiting up to lock_wait seconds for it) after reading what the others appended
        self.shared = shared
        self.lock_wait = lock_wait
        self._held = 0  # depth of writing() blocks
        # seals each event's texts as it is written and opens them as it is read (None: the
        # log holds them in the clear, as a store made before sealing does)
        self.sealer = sealer
        # a shared log's segments are cut back (a torn tail) only under the writer lock
        self.segments = Segments(self.directory, read_only=read_only or shared, io=io)
        self._last_tx_at: datetime = EPOCH
        self._fd: int | None = None
        self._lock: WriterLock | None = None
        self._kind: WriterKind | None = None
        self._append_lock: AppendLock | None = None
        self._mutex = threading.RLock()
        self._closed = False
        self._failed: str | None = None
        self._unsynced = 0
        self._last_sync = time.monotonic()
        self._flusher: threading.Thread | None = None
        self._stop_flusher = threading.Event()

        if read_only and not self.directory.is_dir():
            raise StoreNotFound(f"no event log at {self.directory}")
        if not read_only:
            self.directory.mkdir(mode=0o700, parents=True, exist_ok=True)
            label = lock_label or f"event log {self.directory}"
            self._lock = WriterLock(self.directory / "LOCK", label)
            if not shared:
                self._lock.acquire()  # another lifetime writer: StoreLocked naming it
            try:
                self._kind = WriterKind(self.directory / "WRITERS", shared=shared, label=label)
            except BaseException:
                self._lock.release()
                raise
        try:
            self._append_lock = AppendLock(self.directory / "APPEND", create=not read_only)
            self._load()
            if not read_only and not shared:
                self._open_for_append()
                if fsync == "batch":
                    self._flusher = threading.Thread(
                        target=self._flush_loop, name="hmem-log-sync", daemon=True
                    )
                    self._flusher.start()
        except BaseException:
            self._release()
            raise

    # ------------------------------------------------------------------ properties

    @property
    def last_seq(self) -> int:
        """Seq of the last valid event (0 when empty)."""
        return self.segments.last_seq

    @property
    def last_tx_at(self) -> datetime:
        """tx_at of the last event (the epoch when empty)."""
        return self._last_tx_at

    @property
    def recovery(self) -> Recovery:
        """What opening the log found at its tail and did about it."""
        return self.segments.recovery

    @property
    def size_bytes(self) -> int:
        return self.segments.size_bytes

    @property
    def unfinished_tail(self) -> tuple[Path, int] | None:
        """(segment, offset) of bytes after the last valid record, if any (a torn write)."""
        return self.segments.unfinished_tail

    @property
    def segment_paths(self) -> list[Path]:
        return self.segments.paths

    def where(self) -> str:
        """The log's directory, for messages."""
        return str(self.directory)

    def __len__(self) -> int:
        return self.last_seq

    # ------------------------------------------------------------------ open / follow

    def _load(self) -> None:
        assert self._append_lock is not None
        with self._append_lock.held(shared=True):
            self.segments.load(lazy=self.lazy, resume=self.resume)
        self._read_last_tx()

    def _read_last_tx(self) -> None:
        if self.last_seq:
            self._last_tx_at = self.segments.get(self.last_seq).tx_at

    def refresh(self) -> int:
        """Reader: pick up events appended since open (or the last refresh); returns the new
        last seq."""
        with self._mutex:
            self._check_open()
            assert self._append_lock is not None
            with self._append_lock.held(shared=True):  # never half of a batch
                self.segments.refresh()
            self._read_last_tx()
            return self.last_seq

    # ------------------------------------------------------------------ append

    def _open_for_append(self) -> None:
        if not self.segments.list:
            self._new_segment()
        else:
            tail = self.segments.list[-1]
            self._fd = self.io.open(tail.path, os.O_WRONLY)
            self.io.lseek(self._fd, tail.end, os.SEEK_SET)

    def _new_segment(self) -> None:
        first_seq = self.last_seq + 1
        path = self.directory / segment_name(first_seq)
        header = fmt.pack_segment_header(first_seq, self.segments.chain)
        fd = self.io.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            write_all(self.io, fd, header)
            self.io.fsync(fd)
        except BaseException:
            self.io.close(fd)
            path.unlink(missing_ok=True)
            raise
        fsync_dir(self.io, self.directory)
        if self._fd is not None:
            self.io.close(self._fd)
        self._fd = fd
        self.segments.list.append(Segment(path, first_seq, len(header)))

    def append(self, event: EventBase) -> Event:
        """Append one event; returns it stamped with its seq."""
        return self.append_many([event])[0]

    def append_many(
        self,
        events: Sequence[EventBase],
        links: Mapping[int, int] | None = None,
        *,
        durable: bool = True,
        then: Then | None = None,
    ) -> list[Event]:
        """Append events as one write (and at most one fsync); returns them stamped with seqs
        (see :func:`eventlog.stamping.stamp`; ``links`` ties an event to a fact an earlier one
        of the batch creates). ``then(stamped)`` runs once the records are written, before a
        shared writer lets go of the lock.

        ``durable=False`` writes without an fsync whatever the policy: the records reach disk
        with the next durable append, the batch flusher, :meth:`sync` or close (what a logged
        recall uses: an OS crash may lose the last of them, never a fact).

        Either every event is appended or none is (on error the partial write is cut off and
        the log refuses further writes until reopened).
        """
        with self._mutex:
            self._check_writable()
            if not events:
                return []
            with self.writing():
                stamped = self._append_locked(events, links or {}, durable)
                if then is not None:
                    then(stamped)
                return stamped

    def _append_locked(
        self, events: Sequence[EventBase], links: Mapping[int, int], durable: bool
    ) -> list[Event]:
        """Append under the writer lock (held for the log's life, or for this append)."""
        stamped = stamp(events, Head(self.last_seq, self._last_tx_at, self.segments.chain),
                        links, sealer=self.sealer)
        frames = list(map(fmt.record, stamped.payloads, stamped.chains))
        assert self._append_lock is not None
        # Readers wait for a whole batch; one record needs no lock (a reader takes a record
        # it finds half written for a torn tail and waits for the rest).
        if len(frames) == 1:
            seg = self._write_frames(frames)
        else:
            with self._append_lock.held(shared=False):
                seg = self._write_frames(frames)
        pos = seg.end
        for record in frames:
            seg.offsets.append(pos)
            pos += len(record)
        seg.end = pos
        head = stamped.head
        self.segments.chain = head.chain
        self._last_tx_at = head.tx_at
        self._unsynced += len(frames)
        if durable and (self.fsync_policy == "always" or (
            self.fsync_policy == "batch" and self._unsynced >= self.batch_events
        )):
            self._sync()
        return stamped.events

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

    def _write_frames(self, frames: list[bytes]) -> Segment:
        """Write whole records at the end of the last segment (a new one when it is full)."""
        if self.segments.list[-1].end >= self.segment_bytes:
            self._guarded(self._new_segment, "creating a new segment")
        seg = self.segments.list[-1]
        self._write(seg, b"".join(frames))
        return seg

    def _write(self, seg: Segment, data: bytes) -> None:
        assert self._fd is not None
        try:
            write_all(self.io, self._fd, data)
        except OSError as e:
            # Cut the partial write off so the file still ends after a whole record.
            try:
                self.io.ftruncate(self._fd, seg.end)
                self.io.lseek(self._fd, seg.end, os.SEEK_SET)
            except OSError:
                pass
            self._failed = f"write to {seg.path} failed: {e}"
            raise LogWriteFailed(
                f"{self._failed}. Nothing of this call was stored; the log refuses writes until "
                f"it is reopened (check disk space and the device)"
            ) from e

    def _sync(self) -> None:
        self._guarded(lambda: self.io.fdatasync(self._fd), "fsync")  # type: ignore[arg-type]
        self._unsynced = 0
        self._last_sync = time.monotonic()

    def _guarded(self, op, what: str) -> None:  # type: ignore[no-untyped-def]
        try:
            op()
        except OSError as e:
            # An fsync error is never retried: the kernel may already have dropped the pages.
            self._failed = f"{what} of {self.directory} failed: {e}"
            raise LogWriteFailed(
                f"{self._failed}. Events appended since the last successful sync may not be "
                f"durable; the log refuses writes until it is reopened"
            ) from e

    def sync(self) -> None:
        """Force pending writes to stable storage now (any policy)."""
        with self._mutex:
            self._check_writable()
            if self._unsynced:
                self._sync()

    def _flush_loop(self) -> None:
        while not self._stop_flusher.wait(self.batch_interval):
            with self._mutex:
                if self._closed or self._failed:
                    return
                if self._unsynced and time.monotonic() - self._last_sync >= self.batch_interval:
                    try:
                        self._sync()
                    except LogWriteFailed:
                        return

    # ------------------------------------------------------------------ read

    def get(self, seq: int) -> Event:
        """The event with this seq (opened: see :mod:`eventlog.sealing`)."""
        with self._mutex:
            ev = self.segments.get(seq)
        return ev if self.sealer is None else self.sealer.open(ev)

    def get_raw(self, seq: int) -> Event:
        """The event with this seq as the log stores it (sealed texts stay sealed)."""
        with self._mutex:
            return self.segments.get(seq)

    def head(self) -> ChainHead:
        """The log's last seq and the hash chain after it: compare it with a head noted
        earlier (``hmem log verify --expect``) to detect a rewritten log."""
        with self._mutex:
            return self.segments.head()

    def position(self, seq: int) -> tuple[int, int] | None:
        """Where the record of ``seq`` lies (its segment's first seq, its offset there), when
        known without reading the log (what a checkpoint names for :class:`Resume`)."""
        with self._mutex:
            return self.segments.position(seq)

    def chain_at(self, seq: int) -> bytes:
        """The hash chain value after the event with this seq (identifies the whole prefix)."""
        with self._mutex:
            return self.segments.chain_at(seq)

    def read(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[Event]:
        """Events with ``from_seq <= seq <= to_seq`` (default: to the end as of this call)."""
        to_seq = self.last_seq if to_seq is None else min(to_seq, self.last_seq)
        events = self.segments.read(max(from_seq, 1), to_seq)
        return events if self.sealer is None else map(self.sealer.open, events)

    def read_raw(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[Event]:
        """As :meth:`read`, with events as the log stores them (sealed texts stay sealed)."""
        to_seq = self.last_seq if to_seq is None else min(to_seq, self.last_seq)
        return self.segments.read(max(from_seq, 1), to_seq)

    def read_raw_seqs(self, seqs: Sequence[int]) -> Iterator[Event]:
        """The events with ``seqs`` (ascending, each in the log) as stored, in that order."""
        return self.segments.read_seqs(seqs)

    # ------------------------------------------------------------------ lifecycle

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed("the event log is closed")

    def _check_writable(self) -> None:
        self._check_open()
        if self.read_only:
            raise ReadOnlyStore("this log was opened read-only; open it without read_only to write")
        if self._failed:
            raise LogWriteFailed(f"the log refuses writes after an earlier failure: {self._failed}")

    def close(self) -> None:
        """Sync (unless the policy is ``never``), close files and release the writer lock."""
        with self._mutex:
            if self._closed:
                return
            self._stop_flusher.set()
            try:
                if (
                    self._fd is not None
                    and self._unsynced
                    and not self._failed
                    and self.fsync_policy != "never"
                ):
                    self._sync()
            finally:
                self._closed = True
                self._release()
        if self._flusher is not None:
            self._flusher.join()

    def _close_fd(self) -> None:
        if self._fd is not None:
            self.io.close(self._fd)
            self._fd = None

    def _release(self) -> None:
        self._close_fd()
        if self._append_lock is not None:
            self._append_lock.close()
            self._append_lock = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None
        if self._kind is not None:
            self._kind.release()
            self._kind = None

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_: type[Log] = EventLog  # the file log is a Log (eventlog/protocol.py)
