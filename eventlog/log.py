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
:attr:`EventLog.recovery`; a damaged record anywhere else raises :class:`LogCorrupted` naming the
segment and offset. A read-only log never modifies files and can follow a live writer with
:meth:`EventLog.refresh`.
"""

from __future__ import annotations

import os
import threading
import time
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Literal

import msgspec

from eventlog import format as fmt
from eventlog.events import EPOCH, Event, EventBase, decode, encode
from eventlog.fileio import OS, FileIO
from eventlog.lock import WriterLock
from eventlog.errors import (
    LogCorrupted,
    LogWriteFailed,
    ReadOnlyStore,
    StoreClosed,
    StoreNotFound,
    UnsupportedFormat,
)

__all__ = ["EventLog", "FsyncPolicy", "Recovery", "FSYNC_POLICIES"]

FsyncPolicy = Literal["always", "batch", "never"]
FSYNC_POLICIES: tuple[str, ...] = ("always", "batch", "never")
SEGMENT_SUFFIX = ".hlog"


@dataclass
class Recovery:
    """What opening the log found at its tail and did about it."""

    truncated_bytes: int = 0
    segment: str | None = None
    offset: int | None = None
    detail: str = ""
    removed_segments: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.truncated_bytes and not self.removed_segments

    def __str__(self) -> str:
        if self.clean:
            return "log was clean"
        parts = []
        if self.truncated_bytes:
            parts.append(
                f"truncated a torn final record ({self.truncated_bytes} bytes, {self.detail}) "
                f"in {self.segment} at byte {self.offset}"
            )
        if self.removed_segments:
            parts.append(f"removed unfinished segment(s) {', '.join(self.removed_segments)}")
        return "; ".join(parts)


class _Segment:
    __slots__ = ("path", "first_seq", "offsets", "end")

    def __init__(self, path: Path, first_seq: int, end: int) -> None:
        self.path = path
        self.first_seq = first_seq
        self.offsets = array("Q")
        self.end = end

    @property
    def last_seq(self) -> int:
        return self.first_seq + len(self.offsets) - 1


def segment_name(first_seq: int) -> str:
    return f"{first_seq:020d}{SEGMENT_SUFFIX}"


class EventLog:
    """An append-only log of events in segment files under ``directory``.

    Open a writer with ``EventLog(dir)`` (takes the store's writer lock) or a reader with
    ``EventLog(dir, read_only=True)`` (no lock; never modifies files).
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        read_only: bool = False,
        fsync: FsyncPolicy = "always",
        segment_bytes: int = 64 * 1024 * 1024,
        batch_events: int = 1000,
        batch_interval: float = 1.0,
        lock_label: str | None = None,
        io: FileIO = OS,
    ) -> None:
        if fsync not in FSYNC_POLICIES:
            raise ValueError(f"fsync must be one of {FSYNC_POLICIES}, not {fsync!r}")
        self.directory = Path(directory)
        self.read_only = read_only
        self.fsync_policy: FsyncPolicy = fsync
        self.segment_bytes = segment_bytes
        self.batch_events = batch_events
        self.batch_interval = batch_interval
        self.recovery = Recovery()
        self.io = io
        self._segments: list[_Segment] = []
        self._chain = fmt.ZERO_CHAIN
        self._last_tx_at: datetime = EPOCH
        self._fd: int | None = None
        self._lock: WriterLock | None = None
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
            self.directory.mkdir(parents=True, exist_ok=True)
            self._lock = WriterLock(
                self.directory / "LOCK", lock_label or f"event log {self.directory}"
            )
            self._lock.acquire()
        try:
            self._load()
            if not read_only:
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
        if not self._segments:
            return 0
        return self._segments[-1].last_seq

    @property
    def last_tx_at(self) -> datetime:
        """tx_at of the last event (the epoch when empty)."""
        return self._last_tx_at

    @property
    def size_bytes(self) -> int:
        return sum(s.end for s in self._segments)

    @property
    def unfinished_tail(self) -> tuple[Path, int] | None:
        """(segment, offset) of bytes after the last valid record, if any (a torn write)."""
        if not self._segments:
            return None
        tail = self._segments[-1]
        try:
            size = tail.path.stat().st_size
        except FileNotFoundError:
            return None
        return (tail.path, tail.end) if size > tail.end else None

    @property
    def segment_paths(self) -> list[Path]:
        return [s.path for s in self._segments]

    def __len__(self) -> int:
        return self.last_seq

    # ------------------------------------------------------------------ open / recover

    def _segment_files(self) -> list[Path]:
        if not self.directory.exists():
            return []
        return sorted(p for p in self.directory.iterdir() if p.name.endswith(SEGMENT_SUFFIX))

    def _load(self) -> None:
        files = self._segment_files()
        for i, path in enumerate(files):
            self._load_segment(path, is_last=i == len(files) - 1, start_from=None)
        self._read_last_tx()

    def _load_segment(self, path: Path, *, is_last: bool, start_from: _Segment | None) -> bool:
        """Scan one segment (or the new bytes of ``start_from``); returns False at an unfinished one."""
        if start_from is None:
            data = path.read_bytes()
            header = fmt.unpack_segment_header(data)
            if isinstance(header, str):
                if is_last and (len(data) < fmt.SEGMENT_HEADER_SIZE or not any(data)):
                    self._drop_unfinished_segment(path)
                    return False
                raise LogCorrupted(str(path), 0, header)
            if header.version > fmt.FORMAT_VERSION:
                raise UnsupportedFormat(
                    f"{path} was written in log format {header.version}; this hmem reads up to "
                    f"format {fmt.FORMAT_VERSION}. Upgrade hmem (pip install -U hmem)"
                )
            expected_first = self.last_seq + 1
            if header.first_seq != expected_first or header.prev_chain != self._chain:
                raise LogCorrupted(
                    str(path), 0,
                    f"segment starts at seq {header.first_seq} but seq {expected_first} was "
                    f"expected, or its chain does not continue the previous segment "
                    f"(a segment is missing, reordered or replaced)",
                )
            seg = _Segment(path, header.first_seq, fmt.SEGMENT_HEADER_SIZE)
            self._segments.append(seg)
            base = 0
            result = fmt.scan(data, fmt.SEGMENT_HEADER_SIZE, self._chain)
        else:
            seg = start_from
            base = seg.end
            with open(path, "rb") as f:
                f.seek(base)
                data = f.read()
            result = fmt.scan(data, 0, self._chain)
        seg.offsets.extend([base + off for off in result.offsets] if base else result.offsets)
        seg.end = base + result.end
        self._chain = result.chain
        if result.stop is fmt.Stop.CORRUPT:
            raise LogCorrupted(str(path), seg.end, result.detail)
        if result.stop is fmt.Stop.TORN:
            if not is_last:
                raise LogCorrupted(str(path), seg.end, f"{result.detail}, but later segments exist")
            if not self.read_only:
                self._truncate_tail(seg, base + len(data) - seg.end, result.detail)
        return True

    def _drop_unfinished_segment(self, path: Path) -> None:
        if self.read_only:
            return
        path.unlink()
        _fsync_dir(self.io, self.directory)
        self.recovery.removed_segments.append(str(path))

    def _truncate_tail(self, seg: _Segment, nbytes: int, detail: str) -> None:
        with open(seg.path, "r+b") as f:
            f.truncate(seg.end)
            f.flush()
            os.fsync(f.fileno())
        self.recovery.truncated_bytes += nbytes
        self.recovery.segment = str(seg.path)
        self.recovery.offset = seg.end
        self.recovery.detail = detail

    def _read_last_tx(self) -> None:
        if self.last_seq:
            self._last_tx_at = self.get(self.last_seq).tx_at

    def refresh(self) -> int:
        """Reader: pick up events appended since open (or the last refresh). Returns the new last seq."""
        with self._mutex:
            self._check_open()
            files = self._segment_files()
            known = {s.path for s in self._segments}
            if self._segments:
                tail = self._segments[-1]
                if tail.path.exists():
                    self._load_segment(
                        tail.path, is_last=files[-1] == tail.path, start_from=tail
                    )
            for path in files:
                if path not in known:
                    if not self._load_segment(path, is_last=path == files[-1], start_from=None):
                        break
            self._read_last_tx()
            return self.last_seq

    # ------------------------------------------------------------------ append

    def _open_for_append(self) -> None:
        if not self._segments:
            self._new_segment()
        else:
            tail = self._segments[-1]
            self._fd = self.io.open(tail.path, os.O_WRONLY)
            self.io.lseek(self._fd, tail.end, os.SEEK_SET)

    def _new_segment(self) -> None:
        first_seq = self.last_seq + 1
        path = self.directory / segment_name(first_seq)
        header = fmt.pack_segment_header(first_seq, self._chain)
        fd = self.io.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            _write_all(self.io, fd, header)
            self.io.fsync(fd)
        except BaseException:
            self.io.close(fd)
            path.unlink(missing_ok=True)
            raise
        _fsync_dir(self.io, self.directory)
        if self._fd is not None:
            self.io.close(self._fd)
        self._fd = fd
        self._segments.append(_Segment(path, first_seq, len(header)))

    def append(self, event: EventBase) -> Event:
        """Append one event; returns it stamped with its seq."""
        return self.append_many([event])[0]

    def append_many(
        self, events: Sequence[EventBase], links: Mapping[int, int] | None = None
    ) -> list[Event]:
        """Append events as one write (and at most one fsync); returns them stamped with seqs.

        ``links`` ties events to facts created earlier in the same batch: ``links[j] = i``
        (``i < j``) sets event ``j``'s ``fact_id`` to the seq event ``i`` is given, so a caller
        never predicts a seq. Either every event is appended or none is (on error the partial
        write is cut off and the log refuses further writes until reopened).
        """
        links = links or {}
        with self._mutex:
            self._check_writable()
            if not events:
                return []
            _check_links(links, len(events))
            stamped: list[Event] = []
            frames: list[bytes] = []
            chain = self._chain
            seq = self.last_seq
            last_tx = self._last_tx_at
            for j, ev in enumerate(events):
                if ev.tx_at < last_tx:
                    raise ValueError(
                        f"tx_at {ev.tx_at.isoformat()} is before the log's last tx_at "
                        f"{last_tx.isoformat()}; transaction time never goes backwards"
                    )
                seq += 1
                if j in links:
                    ev = msgspec.structs.replace(ev, seq=seq, fact_id=stamped[links[j]].seq)
                else:
                    ev = msgspec.structs.replace(ev, seq=seq)
                record, chain = fmt.frame(encode(ev), chain)
                frames.append(record)
                stamped.append(ev)  # type: ignore[arg-type]
                last_tx = ev.tx_at
            if self._segments[-1].end >= self.segment_bytes:
                self._guarded(self._new_segment, "creating a new segment")
            seg = self._segments[-1]
            data = b"".join(frames)
            self._write(seg, data)
            pos = seg.end
            for record in frames:
                seg.offsets.append(pos)
                pos += len(record)
            seg.end = pos
            self._chain = chain
            self._last_tx_at = last_tx
            self._unsynced += len(frames)
            if self.fsync_policy == "always" or (
                self.fsync_policy == "batch" and self._unsynced >= self.batch_events
            ):
                self._sync()
            return stamped

    def _write(self, seg: _Segment, data: bytes) -> None:
        assert self._fd is not None
        try:
            _write_all(self.io, self._fd, data)
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
        """The event with this seq."""
        with self._mutex:
            seg = self._segment_of(seq)
            off = seg.offsets[seq - seg.first_seq]
            with open(seg.path, "rb") as f:
                f.seek(off)
                head = f.read(fmt.RECORD_HEADER_SIZE)
                n = int.from_bytes(head[:4], "little")
                payload = f.read(n)
            return self._decode(payload, seg, off, seq)

    def chain_at(self, seq: int) -> bytes:
        """The hash chain value after the event with this seq (identifies the whole prefix)."""
        with self._mutex:
            seg = self._segment_of(seq)
            with open(seg.path, "rb") as f:
                f.seek(seg.offsets[seq - seg.first_seq])
                return fmt.record_chain(f.read(fmt.RECORD_HEADER_SIZE))

    def _segment_of(self, seq: int) -> _Segment:
        if not 1 <= seq <= self.last_seq:
            raise IndexError(f"seq {seq} is not in the log (1..{self.last_seq})")
        lo, hi = 0, len(self._segments) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self._segments[mid].first_seq <= seq:
                lo = mid
            else:
                hi = mid - 1
        return self._segments[lo]

    def read(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[Event]:
        """Events with ``from_seq <= seq <= to_seq`` (default: to the end as of this call)."""
        to_seq = self.last_seq if to_seq is None else min(to_seq, self.last_seq)
        from_seq = max(from_seq, 1)
        for seg in list(self._segments):
            if seg.last_seq < from_seq or seg.first_seq > to_seq or not seg.offsets:
                continue
            with open(seg.path, "rb") as f:
                data = f.read(seg.end)
            lo = max(from_seq, seg.first_seq) - seg.first_seq
            hi = min(to_seq, seg.last_seq) - seg.first_seq
            offsets = seg.offsets
            for i in range(lo, hi + 1):
                off = offsets[i]
                yield self._decode(fmt.payload_at(data, off), seg, off, seg.first_seq + i)

    def _decode(self, payload: bytes | memoryview, seg: _Segment, off: int, seq: int) -> Event:
        try:
            ev = decode(payload)
        except msgspec.ValidationError as e:
            raise UnsupportedFormat(
                f"record at {seg.path} byte {off} passed its checksums but this hmem cannot "
                f"decode it ({e}); it was probably written by a newer hmem: upgrade hmem"
            ) from e
        except msgspec.DecodeError as e:
            raise LogCorrupted(str(seg.path), off, f"payload does not decode ({e})") from e
        if ev.seq != seq:
            raise LogCorrupted(str(seg.path), off, f"record holds seq {ev.seq}, expected {seq}")
        return ev

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

    def _release(self) -> None:
        if self._fd is not None:
            self.io.close(self._fd)
            self._fd = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _check_links(links: Mapping[int, int], n: int) -> None:
    for j, i in links.items():
        if not 0 <= i < j < n:
            raise ValueError(f"link {j} -> {i} must point from a later event to an earlier one")


def _write_all(io: FileIO, fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = io.write(fd, view)
        if n <= 0:
            raise OSError("short write")
        view = view[n:]


def _fsync_dir(io: FileIO, directory: Path) -> None:
    fd = io.open(directory, os.O_RDONLY)
    try:
        io.fsync(fd)
    finally:
        io.close(fd)

