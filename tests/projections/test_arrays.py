"""The fold's array types: a ragged column's runs gathered at once equal each slot's run read
alone, whether the slots are one stretch (read as a view) or any others, and runs appended
after values loaded from a part read alike without making them; an array with room grows into
it only from its own length; a string table filled from UTF-8 bytes reads back every string,
ASCII (cut from one decoded text) or not."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.arrays import Ragged, distinct, grown, with_room
from projections.compact_columns import NarrowColumn
from projections.string_columns import Strings
from tests.conftest import examples


def _column(runs: list[list[int]]) -> tuple[Ragged, np.ndarray]:
    ragged = Ragged("int32")
    ends = np.array([ragged.append(run) for run in runs], dtype=np.int64)
    return ragged, ends


@settings(max_examples=examples(dev=200, ci=1000))
@given(runs=st.lists(st.lists(st.integers(0, 9), max_size=4), min_size=1, max_size=12),
       data=st.data())
def test_gathered_runs_are_each_slots_run(runs, data):
    ragged, ends = _column(runs)
    n = len(runs)
    start = data.draw(st.integers(0, n - 1))
    stretch = np.arange(start, data.draw(st.integers(start, n)), dtype=np.intp)
    scattered = np.array(data.draw(st.lists(st.integers(0, n - 1), max_size=8)), dtype=np.intp)
    for slots in (stretch, scattered, np.arange(n, dtype=np.intp)):
        flat, lengths = ragged.gather(ends, slots)
        assert lengths.tolist() == [len(runs[s]) for s in slots.tolist()]
        assert flat.tolist() == [v for s in slots.tolist() for v in runs[s]]
        assert flat.tolist() == [v for s in slots.tolist() for v in ragged.run(ends, s)]


@settings(max_examples=examples(dev=200, ci=1000))
@given(runs=st.lists(st.lists(st.integers(0, 200), max_size=4), min_size=1, max_size=12),
       loaded=st.integers(0, 12))
def test_runs_appended_after_loaded_values_read_as_if_the_values_were_made_first(runs, loaded):
    """Values loaded from a part (deferred) and runs appended after them: each run reads the
    same alone before the values are made (the appended ones without making them), and every
    run gathered (which makes them) is the runs in order."""
    loaded = min(loaded, len(runs))
    first = [v for run in runs[:loaded] for v in run]
    ragged = Ragged("int32")
    ragged.defer("values", NarrowColumn(np.array(first, dtype=np.uint8), np.dtype(np.int32)))
    ragged.n = len(first)
    ends = np.cumsum([len(run) for run in runs[:loaded]], dtype=np.int64).tolist()
    ends += [ragged.append(run) for run in runs[loaded:]]
    ends_arr = np.array(ends, dtype=np.int64)
    for slot in range(loaded, len(runs)):
        assert ragged.run(ends_arr, slot) == runs[slot]
    if first and any(runs[loaded:]):
        assert ragged.deferred() == ["values"]  # appended to and read, not made
    assert [ragged.run(ends_arr, slot) for slot in range(len(runs))] == runs
    flat, _ = ragged.gather(ends_arr, np.arange(len(runs), dtype=np.intp))
    assert flat.tolist() == [v for run in runs for v in run]


def test_an_array_with_room_grows_into_it_once_and_only_from_its_own_length():
    """:func:`with_room`'s array grows in place (no copy) and keeps its entries, the new ones
    the fill; a shorter view of it, or the grown array grown again, is copied: room that
    another view may hold entries in is never filled over."""
    arr = with_room(1 << 17, np.int64)
    arr[:] = 7
    shorter = arr[:10]
    assert grown(shorter, 20).base is not arr.base  # a copy: arr's entries 10.. kept
    assert int(arr[10]) == 7
    other_type = grown(arr.view(np.uint64), len(arr) + 1)  # the same bytes as another type
    assert other_type.dtype == np.uint64 and not np.shares_memory(other_type, arr)
    more = grown(arr, len(arr) + 1, fill=-1)
    assert more.base is None and arr.base is not None  # the allocation behind arr itself
    assert np.shares_memory(more, arr)
    assert int(more[len(arr) - 1]) == 7 and set(more[len(arr):].tolist()) == {-1}
    again = grown(arr, len(arr) + 2)  # the room is taken: a copy, and more is untouched
    assert not np.shares_memory(again, more) and int(more[len(arr)]) == -1


@settings(max_examples=examples(dev=200, ci=1000))
@given(st.lists(st.text(max_size=6) | st.text("abc ", max_size=6), max_size=10, unique=True))
def test_a_string_table_filled_from_utf8_reads_back_every_string(values):
    encoded = [v.encode("utf-8", "surrogatepass") for v in values]
    ends = np.cumsum([len(e) for e in encoded], dtype=np.int64).tolist()
    table = Strings()
    table.fill_utf8(b"".join(encoded), ends)
    assert len(table) == len(values)
    assert table.values == values
    assert [table.codes[v] for v in values] == list(range(len(values)))


@settings(max_examples=examples(dev=200, ci=1000))
@given(st.lists(st.integers(-3, 40), max_size=30))
def test_distinct_values_are_numpys_unique_ones(values):
    for dtype in (np.int64, np.uint16, np.int32):
        arr = np.array([v % 30 for v in values], dtype=dtype)
        got = distinct(arr)
        assert got.dtype == arr.dtype and got.tolist() == np.unique(arr).tolist()
