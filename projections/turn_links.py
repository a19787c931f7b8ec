"""Links between documents of neighbouring conversation turns, computed for many documents at once.

A document whose fact has a source position (session, turn) is linked to the first document of
the previous and of the next turn of its session (``prev_doc`` / ``next_doc``), as
:meth:`projections.recall_index.NamespaceIndex.add_documents` does one document at a time: when
document ``d`` (in document order) arrives, ``first[(s, t - 1)]``, if it came before ``d``,
becomes ``prev_doc[d]`` and gets ``next_doc = d``; ``first[(s, t + 1)]``, if it came before,
becomes ``next_doc[d]`` and gets ``prev_doc = d``. Later writes win. :func:`link_turns` makes the
same writes as arrays and keeps the last write to each entry;
tests/projections/test_index_build.py holds the result equal to adding the documents one by one.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import numpy.typing as npt

__all__ = ["FirstDocs", "TurnLinks", "link_turns"]

I64 = npt.NDArray[np.int64]
FirstDocs = dict[str, dict[int, int]]  # session -> turn -> its first document
# (prev_doc, next_doc, the first documents: made when called, only if a later add needs them)
TurnLinks = tuple[I64, I64, Callable[[], FirstDocs]]


def link_turns(n: int, docs: I64, sessions: I64, names: Sequence[str], turns: I64) -> TurnLinks:
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
    s_sorted, t_sorted = sess[order], turn[order]
    starts = np.flatnonzero(np.concatenate((
        [True], (s_sorted[1:] != s_sorted[:-1]) | (t_sorted[1:] != t_sorted[:-1])
    )))
    g_sess, g_turn, g_first = s_sorted[starts], t_sorted[starts], docs[order][starts]

    def first_docs() -> FirstDocs:
        first: FirstDocs = {}
        for s, t, d in zip(g_sess.tolist(), g_turn.tolist(), g_first.tolist(), strict=True):
            first.setdefault(names[s], {})[t] = d
        return first

    if len(starts) == len(docs):  # each turn one document (a chat's facts): linked whatever
        # came first, each to its neighbours in sorted order
        adjacent = np.flatnonzero((g_sess[1:] == g_sess[:-1]) & (g_turn[1:] == g_turn[:-1] + 1))
        prev_doc[g_first[adjacent + 1]] = g_first[adjacent]
        next_doc[g_first[adjacent]] = g_first[adjacent + 1]
        return prev_doc, next_doc, first_docs
    group = np.empty(len(docs), dtype=np.int64)  # each document's (session, turn) group
    group[order] = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(docs))))
    # (s, t - 1), when present, is the group just before (s, t) in sorted order; (s, t + 1) after
    below, above = group - 1, group + 1
    has_prev = (below >= 0) & (g_sess[np.maximum(below, 0)] == sess) & (
        g_turn[np.maximum(below, 0)] == turn - 1
    )
    top = len(starts) - 1
    has_next = (above <= top) & (g_sess[np.minimum(above, top)] == sess) & (
        g_turn[np.minimum(above, top)] == turn + 1
    )
    first_prev = np.where(has_prev, g_first[np.maximum(below, 0)], -1)
    first_next = np.where(has_next, g_first[np.minimum(above, top)], -1)
    cp = has_prev & (first_prev < docs)  # the previous turn's first document came before d
    cn = has_next & (first_next < docs)
    step = 4 * docs  # the writes of document d, in the order add_documents makes them
    _last_writes(prev_doc, [
        (docs[cp], first_prev[cp], step[cp] + 1), (first_next[cn], docs[cn], step[cn] + 4),
    ])
    _last_writes(next_doc, [
        (first_prev[cp], docs[cp], step[cp] + 2), (docs[cn], first_next[cn], step[cn] + 3),
    ])
    return prev_doc, next_doc, first_docs


def _by_position(docs: I64, sess: I64, turn: I64) -> I64:
    """The order of the documents by session, turn, then document: one stable sort of
    (session, turn) as one integer where it fits (the documents come ascending; a chat's turns
    come in runs already sorted, which a stable sort merges fast), else a three-key sort."""
    low, high = int(turn.min()), int(turn.max())
    span = high - low + 1
    if int(sess.max()) < (1 << 62) // span:
        return np.argsort(sess * span + (turn - low), kind="stable")
    return np.lexsort((docs, turn, sess))


def _last_writes(out: I64, writes: list[tuple[I64, I64, I64]]) -> None:
    """Apply (target, value, order) writes to ``out``: the highest order per target wins."""
    target = np.concatenate([w[0] for w in writes])
    value = np.concatenate([w[1] for w in writes])
    order = np.concatenate([w[2] for w in writes])
    if not len(target):
        return
    by = np.lexsort((order, target))
    target, value = target[by], value[by]
    last = np.append(target[1:] != target[:-1], True)
    out[target[last]] = value[last]
