"""The key file: one random 256-bit data key per log seq, kept apart from the log, so that
destroying keys erases what they sealed while the log's bytes (and its hash chain) stay as written.

Layout (little-endian)::

    header = magic "HMEMKEYS" | u16 version | u16 flags | u64 erased_through
             | u64 scrubbed_through | 16-byte file id | 16-byte secret
             | u32 crc32 of the 60 bytes before
    record = u64 seq | u8 state | 7 zero bytes | u64 receipt | 32-byte key | u32 crc32 of the
             56 bytes before | 4 zero bytes            (record of seq s at 64 * s)

``state`` is LIVE (the key) or ERASED (the key overwritten with zeros; ``receipt`` is the seq
of the ``FactsErased`` event that erased it). Keys are made ahead, a block at a time, and made
durable (fsync) before any record sealed with them is written, so a crash never leaves a logged
event without its key. Erasing overwrites the 32 key bytes in place, then fsyncs: no copy of a
key is left in the file. ``erased_through`` is the last receipt whose keys are all erased,
``scrubbed_through`` the last one after which the projection files were rebuilt; the flag
ERASING is set before a receipt is logged and cleared when the store's own files are done (a
crash between the steps is finished on the next writer open; a reader refuses to open
meanwhile); EXPORTS stays set until the exports the store made are written again (the next
writer ``Memory`` to open does it if a crash came first).

The secret (random, made with the file) keys what must not be forged or guessed by someone who
can read or write the store's directory but not the key file: the MAC of the store's checkpoint
and the digest of an erased subject (:meth:`KeyFile.derived_key`). The file id, kept in clear
beside the log (``keys.id``), keys nothing. A version-1 file (no secret) is given one by the
next writer that opens it.

A reader maps the file and reads keys by offset; it never writes.
"""

from __future__ import annotations

import hashlib
import mmap
import os
import struct
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from eventlog.errors import KeyFileDamaged, KeyFileMissing
from eventlog.fileio import OS
from eventlog.segments import fsync_dir

__all__ = ["KeyFile", "LIVE", "ERASED", "KEY_BLOCK"]

MAGIC = b"HMEMKEYS"
VERSION = 2  # 1: no secret (the 16 bytes after the file id were zero)
LIVE, ERASED = 1, 2
ERASING = 1  # header flag: an erasure is under way (set before its receipt is logged)
EXPORTS = 2  # header flag: the exports the store made are still to be written again
KEY_BLOCK = 1024  # keys made at once (one write, one fsync)

_HEAD = struct.Struct("<8sHHQQ16s16s")
_HEAD_1 = struct.Struct("<8sHHIQQ16s12x")
_REC = struct.Struct("<QB7xQ32s")
_CRC = struct.Struct("<I")
RECORD = 64
assert _HEAD.size + _CRC.size == RECORD and _REC.size + _CRC.size + 4 == RECORD


class _Header(NamedTuple):
    flags: int
    erased_through: int
    scrubbed_through: int
    file_id: bytes
    secret: bytes | None  # None in a version-1 file


class KeyFile:
    """One store's data keys. ``KeyFile.create`` makes a new one; ``KeyFile(path)`` opens one
    (``read_only`` for a reader). Not thread-safe: the log's mutex serialises its writers."""

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.path = Path(path)
        self.read_only = read_only
        try:
            self._fd = os.open(self.path, os.O_RDONLY if read_only else os.O_RDWR)
        except FileNotFoundError:
            raise KeyFileMissing(
                f"the key file {self.path} is missing; the store's texts are sealed with its "
                f"keys and cannot be read without it. Restore it from where you keep it (it is "
                f"never recreated: a new one would not open the log)"
            ) from None
        except OSError as e:
            raise self._damaged(f"it cannot be opened ({e.strerror})") from None
        self._map: mmap.mmap | None = None
        try:
            self._read_header()
            if self.secret is None and not read_only:
                self._write_header()
        except BaseException:
            os.close(self._fd)
            raise

    @classmethod
    def create(cls, path: str | os.PathLike[str], file_id: bytes) -> KeyFile:
        """A new, empty key file with this 16-byte id (fails if one exists), durable with its
        directory entry."""
        path = Path(path)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, _header(0, 0, file_id, os.urandom(16)))
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(OS, path.parent)
        return cls(path)

    # ------------------------------------------------------------------ header

    def _header_now(self) -> _Header:
        """The header as the file holds it now, checked."""
        raw = os.pread(self._fd, RECORD, 0)
        if len(raw) < RECORD or raw[:8] != MAGIC:
            raise self._damaged("its header is missing or not an hmem key file's")
        if _CRC.unpack_from(raw, 60)[0] != zlib.crc32(raw[:60]):
            raise self._damaged("its header fails its checksum")
        version = struct.unpack_from("<H", raw, 8)[0]
        if version == 1:
            _, _, flags, _, erased, scrubbed, file_id = _HEAD_1.unpack_from(raw)
            return _Header(flags, erased, scrubbed, file_id, None)
        if version == VERSION:
            return _Header(*_HEAD.unpack_from(raw)[2:])
        raise self._damaged(f"it has format version {version}; this hmem reads {VERSION}")

    def _read_header(self) -> None:
        flags, self.erased_through, self.scrubbed_through, self.file_id, self.secret = (
            self._header_now()
        )
        self.erasing = bool(flags & ERASING)
        self.exports_pending = bool(flags & EXPORTS)
        self._size = os.fstat(self._fd).st_size
        if self._size % RECORD:  # a crash while keys were being made: the last block is torn
            if self.read_only:
                self._size -= self._size % RECORD
            else:
                os.ftruncate(self._fd, self._size - self._size % RECORD)
                self._size -= self._size % RECORD

    def mark(self, *, erased_through: int | None = None, scrubbed_through: int | None = None,
             erasing: bool | None = None, exports_pending: bool | None = None) -> None:
        """Record how far erasures have gone, whether one is under way and whether the
        exports are still to be written again (durably, in one write)."""
        if erased_through is not None:
            self.erased_through = erased_through
        if scrubbed_through is not None:
            self.scrubbed_through = scrubbed_through
        if erasing is not None:
            self.erasing = erasing
        if exports_pending is not None:
            self.exports_pending = exports_pending
        self._write_header()

    def _write_header(self) -> None:
        if self.secret is None:  # a version-1 file, written as version 2 from now on
            self.secret = os.urandom(16)
        flags = (ERASING if self.erasing else 0) | (EXPORTS if self.exports_pending else 0)
        os.pwrite(self._fd, _header(self.erased_through, self.scrubbed_through, self.file_id,
                                    self.secret, flags), 0)
        os.fsync(self._fd)

    def erasure_record(self) -> int:
        """``erased_through`` as the file holds it now (another writer of a shared store may
        have erased since this one read the header)."""
        return self._header_now().erased_through

    def reread(self) -> None:
        """Take in the header as the file holds it now (another writer's erasure)."""
        self._read_header()

    def erasing_now(self) -> bool:
        """Whether an erasure is under way as the file's header says now (another writer of a
        shared store may have begun one since this one read the header)."""
        return bool(self._header_now().flags & ERASING)

    def derived_key(self, purpose: str) -> bytes | None:
        """A 32-byte key for ``purpose``, derived from the file's secret; None for a
        version-1 file opened read-only (a writer's open gives it a secret)."""
        if self.secret is None:
            return None
        return hashlib.blake2b(purpose.encode(), key=self.secret, digest_size=32).digest()

    # ------------------------------------------------------------------ keys

    @property
    def made_through(self) -> int:
        """The highest seq a key has been made for."""
        return self._size // RECORD - 1

    def reserve(self, through_seq: int) -> None:
        """Make keys (durably) for every seq up to ``through_seq``, a block ahead."""
        self._size = os.fstat(self._fd).st_size // RECORD * RECORD  # another writer's keys
        first = self.made_through + 1
        if through_seq < first:
            return
        last = through_seq + KEY_BLOCK - 1
        keys = os.urandom(32 * (last - first + 1))
        out = bytearray()
        for i, seq in enumerate(range(first, last + 1)):
            out += _record(seq, LIVE, 0, keys[32 * i:32 * i + 32])
        _pwrite_all(self._fd, bytes(out), self._size)
        os.fsync(self._fd)
        self._size += len(out)

    def key(self, seq: int) -> bytes | None:
        """The key of ``seq``; None if it was erased. Raises ``KeyFileDamaged`` if the file holds
        no key for it or the key's record fails its checks."""
        state, _, key = self._record(seq)
        return key if state == LIVE else None

    def keys(self, seqs: Iterable[int]) -> list[bytes | None]:
        """:meth:`key` of each of ``seqs``, read in one pass over the map (what a batch seals or
        opens with); the same checks and errors."""
        seqs = list(seqs)
        if not seqs:
            return []
        high = max(seqs)
        if not self._holds(high) or min(seqs) < 1:
            return [self.key(seq) for seq in seqs]  # raises, naming the seq without a key
        view = self._view(RECORD * (high + 1))
        out: list[bytes | None] = []
        for seq in seqs:  # one failing is read again by the one-by-one path, which names it
            state, _, key = _checked(view, seq) or self._record(seq)
            out.append(key if state == LIVE else None)
        return out

    def receipt(self, seq: int) -> int | None:
        """The seq of the receipt that erased ``seq``'s key; None if it is live."""
        state, receipt, _ = self._record(seq)
        return receipt if state == ERASED else None

    def _record(self, seq: int) -> tuple[int, int, bytes]:
        at = RECORD * seq
        if not self._holds(seq):
            raise self._damaged(
                f"it holds no key for event {seq} (keys end at event {self.made_through}): "
                f"it is older than the log, or another store's"
            )
        record = _checked(self._view(at + RECORD), seq)
        if record is None:
            raise self._damaged(f"the key record of event {seq} fails its checks")
        return record

    def _holds(self, seq: int) -> bool:
        """Whether the file has a record for ``seq`` (another writer's keys looked for)."""
        if seq < 1:
            return False
        if RECORD * (seq + 1) > self._size:
            self._size = os.fstat(self._fd).st_size // RECORD * RECORD
        return RECORD * (seq + 1) <= self._size

    def digest(self, name: str) -> str:
        """A keyed hash of ``name`` (keyed from the file's secret, so that no dictionary of
        names recovers it without the key file): what a receipt records of an erased
        subject."""
        key = self.derived_key("subject digest")
        if key is None:
            raise PermissionError("a version-1 key file opened read-only has no secret")
        return hashlib.blake2b(name.encode(), key=key, digest_size=16).hexdigest()

    def id_digest(self, name: str) -> str:
        """The digest receipts recorded before key files had a secret (keyed with the file's
        id, which is not secret): only to recognise those receipts' subjects."""
        return hashlib.blake2b(name.encode(), key=self.file_id, digest_size=16).hexdigest()

    def erased_seqs(self, through: int) -> list[int]:
        """The seqs up to ``through`` whose keys are erased."""
        n = min(through, self.made_through)
        if n < 1:
            return []
        view = self._view(RECORD * (n + 1))
        states = memoryview(view)[RECORD + 8:RECORD * (n + 1):RECORD]
        return [i + 1 for i, state in enumerate(states) if state == ERASED]

    def _view(self, need: int) -> mmap.mmap:
        if self._map is None or len(self._map) < need:
            if self._map is not None:
                self._map.close()
            self._map = mmap.mmap(self._fd, self._size, access=mmap.ACCESS_READ)
        return self._map

    def check(self, through: int) -> None:
        """Read every key record up to seq ``through``; ``KeyFileDamaged`` names the first
        that fails its checks (what an erasure makes sure of before it destroys anything)."""
        if through < 1:
            return
        self._holds(through)  # another writer's keys, looked for
        made = min(through, self.made_through)
        bad = self._first_failing(made) if made > 0 else 0
        if bad or made < through:
            self._record(bad or made + 1)  # raises, naming the first that fails or is missing

    def _first_failing(self, through: int) -> int:
        """The first seq up to ``through`` whose key record fails its checks (the checks of
        :meth:`_record`, over all the records at once); 0 for none."""
        view = memoryview(self._view(RECORD * (through + 1)))[RECORD:RECORD * (through + 1)]
        words = np.frombuffer(view, dtype="<u8").reshape(through, RECORD // 8)
        crcs = np.fromiter((zlib.crc32(view[at:at + 56]) for at in range(0, len(view), RECORD)),
                           dtype=np.uint32, count=through)
        good = ((words[:, 0] == np.arange(1, through + 1, dtype=np.uint64))
                & np.isin(words[:, 1] & 0xFF, (LIVE, ERASED))
                & ((words[:, 7] & 0xFFFFFFFF).astype(np.uint32) == crcs))
        return 0 if good.all() else int(np.argmin(good)) + 1

    def renew_erased_after(self, seq: int) -> int:
        """Give a new key to every erased seq after ``seq`` (a log restored or cut back to
        ``seq`` holds no event there, and its next events must be sealable); returns how many."""
        later = [s for s in self.erased_seqs(self.made_through) if s > seq]
        for s in later:
            os.pwrite(self._fd, _record(s, LIVE, 0, os.urandom(32)), RECORD * s)
        if later:
            os.fsync(self._fd)
        return len(later)

    def erase(self, seqs: Iterable[int], receipt: int) -> int:
        """Overwrite the keys of ``seqs`` with zeros (state ERASED, naming ``receipt``), then
        fsync. Keys already erased are left as they are. Returns how many were erased now."""
        if self.read_only:
            raise PermissionError("a read-only key file erases nothing")
        n = 0
        for seq in sorted(set(seqs)):
            state, _, _ = self._record(seq)
            if state == LIVE:
                os.pwrite(self._fd, _record(seq, ERASED, receipt, bytes(32)), RECORD * seq)
                n += 1
        os.fsync(self._fd)
        return n

    def _damaged(self, detail: str) -> KeyFileDamaged:
        return KeyFileDamaged(
            f"the key file {self.path} cannot be used: {detail}. Restore the store's own key "
            f"file; hmem never reads a sealed text without its key"
        )

    def close(self) -> None:
        if self._map is not None:
            self._map.close()
            self._map = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def _header(
    erased_through: int, scrubbed_through: int, file_id: bytes, secret: bytes, flags: int = 0
) -> bytes:
    body = _HEAD.pack(MAGIC, VERSION, flags, erased_through, scrubbed_through, file_id, secret)
    return body + _CRC.pack(zlib.crc32(body))


def _record(seq: int, state: int, receipt: int, key: bytes) -> bytes:
    body = _REC.pack(seq, state, receipt, key)
    return body + _CRC.pack(zlib.crc32(body)) + bytes(4)


def _pwrite_all(fd: int, data: bytes, at: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, at)
        view, at = view[n:], at + n


def _checked(view: mmap.mmap, seq: int) -> tuple[int, int, bytes] | None:
    """(state, receipt, key) of the record of ``seq`` in the map, or None when it fails its
    checks (its checksum, its seq, a state neither live nor erased)."""
    at = RECORD * seq
    got_seq, state, receipt, key = _REC.unpack_from(view, at)
    if _CRC.unpack_from(view, at + 56)[0] != zlib.crc32(view[at:at + 56]) or got_seq != seq or (
        state not in (LIVE, ERASED)
    ):
        return None
    return state, receipt, key
