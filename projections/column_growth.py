"""How the fold's columns grow (projections/arrays.py): room added by :func:`grown`, room kept
behind a loaded column (:func:`with_room`) that it grows into without a copy, and the entries
appended to a column not made yet (:class:`PendingColumn`), so that a reader folding a few
facts after a checkpoint part neither copies nor makes the columns it appends to."""

from __future__ import annotations

import weakref
from typing import Any, TypeVar

import numpy as np
import numpy.typing as npt

__all__ = ["PendingColumn", "appended_bytes", "grown", "with_room"]

A = TypeVar("A", bound=npt.NDArray[Any])

_GROW_BY_EIGHTHS = 1 << 16  # from this many entries grown() adds an eighth, not a double


def grown(arr: A, need: int, fill: int | float = 0) -> A:
    """``arr`` with room for at least ``need`` entries, new entries ``fill``: doubling while
    small, then an eighth more (a reader folding one fact after a 1M-fact checkpoint part held
    every fold column at twice its size: 555 MiB of the 1,248 MiB it peaked at). An array
    made by :func:`with_room` grows into its room without a copy, once."""
    if need <= len(arr):
        return arr
    into = _room_behind(arr, need)
    if into is not None:
        into[len(arr):] = fill
        return into  # type: ignore[return-value]
    out = np.full(_room(len(arr), need), fill, dtype=arr.dtype)
    out[: len(arr)] = arr
    return out  # type: ignore[return-value]


# room left behind arrays by with_room: id of the allocation -> (it, weakly; the length handed
# out). Only that length's prefix may grow into it, and only once: no other view can hold an
# entry past it, so filling the room overwrites nothing anyone reads.
_BEHIND: dict[int, tuple[weakref.ref[npt.NDArray[Any]], int]] = {}


def with_room(length: int, dtype: npt.DTypeLike) -> npt.NDArray[Any]:
    """An uninitialised array of ``length`` entries that :func:`grown` can extend in place by
    as much as it would add: a column loaded from a checkpoint part, which a reader that folds
    a tail grows by a few entries (untouched room is address space, not memory)."""
    room = _room(length, length + 1)
    if room <= length or length < _GROW_BY_EIGHTHS:
        return np.empty(length, dtype=dtype)
    whole = np.empty(room, dtype=dtype)
    key = id(whole)
    _BEHIND[key] = (weakref.ref(whole, lambda _: _BEHIND.pop(key, None)), length)
    return whole[:length]


def _room_behind(arr: npt.NDArray[Any], need: int) -> npt.NDArray[Any] | None:
    """All of the allocation behind ``arr`` if ``arr`` is the prefix :func:`with_room` handed
    out and the allocation holds ``need`` entries; it is then no longer room to grow into."""
    whole = arr.base
    if whole is None or not isinstance(whole, np.ndarray):
        return None
    entry = _BEHIND.get(id(whole))
    if entry is None or entry[0]() is not whole or entry[1] != len(arr):
        return None
    if need > len(whole) or arr.dtype != whole.dtype or arr.ctypes.data != whole.ctypes.data or (
        arr.strides != whole.strides
    ):
        return None
    del _BEHIND[id(whole)]
    return whole


def _room(length: int, need: int) -> int:
    """The entries :func:`grown` makes room for (``need`` > ``length``)."""
    more = length // 8 if length >= _GROW_BY_EIGHTHS else length
    return max(need, length + more, 16)


class PendingColumn:
    """A deferred column (one with ``item``: projections/compact_columns.py) that was given room
    and entries past its end before it was made: made, it is ``make()`` grown to ``length``
    with the entries after it, as if it had been made first; meanwhile its values read one at
    a time (a reader folding a few facts after a checkpoint part does not make every column
    whole). The entries after ``make`` are one array, ``tail`` (appends come in order)."""

    __slots__ = ("make", "length", "fill", "dtype", "tail", "written")

    def __init__(self, make: Any, fill: int | float, dtype: str) -> None:
        self.make, self.fill, self.dtype = make, fill, np.dtype(dtype)
        self.length = len(make)
        self.tail: npt.NDArray[Any] = np.full(0, fill, dtype=dtype)  # entries len(make) ..
        self.written = 0  # of ``tail``'s entries, how many hold values or lie before one

    def __len__(self) -> int:
        return self.length

    def grow(self, need: int) -> None:
        """Room for ``need`` entries, as :func:`grown` would make it."""
        if need > self.length:
            self.length = _room(self.length, need)

    def write(self, start: int, values: Any, count: int) -> bool:
        """Entries ``start .. start + count`` set to ``values`` (``column[...] = values``: the
        same casts, broadcasts and errors); False, writing nothing, if they are not past
        ``make``'s end (write them to the column made)."""
        first = start - len(self.make)
        if first < 0:
            return False
        if start + count > self.length:
            raise IndexError(f"entries up to {start + count} of a column of {self.length}")
        self.tail = grown(self.tail, first + count, self.fill)
        self.tail[first:first + count] = values
        self.written = max(self.written, first + count)
        return True

    def __call__(self) -> npt.NDArray[Any]:
        base = self.make()
        at = len(base)
        out: npt.NDArray[Any] = grown(base, self.length, self.fill)
        out[at:at + self.written] = self.tail[: self.written]
        return out

    def item(self, i: int) -> Any:
        if not -self.length <= i < self.length:
            raise IndexError(f"index {i} is out of bounds for a column of {self.length}")
        if i < 0:
            i += self.length
        past = i - len(self.make)
        if past < 0:
            return self.make.item(i)
        return self.tail.item(past) if past < self.written else self.dtype.type(self.fill).item()

    def run(self, start: int, end: int) -> npt.NDArray[Any] | None:
        """Entries ``start .. end`` if they are all past ``make``'s end, or all before it and
        ``make`` reads runs (a column left in its part); else None."""
        past = start - len(self.make)
        if past < 0:
            read = getattr(self.make, "run", None)
            return read(start, end) if read is not None and end <= len(self.make) else None
        if end > self.length:
            return None
        if end - len(self.make) > self.written:
            out = np.full(end - start, self.fill, dtype=self.dtype)
            held = self.tail[past:self.written]
            out[: len(held)] = held
            return out
        return self.tail[past:end - len(self.make)]


def appended_bytes(make: Any) -> int:
    """Bytes a deferred column holds in memory: its appended entries, if any."""
    return int(make.tail.nbytes) if isinstance(make, PendingColumn) else 0
