"""On-disk framing of log segments.

A segment file is a header followed by records::

    header  = magic "HMEMLOG\\0" | u16 version | u16 flags | u32 reserved
              | u64 first_seq | 16-byte chain of the record before this segment | u32 crc32
    record  = u32 length | u32 length ^ 0xFFFFFFFF | u32 crc32(chain + payload)
              | 16-byte chain | payload (msgpack, `length` bytes)
    chain_i = blake2b(chain_{i-1} + payload_i, digest_size=16); chain_0 = 16 zero bytes

The length is stored twice so that a damaged length is recognised as damage, not mistaken for a
record that runs past the end of the file. The chained hash makes tampering, reordering and
dropped records detectable across records and segments.

A scan classifies where valid records stop:

* ``END``: the data ended exactly after a record.
* ``TORN``: the tail is an unfinished write (fewer bytes than a record header, a valid header whose
  record runs past the end, or only zero bytes left). Recovery truncates it.
* ``CORRUPT``: a complete record failed a check. Never skipped: the caller raises.
"""

from __future__ import annotations

import hashlib
import struct
import zlib
from enum import Enum
from typing import NamedTuple

from eventlog.errors import RecordRejected

__all__ = [
    "MAGIC",
    "FORMAT_VERSION",
    "SEGMENT_HEADER_SIZE",
    "RECORD_HEADER_SIZE",
    "ZERO_CHAIN",
    "MAX_RECORD_BYTES",
    "Stop",
    "ScanResult",
    "SegmentHeader",
    "pack_segment_header",
    "unpack_segment_header",
    "chain_next",
    "record",
    "frame",
    "scan",
    "record_at",
]

MAGIC = b"HMEMLOG\x00"
FORMAT_VERSION = 1
ZERO_CHAIN = bytes(16)
MAX_RECORD_BYTES = 64 * 1024 * 1024
# A segment file ends once it holds this many bytes. A reader opens a log by scanning only its
# last segment (the others are taken from their headers), so this bounds a reader's open: 8 MiB
# is about 17,000 text facts, scanned in some 40 ms (at 64 MiB the scan of a 100k-fact store's
# one segment took a reader 240 of its 300 ms open).
SEGMENT_BYTES = 8 * 1024 * 1024

_SEG = struct.Struct("<8sHHIQ16s")
_SEG_CRC = struct.Struct("<I")
SEGMENT_HEADER_SIZE = _SEG.size + _SEG_CRC.size
_REC = struct.Struct("<III16s")
RECORD_HEADER_SIZE = _REC.size
_MASK = 0xFFFFFFFF


class SegmentHeader(NamedTuple):
    version: int
    first_seq: int
    prev_chain: bytes


def pack_segment_header(first_seq: int, prev_chain: bytes) -> bytes:
    body = _SEG.pack(MAGIC, FORMAT_VERSION, 0, 0, first_seq, prev_chain)
    return body + _SEG_CRC.pack(zlib.crc32(body))


def unpack_segment_header(data: bytes) -> SegmentHeader | str:
    """Parse a segment header; returns an error description instead of raising."""
    if len(data) < SEGMENT_HEADER_SIZE:
        return "segment header is incomplete"
    body = data[: _SEG.size]
    magic, version, _flags, _reserved, first_seq, prev_chain = _SEG.unpack(body)
    if magic != MAGIC:
        return "not an hmem log segment (bad magic)"
    (crc,) = _SEG_CRC.unpack_from(data, _SEG.size)
    if crc != zlib.crc32(body):
        return "segment header checksum mismatch"
    return SegmentHeader(version, first_seq, prev_chain)


def chain_next(prev_chain: bytes, payload: bytes | memoryview) -> bytes:
    h = hashlib.blake2b(prev_chain, digest_size=16)
    h.update(payload)
    return h.digest()


def frame(payload: bytes, prev_chain: bytes) -> tuple[bytes, bytes]:
    """Frame one payload; returns (record bytes, chain after it)."""
    n = len(payload)
    if n > MAX_RECORD_BYTES:
        raise RecordRejected(
            f"an event of {n:,} bytes exceeds the {MAX_RECORD_BYTES:,}-byte record limit; "
            f"store less in one event (shorter texts, fewer entities, a smaller vector)"
        )
    chain = chain_next(prev_chain, payload)
    return record(payload, chain), chain


def record(payload: bytes, chain: bytes) -> bytes:
    """The record of ``payload`` whose chain (``chain_next`` of the one before) is ``chain``."""
    n = len(payload)
    crc = zlib.crc32(payload, zlib.crc32(chain))
    return _REC.pack(n, n ^ _MASK, crc, chain) + payload


class Stop(Enum):
    END = "end"
    TORN = "torn"
    CORRUPT = "corrupt"


class ScanResult(NamedTuple):
    offsets: list[int]  # start offset of every valid record, in order
    end: int  # offset just after the last valid record
    chain: bytes  # chain after the last valid record
    stop: Stop
    detail: str  # why the scan stopped (empty for END)


def scan(buf: bytes | memoryview, pos: int, prev_chain: bytes) -> ScanResult:
    """Walk the records of ``buf`` from ``pos``, checking lengths, checksums and the chain."""
    mv = memoryview(buf)
    size = len(mv)
    offsets: list[int] = []
    chain = prev_chain
    unpack = _REC.unpack_from
    crc32 = zlib.crc32
    blake = hashlib.blake2b
    while True:
        if pos == size:
            return ScanResult(offsets, pos, chain, Stop.END, "")
        if size - pos < RECORD_HEADER_SIZE:
            return ScanResult(offsets, pos, chain, Stop.TORN, "partial record header at end")
        n, n_check, crc, rec_chain = unpack(mv, pos)
        if n ^ _MASK != n_check:
            if not any(mv[pos:]):
                return ScanResult(offsets, pos, chain, Stop.TORN, "zero bytes at end")
            return ScanResult(offsets, pos, chain, Stop.CORRUPT, "record length field is damaged")
        if n > MAX_RECORD_BYTES:
            return ScanResult(offsets, pos, chain, Stop.CORRUPT, f"record length {n} too large")
        start = pos + RECORD_HEADER_SIZE
        stop = start + n
        if stop > size:
            return ScanResult(offsets, pos, chain, Stop.TORN, "record runs past end of file")
        payload = mv[start:stop]
        if crc32(payload, crc32(rec_chain)) != crc:
            return ScanResult(offsets, pos, chain, Stop.CORRUPT, "record checksum mismatch")
        h = blake(chain, digest_size=16)
        h.update(payload)
        expected = h.digest()
        if expected != rec_chain:
            return ScanResult(
                offsets, pos, chain, Stop.CORRUPT,
                "hash chain broken (a record was altered, removed or reordered)",
            )
        offsets.append(pos)
        chain = expected
        pos = stop


def record_at(buf: bytes | memoryview, pos: int) -> tuple[int, bytes] | None:
    """(the offset after it, the chain it stores) of the record at ``pos`` of ``buf`` when it
    is whole and its checksum holds (its chain is not checked: that needs the records before
    it); None else."""
    mv = memoryview(buf)
    if pos < 0 or len(mv) - pos < RECORD_HEADER_SIZE:
        return None
    n, n_check, crc, chain = _REC.unpack_from(mv, pos)
    stop = pos + RECORD_HEADER_SIZE + n
    if n ^ _MASK != n_check or n > MAX_RECORD_BYTES or stop > len(mv):
        return None
    if zlib.crc32(mv[pos + RECORD_HEADER_SIZE:stop], zlib.crc32(chain)) != crc:
        return None
    return stop, chain


def record_chain(header: bytes) -> bytes:
    """The chain value stored in a record header."""
    chain: bytes = _REC.unpack_from(header, 0)[3]
    return chain


def payload_at(buf: bytes | memoryview, offset: int) -> memoryview:
    """The payload of the (already validated) record starting at ``offset``."""
    n = _REC.unpack_from(buf, offset)[0]
    start = offset + RECORD_HEADER_SIZE
    return memoryview(buf)[start : start + n]
