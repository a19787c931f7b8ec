"""The fold's array types: a ragged column's runs gathered at once equal each slot's run read
alone, whether the slots are one stretch (read as a view) or any others; a string table filled
from UTF-8 bytes reads back every string, ASCII (cut from one decoded text) or not."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.arrays import Ragged
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
@given(st.lists(st.text(max_size=6) | st.text("abc ", max_size=6), max_size=10, unique=True))
def test_a_string_table_filled_from_utf8_reads_back_every_string(values):
    encoded = [v.encode("utf-8", "surrogatepass") for v in values]
    ends = np.cumsum([len(e) for e in encoded], dtype=np.int64).tolist()
    table = Strings()
    table.fill_utf8(b"".join(encoded), ends)
    assert len(table) == len(values)
    assert table.values == values
    assert [table.codes[v] for v in values] == list(range(len(values)))
