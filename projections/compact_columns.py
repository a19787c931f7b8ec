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

from typing import Any

import numpy as np
import numpy.typing as npt

from projections.arrays import NONE

__all__ = ["Sparse", "derive_times", "pack", "unpack"]

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


def unpack(
    stored: dict[str, Any], sparse: dict[str, Sparse], widths: dict[str, str]
) -> dict[str, Any]:
    """The arrays :func:`pack` was given."""
    stored = {name: arr.astype(np.dtype(widths[name])) if name in widths else arr
              for name, arr in stored.items()}
    out = {name: arr for name, arr in stored.items() if "@" not in name}
    for name, (length, fill, dtype) in sparse.items():
        arr = np.full(length, fill, dtype=np.dtype(dtype))
        at = stored[f"{name}@at"]
        if len(at) and (int(at.min()) < 0 or int(at.max()) >= length):
            raise ValueError(f"the exceptions of {name} fall outside it")
        arr[at] = stored[f"{name}@values"]
        out[name] = arr
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
    out = np.full(len(seqs), NONE, dtype=np.int64)
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
