"""No hit without its own evidence: which ranked candidates recall may return.

Feedback terms and neighbours' shares lift facts that hold none of the query's words (that is
their point: an answer often shares no word with its question). They also lift facts that have
nothing to do with it: on a store of numbered facts, ``recall("inspector")`` found the one fact
that says "inspector", took its word "fact" as a feedback term, and returned every other fact
after it. So a candidate is returned only when (``RecallConfig.require_evidence``, the default)
it has evidence of its own, or is tied to a fact that has:

1. it holds a word of the query as asked (tokenized and stemmed as the index is, in its text or
   its subject; the feedback terms do not count), or
2. its vector's cosine with the query's is at least ``RecallConfig.min_cosine`` (its own cosine,
   not a neighbour's share), or
3. it is a neighbouring turn that the ranking lends a match to (the turn after a fact with
   ``neighbor_weight``, the turn before it with ``next_weight``: see :mod:`hmem.recall.loans`)
   of a fact believed at the query's time that has evidence of its own (1 or 2): an answer that
   follows the question naming its topic is returned, a turn beside nothing is not.

However many hits are asked for, a store of facts unrelated to the query returns none of them.

The floor, 0.45, was measured on LoCoMo (its 1,986 questions and 5,882 turns, each
question against the turns of its conversation that hold none of its words): with the local
MiniLM embedder the cosines of such turns that are not evidence sit at 0.115 / 0.248 / 0.36 /
0.441 (50th / 90th / 99th / 99.9th percentile) and the 14 that are evidence all below 0.45;
with the hash embedder (64 dims) the others sit at 0 / 0.176 / 0.311 / 0.406. So 0.45 lets
through 0.08% of MiniLM's unrelated turns and 0.02% of the hash embedder's. Evidence that shares
no word with its question is rare there (14 of the turns sharing no query word), which is why
the rule leaves R@10 where it was on both benchmarks (docs/benchmarks.md). Another model's
cosines sit elsewhere: set ``min_cosine`` for it.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hmem.recall.loans import Words
from projections.dense import DocVectors
from projections.recall_index import NamespaceIndex

__all__ = ["Cosines", "evident"]


class Cosines:
    """The query's own cosine with each document (-inf for one without a vector): those the
    dense search scored, and any other looked up when asked."""

    def __init__(
        self, docs: np.ndarray, cosines: np.ndarray, vectors: DocVectors, query: np.ndarray
    ) -> None:
        order = np.argsort(docs, kind="stable")
        self._docs, self._cosines = docs[order], np.asarray(cosines, dtype=np.float32)[order]
        self._vectors = vectors
        norm = float(np.linalg.norm(query))
        self._query = np.asarray(query, dtype=np.float32) / (norm or 1.0)

    def of(self, docs: np.ndarray) -> np.ndarray:
        at = np.minimum(np.searchsorted(self._docs, docs), max(len(self._docs) - 1, 0))
        out = np.full(len(docs), np.nan, dtype=np.float32)
        if len(self._docs):
            known = self._docs[at] == docs
            out[known] = self._cosines[at[known]]
        for i in np.flatnonzero(np.isnan(out)).tolist():  # past the dense search's depth
            vector = self._vectors.get(int(docs[i]))
            out[i] = -np.inf if vector is None else float(vector @ self._query)
        return out


def evident(
    index: NamespaceIndex, cand: np.ndarray, words: Words | None, cosines: Cosines | None,
    floor: float, believed: Callable[[np.ndarray], np.ndarray], before: float, after: float,
) -> np.ndarray:
    """Which of the documents ``cand`` may be returned (the rules of the module doc)."""

    def own(docs: np.ndarray) -> np.ndarray:
        mask = np.zeros(len(docs), dtype=bool)
        if words is not None:
            mask |= (words.held(docs) != 0).any(axis=-1)
        if cosines is not None:
            mask[~mask] = cosines.of(docs[~mask]) >= floor
        return mask

    keep = own(cand)
    for links, weight in ((index.prev_doc, before), (index.next_doc, after)):
        rest = np.flatnonzero(~keep)
        if not weight or not len(rest):
            continue
        lender = np.frombuffer(links, dtype=np.int64)[cand[rest]]
        rest, lender = rest[lender >= 0], lender[lender >= 0]
        if len(rest):
            keep[rest] = own(lender) & believed(lender)
    return keep
