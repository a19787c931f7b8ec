"""Finding a string among many held as one UTF-8 buffer, without a ``str`` object or a dict
entry each (a 1M-fact namespace's 265k index terms: ~250 ms and ~48 MiB as a list and two
dicts; ~15 ms and ~4 MiB here).

Each string gets a 64-bit key from its length and its first and last eight bytes (all of a
string of up to sixteen bytes), computed for every string at once with numpy; the keys are
sorted once, and a string asked for is found by its key (:func:`key_of`, the same number in
Python) and confirmed by its bytes, so two strings that share a key are told apart."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["BlobLookup", "key_of", "keys_of"]

_MASK = (1 << 64) - 1
_FIRST, _LAST, _LENGTH = 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_MIX1, _MIX2 = 0xBF58476D1CE4E5B9, 0x94D049BB133111EB


def key_of(data: bytes) -> int:
    """The key of one string's UTF-8 bytes (what :func:`keys_of` gives it)."""
    n = len(data)
    first = int.from_bytes(data[:8], "little")
    last = int.from_bytes(data[-8:], "little") if n >= 8 else first
    k = ((first * _FIRST) ^ (last * _LAST) ^ (n * _LENGTH)) & _MASK
    k = ((k ^ (k >> 31)) * _MIX1) & _MASK
    k = ((k ^ (k >> 29)) * _MIX2) & _MASK
    return k ^ (k >> 32)


def keys_of(blob: bytes, ends: npt.NDArray[np.int64]) -> npt.NDArray[np.uint64]:
    """The key of every string of ``blob`` (string ``i`` ends at ``ends[i]``, starts where the
    one before it ends)."""
    ends = np.asarray(ends, dtype=np.int64)
    starts = np.empty_like(ends)
    starts[:1] = 0
    starts[1:] = ends[:-1]
    lengths = ends - starts
    padded = bytes(blob) + bytes(8)
    # the eight bytes from every offset, read unaligned: one gather a string, no copy of them all
    at = np.ndarray((len(blob) + 1,), dtype="<u8", buffer=padded, strides=(1,))
    short = lengths < 8
    shift = (np.minimum(lengths, 7) * 8).astype(np.uint64)
    mask = np.where(short, (np.uint64(1) << shift) - np.uint64(1), np.uint64(_MASK))
    first = at[starts] & mask
    last = np.where(short, first, at[np.maximum(ends - 8, 0)])
    k = (first * np.uint64(_FIRST)) ^ (last * np.uint64(_LAST))
    k ^= lengths.astype(np.uint64) * np.uint64(_LENGTH)
    k = (k ^ (k >> np.uint64(31))) * np.uint64(_MIX1)
    k = (k ^ (k >> np.uint64(29))) * np.uint64(_MIX2)
    result: npt.NDArray[np.uint64] = k ^ (k >> np.uint64(32))
    return result


class BlobLookup:
    """The code (position) of a string of ``blob`` (string ``i`` ends at ``ends[i]``)."""

    __slots__ = ("_blob", "_ends", "_sorted", "_order")

    def __init__(self, blob: bytes, ends: Sequence[int] | npt.NDArray[np.int64]) -> None:
        self._blob = blob
        self._ends = np.asarray(ends, dtype=np.int64)
        keys = keys_of(blob, self._ends)
        self._order = np.argsort(keys, kind="stable").astype(np.int32)
        self._sorted = keys[self._order]

    def find(self, value: str) -> int | None:
        """The code of ``value``; None when the buffer does not hold it."""
        data = value.encode("utf-8", "surrogatepass")
        key = key_of(data)
        return self._confirmed(data, key, int(self._sorted.searchsorted(np.uint64(key))))

    def find_many(self, values: Sequence[str]) -> list[int | None]:
        """:meth:`find` of each of ``values``, the keys computed and searched at once."""
        if len(values) < 8:
            return [self.find(v) for v in values]
        encoded = [v.encode("utf-8", "surrogatepass") for v in values]
        ends = np.cumsum(np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded)))
        keys = keys_of(b"".join(encoded), ends)
        ats = np.searchsorted(self._sorted, keys).tolist()
        confirmed = self._confirmed
        return [confirmed(data, key, at)
                for data, key, at in zip(encoded, keys.tolist(), ats, strict=True)]

    def _confirmed(self, data: bytes, key: int, at: int) -> int | None:
        """The code of the string whose bytes are ``data`` among those with ``key`` (sorted
        from ``at`` on); None if none of them is it."""
        sorted_, order, blob, ends = self._sorted, self._order, self._blob, self._ends
        while at < len(sorted_) and sorted_.item(at) == key:
            code = order.item(at)
            if blob[ends.item(code - 1) if code else 0:ends.item(code)] == data:
                return code
            at += 1
        return None
