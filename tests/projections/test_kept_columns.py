"""The index state a checkpoint part keeps is refused when it does not fit the part's facts (the
part is then refused and its namespace folded from the log), and read back when it does."""

from __future__ import annotations

import numpy as np
import pytest

from projections.kept_columns import kept_entity_runs, kept_turns

I32, I64 = np.int32, np.int64


def _runs(codes, bounds, documents):
    return {"entity_runs.codes": np.array(codes, I32), "entity_runs.bounds": np.array(bounds, I64),
            "entity_runs.documents": np.array(documents, I32)}


def test_entity_runs_that_fit_read_back():
    runs = kept_entity_runs(_runs([0, 2], [0, 2, 3], [1, 4, 0]), facts=5, entities=3)
    assert runs.codes.tolist() == [0, 2] and runs.documents.tolist() == [1, 4, 0]
    assert runs.docs == 5


@pytest.mark.parametrize("codes, bounds, documents", [
    ([2, 0], [0, 2, 3], [1, 4, 0]),  # entities out of order
    ([0, 3], [0, 2, 3], [1, 4, 0]),  # an entity the part does not name
    ([0, 2], [0, 2, 4], [1, 4, 0]),  # runs that do not cover the documents
    ([0, 2], [0, 0, 3], [1, 4, 0]),  # an empty run
    ([0, 2], [0, 2, 3], [4, 1, 0]),  # a run out of order
    ([0, 2], [0, 2, 3], [1, 5, 0]),  # a document past the part's facts
    ([0, 2], [1, 2, 3], [1, 4, 0]),  # runs that do not start at 0
])
@pytest.mark.parametrize("dtype", [np.int32, np.uint8])  # a part stores them as narrow as fits
def test_entity_runs_that_do_not_fit_are_refused(codes, bounds, documents, dtype):
    runs = {name: column.astype(dtype) for name, column in _runs(codes, bounds, documents).items()}
    with pytest.raises(ValueError, match="entity runs"):
        kept_entity_runs(runs, facts=5, entities=3)


def _turns(session, turn, prev_doc, next_doc, sessions=("s1:t",)):
    blob = "".join(sessions).encode()
    ends = np.cumsum([len(s.encode()) for s in sessions]).astype(I64)
    return {"turns.sessions.blob": np.frombuffer(blob, np.uint8), "turns.sessions.ends": ends,
            "turns.session": np.array(session, I32), "turns.turn": np.array(turn, I64),
            "turns.prev_doc": np.array(prev_doc, I64), "turns.next_doc": np.array(next_doc, I64)}


def test_turn_links_that_fit_read_back():
    turns = kept_turns(_turns([0, 0, -1], [1, 2, 0], [-1, 0, -1], [1, -1, -1]), facts=3)
    assert turns.sessions == ["s1:t"] and turns.docs == 3


@pytest.mark.parametrize("session, turn, prev_doc, next_doc, facts", [
    ([0, 0, -1], [1, 2, 0], [-1, 0, -1], [1, -1, -1], 2),  # more documents than facts
    ([0, 1, -1], [1, 2, 0], [-1, 0, -1], [1, -1, -1], 3),  # a session not listed
    ([0, 0, -1], [1, 2, 0], [-1, 3, -1], [1, -1, -1], 3),  # a link past the documents
    ([0, 0, -1], [1, 2], [-1, 0, -1], [1, -1, -1], 3),  # columns of other lengths
])
def test_turn_links_that_do_not_fit_are_refused(session, turn, prev_doc, next_doc, facts):
    with pytest.raises(ValueError, match="turn links"):
        kept_turns(_turns(session, turn, prev_doc, next_doc), facts=facts)
