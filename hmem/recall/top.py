"""The best entries of a ranked list: what each of recall's lists keeps before fusion."""

from __future__ import annotations

import numpy as np

from projections.arrays import distinct

__all__ = ["top", "top_of"]

_SAMPLE = 16  # top_of reads every this-many-th score first, to bound the cut from below


def top(docs: np.ndarray, scores: np.ndarray, depth: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``depth`` best (docs, scores), best first; the newer document first on ties."""
    if len(docs) > depth:
        cut = np.argpartition(-scores, depth - 1)[:depth]
        floor = scores[cut].min()
        chosen = np.flatnonzero(scores >= floor)  # keep every tie at the cut
        docs, scores = docs[chosen], scores[chosen]
    order = np.lexsort((-docs, -scores))[:depth]
    return docs[order], scores[order]


def top_of(
    scores: np.ndarray, mask: np.ndarray, depth: int, among: np.ndarray | None = None,
    repeats: int = 1,
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`top` of the documents where ``mask`` holds and the score (one per document) is
    above 0, without ordering them all: the ``depth``-th best of a sample of the scores is at
    most the ``depth``-th best of all, so only the documents scoring at least that are ranked.
    ``among``: the only documents that may score above 0, each at most ``repeats`` times (then
    the others are not read; the sample's ``repeats * depth``-th best bounds the cut)."""
    if depth < 1:
        return np.empty(0, dtype=np.int64), scores[:0]
    if among is None:
        values = np.where(mask, scores, np.zeros((), dtype=scores.dtype))
    else:
        among = among[mask[among]]
        values = scores[among]
    sample = values[::_SAMPLE]
    nth = repeats * depth
    floor = 0.0
    if len(sample) > nth:
        floor = float(np.partition(sample, len(sample) - nth)[len(sample) - nth])
    chosen = np.flatnonzero(values >= floor) if floor > 0 else np.flatnonzero(values > 0)
    docs = chosen if among is None else among[chosen]
    if repeats > 1:
        docs = distinct(docs)
    return top(docs, scores[docs], depth)
