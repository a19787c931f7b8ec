"""A namespace's turn links, kept with the columnar fold so that a load does not make them again.

Building a namespace's recall index links the documents of neighbouring conversation turns
(projections/turn_links.py) from each fact's source position, read from its source ref
(projections/source_positions.py): ~0.4 s for a 1M-fact namespace. The positions and links so
made for a space's first facts are kept (``FactColumns.turns``) and saved with its checkpoint
part, as the postings are (projections/index_tokens.py). A namespace loaded from its part then
takes the links as they are when no fact follows the part; else it reads the positions of the
facts after the part only and adds them to the kept links one by one (a later document may
link an earlier one), reading only the kept documents at their neighbouring turns.
tests/projections/test_index_build.py and test_part_index.py hold every way equal to adding
the documents one by one; ``verify`` holds the kept ones equal to the ones the refs make.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

from projections.arrays import distinct, in_sorted
from projections.fold_state import FactColumns, KeptTurns
from projections.source_positions import source_positions
from projections.turn_links import FirstDocs, TurnLinks, link_turns

__all__ = ["first_turns", "kept_turns_hold", "namespace_turns"]

I64 = npt.NDArray[np.int64]


def namespace_turns(cols: FactColumns, slots: npt.NDArray[np.intp]) -> TurnLinks:
    """The turn links of the facts at ``slots`` (ascending, as ``namespace_slots`` gives them),
    document ``i`` being ``slots[i]``. The kept ones are used where ``slots`` start with the
    kept facts; when ``slots`` are the first facts (a space's are), the result is kept."""
    n = len(slots)
    kept = _kept_prefix(cols, slots)
    if kept is not None and kept.docs == n:
        return kept.prev_doc, kept.next_doc, lambda: _first_docs(kept)
    if kept is None:
        sessions, names, turns = _positions(cols, slots)
    else:
        later, later_names, later_turns = _positions(cols, slots[kept.docs:])
        names = list(kept.sessions)
        code_of = {name: code for code, name in enumerate(names)}
        recode = np.array([code_of.setdefault(s, len(code_of)) for s in later_names] or [0],
                          dtype=np.int32)
        names = list(code_of)
        sessions = np.concatenate((kept.session, np.where(later >= 0, recode[later], -1)))
        turns = np.concatenate((kept.turn, later_turns))
    made = _linked(sessions, names, turns) if kept is None else _extended(kept, sessions, names,
                                                                           turns)
    if n and int(slots[-1]) == n - 1:
        cols.turns = made
    return made.prev_doc, made.next_doc, lambda: _first_docs(made)


def first_turns(cols: FactColumns) -> KeptTurns:
    """The positions and links of every fact of a space (slots ``0 .. n - 1``, one namespace),
    what a checkpoint part keeps."""
    namespace_turns(cols, np.arange(cols.n, dtype=np.intp))
    kept = cols.turns
    if kept is None or kept.docs != cols.n:  # no facts: nothing was kept
        return _linked(np.zeros(0, dtype=np.int32), [], np.zeros(0, dtype=np.int64))
    return kept


def kept_turns_hold(cols: FactColumns) -> bool:
    """Whether the positions and links kept for the first facts (if any) are the ones their
    source refs make (what ``verify`` asks of a checkpoint's)."""
    kept = cols.turns
    if kept is None:
        return True
    if not 0 <= kept.docs <= cols.n:
        return False
    made = _linked(*_positions(cols, np.arange(kept.docs, dtype=np.intp)))
    # sessions are compared by name (the codes may number them in another order)
    names_kept = np.array(kept.sessions + [""], dtype=object)[kept.session]
    names_made = np.array(made.sessions + [""], dtype=object)[made.session]
    return bool(np.array_equal(names_kept, names_made)) and all(
        np.array_equal(getattr(kept, name), getattr(made, name))
        for name in ("turn", "prev_doc", "next_doc")
    )


def _kept_prefix(cols: FactColumns, slots: npt.NDArray[np.intp]) -> KeptTurns | None:
    """The kept turns when ``slots`` start with the kept facts, else None. Ascending slots
    start with slots ``0 .. docs - 1`` exactly when slot ``docs - 1`` is document ``docs - 1``."""
    kept = cols.turns
    if kept is None or not 0 < kept.docs <= len(slots) or int(slots[kept.docs - 1]) != (
        kept.docs - 1
    ):
        return None
    return kept


def _positions(
    cols: FactColumns, slots: npt.NDArray[np.intp]
) -> tuple[npt.NDArray[np.int32], list[str], I64]:
    """Each fact's session (a code into the list that comes next; -1: no position) and turn."""
    n = len(slots)
    refs = cols.table.source_ref[slots]
    with_ref = np.flatnonzero(refs >= 0)
    codes = refs[with_ref]
    named, sessions, names, turns = source_positions(
        cols.refs.in_memory(), cols.refs.starts[codes], cols.refs.ends[codes]
    )
    session = np.full(n, -1, dtype=np.int32)
    turn = np.zeros(n, dtype=np.int64)
    at = with_ref[named]
    session[at], turn[at] = sessions, turns
    return session, names, turn


def _linked(session: npt.NDArray[np.int32], names: list[str], turn: I64) -> KeptTurns:
    docs = np.flatnonzero(session >= 0)
    prev_doc, next_doc, _ = link_turns(len(session), docs, session[docs], names, turn[docs])
    return KeptTurns(names, session, turn, prev_doc, next_doc)


def _extended(
    kept: KeptTurns, session: npt.NDArray[np.int32], names: list[str], turn: I64
) -> KeptTurns:
    """The kept links with the documents after them added one by one (what
    ``NamespaceIndex.add_documents`` does): each later document at (s, t) becomes the first of
    (s, t) if none came before, links to the first of (s, t - 1) and of (s, t + 1), and they
    to it. Only the kept documents at those positions are read, not all sorted again."""
    k, n = kept.docs, len(session)
    prev_doc, next_doc = np.full(n, -1, dtype=np.int64), np.full(n, -1, dtype=np.int64)
    prev_doc[:k], next_doc[:k] = kept.prev_doc, kept.next_doc
    later = k + np.flatnonzero(session[k:] >= 0)
    if not len(later):
        return KeptTurns(names, session, turn, prev_doc, next_doc)
    # the kept documents at (s, t - 1), (s, t) or (s, t + 1) of a later (s, t), found by a
    # hash of the pair (one that collides brings a document the loop below keys and never asks)
    s_later, t_later = session[later], turn[later]
    near = distinct(np.concatenate([_pair(s_later, t_later + step) for step in (-1, 0, 1)]))
    kept_docs = np.flatnonzero(in_sorted(near, _pair(session[:k], turn[:k])))
    first: dict[tuple[int, int], int] = {}
    for doc, s, t in zip(kept_docs.tolist(), session[kept_docs].tolist(),
                         turn[kept_docs].tolist(), strict=True):
        first.setdefault((s, t), doc)  # ascending: the first document of its turn
    for doc, s, t in zip(later.tolist(), session[later].tolist(), turn[later].tolist(),
                         strict=True):
        first.setdefault((s, t), doc)
        before, after = first.get((s, t - 1)), first.get((s, t + 1))
        if before is not None:
            prev_doc[doc], next_doc[before] = before, doc
        if after is not None:
            next_doc[doc], prev_doc[after] = after, doc
    return KeptTurns(names, session, turn, prev_doc, next_doc)


def _pair(session: npt.NDArray[np.signedinteger[Any]], turn: I64) -> I64:
    """A hash of each (session, turn) (int64 arithmetic wraps: equal pairs hash equal)."""
    return session.astype(np.int64) * np.int64(1_000_003) + turn


def _first_docs(kept: KeptTurns) -> FirstDocs:
    """Session -> turn -> its first document (what a later add needs), made when asked."""
    docs = np.flatnonzero(kept.session >= 0)
    return link_turns(kept.docs, docs, kept.session[docs], kept.sessions, kept.turn[docs])[2]()
