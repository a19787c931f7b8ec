"""Every event's tx time, by seq: what time travel turns a time into a seq of the log with.

The checkpoint's manifest holds the tx time of every event up to its seq (8 bytes an event); a
process that opens from it keeps them in the file, digested by block (projections/part_blob.py),
and reads the blocks a lookup needs, each checked, when one is asked for: a process that never
travels in time by a time (most never do) holds none of them and reads none (it held 8 MB at 1M
events and read and hashed them at open; 80 MB at 10M, whatever namespace it serves). A block
that fails its digest is never believed: with ``recover`` (the log's times of a run of seqs)
its times are read from the log, else :class:`DamagedProjection` says so. The times of the
events folded after the checkpoint are kept in memory. :func:`open_tx_file` opens the file the
manifest names (the checkpoint's writer writes it: projections/checkpoint.py), and
:func:`fetched_tx_file` does when time travel first asks, fetching it first if it is not here.
"""

from __future__ import annotations

import os
import sys
from array import array
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import overload

from projections.checkpoint_part import Refused
from projections.errors import DamagedProjection
from projections.part_blob import BLOCK, PartBlob, stream_digests

__all__ = ["TxTimes", "fetched_tx_file", "open_tx_file"]

_SIZE = 8  # bytes of one tx time (int64, little-endian, microseconds)
_PER_BLOCK = BLOCK // _SIZE  # tx times in one checked block

Recover = Callable[[int, int], Sequence[int]]  # (start, stop) -> the times at [start, stop)
Opener = Callable[[], PartBlob]  # the kept times' file, opened (DamagedProjection: it cannot be)


class TxTimes(Sequence[int]):
    """Event tx times in microseconds, seq ``i + 1`` at ``[i]``: the first ones kept in a
    checkpoint's file (``kept``, or ``count`` of them that ``opener`` opens when one is first
    asked for; read by block), then those appended. ``recover``, when set, gives the times of
    a kept block that fails its digest, or of every kept block when their file cannot be opened
    (from the log); they are kept in memory from then on."""

    __slots__ = ("_kept", "_count", "_tail", "recover", "_recovered", "_opener")

    def __init__(self, kept: PartBlob | array[int] | None = None, *,
                 opener: Opener | None = None, count: int = 0) -> None:
        self._kept: PartBlob | array[int] = array("q") if kept is None else kept
        self._count = len(kept) // _SIZE if isinstance(kept, PartBlob) else len(self._kept)
        self._opener = opener
        if opener is not None:
            self._count = count
        self._tail = array("q")
        self.recover: Recover | None = None
        self._recovered: dict[int, array[int]] = {}  # block -> its times, read from the log

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
        if self._by_block():
            return self._kept_block(i // _PER_BLOCK)[i % _PER_BLOCK]
        kept = self._kept
        assert not isinstance(kept, PartBlob)
        return kept[i]

    def _by_block(self) -> bool:
        """Whether the kept times are read by block (from their file, or the log's blocks)."""
        kept = self._kept
        return self._opener is not None or isinstance(kept, PartBlob) or len(kept) < self._count

    def _blob(self) -> PartBlob | None:
        """The kept times' file, opened when first asked for (None: it cannot be, and
        ``recover`` reads every kept block from the log)."""
        if self._opener is not None:
            opener, self._opener = self._opener, None
            try:
                self._kept = opener()
            except DamagedProjection:
                if self.recover is None:
                    self._opener = opener
                    raise
                self._kept = array("q")
        return self._kept if isinstance(self._kept, PartBlob) else None

    def _kept_block(self, block: int) -> array[int]:
        """The times of one block kept in the file: read and checked, or, when it fails its
        digest and ``recover`` is set, read from the log (and kept)."""
        recovered = self._recovered.get(block)
        if recovered is not None:
            return recovered
        at = block * BLOCK
        try:
            blob = self._blob()
            if blob is None:
                raise DamagedProjection("the checkpoint's tx times cannot be opened")
            out = array("q", blob[at:at + BLOCK])
        except DamagedProjection:
            if self.recover is None:
                raise
            start = block * _PER_BLOCK
            out = array("q", self.recover(start, min(start + _PER_BLOCK, self._count)))
            self._recovered[block] = out
            return out
        if sys.byteorder == "big":
            out.byteswap()
        return out

    def __iter__(self) -> Iterator[int]:
        return iter(self.array())

    def extend(self, times: Iterable[int]) -> None:
        """Append the tx times of the next events."""
        self._tail.extend(times)

    def array(self) -> array[int]:
        """Every tx time in one array (the kept ones read and checked, every block)."""
        kept = self._kept
        if self._by_block():
            if self.recover is None:
                blob = self._blob()
                assert blob is not None  # without recover, an opener that fails raises
                out = array("q", blob.whole())  # little-endian in the file
                if sys.byteorder == "big":
                    out.byteswap()
            else:  # block by block: a damaged one's times come from the log
                out = array("q")
                for block in range(-(-self._count // _PER_BLOCK)):
                    out.extend(self._kept_block(block))
        else:
            assert not isinstance(kept, PartBlob)
            out = array("q", kept)
        out.extend(self._tail)
        return out

    def nbytes(self) -> int:
        """Bytes held in memory (the kept times left in the file not counted)."""
        held = 0 if isinstance(self._kept, PartBlob) else len(self._kept)
        held += sum(len(times) for times in self._recovered.values())
        return _SIZE * (held + len(self._tail))


def open_tx_file(file: Path, count: int, blocks: bytes, *, check: bool) -> PartBlob:
    """The checkpoint's file of ``count`` tx times, open (read by block when asked, each block
    checked against ``blocks`` then); with ``check``, also checked whole now by streaming it
    (what an open that reads every part does). :class:`Refused` when it is not the one the
    manifest names."""
    length = _SIZE * count
    try:
        fd = os.open(file, os.O_RDONLY)
    except OSError as e:
        raise Refused(f"its tx times cannot be read ({type(e).__name__}: {e})") from None
    try:
        if os.fstat(fd).st_size != length:
            raise Refused("it is damaged (its tx times are cut short or run on)")
        if check:
            with os.fdopen(os.dup(fd), "rb") as f:
                if stream_digests(f, 0, length) != blocks:
                    raise Refused("it is damaged (its tx times fail their digest)")
        return PartBlob(fd, 0, length, blocks, what="the checkpoint's tx times")
    except BaseException:
        os.close(fd)
        raise


def fetched_tx_file(directory: Path, name: str, count: int, blocks: bytes,
                    fetch: Callable[[str], None] | None) -> PartBlob:
    """:func:`open_tx_file` when time travel first asks, fetched first (``fetch(name)``) if it is
    not here; :class:`DamagedProjection` when it cannot be used."""
    file = directory / name
    try:
        if fetch is not None and not file.exists():
            fetch(name)
        return open_tx_file(file, count, blocks, check=False)
    except (Refused, OSError) as e:
        raise DamagedProjection(f"the checkpoint's tx times cannot be used ({e})") from None
