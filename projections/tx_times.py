"""Every event's tx time, by seq: what time travel turns a time into a seq of the log with.

The checkpoint's manifest holds the tx time of every event up to its seq (8 bytes an event); a
process that opens from it keeps them in the file, digested by block (projections/part_blob.py),
and reads the blocks a lookup needs, each checked, when one is asked for: a process that never
travels in time by a time (most never do) holds none of them, where it held 8 MB and read and
hashed them at open at 1M events (80 MB at 10M, whatever namespace it serves). The times of
the events folded after the checkpoint are kept in memory.
"""

from __future__ import annotations

import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from typing import overload

from projections.part_blob import PartBlob

__all__ = ["TxTimes"]

_SIZE = 8  # bytes of one tx time (int64, little-endian, microseconds)


class TxTimes(Sequence[int]):
    """Event tx times in microseconds, seq ``i + 1`` at ``[i]``: the first ones kept in a
    checkpoint's manifest (``kept``, read by block when asked for), then those appended."""

    __slots__ = ("_kept", "_count", "_tail")

    def __init__(self, kept: PartBlob | array[int] | None = None) -> None:
        self._kept: PartBlob | array[int] = array("q") if kept is None else kept
        self._count = len(kept) // _SIZE if isinstance(kept, PartBlob) else len(self._kept)
        self._tail = array("q")

    def __len__(self) -> int:
        return self._count + len(self._tail)

    @overload
    def __getitem__(self, i: int) -> int: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[int]: ...

    def __getitem__(self, i: int | slice) -> int | Sequence[int]:
        if isinstance(i, slice):
            return self.array()[i]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(f"no tx time at {i} ({n} events)")
        if i < 0:
            i += n
        if i >= self._count:
            return self._tail[i - self._count]
        kept = self._kept
        if isinstance(kept, PartBlob):
            return int.from_bytes(kept[i * _SIZE:(i + 1) * _SIZE], "little", signed=True)
        return kept[i]

    def __iter__(self) -> Iterator[int]:
        return iter(self.array())

    def extend(self, times: Iterable[int]) -> None:
        """Append the tx times of the next events."""
        self._tail.extend(times)

    def array(self) -> array[int]:
        """Every tx time in one array (the kept ones read and checked, every block)."""
        kept = self._kept
        if isinstance(kept, PartBlob):
            out = array("q", kept.whole())  # little-endian in the file
            if sys.byteorder == "big":
                out.byteswap()
        else:
            out = array("q", kept)
        out.extend(self._tail)
        return out

    def nbytes(self) -> int:
        """Bytes held in memory (the kept times left in the file not counted)."""
        held = 0 if isinstance(self._kept, PartBlob) else len(self._kept)
        return _SIZE * (held + len(self._tail))
