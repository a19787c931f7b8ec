"""A namespace's entity documents, kept with the columnar fold so that a load does not sort them.

A namespace's recall index finds the documents naming an entity in one column of documents
ordered by entity (projections/entity_docs.py), made by one sort of every naming: ~0.15 s for a
1M-fact namespace. The runs so made for a space's facts are kept (``FactColumns.entity_runs``)
and saved with its checkpoint part, as the postings and turn links are; a namespace loaded from
its part with no fact after it takes them as they are; the facts after it are sorted
alone and merged in. tests/projections/test_part_index.py holds the index equal to one built
document by document; ``verify`` holds the kept runs equal to the ones the facts' entities make.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from projections.arrays import code_major, run_starts
from projections.fold_state import EntityRuns, FactColumns

__all__ = ["first_entity_runs", "kept_entity_runs_hold", "namespace_entity_runs"]


def namespace_entity_runs(cols: FactColumns, slots: npt.NDArray[np.intp]) -> EntityRuns:
    """The entity runs of the facts at ``slots`` (ascending, as ``namespace_slots`` gives
    them), document ``i`` being ``slots[i]``: the kept ones when ``slots`` are exactly the kept
    facts; when ``slots`` are the first facts (a space's are), the result is kept."""
    n = len(slots)
    whole_space = bool(n) and int(slots[-1]) == n - 1  # slots 0 .. n - 1
    kept = cols.entity_runs
    if whole_space and kept is not None and kept.docs == n:
        return kept
    if whole_space and kept is not None and 0 < kept.docs < n:  # the facts after them added
        made = _merged(kept, _made(cols, slots[kept.docs:]))
    else:
        made = _made(cols, slots)
    if whole_space:
        cols.entity_runs = made
    return made


def first_entity_runs(cols: FactColumns) -> EntityRuns:
    """The entity runs of every fact of a space (slots ``0 .. n - 1``, one namespace), what a
    checkpoint part keeps."""
    return namespace_entity_runs(cols, np.arange(cols.n, dtype=np.intp))


def kept_entity_runs_hold(cols: FactColumns) -> bool:
    """Whether the runs kept for the first facts (if any) are the ones their entities make
    (what ``verify`` asks of a checkpoint's)."""
    kept = cols.entity_runs
    if kept is None:
        return True
    if not 0 <= kept.docs <= cols.n:
        return False
    made = _made(cols, np.arange(kept.docs, dtype=np.intp))
    return all(np.array_equal(getattr(kept, name), getattr(made, name))
               for name in ("codes", "bounds", "documents"))


def _merged(kept: EntityRuns, later: EntityRuns) -> EntityRuns:
    """The runs of ``kept``'s documents followed by ``later``'s (numbered after them), as one
    sort of every naming makes them: within an entity, every later document comes after every
    kept one, so a stable sort by entity alone of the kept namings then the later ones
    (two sorted runs: merged, not sorted again) leaves each entity's documents ascending."""
    entity = np.concatenate((np.repeat(kept.codes, np.diff(kept.bounds)),
                             np.repeat(later.codes, np.diff(later.bounds))))
    documents = np.concatenate((kept.documents.astype(np.int32, copy=False),
                                later.documents + np.int32(kept.docs)))
    order = np.argsort(entity, kind="stable")
    entity, documents = entity[order], documents[order]
    starts = run_starts(entity)
    bounds = np.append(starts, len(entity)).astype(np.int64)
    return EntityRuns(entity[starts].astype(np.int32), bounds, documents, kept.docs + later.docs)


def _made(cols: FactColumns, slots: npt.NDArray[np.intp]) -> EntityRuns:
    """The runs of ``slots``, made by one sort of their namings."""
    codes, lengths = cols.entities.gather(cols.table.entities_end, slots)
    key, width = code_major(codes, lengths)  # one per naming: by entity, then document
    entity = key // width
    starts = run_starts(entity)
    documents = (key - entity * width).astype(np.int32)
    return EntityRuns(entity[starts].astype(np.int32),
                      np.append(starts, len(key)).astype(np.int64), documents, len(slots))
