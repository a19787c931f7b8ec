"""What extraction judged of a fact, for ranking: its importance (1-10) and category (semantic,
episodic, procedural) as factors, and procedural facts pinned into every recall.

All off by default (``RecallConfig.importance_weight`` 0, category weights 1, ``pin_procedural``
0): neither benchmark recall is measured on (LoCoMo, BEAM; one fact per turn, no extraction)
carries these judgements, so no default could be shown to help. Facts without a judgement (every
``remember``) rank as before.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from projections.fold_state import FactColumns
from projections.recall_index import NamespaceIndex

__all__ = ["judgement_factor", "pinned_docs"]

NEUTRAL_IMPORTANCE = 5.0  # the middle of 1-10: a factor of 1


def judgement_factor(
    cols: FactColumns, ids: np.ndarray, importance_weight: float,
    category_weights: Mapping[str, float],
) -> np.ndarray:
    """Per fact id: ``1 + importance_weight * (importance - 5) / 5`` (importance clipped to
    1-10; none: 1) times its category's weight (none, or a category not named: 1)."""
    slots = cols.slots(ids)
    code = cols.table.importance[slots].astype(np.float64)
    for i in np.flatnonzero(code < 0).tolist():  # kept beside the int8 column
        code[i] = cols.odd[int(slots[i])]
    importance = np.where(code == 0, NEUTRAL_IMPORTANCE, np.clip(code, 1, 10))
    factor: np.ndarray = 1.0 + importance_weight * (importance - NEUTRAL_IMPORTANCE) / 5.0
    labels = cols.labels.codes
    category = cols.table.category[slots]
    for name, weight in category_weights.items():
        label = labels.get(name)
        if weight != 1.0 and label is not None:
            factor = np.where(category == label, factor * weight, factor)
    return factor


def pinned_docs(
    cols: FactColumns, index: NamespaceIndex, namespace: str, count: int,
    visible: Callable[[np.ndarray], np.ndarray],
) -> list[int]:
    """The documents of up to ``count`` procedural facts visible to the query, newest first."""
    label = cols.labels.codes.get("procedural")
    if not count or label is None:
        return []
    slots = cols.namespace_slots(namespace)
    ids = cols.table.ids[slots[cols.table.category[slots] == label]]
    if not len(ids):
        return []
    docs = np.searchsorted(np.frombuffer(index.fact_ids, dtype=np.int64), ids[::-1])
    chosen: list[int] = docs[visible(docs)][:count].tolist()
    return chosen
