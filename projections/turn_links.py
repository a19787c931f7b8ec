"""Links between documents of neighbouring conversation turns, computed for many documents at once.

A document whose fact has a source position (session, turn) is linked to the first document of
the previous and of the next turn of its session (``prev_doc`` / ``next_doc``), as
:meth:`projections.recall_index.NamespaceIndex.add_documents` does one document at a time: when
document ``d`` (in document order) arrives, ``first[(s, t - 1)]``, if it came before ``d``,
becomes ``prev_doc[d]`` and gets ``next_doc = d``; ``first[(s, t + 1)]``, if it came before,
becomes ``next_doc[d]`` and gets ``prev_doc = d``. Later writes win. :func:`link_turns` computes
what those writes leave, per (session, turn) group, from each group's first and last documents;
tests/projections/test_index_build.py holds the result equal to adding the documents one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["FirstDocs", "TurnLinks", "link_turns"]

I64 = npt.NDArray[np.int64]
FirstDocs = dict[str, dict[int, int]]  # session -> turn -> its first document
# (prev_doc, next_doc, the first documents: made when called, only if a later add needs them)
TurnLinks = tuple[I64, I64, Callable[[], FirstDocs]]


def link_turns(
    n: int, docs: I64, sessions: npt.NDArray[np.integer[Any]], names: Sequence[str], turns: I64
) -> TurnLinks:
    """``prev_doc`` and ``next_doc`` (length ``n``, -1 where there is no link) and a function
    giving the first document of each (session, turn), for documents ``docs`` (ascending) at
    positions ``(names[sessions[i]], turns[i])`` (distinct codes name distinct sessions)."""
    prev_doc = np.full(n, -1, dtype=np.int64)
    next_doc = np.full(n, -1, dtype=np.int64)
    if not len(docs):
        return prev_doc, next_doc, dict
    sess = np.asarray(sessions, dtype=np.int64)
    turn = np.asarray(turns, dtype=np.int64)
    order = _by_position(docs, sess, turn)
    s_sorted, t_sorted, d_sorted = sess[order], turn[order], docs[order]
    starts = np.flatnonzero(np.concatenate((
        [True], (s_sorted[1:] != s_sorted[:-1]) | (t_sorted[1:] != t_sorted[:-1])
    )))
    ends = np.append(starts[1:], len(docs))
    # each (session, turn) group: its first and last documents (ascending within a group)
    g_sess, g_turn, g_first, g_last = (s_sorted[starts], t_sorted[starts], d_sorted[starts],
                                       d_sorted[ends - 1])

    def first_docs() -> FirstDocs:
        first: FirstDocs = {}
        for s, t, d in zip(g_sess.tolist(), g_turn.tolist(), g_first.tolist(), strict=True):
            first.setdefault(names[s], {})[t] = d
        return first

    # the group of (s, t - 1), when present, is just before (s, t) in sorted order
    after = np.flatnonzero((g_sess[1:] == g_sess[:-1]) & (g_turn[1:] == g_turn[:-1] + 1))
    below = np.full(len(starts), -1, dtype=np.int64)  # each group's previous turn's group
    above = np.full(len(starts), -1, dtype=np.int64)
    below[after + 1], above[after] = after, after + 1
    group = np.repeat(np.arange(len(starts)), ends - starts)  # of each sorted document
    _link(prev_doc, d_sorted, group, below, g_first, g_last)
    _link(next_doc, d_sorted, group, above, g_first, g_last)
    return prev_doc, next_doc, first_docs


def _link(out: I64, docs: I64, group: I64, other: I64, g_first: I64, g_last: I64) -> None:
    """``out[d]`` for documents ``docs`` of groups ``group``, whose neighbouring turn's group
    is ``other[group]`` (-1: none), as adding them one by one leaves it: the first document of
    a group is linked by each later document of the neighbouring turn as it arrives (the last
    of them wins), else, as every document of the group, to the first document of the
    neighbouring turn if that came before it."""
    o = other[group]
    has = o >= 0
    o = np.maximum(o, 0)
    first, last = g_first[o], g_last[o]
    lead = docs == g_first[group]  # the first document of its group
    linked = np.where(lead & (last > docs), last, np.where(first < docs, first, -1))
    out[docs] = np.where(has, linked, -1)


def _by_position(docs: I64, sess: I64, turn: I64) -> I64:
    """The order of the documents by session, turn, then document: one stable sort of
    (session, turn) as one integer where it fits (the documents come ascending; a chat's turns
    come in runs already sorted, which a stable sort merges fast), else a three-key sort."""
    low, high = int(turn.min()), int(turn.max())
    span = high - low + 1
    if int(sess.max()) < (1 << 62) // span:
        return np.argsort(sess * span + (turn - low), kind="stable")
    return np.lexsort((docs, turn, sess))
