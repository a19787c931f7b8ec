"""How the checkpoint keeps its columns small: a column that is mostly one value is kept as its
exceptions, an integer column in the narrowest type its values fit, and a column the others
determine is not kept at all but made again at load.

Most integer columns of the fold are mostly one value (a fact that was never superseded,
forgotten or revised holds the sentinel NONE there; an event without a request holds -1); such
a column is stored as the positions and values that differ (:func:`pack`, :func:`unpack`).
Codes into a small table (namespaces, terms) fit in fewer bytes than their column's type.
The times of a fact's creation, supersession and forgetting and of its rows' belief periods are
the tx times of the events that made them, so they are made again from the event columns
(:func:`derive_times`), as is where each fact's index tokens end.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from projections.arrays import NONE, Table, with_room
from projections.part_blob import PartBlob

if TYPE_CHECKING:
    from projections.event_columns import EventColumns
    from projections.fold_state import FactColumns

__all__ = [
    "Compact", "DiskColumn", "NarrowColumn", "Sparse", "SparseColumn", "derive_columns",
    "derive_times", "narrowest", "pack", "unpack", "whole",
]

Sparse = tuple[int, int, str]  # (the column's length, the value it mostly holds, its dtype)
_NARROW = [np.dtype(t) for t in ("i1", "u1", "<i2", "<u2", "<i4", "<u4")]
_MOSTLY = 7 / 8  # the share of one value that makes a column sparse
_MIN = 64  # shorter columns are kept as they are


def pack(arrays: dict[str, npt.NDArray[Any]]) -> tuple[
    dict[str, npt.NDArray[Any]], dict[str, Sparse], dict[str, str]
]:
    """The arrays to store (a sparse column as ``name@at`` and ``name@values``), what each
    sparse column was, and the type of each stored array kept narrower than its own."""
    stored: dict[str, npt.NDArray[Any]] = {}
    sparse: dict[str, Sparse] = {}
    for name, arr in arrays.items():
        fill = _mostly(arr)
        if fill is None:
            stored[name] = arr
            continue
        at = np.flatnonzero(arr != fill)
        stored[f"{name}@at"] = at.astype(np.int64)
        stored[f"{name}@values"] = arr[at]
        sparse[name] = (len(arr), fill, arr.dtype.str)
    widths: dict[str, str] = {}
    for name, arr in stored.items():
        narrow = _narrowest(arr)
        if narrow is not None:
            stored[name] = arr.astype(narrow)
            widths[name] = arr.dtype.str
    return stored, sparse, widths


class Compact:
    """A stored column not yet made whole (sparse, or kept narrower): call it to make it;
    :meth:`item` reads one value without making it. A process that never reads the whole
    column never pays for it."""

    __slots__ = ("length",)

    def __init__(self, length: int) -> None:
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __call__(self) -> npt.NDArray[Any]:
        raise NotImplementedError

    def item(self, i: int) -> Any:
        """The value at ``i`` (``ndarray.item``'s)."""
        raise NotImplementedError


class SparseColumn(Compact):
    """A column that holds ``fill`` but for ``values`` at positions ``at`` (ascending)."""

    __slots__ = ("fill", "dtype", "at", "values")

    def __init__(self, length: int, fill: int, dtype: np.dtype[Any], at: npt.NDArray[Any],
                 values: npt.NDArray[Any]) -> None:
        super().__init__(length)
        self.fill, self.dtype, self.at, self.values = fill, dtype, at, values

    def __call__(self) -> npt.NDArray[Any]:
        arr = with_room(self.length, self.dtype)
        arr[:] = self.fill
        arr[self.at] = self.values
        return arr

    def item(self, i: int) -> Any:
        if not -self.length <= i < self.length:
            raise IndexError(f"index {i} is out of bounds for a column of {self.length}")
        i %= self.length
        at = int(np.searchsorted(self.at, i))
        return self.values.item(at) if at < len(self.at) and self.at.item(at) == i else self.fill


class NarrowColumn(Compact):
    """A column stored in a narrower integer type than its own, ``dtype``."""

    __slots__ = ("stored", "dtype")

    def __init__(self, stored: npt.NDArray[Any], dtype: np.dtype[Any]) -> None:
        super().__init__(len(stored))
        self.stored, self.dtype = stored, dtype

    def __call__(self) -> npt.NDArray[Any]:
        arr = with_room(self.length, self.dtype)
        arr[:] = self.stored
        return arr

    def item(self, i: int) -> Any:
        return self.stored.item(i)


class DiskColumn(Compact):
    """A column left in its checkpoint part (read by block, each block checked: PartBlob),
    stored as ``stored``, its own type ``dtype``."""

    __slots__ = ("blob", "stored", "dtype")

    def __init__(self, blob: PartBlob, stored: np.dtype[Any], dtype: np.dtype[Any]) -> None:
        super().__init__(len(blob) // stored.itemsize)
        self.blob, self.stored, self.dtype = blob, stored, dtype

    def __call__(self) -> npt.NDArray[Any]:
        arr = with_room(self.length, self.dtype)
        arr[:] = np.frombuffer(self.blob.whole(), dtype=self.stored)
        return arr

    def item(self, i: int) -> Any:
        size = self.stored.itemsize
        i = range(self.length)[i]
        return np.frombuffer(self.blob[i * size:(i + 1) * size], dtype=self.stored).item(0)

    def run(self, start: int, end: int) -> npt.NDArray[Any] | None:
        """Entries ``start .. end``, read from the blocks they lie in (None if out of range)."""
        if not 0 <= start <= end <= self.length:
            return None
        size = self.stored.itemsize
        values = np.frombuffer(self.blob[start * size:end * size], dtype=self.stored)
        return values.astype(self.dtype)


def whole(column: npt.NDArray[Any] | Compact) -> npt.NDArray[Any]:
    """The column itself, made whole if it is :class:`Compact`."""
    return column() if isinstance(column, Compact) else column


def narrowest(column: npt.NDArray[Any] | Compact) -> npt.NDArray[Any]:
    """The column's values as an array in the narrowest type they are kept in: a narrow
    column's stored array (no copy), else :func:`whole`."""
    return column.stored if isinstance(column, NarrowColumn) else whole(column)


def unpack(
    stored: dict[str, Any], sparse: dict[str, Sparse], widths: dict[str, str]
) -> dict[str, Any]:
    """The arrays :func:`pack` was given, those it changed as :class:`Compact` (checked here,
    made when asked for)."""
    out = {name: NarrowColumn(arr, np.dtype(widths[name])) if name in widths else arr
           for name, arr in stored.items() if "@" not in name}
    for name, (length, fill, dtype) in sparse.items():
        at, values = stored[f"{name}@at"], stored[f"{name}@values"]
        if len(at) != len(values) or (len(at) and (
            int(at.min()) < 0 or int(at.max()) >= length or not bool((np.diff(at) > 0).all())
        )):
            raise ValueError(f"the exceptions of {name} fall outside it")
        out[name] = SparseColumn(length, fill, np.dtype(dtype), at, values)
    return out


def _narrowest(arr: npt.NDArray[Any]) -> np.dtype[Any] | None:
    """A narrower integer type that holds every value of ``arr``, None if there is none."""
    if arr.dtype.kind not in "iu" or not len(arr) or arr.dtype.itemsize == 1:
        return None
    low, high = int(arr.min()), int(arr.max())
    for dtype in _NARROW:
        if dtype.itemsize >= arr.dtype.itemsize:
            return None
        info = np.iinfo(dtype)
        if info.min <= low and high <= info.max:
            return dtype
    return None


def _mostly(arr: npt.NDArray[Any]) -> int | None:
    """The value at least 7/8 of an integer column holds, None if none does (or it is short)."""
    if len(arr) < _MIN or arr.dtype.kind not in "iu":
        return None
    info = np.iinfo(arr.dtype)
    for candidate in dict.fromkeys((int(arr[0]), -1, 0, NONE)):
        if info.min <= candidate <= info.max and (
            np.count_nonzero(arr == candidate) >= _MOSTLY * len(arr)
        ):
            return candidate
    return None


def derive_times(
    tx: npt.NDArray[np.int64], event_seqs: npt.NDArray[np.int64], seqs: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """The tx time of each event ``seqs`` names (NONE where it names none), from the event
    rows' tx times ``tx`` and seqs ``event_seqs`` (increasing)."""
    out = with_room(len(seqs), np.int64)
    out[:] = NONE
    known = seqs != NONE
    if known.any():
        wanted = seqs[known]
        n = len(event_seqs)
        if n and int(event_seqs[-1]) == n:  # every seq from 1: row = seq - 1
            at = wanted - 1
            if int(at.min()) < 0 or int(at.max()) >= n:
                raise ValueError("a seq the state names is not among its events")
        else:
            at = np.searchsorted(event_seqs, wanted)
            if int(at.max()) >= n or not np.array_equal(event_seqs[at], wanted):
                raise ValueError("a seq the state names is not among its events")
        out[known] = tx[at]
    return out


def derive_columns(facts: FactColumns, events: EventColumns) -> None:
    """Set the columns a checkpoint does not keep: the times, from each event's tx time; where
    each fact's index tokens end. ValueError if the columns kept do not fit together."""
    tx, seqs = events.column("tx"), events.column("seq")
    if len(seqs) > 1 and not bool((seqs[1:] > seqs[:-1]).all()):
        raise ValueError("the event rows are not in seq order")
    f, r = facts.table, facts.rows
    for table, name, seq_column in ((f, "created_at", "ids"), (f, "superseded_at", "superseded_by"),
                                    (f, "forgotten_at", "forgotten_seq"),
                                    (r, "tx_from", "tx_from_seq"), (r, "tx_to", "tx_to_seq")):
        _set_times(table, name, seq_column, tx, seqs)
    ids = f.ids[: f.n]
    if len(ids) and (int(ids[0]) < 1 or int(ids[-1]) > facts.last_seq
                     or not bool((ids[1:] > ids[:-1]).all())):
        raise ValueError("the facts' ids are not increasing seqs of the part's")
    ends = with_room(f.n, np.int64)
    ends[facts.tokened:] = 0
    np.cumsum(f.doc_len[: facts.tokened], out=ends[: facts.tokened])
    f.tokens_end = ends
    if facts.tokened and int(ends[facts.tokened - 1]) != facts.tokens.n:
        raise ValueError("the facts' token counts do not add up to their tokens")


def _set_times(table: Table, name: str, seq_column: str, tx: npt.NDArray[np.int64],
               seqs: npt.NDArray[np.int64]) -> None:
    """Column ``name``: the tx times of the events ``seq_column`` names. From a sparse column
    of mostly NONE (a fact seldom superseded), a sparse column too: its few times are made
    (and checked) now, the whole column when it is first read."""
    made = table.peek(seq_column)
    if isinstance(made, SparseColumn) and made.fill == NONE:
        times = derive_times(tx, seqs, made.values.astype(np.int64))
        table.defer(name, SparseColumn(len(made), NONE, np.dtype(np.int64), made.at, times))
    else:
        setattr(table, name, derive_times(tx, seqs, getattr(table, seq_column)))
