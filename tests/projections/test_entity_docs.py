"""A recall index's entity -> documents map: loaded in bulk as one column by entity and added to
one document at a time, it answers as a dict of lists built one naming at a time would."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.entity_docs import EntityDocs
from tests.conftest import examples

NAMES = ["maya", "london", "tom", "the london office", "unused"]


@settings(max_examples=examples(dev=100, ci=300), deadline=None)
@given(
    loaded=st.lists(st.lists(st.sampled_from(range(len(NAMES) - 1)), max_size=3), max_size=12),
    added=st.lists(st.lists(st.sampled_from(NAMES + ["new"]), max_size=3), max_size=6),
)
def test_loaded_and_added_namings_read_as_one_map(loaded, added):
    want: dict[str, list[int]] = {}
    for doc, codes in enumerate(loaded):
        for code in codes:
            want.setdefault(NAMES[code], []).append(doc)
    pairs = sorted((code, doc) for doc, codes in enumerate(loaded) for code in codes)
    present = sorted({c for c, _ in pairs})  # one run per entity named, by code
    bounds = np.searchsorted([c for c, _ in pairs], present + [len(NAMES)])
    index = EntityDocs()
    index.load([NAMES[c] for c in present], bounds, np.array([d for _, d in pairs], np.int32))
    for doc, names in enumerate(added, len(loaded)):
        for name in names:
            index.append(name, doc)
            want.setdefault(name, []).append(doc)
    assert index.as_dict() == want
    assert index.names() == want.keys()
    assert bool(index) == bool(want)
    for name in [*NAMES, "new", "absent"]:
        docs = index.get(name)
        assert (name in index) == (name in want)
        assert (None if docs is None else docs.tolist()) == want.get(name)


def test_what_get_hands_out_cannot_change_the_map():
    """A caller holding an entity's documents neither changes them nor blocks later writes."""
    index = EntityDocs()
    index.load(["maya"], np.array([0, 2]), np.array([3, 7]))
    index.append("bob", 8)
    loaded, added = index.get("maya"), index.get("bob")
    assert loaded is not None and added is not None
    with pytest.raises(ValueError):  # read-only
        loaded[0] = 99
    added[0] = 99  # a copy of the later documents
    index.append("bob", 9)
    index.append("maya", 10)
    assert index.as_dict() == {"maya": [3, 7, 10], "bob": [8, 9]}
