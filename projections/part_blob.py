"""A checkpoint part's large columns left on disk (fact texts, index tokens): read when asked
for, each block checked.

A large namespace's texts are most of its part (145 of 403 MB at 1M facts) and recall reads
only its hits'. The part keeps such a column as one buffer whose digest is the SHA-256 of its
blocks' SHA-256s (:func:`block_root`, 16 KiB blocks), and the block digests beside it: a reader
checks the digests against the column's digest at open (a few hundred KB, where streaming the
column through SHA-256 took 0.2 s at 1M facts; :func:`stream_digests` still does for a part
that keeps none, and for ``verify``). :class:`PartBlob` then reads the blocks a text spans when
the text is asked for, on its own descriptor of the file (the part may be replaced or removed
meanwhile: the descriptor still reads the file that was checked), and checks each block it reads
against its digest, so a part changed on disk is never believed: a block that fails is made
again from the log where the store says how (``recover``), else the read raises.
"""

from __future__ import annotations

import hashlib
import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from io import BufferedReader

from projections.errors import DamagedProjection

__all__ = ["BLOCK", "LAZY", "PartBlob", "block_digests", "block_root", "stream_digests"]

BLOCK = 16 << 10  # bytes per checked block
LAZY = hasattr(os, "pread")  # where a file can be read at an offset without seeking
_CHUNK = 64 * BLOCK  # bytes read per call when streaming
_HASHERS = 2  # threads hashing a streamed column's chunks
_CACHED = 64  # blocks kept after they were read and checked
_DIGEST = 32


def block_digests(data: bytes | bytearray | memoryview) -> bytes:
    """The SHA-256 of each BLOCK-byte block of ``data`` (the last may be shorter), joined."""
    view = memoryview(data).cast("B")
    return b"".join(hashlib.sha256(view[at:at + BLOCK]).digest()
                    for at in range(0, len(view), BLOCK))


def block_root(digests: bytes) -> bytes:
    """The digest of a buffer kept in blocks: the SHA-256 of its block digests."""
    return hashlib.sha256(digests).digest()


def stream_digests(f: BufferedReader, offset: int, length: int) -> bytes:
    """:func:`block_digests` of ``length`` bytes of the open file ``f`` from ``offset``, read a
    chunk at a time and hashed by :data:`_HASHERS` threads (hashlib lets go of the GIL), a few
    chunks in memory at once; ``ValueError`` if the file ends before them."""
    f.seek(offset)
    if length <= _HASHERS * _CHUNK:  # starting threads would cost more than they save
        chunk = f.read(length)
        if len(chunk) != length:
            raise ValueError("the part ends inside a column")
        return block_digests(chunk)
    out: list[bytes] = []
    with ThreadPoolExecutor(max_workers=_HASHERS) as hashers:
        hashing: deque[Future[bytes]] = deque()
        for done in range(0, length, _CHUNK):
            size = min(_CHUNK, length - done)
            chunk = f.read(size)
            if len(chunk) != size:
                raise ValueError("the part ends inside a column")
            hashing.append(hashers.submit(block_digests, chunk))
            if len(hashing) > _HASHERS:
                out.append(hashing.popleft().result())
        out += [digests.result() for digests in hashing]
    return b"".join(out)


class PartBlob:
    """``length`` bytes of a part file from ``offset``, read by block when sliced; each block
    read is checked against ``digests`` (:func:`block_digests` of the bytes that were checked
    at open) and :class:`DamagedProjection` raised if it differs. Owns ``fd`` (closed when the
    blob is dropped or closed)."""

    __slots__ = ("__weakref__", "_cache", "_close", "_digests", "_fd", "_length", "_lock",
                 "_made", "_offset", "_what", "recover")

    def __init__(self, fd: int, offset: int, length: int, digests: bytes,
                 what: str = "a checkpoint part's texts") -> None:
        if len(digests) != -(-length // BLOCK) * _DIGEST:
            os.close(fd)
            raise ValueError("the block digests do not cover the buffer")
        self._fd, self._offset, self._length, self._digests = fd, offset, length, digests
        self._what = what  # for the message when a block fails its digest
        self._cache: dict[int, bytes] = {}
        self._lock = threading.Lock()
        self._close = weakref.finalize(self, os.close, fd)
        # block -> its bytes made again from the log, for a block that fails its digest
        self.recover: Callable[[int], bytes] | None = None
        self._made: dict[int, bytes] = {}  # the blocks so made, kept

    def __len__(self) -> int:
        return self._length

    def __getitem__(self, at: slice) -> bytes:
        start, stop, step = at.indices(self._length)
        if step != 1:
            raise ValueError("a part's texts are read in runs of bytes")
        if stop <= start:
            return b""
        first, last = start // BLOCK, (stop - 1) // BLOCK
        data = b"".join(self._block(i) for i in range(first, last + 1))
        return data[start - first * BLOCK: stop - first * BLOCK]

    def whole(self) -> bytearray:
        """Every byte, checked, in memory."""
        out = bytearray(self._length)
        for i, block in enumerate(self._blocks()):
            out[i * BLOCK: (i + 1) * BLOCK] = block
        return out

    def close(self) -> None:
        """Close the descriptor (the blob is not read again)."""
        self._close()
        self._cache.clear()

    def __bytes__(self) -> bytes:
        return b"".join(self._blocks())

    def _blocks(self) -> Iterator[bytes]:
        return map(self._block, range(-(-self._length // BLOCK)))

    def _block(self, i: int) -> bytes:
        data = self._cache.get(i) or self._made.get(i)
        if data is not None:
            return data
        at = i * BLOCK
        size = min(BLOCK, self._length - at)
        data = os.pread(self._fd, size, self._offset + at)
        if len(data) != size or hashlib.sha256(data).digest() != self._digests[
            i * _DIGEST: (i + 1) * _DIGEST
        ]:
            data = self._recovered(i, size)
        with self._lock:  # readers on many threads share the cache
            if len(self._cache) >= _CACHED and i not in self._cache:
                del self._cache[next(iter(self._cache))]
            self._cache[i] = data
        return data

    def _recovered(self, i: int, size: int) -> bytes:
        """Block ``i``, which fails its digest: made again by ``recover``, else
        :class:`DamagedProjection`."""
        data = None if self.recover is None else self.recover(i)
        if data is None or len(data) != size or hashlib.sha256(data).digest() != self._digests[
            i * _DIGEST: (i + 1) * _DIGEST
        ]:  # made again, it is checked as the block was: a wrong remake is not believed
            raise DamagedProjection(
                f"block {i} of {self._what} fails its digest (the file changed on disk): it is "
                f"not believed; a store reads what the block held from its log"
            )
        self._made[i] = data
        return data
