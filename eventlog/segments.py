"""The log's segment files, read side: scanning and recovering them, and reading records.

:class:`Segments` knows where every valid record of a log directory starts. It is what a reader
holds, and what the writer (:class:`eventlog.log.EventLog`) appends behind. Loading is recovery:
a torn final record is truncated (unless read-only) and reported in :attr:`Segments.recovery`;
a damaged record anywhere else raises :class:`LogCorrupted` naming the segment and offset.

A log may load *lazily* (``load(lazy=True)``: a store's readers and shared writers do): only
the last segment is scanned at open; a sealed one (every segment but the last never changes
again) is taken from the file names (a segment's name is the seq it starts at, so the sealed
one's seqs are known without opening it), and its header and the next one's (the seq it
starts at and the chain before it, so its final chain) are read and checked against the names,
and it is scanned with every check, the first time one of its records is read: an open costs
the same whatever the number of segments. A directory whose names are not segment names from
seq 1 on is taken from every header at open, as before. The last segment, with a
:class:`Resume` (where the checkpoint the process opens from says its record lies, and the
chain before it), is read and checked from that record on (it, from that chain), and the
records before it (which a process opened from the checkpoint does not read) are scanned from
the header when one of them is first read: they must end where it starts, with that chain.
Damage there raises then, not at open; a writer appends after the last segment's records.
``hmem log verify``, an eager log (a store's lifetime writer) and a process without a checkpoint
(which reads every record anyway) check everything.
"""

from __future__ import annotations

import os
import threading
from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

import msgspec

from eventlog import format as fmt
from eventlog.errors import LogCorrupted, UnsupportedFormat
from eventlog.events import Event, decode
from eventlog.fileio import FileIO
from eventlog.segment import (
    SEGMENT_SUFFIX,
    Resume,
    Segment,
    check_head,
    check_named,
    check_version,
    file_size,
    named_header,
    named_seq,
    read_header,
    resumed,
    scan_sealed,
)

__all__ = ["ChainHead", "Recovery", "Segments", "fsync_dir"]


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


@dataclass(frozen=True)
class ChainHead:
    """Where the log stands: its last seq and the hash chain after it (hex; "" when empty).

    The hash identifies the whole prefix: two logs with the same head hold the same events.
    Written as ``SEQ:HASH`` (see :meth:`parse`)."""

    seq: int
    hash: str

    def __str__(self) -> str:
        return f"{self.seq}:{self.hash}"

    @classmethod
    def parse(cls, text: str) -> ChainHead:
        """A head from ``SEQ:HASH`` (as ``hmem stats`` and ``hmem log verify`` print it)."""
        seq, sep, digest = text.strip().partition(":")
        if not sep or not seq.isdigit() or len(digest) != 32 or not _is_hex(digest):
            raise ValueError(
                f"a chain head is SEQ:HASH with a 32-digit hex hash (as `hmem log verify` "
                f"prints it), not {text[:80]!r}"
            )
        return cls(int(seq), digest.lower())


def _is_hex(text: str) -> bool:
    return all(c in "0123456789abcdefABCDEF" for c in text)


class Segments:
    """The valid records of the segment files in ``directory``, with the chain after the last.

    ``read_only`` never modifies files: a torn tail is left in place (and not read).
    """

    def __init__(self, directory: Path, *, read_only: bool, io: FileIO) -> None:
        self.directory = directory
        self.read_only = read_only
        self.io = io
        self.recovery = Recovery()
        self.list: list[Segment] = []
        self.chain = fmt.ZERO_CHAIN
        self._scanning = threading.Lock()  # a sealed segment is scanned once, by one thread

    @property
    def last_seq(self) -> int:
        """Seq of the last valid event (0 when empty)."""
        return self.list[-1].last_seq if self.list else 0

    @property
    def size_bytes(self) -> int:
        return sum(file_size(s.path) if s.unread else s.end for s in self.list)

    @property
    def paths(self) -> list[Path]:
        return [s.path for s in self.list]

    @property
    def unfinished_tail(self) -> tuple[Path, int] | None:
        """(segment, offset) of bytes after the last valid record, if any (a torn write)."""
        if not self.list:
            return None
        tail = self.list[-1]
        try:
            size = tail.path.stat().st_size
        except FileNotFoundError:
            return None
        return (tail.path, tail.end) if size > tail.end else None

    # ------------------------------------------------------------------ load / recover

    def files(self) -> list[Path]:
        return [self.directory / n for n in self._names()]

    def _names(self) -> list[str]:
        """The segment files' names, in the order of their seqs (zero-padded: of the names)."""
        try:
            return sorted(n for n in os.listdir(self.directory) if n.endswith(SEGMENT_SUFFIX))
        except FileNotFoundError:
            return []

    def load(self, *, lazy: bool = False, resume: Resume | None = None) -> None:
        """Scan every segment file (once, on open); with ``lazy``, scan only the last one and
        take the sealed ones from the file names, and of the last one, with ``resume``, only
        the records from the one it names on (see the module docstring)."""
        files = self.files()
        if lazy:
            files = self._load_sealed(files)
        for i, path in enumerate(files):
            last = i == len(files) - 1
            self._load(path, is_last=last, start_from=None,
                       resume=resume if lazy and last else None)

    def _load_sealed(self, files: list[Path]) -> list[Path]:
        """Take every segment but the tail from the file names, their headers read when one is
        first scanned (:meth:`_read_headers`); returns the files left to scan. A directory
        whose names are not segment names from seq 1 on, or whose last file is not a whole
        segment, is taken from every header (:meth:`_load_headers`), as before."""
        seqs = [named_seq(path) for path in files]  # ascending: the names sort as the seqs
        if len(files) < 2 or seqs[0] != 1 or None in seqs:
            return self._load_headers(files)
        header, _ = read_header(files[-1])
        if isinstance(header, str):  # the tail's name is checked as it loads
            return self._load_headers(files)
        for path, first, after in zip(files, seqs, seqs[1:], strict=False):
            assert first is not None and after is not None
            self.list.append(Segment(path, first, 0, sealed=(after - 1, b""), unread=True))
        self.chain = header.prev_chain
        return files[-1:]

    def _read_headers(self, seg: Segment) -> None:
        """Read an unread sealed segment's header and the next one's, checked: each starts at
        the seq its name says, the first with the zero chain."""
        at = self.list.index(seg)
        header = named_header(seg)
        if at == 0 and header.prev_chain != fmt.ZERO_CHAIN:
            raise LogCorrupted(str(seg.path), 0, "the first segment's chain does not start "
                                                 "at zero (a segment is missing or replaced)")
        after = named_header(self.list[at + 1])
        assert seg.sealed is not None
        seg.prev_chain, seg.sealed = header.prev_chain, (seg.sealed[0], after.prev_chain)
        seg.end = file_size(seg.path)  # as a load from the headers had it, until it is scanned
        seg.unread = False

    def _load_headers(self, files: list[Path]) -> list[Path]:
        """Take every segment but the tail from the headers; returns the files left to scan."""
        headers: list[fmt.SegmentHeader] = []
        sizes: list[int] = []
        for i, path in enumerate(files):
            header, data = read_header(path)
            sizes.append(file_size(path))
            if isinstance(header, str):
                if i == len(files) - 1 and (len(data) < fmt.SEGMENT_HEADER_SIZE or not any(data)):
                    break  # an unfinished new segment: a reader ignores it, as _load does
                raise LogCorrupted(str(path), 0, header)
            check_version(path, header)
            headers.append(header)
        tail = len(headers) - 1
        for i in range(tail):
            header, after = headers[i], headers[i + 1]
            self._check_continues(files[i], header)
            seg = Segment(
                files[i], header.first_seq, sizes[i], header.prev_chain,
                sealed=(after.first_seq - 1, after.prev_chain),
            )
            if seg.last_seq < seg.first_seq - 1:
                raise LogCorrupted(
                    str(files[i + 1]), 0,
                    f"segment starts at seq {after.first_seq}, before the segment ahead of it "
                    f"(seq {header.first_seq}): segments are reordered or replaced",
                )
            self.list.append(seg)
            self.chain = after.prev_chain
        return files[max(tail, 0):]

    def scanned(self, seg: Segment, first: int = 0) -> Segment:
        """``seg`` with its records from its ``first`` on found and checked: a lazily loaded
        sealed segment is scanned now, its end what the next segment's header says; the
        records before a resumed one are scanned now if ``first`` is one of them."""
        if seg.sealed is None and first >= seg.unchecked:
            return seg
        with self._scanning:  # another thread may have checked it meanwhile
            if seg.unread:
                self._read_headers(seg)
            if seg.sealed is not None:
                scan_sealed(seg)
            elif seg.unchecked:
                check_head(seg)
        return seg

    def refresh(self) -> None:
        """Pick up records appended (and segments created) since the last load or refresh."""
        names = self._names()  # a Path made only for a new one: ~5 us each, 60 a 1M log
        known = {s.path.name for s in self.list}
        if self.list:
            tail = self.list[-1]
            if tail.path.exists():
                self._load(tail.path, is_last=bool(names) and names[-1] == tail.path.name,
                           start_from=tail)
        for name in names:
            if name not in known:
                if not self._load(self.directory / name, is_last=name == names[-1],
                                  start_from=None):
                    break

    def _load(self, path: Path, *, is_last: bool, start_from: Segment | None,
              resume: Resume | None = None) -> bool:
        """Scan one segment (or the new bytes of ``start_from``; or, with ``resume``, the
        records from the one it names on, when it is there); returns False at an unfinished
        one."""
        opened = None
        if resume is not None and start_from is None:
            opened = self._scan_resumed(path, resume)
        if opened is not None:
            seg, data, base, result = opened
        elif start_from is None:
            data = path.read_bytes()
            header = fmt.unpack_segment_header(data)
            if isinstance(header, str):
                if is_last and (len(data) < fmt.SEGMENT_HEADER_SIZE or not any(data)):
                    self._drop_unfinished(path)
                    return False
                raise LogCorrupted(str(path), 0, header)
            check_version(path, header)
            self._check_continues(path, header)
            seg = Segment(path, header.first_seq, fmt.SEGMENT_HEADER_SIZE, header.prev_chain)
            self.list.append(seg)
            base = 0
            result = fmt.scan(data, fmt.SEGMENT_HEADER_SIZE, self.chain)
        else:
            seg = start_from
            base = seg.end
            with open(path, "rb") as f:
                f.seek(base)
                data = f.read()
            result = fmt.scan(data, 0, self.chain)
        seg.offsets.extend([base + off for off in result.offsets] if base else result.offsets)
        seg.end = base + result.end
        self.chain = result.chain
        if result.stop is fmt.Stop.CORRUPT:
            raise LogCorrupted(str(path), seg.end, result.detail)
        if result.stop is fmt.Stop.TORN:
            if not is_last:
                raise LogCorrupted(str(path), seg.end, f"{result.detail}, but later segments exist")
            if not self.read_only:
                self._truncate_tail(seg, base + len(data) - seg.end, result.detail)
        return True

    def _scan_resumed(self, path: Path, resume: Resume
                      ) -> tuple[Segment, bytes, int, fmt.ScanResult] | None:
        """The segment at ``path`` resumed at the record ``resume`` names, its bytes from that
        record on (their offset) and the scan of the records after it; None when ``resume``
        names no record of it, or the scan after it fails (the segment is then scanned whole,
        which tells damage from a hint that misled)."""
        found_at = resumed(path, resume)
        if found_at is None:
            return None
        header, data, after = found_at
        check_version(path, header)
        self._check_continues(path, header)
        result = fmt.scan(data, after, resume.chain)  # the records after it, from its chain
        if result.stop is fmt.Stop.CORRUPT:
            return None
        seg = Segment(path, header.first_seq, fmt.SEGMENT_HEADER_SIZE, header.prev_chain)
        head = resume.seq - header.first_seq  # records before it: found when one is read
        seg.offsets.extend(array("Q", bytes(8 * head)))
        seg.offsets.append(resume.offset)
        seg.unchecked = head
        self.list.append(seg)
        return seg, data, resume.offset, result

    def _check_continues(self, path: Path, header: fmt.SegmentHeader) -> None:
        """The segment must start where the ones before it end, at the seq its name says (a
        lazy load takes a sealed segment's seqs from its name)."""
        check_named(path, header)
        expected_first = self.last_seq + 1
        if header.first_seq != expected_first or header.prev_chain != self.chain:
            raise LogCorrupted(
                str(path), 0,
                f"segment starts at seq {header.first_seq} but seq {expected_first} was "
                f"expected, or its chain does not continue the previous segment "
                f"(a segment is missing, reordered or replaced)",
            )

    def _drop_unfinished(self, path: Path) -> None:
        if self.read_only:
            return
        path.unlink()
        fsync_dir(self.io, self.directory)
        self.recovery.removed_segments.append(str(path))

    def _truncate_tail(self, seg: Segment, nbytes: int, detail: str) -> None:
        with open(seg.path, "r+b") as f:
            f.truncate(seg.end)
            f.flush()
            os.fsync(f.fileno())
        self.recovery.truncated_bytes += nbytes
        self.recovery.segment = str(seg.path)
        self.recovery.offset = seg.end
        self.recovery.detail = detail

    # ------------------------------------------------------------------ read

    def segment_of(self, seq: int) -> Segment:
        """The segment that holds ``seq``, its record found and checked."""
        seg = self._holding(seq)
        return self.scanned(seg, seq - seg.first_seq)

    def position(self, seq: int) -> tuple[int, int] | None:
        """(the first seq of its segment, its offset there) of record ``seq`` when that is
        known without reading the log; None else."""
        if not 1 <= seq <= self.last_seq:
            return None
        seg = self._holding(seq)
        if seg.sealed is not None or seq - seg.first_seq < seg.unchecked:
            return None
        return seg.first_seq, seg.offsets[seq - seg.first_seq]

    def _holding(self, seq: int) -> Segment:
        if not 1 <= seq <= self.last_seq:
            raise IndexError(f"seq {seq} is not in the log (1..{self.last_seq})")
        lo, hi = 0, len(self.list) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if self.list[mid].first_seq <= seq:
                lo = mid
            else:
                hi = mid - 1
        return self.list[lo]

    def get(self, seq: int) -> Event:
        """The event with this seq."""
        seg = self.segment_of(seq)
        with open(seg.path, "rb") as f:
            return _read_one(f, seg, seq)

    def head(self) -> ChainHead:
        """The last seq and the chain after it."""
        return ChainHead(self.last_seq, self.chain.hex() if self.last_seq else "")

    def chain_at(self, seq: int) -> bytes:
        """The hash chain value after the event with this seq (identifies the whole prefix);
        before the first event (seq 0), the zero chain."""
        if seq == 0:
            return fmt.ZERO_CHAIN
        for seg in self.list:  # the end of a sealed segment not scanned yet: its next header's
            if seg.sealed is not None and seg.sealed[0] == seq >= seg.first_seq:
                with self._scanning:  # another thread may scan it meanwhile (sealed: None)
                    if seg.unread:
                        self._read_headers(seg)
                    sealed = seg.sealed
                if sealed is not None:
                    return sealed[1]
                break
        seg = self.segment_of(seq)
        with open(seg.path, "rb") as f:
            f.seek(seg.offsets[seq - seg.first_seq])
            return fmt.record_chain(f.read(fmt.RECORD_HEADER_SIZE))

    def read(self, from_seq: int, to_seq: int) -> Iterator[Event]:
        """Events with ``from_seq <= seq <= to_seq``."""
        for seg in list(self.list):
            if seg.last_seq < from_seq or seg.first_seq > to_seq or seg.last_seq < seg.first_seq:
                continue
            lo = max(from_seq, seg.first_seq) - seg.first_seq
            seg = self.scanned(seg, lo)
            with open(seg.path, "rb") as f:
                data = f.read(seg.end)
            hi = min(to_seq, seg.last_seq) - seg.first_seq
            offsets = seg.offsets
            for i in range(lo, hi + 1):
                off = offsets[i]
                yield _decode(fmt.payload_at(data, off), seg, off, seg.first_seq + i)

    def read_seqs(self, seqs: Sequence[int]) -> Iterator[Event]:
        """The events with ``seqs`` (ascending): each segment that holds some opened once, and
        read whole where they are many, else record by record."""
        i = 0
        while i < len(seqs):
            seg = self.segment_of(seqs[i])
            j = i
            while j < len(seqs) and seqs[j] <= seg.last_seq:
                j += 1
            with open(seg.path, "rb") as f:
                if (j - i) * SPARSE_BYTES < seg.end:
                    for seq in seqs[i:j]:
                        yield _read_one(f, seg, seq)
                else:
                    data = f.read(seg.end)
                    for seq in seqs[i:j]:
                        off = seg.offsets[seq - seg.first_seq]
                        yield _decode(fmt.payload_at(data, off), seg, off, seq)
            i = j


# read_seqs reads a segment whole when it wants a record for every this many of its bytes
SPARSE_BYTES = 16 * 1024


def _read_one(f: BinaryIO, seg: Segment, seq: int) -> Event:
    """The event ``seq`` of ``seg``, read from its open file ``f``."""
    off = seg.offsets[seq - seg.first_seq]
    f.seek(off)
    n = int.from_bytes(f.read(fmt.RECORD_HEADER_SIZE)[:4], "little")
    return _decode(f.read(n), seg, off, seq)


def _decode(payload: bytes | memoryview, seg: Segment, off: int, seq: int) -> Event:
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


def fsync_dir(io: FileIO, directory: Path) -> None:
    fd = io.open(directory, os.O_RDONLY)
    try:
        io.fsync(fd)
    finally:
        io.close(fd)
