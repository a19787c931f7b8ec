"""A recall index's entity -> documents map: loaded in bulk as one sorted column and added to
one document at a time, it answers as a dict of lists built one naming at a time would."""

from __future__ import annotations

import numpy as np
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
    index = EntityDocs()
    index.load(NAMES, np.array([c for c, _ in pairs], dtype=np.int64),
               np.array([d for _, d in pairs], dtype=np.int64))
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
