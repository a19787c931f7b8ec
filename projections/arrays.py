"""Storage of the columnar fold (projections/fold_state.py): growable numpy columns and the
fact and version-row tables (its strings: projections/string_columns.py).

* A fact has a dense *slot* (0, 1, 2, ... in order of creation, so in order of id); every fact
  column is a numpy array indexed by slot, over-allocated and grown by :func:`grown` (the first
  ``n`` entries are the facts). Fact ids are seqs, so the ids column is increasing and a fact's slot
  is found by a binary search of it (no map of one entry per event: a state may hold only some
  namespaces' facts of a long log).
* Optional integers (times, seqs) use :data:`NONE` (the largest int64) for None, so "open" and
  "not yet" compare as +infinity: ``seq < tx_to_seq`` and ``superseded_by > seq`` work as they
  are. Optional strings are codes into a string table (projections/string_columns.py), -1 for
  None.
* Version rows are a second table in order of creation; ``first_row[slot]`` is a fact's first
  row, ``row_next[row]`` the fact's next one (-1: none) and ``last_row[slot]`` its last, which is
  the open row if it has one. A fact has one or two rows (two after a world change).
* Ragged per-fact lists (entities, derived_from, index tokens): one flat values column and
  ``end[slot]``, the end of the fact's run (it starts at the previous slot's end).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from projections.column_growth import PendingColumn, appended_bytes, grown, with_room

__all__ = [
    "NONE", "Deferred", "Items", "Ragged", "Table", "FactTable", "RowTable", "grown",
    "in_sorted", "narrow_counts", "run_positions", "with_room",
]

NONE = int(np.iinfo(np.int64).max)  # None / open / never, for int64 columns

Array = npt.NDArray[Any]
A = TypeVar("A", bound=npt.NDArray[Any])


def in_sorted(values: np.ndarray, wanted: np.ndarray) -> npt.NDArray[np.bool_]:
    """Whether each of ``wanted`` (any shape) is one of ``values`` (ascending): a binary search
    each, where ``np.isin`` would sort both (``values`` may be a whole namespace long)."""
    wanted = np.asarray(wanted)
    if not len(values):
        return np.zeros(wanted.shape, dtype=bool)
    at = np.minimum(np.searchsorted(values, wanted), len(values) - 1)
    found: npt.NDArray[np.bool_] = values[at] == wanted
    return found


def as_bytes(arr: npt.ArrayLike, dtype: npt.DTypeLike | None = None) -> memoryview:
    """The bytes of ``arr`` as ``dtype`` (its own if None), for ``array.frombytes`` and files:
    a view when it already is that type and contiguous, one conversion when not."""
    return np.ascontiguousarray(arr, dtype=dtype).data.cast("B")


def array_of(typecode: str, arr: npt.ArrayLike, dtype: npt.DTypeLike) -> array[Any]:
    """A Python ``array`` of ``typecode`` holding ``arr``'s values as ``dtype`` (its items)."""
    out = array(typecode)
    out.frombytes(as_bytes(arr, dtype))
    return out


def distinct(values: npt.ArrayLike) -> npt.NDArray[Any]:
    """The distinct values, sorted: ``np.unique(values)`` of integers, without the import of
    numpy.ma its first call makes (numpy 2.4 asks ``np.ma.is_masked``: 11-22 ms of a fresh
    process's first recall)."""
    arr = np.sort(np.asarray(values).ravel())
    return arr[run_starts(arr)]


def run_starts(values: npt.NDArray[Any]) -> npt.NDArray[np.intp]:
    """Where each run of equal values starts (the first value's place included)."""
    change = np.empty(len(values), dtype=bool)
    change[:1] = True
    np.not_equal(values[1:], values[:-1], out=change[1:])
    return np.flatnonzero(change)


def run_positions(
    starts: npt.NDArray[np.int64], lengths: npt.NDArray[np.int64]
) -> npt.NDArray[np.int64]:
    """Every place of runs ``starts[i] .. starts[i] + lengths[i]``, run after run, in one pass."""
    # a run's k-th place is start + k: (start - where the run lands) + its place out
    places = np.repeat(starts - (np.cumsum(lengths) - lengths), lengths)
    places += np.arange(len(places))
    return places


def code_major(codes: npt.NDArray[Any], lengths: npt.NDArray[np.int64]) -> tuple[
    npt.NDArray[np.int64], int
]:
    """The runs ``codes`` (document i's run is ``lengths[i]`` long) as one int64 key per item,
    ``code * width + document``, sorted: by code, documents ascending within a code; and the
    width: a key's code is ``key // width``, its document ``key % width``."""
    width = max(len(lengths), 1)
    key = np.multiply(codes, width, dtype=np.int64)
    key += np.repeat(np.arange(len(lengths), dtype=np.int64), lengths)
    key.sort()
    return key, width


class Items(Protocol):
    """What reads one value at a time (an array, or a column not made whole)."""

    def item(self, i: int, /) -> Any: ...


class Deferred:
    """Attributes made when first read: a loader sets a column it has not made yet with
    :meth:`defer` (a checkpoint part's sparse or narrow column), and its first read makes it,
    once (a second thread reading it meanwhile gets the first one's)."""

    def defer(self, name: str, make: Callable[[], Any]) -> None:
        """Make attribute ``name`` by calling ``make`` when it is first read."""
        self.__dict__.pop(name, None)
        self.__dict__.setdefault("_later", {})[name] = make

    def deferred(self) -> list[str]:
        """The attributes not made yet."""
        made = self.__dict__
        return [name for name in made.get("_later", ()) if name not in made]

    def make_deferred(self) -> None:
        """Make every deferred attribute (before a change that they must precede)."""
        for name in self.deferred():
            getattr(self, name)

    def reader(self) -> Callable[[str], Items]:
        """:meth:`peek` while a column is deferred; once every one is made, plain attribute
        reads (a fact read one at a time reads ~30 columns: the check per read is its cost)."""
        if self.__dict__.get("_later"):
            return self.peek
        return partial(getattr, self)

    def peek(self, name: str) -> Items:
        """Column ``name`` to read a few values of with ``item``: while it is deferred, what it
        will be made from when that answers ``item`` itself (a sparse column does)."""
        make = self._later_item(name)
        return make if make is not None else getattr(self, name)  # type: ignore[no-any-return]

    def span(self, name: str, start: int, end: int) -> npt.NDArray[Any]:
        """Entries ``start .. end`` of column ``name``, read without making it while it is
        deferred and its maker reads runs (the facts a reader folded after a part)."""
        read = getattr(self._later_item(name), "run", None)
        got = None if read is None else read(start, end)
        if got is None:
            got = getattr(self, name)[start:end]
        return np.asarray(got)

    def _later_item(self, name: str) -> Any:
        """The maker of attribute ``name`` if it is deferred and reads one value at a time."""
        if name in self.__dict__:
            return None
        make = (self.__dict__.get("_later") or {}).get(name)
        return make if callable(make) and hasattr(make, "item") else None

    def _pending(self, name: str, dtype: str, fill: int | float) -> PendingColumn | None:
        """Attribute ``name`` as a :class:`PendingColumn` if it is deferred and reads values one at
        a time (made one if it is not yet); None if it is made."""
        make = self._later_item(name)
        if make is None or isinstance(make, PendingColumn):
            return make
        pending = self.__dict__["_later"][name] = PendingColumn(make, fill, dtype)
        return pending

    if not TYPE_CHECKING:  # to the type checker every attribute is declared

        def __getattr__(self, name):
            later = self.__dict__.get("_later")
            make = later.get(name) if later else None
            if make is None:
                if name in self.__dict__:  # made meanwhile by another thread
                    return self.__dict__[name]
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            value = self.__dict__.setdefault(name, make())
            later.pop(name, None)
            return value


class Table(Deferred):
    """Columns of one table: numpy arrays of a common capacity, ``n`` entries in use."""

    COLUMNS: dict[str, tuple[str, int | float]] = {}  # name -> (dtype, fill of unused room)

    def __init__(self) -> None:
        self.n = 0
        for name, (dtype, fill) in self.COLUMNS.items():
            setattr(self, name, np.full(0, fill, dtype=dtype))

    def reserve(self, need: int) -> None:
        """Room for ``need`` entries in every column (a deferred one that reads values one at a
        time stays deferred: :class:`PendingColumn`)."""
        first = next(iter(self.COLUMNS))
        if need <= len(getattr(self, first)):  # every column has the same room
            return
        for name, (dtype, fill) in self.COLUMNS.items():
            pending = self._pending(name, dtype, fill)
            if pending is not None:
                pending.grow(need)
            else:
                setattr(self, name, grown(getattr(self, name), need, fill))

    def extend(self, columns: dict[str, Array | Sequence[int]]) -> int:
        """Append entries given as whole columns (missing columns keep their fill); returns the
        index of the first."""
        start = self.n
        count = len(next(iter(columns.values())))
        self.reserve(start + count)
        for name, values in columns.items():
            pending = self._later_item(name)
            if not (isinstance(pending, PendingColumn) and pending.write(start, values, count)):
                getattr(self, name)[start:start + count] = values
        self.n = start + count
        return start

    def nbytes(self) -> int:
        """Bytes of the columns made, and of what was appended to those not made yet (a
        deferred one is not made to be counted)."""
        later = self.deferred()
        made: int = sum(getattr(self, name)[: self.n].nbytes for name in self.COLUMNS
                        if name not in later)
        return made + sum(appended_bytes(self._later_item(name)) for name in later)


class RowTable(Table):
    """Version rows: ``[valid_from, valid_to) x [tx_from_seq, tx_to_seq)`` of fact ``slot``."""

    COLUMNS = {
        "slot": ("int32", -1),
        "valid_from": ("int64", 0),
        "valid_to": ("int64", NONE),
        "tx_from_seq": ("int64", 0),
        "tx_from": ("int64", 0),
        "tx_to_seq": ("int64", NONE),
        "tx_to": ("int64", NONE),
        "next": ("int32", -1),
    }
    slot: npt.NDArray[np.int32]
    valid_from: npt.NDArray[np.int64]
    valid_to: npt.NDArray[np.int64]
    tx_from_seq: npt.NDArray[np.int64]
    tx_from: npt.NDArray[np.int64]
    tx_to_seq: npt.NDArray[np.int64]
    tx_to: npt.NDArray[np.int64]
    next: npt.NDArray[np.int32]


class FactTable(Table):
    """One entry per fact, by slot. String columns are codes (see :class:`FactColumns`)."""

    COLUMNS = {
        "ids": ("int64", 0),
        "namespace": ("int32", -1),
        "subject": ("int32", -1),
        "confidence": ("float64", 0.0),
        "source_agent": ("int32", -1),
        "source_ref": ("int32", -1),
        "created_at": ("int64", 0),
        "supersedes": ("int64", NONE),
        "revision": ("int8", 0),  # 0 none, 1 world, 2 correction
        "reason": ("int32", -1),
        "superseded_by": ("int64", NONE),
        "superseded_at": ("int64", NONE),
        "forgotten_seq": ("int64", NONE),
        "forgotten_at": ("int64", NONE),
        "forget_reason": ("int32", -1),
        "doc_len": ("int32", 0),
        "entities_end": ("int64", 0),
        "derived_end": ("int64", 0),
        "tokens_end": ("int64", 0),
        "extractor": ("int32", -1),
        "prompt_version": ("int32", -1),
        "category": ("int32", -1),
        "importance": ("int8", 0),  # 0 None, 1..127 the value, -1 see FactColumns.odd
        "first_row": ("int32", -1),
        "last_row": ("int32", -1),
    }
    ids: npt.NDArray[np.int64]
    namespace: npt.NDArray[np.int32]
    subject: npt.NDArray[np.int32]
    confidence: npt.NDArray[np.float64]
    source_agent: npt.NDArray[np.int32]
    source_ref: npt.NDArray[np.int32]
    created_at: npt.NDArray[np.int64]
    supersedes: npt.NDArray[np.int64]
    revision: npt.NDArray[np.int8]
    reason: npt.NDArray[np.int32]
    superseded_by: npt.NDArray[np.int64]
    superseded_at: npt.NDArray[np.int64]
    forgotten_seq: npt.NDArray[np.int64]
    forgotten_at: npt.NDArray[np.int64]
    forget_reason: npt.NDArray[np.int32]
    doc_len: npt.NDArray[np.int32]
    entities_end: npt.NDArray[np.int64]
    derived_end: npt.NDArray[np.int64]
    tokens_end: npt.NDArray[np.int64]
    extractor: npt.NDArray[np.int32]
    prompt_version: npt.NDArray[np.int32]
    category: npt.NDArray[np.int32]
    importance: npt.NDArray[np.int8]
    first_row: npt.NDArray[np.int32]
    last_row: npt.NDArray[np.int32]


class Ragged(Deferred):
    """Per-fact lists as one flat column: fact ``slot``'s run is ``values[end[slot-1]:end[slot]]``
    (``end`` is a column of the fact table); ``values`` may be deferred (made when first read)."""

    def __init__(self, dtype: str) -> None:
        self.values: Array = np.zeros(0, dtype=dtype)
        self.dtype = dtype
        self.n = 0

    def append(self, items: Sequence[int]) -> int:
        """Append one run; returns its end."""
        if items:
            self.extend(items)
        return self.n

    def extend(self, flat: Array | Sequence[int]) -> None:
        """Append values (runs back to back); values loaded from a part and not read yet stay
        unread (:class:`PendingColumn`)."""
        end = self.n + len(flat)
        pending = self._pending("values", self.dtype, 0)
        if pending is not None:
            pending.grow(end)
            if pending.write(self.n, flat, len(flat)):
                self.n = end
                return
        self.values = grown(self.values, end)
        self.values[self.n:end] = flat
        self.n = end

    def gather(
        self, ends: npt.NDArray[np.int64], slots: npt.NDArray[Any]
    ) -> tuple[Array, npt.NDArray[np.int64]]:
        """(the runs of ``slots`` one after another, each run's length). For slots that are
        one stretch (a whole space's, the usual caller) the runs are a view of the values:
        read it, do not change it."""
        stop = ends[slots]
        if _one_stretch(slots):
            first = int(ends[slots[0] - 1]) if slots[0] > 0 else 0
            lengths = np.diff(stop, prepend=first)
            return self.values[first:first + int(lengths.sum())], lengths
        start = np.where(slots > 0, ends[np.maximum(slots - 1, 0)], 0)
        lengths = stop - start
        return self.values[run_positions(start, lengths)], lengths

    def runs(self, ends: npt.NDArray[np.int64], slots: npt.NDArray[Any]) -> list[list[Any]]:
        """The runs of many slots (as :meth:`run` of each), gathered at once."""
        if not len(slots):
            return []
        flat, lengths = self.gather(ends, slots)
        items, bounds = flat.tolist(), np.cumsum(lengths).tolist()
        return [items[a:b] for a, b in zip([0, *bounds[:-1]], bounds, strict=True)]

    def nbytes(self) -> int:
        """Bytes of the values in memory (while they are deferred, of those appended)."""
        if self.deferred():
            return appended_bytes(self._later_item("values"))
        return self.values[: self.n].nbytes

    def run(self, ends: Items, slot: int) -> list[int]:
        start, end = ends.item(slot - 1) if slot else 0, ends.item(slot)
        pending = self._later_item("values")  # not made: its runs read without making it
        read = getattr(pending, "run", None)
        tail = read(start, end) if read is not None else None
        values = self.values[start:end] if tail is None else tail
        return values.tolist()  # type: ignore[no-any-return]


def _one_stretch(slots: npt.NDArray[Any]) -> bool:
    """Whether ``slots`` are ``k, k + 1, ..., k + m`` (at least one)."""
    if not len(slots):
        return False
    first, last = int(slots[0]), int(slots[-1])
    return last - first == len(slots) - 1 and bool((np.diff(slots) == 1).all())


def narrow_counts(counts: npt.NDArray[Any]) -> npt.NDArray[np.unsignedinteger[Any]]:
    """Term frequencies (counts, each at least 1) in the narrowest unsigned type that holds them:
    nearly all are 1, so a million facts' ~16M postings take 16 MB, not 64."""
    top = int(counts.max()) if len(counts) else 0
    dtype = np.uint8 if top <= 0xFF else np.uint16 if top <= 0xFFFF else np.uint32
    return counts.astype(dtype, copy=counts.dtype != dtype)
