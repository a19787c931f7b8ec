"""A checkpoint part's compact columns (sparse ones, ones kept narrower) read back as the
columns they were made from, one value at a time or whole, and a loaded table makes such a
column whole only when it is read: a deferred attribute is made once, by its first read, and
one set before it is read is the one kept; entries appended before it is read (a reader's tail)
read as if it had been made first."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.arrays import NONE, FactTable
from projections.compact_columns import Compact, pack, unpack, whole
from tests.conftest import examples

_DTYPES = ("int8", "int32", "int64", "uint16")


@st.composite
def _columns(draw):
    """An integer column, often mostly one value (so kept sparse) or small (kept narrower)."""
    dtype = np.dtype(draw(st.sampled_from(_DTYPES)))
    info = np.iinfo(dtype)
    n = draw(st.integers(0, 300))
    fill = draw(st.sampled_from([0, -1 if info.min < 0 else 1, int(info.max)]))
    small = st.integers(max(info.min, -300), min(info.max, 300))
    values = st.integers(int(info.min), int(info.max)) | small
    exceptions = draw(st.dictionaries(st.integers(0, max(n - 1, 0)), values, max_size=n // 4))
    arr = np.full(n, fill, dtype=dtype)
    if draw(st.booleans()):  # not mostly one value
        arr[:] = draw(st.lists(small, min_size=n, max_size=n))
    for at, value in exceptions.items():
        arr[at] = value
    return arr


@settings(max_examples=examples(dev=200, ci=1000))
@given(st.dictionaries(st.sampled_from("abcd"), _columns(), min_size=1), st.data())
def test_a_packed_column_reads_back_by_value_and_whole(arrays, data):
    read = unpack(*pack(arrays))
    assert read.keys() == arrays.keys()
    for name, arr in arrays.items():
        column = read[name]
        made = whole(column)
        assert made.dtype == arr.dtype and made.tolist() == arr.tolist()
        if isinstance(column, Compact) and len(arr):
            i = data.draw(st.integers(-len(arr), len(arr) - 1))
            assert column.item(i) == arr.item(i)
            assert [column.item(j) for j in range(len(arr))] == arr.tolist()


def test_a_deferred_column_is_made_once_by_its_first_read():
    table = FactTable()
    made = []

    def make():
        made.append(1)
        return np.arange(3)

    table.defer("ids", make)
    assert table.deferred() == ["ids"] and not made
    assert table.ids.tolist() == [0, 1, 2]
    table.ids[0] = 7  # the column made is the one kept
    assert table.ids.tolist() == [7, 1, 2] and made == [1] and table.deferred() == []


def test_a_sparse_column_answers_a_value_without_being_made():
    (column,) = unpack(*pack({"x": np.full(100, NONE, dtype=np.int64)})).values()
    table = FactTable()
    table.defer("superseded_by", column)
    assert table.peek("superseded_by").item(5) == NONE
    assert table.deferred() == ["superseded_by"]  # peeked, not made
    table.make_deferred()
    assert table.deferred() == [] and table.superseded_by.tolist() == [NONE] * 100


def test_a_column_set_before_it_is_read_is_the_one_kept():
    table = FactTable()
    table.defer("ids", lambda: np.arange(3))
    table.ids = np.array([9])
    assert table.deferred() == [] and table.peek("ids").item(0) == 9
    assert table.ids.tolist() == [9]


@settings(max_examples=examples(dev=100, ci=500))
@given(_columns(), st.lists(st.tuples(st.lists(st.integers(-5, 5), min_size=1, max_size=40),
                                      st.booleans()), max_size=4),
       st.data())
def test_entries_appended_to_a_deferred_column_read_as_if_it_was_made_first(arr, batches, data):
    """Appending to a table grows a compact column without making it (``PendingColumn``), also by
    appends that leave it out (its fill): value by value, from either end, and whole, it reads
    as the column made first and appended to."""
    arr = arr.astype(np.int64)
    (column,) = unpack(*pack({"x": arr})).values()
    deferred, made = FactTable(), FactTable()
    for table in (deferred, made):
        table.ids, table.n = np.arange(len(arr), dtype=np.int64), len(arr)
    if isinstance(column, Compact):
        deferred.defer("superseded_by", column)
    else:  # kept as it is: a plain column
        deferred.superseded_by = column
    made.superseded_by = arr.copy()
    for values, included in batches:
        for table in (deferred, made):
            columns = {"ids": np.arange(len(values)), "superseded_by": values}
            table.extend(columns if included else {"ids": columns["ids"]})
    if isinstance(column, Compact):
        assert deferred.deferred() == ["superseded_by"]  # appended to, not made
    want = made.superseded_by
    peek = deferred.peek("superseded_by")
    assert [peek.item(i) for i in range(len(want))] == want.tolist()
    if len(want):
        i = data.draw(st.integers(-len(want), -1))
        assert peek.item(i) == want.item(i)
    start = data.draw(st.integers(0, len(want)))
    end = data.draw(st.integers(start, len(want)))
    assert deferred.span("superseded_by", start, end).tolist() == want[start:end].tolist()
    assert deferred.superseded_by.tolist() == want.tolist()  # made: room and entries alike


def test_a_column_appended_to_many_times_keeps_every_entry_in_one_tail():
    """A writer that keeps appending to a deferred column keeps one array of appended entries
    (not one per append: a value is read in one step however many came), and the column made
    holds them all."""
    (column,) = unpack(*pack({"x": np.full(100, NONE, dtype=np.int64)})).values()
    table = FactTable()
    table.ids, table.n = np.arange(100, dtype=np.int64), 100
    table.defer("superseded_by", column)
    for i in range(1000):
        table.extend({"ids": [100 + i], "superseded_by": [i]})
    assert table.deferred() == ["superseded_by"]
    assert table.nbytes() >= table.ids[: table.n].nbytes + 8 * 1000  # the appended, counted
    pending = table.peek("superseded_by")
    assert pending.item(99) == NONE and pending.item(1099) == 999 and pending.item(600) == 500
    assert table.superseded_by[:1100].tolist() == [NONE] * 100 + list(range(1000))
