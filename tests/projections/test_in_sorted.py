"""Membership in an ascending column by binary search equals numpy's sorting ``isin``."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.arrays import in_sorted
from tests.conftest import examples


@settings(max_examples=examples(dev=200, ci=1000))
@given(values=st.lists(st.integers(-3, 40), max_size=30),
       wanted=st.lists(st.integers(-5, 45), max_size=24), rows=st.sampled_from([1, 2, 3]))
def test_membership_by_search_is_isin_for_any_shape(values, wanted, rows):
    """Repeats in the column, values before its first and after its last, an empty column or
    query, and a query of any shape."""
    column = np.sort(np.array(values, dtype=np.int64))
    asked = np.array(wanted[: len(wanted) // rows * rows], dtype=np.int64).reshape(rows, -1)
    got = in_sorted(column, asked)
    assert got.shape == asked.shape
    assert got.tolist() == np.isin(asked, column).tolist()
