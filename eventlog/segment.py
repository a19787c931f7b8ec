"""One segment file of the log as a process knows it, and the checks a lazy open leaves to the
first read of it.

A :class:`Segment` holds where its records start and how far they are checked. An open that
takes a sealed segment from the file names (:mod:`eventlog.segments`) reads its header and the
next one's, and scans it whole, when one of its records is first read (:func:`scan_sealed`);
an open that resumes the last segment at the record a checkpoint names (:class:`Resume`,
:func:`resumed`) checks that record and the ones after it, and the ones before it when one of
them is first read (:func:`check_head`). Each check raises :class:`LogCorrupted` naming the
segment, never serves a record it has not checked.
"""

from __future__ import annotations

import os
from array import array
from pathlib import Path
from typing import NamedTuple

import msgspec

from eventlog import format as fmt
from eventlog.errors import LogCorrupted, UnsupportedFormat

__all__ = [
    "Resume", "Segment", "SEGMENT_SUFFIX", "check_head", "check_named", "check_version",
    "file_size", "named_header", "named_seq", "read_header", "resumed", "scan_sealed",
    "segment_name",
]

SEGMENT_SUFFIX = ".hlog"


def segment_name(first_seq: int) -> str:
    return f"{first_seq:020d}{SEGMENT_SUFFIX}"


def named_seq(path: Path) -> int | None:
    """The first seq the name of a segment file says it holds; None for a name not of that
    form."""
    stem = path.name[: -len(SEGMENT_SUFFIX)]
    if not path.name.endswith(SEGMENT_SUFFIX) or len(stem) != 20 or not stem.isdigit():
        return None
    return int(stem)


def check_version(path: Path, header: fmt.SegmentHeader) -> None:
    """``UnsupportedFormat`` for a segment written in a newer log format than this hmem reads."""
    if header.version > fmt.FORMAT_VERSION:
        raise UnsupportedFormat(
            f"{path} was written in log format {header.version}; this hmem reads up to "
            f"format {fmt.FORMAT_VERSION}. Upgrade hmem (pip install -U hmem)"
        )


def check_named(path: Path, header: fmt.SegmentHeader) -> None:
    """``LogCorrupted`` for a segment whose file name says another first seq than its header
    (a name not of a segment's form says nothing)."""
    named = named_seq(path)
    if named is not None and named != header.first_seq:
        raise LogCorrupted(str(path), 0, f"segment starts at seq {header.first_seq} but its "
                           f"name says {named} (a segment is missing, reordered or replaced)")


def named_header(seg: Segment) -> fmt.SegmentHeader:
    """The header of the file of ``seg`` (taken from its name), checked: whole, of a format
    this hmem reads, starting at the seq the file's name says."""
    header, _ = read_header(seg.path)
    if isinstance(header, str):
        raise LogCorrupted(str(seg.path), 0, header)
    check_version(seg.path, header)
    check_named(seg.path, header)
    return header


def file_size(path: Path) -> int:
    """A segment file's size (0 when it is gone: reading it says so)."""
    try:
        return path.stat().st_size
    except OSError:
        return 0


def read_header(path: Path) -> tuple[fmt.SegmentHeader | str, bytes]:
    """A segment file's header (or what is wrong with it) and its bytes as read."""
    fd = os.open(path, os.O_RDONLY)
    try:
        data = os.pread(fd, fmt.SEGMENT_HEADER_SIZE, 0)
    finally:
        os.close(fd)
    return fmt.unpack_segment_header(data), data


class Segment:
    """One segment file: its first seq, the offset of every valid record, where they end.

    A sealed segment loaded lazily is not scanned yet: ``sealed`` holds what the next segment's
    header says it must hold (its last seq and the chain after it), and ``offsets`` is empty
    until :func:`scan_sealed` reads it; while ``unread``, its seqs are what the file names say
    and neither header is read yet (its chains are not known). The last segment of a log
    resumed at a checkpoint's record has the ``unchecked`` records before that one not found
    (offset 0) or checked yet, until :func:`check_head` reads them."""

    __slots__ = ("path", "first_seq", "offsets", "end", "prev_chain", "sealed", "unchecked",
                 "unread")

    def __init__(
        self, path: Path, first_seq: int, end: int, prev_chain: bytes = fmt.ZERO_CHAIN,
        sealed: tuple[int, bytes] | None = None, *, unread: bool = False,
    ) -> None:
        self.path = path
        self.first_seq = first_seq
        self.offsets = array("Q")
        self.end = end
        self.prev_chain = prev_chain
        self.sealed = sealed
        self.unchecked = 0
        self.unread = unread

    @property
    def last_seq(self) -> int:
        if self.sealed is not None:
            return self.sealed[0]
        return self.first_seq + len(self.offsets) - 1


class Resume(NamedTuple):
    """Where an open from a checkpoint resumes checking the log: the checkpoint's seq, the
    chain after it, where its record lies (the first seq of the segment that holds it, the
    record's offset there) and the chain before it, as an authentic checkpoint names them (a
    store takes them from none other). Still, unless that record is there, holds that seq and
    follows from ``before`` to ``chain`` (the first record of its segment: from the header), it
    is ignored and the segment scanned whole."""

    seq: int
    chain: bytes
    segment: int
    offset: int
    before: bytes


def scan_sealed(seg: Segment) -> None:
    """Scan a sealed segment a lazy load took without reading it (its headers read by now):
    every record checked, ending with the last seq and chain the next segment's header says."""
    assert seg.sealed is not None
    last_seq, chain = seg.sealed
    data = seg.path.read_bytes()
    result = fmt.scan(data, fmt.SEGMENT_HEADER_SIZE, seg.prev_chain)
    if result.stop is fmt.Stop.CORRUPT:
        raise LogCorrupted(str(seg.path), result.end, result.detail)
    if result.stop is fmt.Stop.TORN:
        raise LogCorrupted(
            str(seg.path), result.end, f"{result.detail}, but later segments exist"
        )
    if seg.first_seq + len(result.offsets) - 1 != last_seq or result.chain != chain:
        raise LogCorrupted(
            str(seg.path), result.end,
            f"segment ends at seq {seg.first_seq + len(result.offsets) - 1} but the next "
            f"starts at seq {last_seq + 1}, or its chain does not continue into the next "
            f"(a segment is missing, reordered or replaced)",
        )
    seg.offsets.extend(result.offsets)
    seg.end = result.end
    seg.sealed = None


def resumed(path: Path, resume: Resume) -> tuple[fmt.SegmentHeader, bytes, int] | None:
    """The header of the segment at ``path``, its bytes from the record ``resume`` names and
    where that record ends in them, when it is there (checked: its checksum, its seq, its
    chain from ``resume.before``); None else."""
    with open(path, "rb") as f:
        header = fmt.unpack_segment_header(f.read(fmt.SEGMENT_HEADER_SIZE))
        if isinstance(header, str) or header.first_seq != resume.segment or not (
            header.first_seq <= resume.seq
            and fmt.SEGMENT_HEADER_SIZE <= resume.offset < os.fstat(f.fileno()).st_size
        ) or (resume.seq == header.first_seq and (  # then it is the first record
            resume.offset != fmt.SEGMENT_HEADER_SIZE or resume.before != header.prev_chain
        )):
            return None
        f.seek(resume.offset)
        data = f.read()
    found = fmt.record_at(data, 0)
    if found is None or found[1] != resume.chain:
        return None
    payload = data[fmt.RECORD_HEADER_SIZE:found[0]]
    if fmt.chain_next(resume.before, payload) != resume.chain or _seq_of(payload) != resume.seq:
        return None
    return header, data, found[0]


def check_head(seg: Segment) -> None:
    """Scan the records of a resumed segment up to and with the one it resumed at: they must
    end at that record, with the chain it stores (the one the records after it were checked
    from); their offsets are then known."""
    count = seg.unchecked + 1
    at = seg.offsets[count - 1]
    upto = seg.offsets[count] if count < len(seg.offsets) else seg.end
    with open(seg.path, "rb") as f:
        data = f.read(upto)
    result = fmt.scan(data, fmt.SEGMENT_HEADER_SIZE, seg.prev_chain)
    if result.stop is not fmt.Stop.END:
        raise LogCorrupted(str(seg.path), result.end, result.detail)
    stored = fmt.record_chain(data[at:at + fmt.RECORD_HEADER_SIZE])
    if len(result.offsets) != count or result.offsets[-1] != at or result.chain != stored:
        raise LogCorrupted(str(seg.path), result.end,
                           "hash chain broken (a record was altered, removed or reordered)")
    seg.offsets[:count - 1] = array("Q", result.offsets[:-1])
    seg.unchecked = 0


class _SeqOnly(msgspec.Struct):
    seq: int


def _seq_of(payload: bytes) -> int | None:
    """The seq a record's payload holds (None if it holds none that decodes)."""
    try:
        return msgspec.msgpack.decode(payload, type=_SeqOnly).seq
    except (msgspec.DecodeError, msgspec.ValidationError):
        return None
