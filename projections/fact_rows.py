"""The ``facts`` and ``fact_versions`` rows of some facts, read straight from the columnar fold.

What a projection batch writes for the facts it created or changed: one numpy column per table
column (named as the table's, times in microseconds, None as NULL), made by indexing the fold's
columns with the facts' slots, never by making a :class:`~projections.records.Fact` each.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import chain
from typing import Any

import numpy as np
import numpy.typing as npt

from projections.column_store import NONE, Strings, UniqueStrings
from projections.columns import object_column
from projections.fact_columns import REVISION_KINDS, FactColumns
from projections.records import subject_key

__all__ = ["entity_rows", "fact_rows", "posting_rows", "version_rows"]


def fact_rows(cols: FactColumns, ids: Sequence[int]) -> dict[str, np.ndarray]:
    """The ``facts`` table's rows of the facts ``ids``, in that order."""
    slots = cols.slot_of[np.asarray(ids, dtype=np.int64)].astype(np.int64)
    f = cols.table
    subjects = _strings(cols.subjects, f.subject[slots])
    entity_names = cols.entity_names.values
    return {
        "id": f.ids[slots],
        "namespace": _strings(cols.namespaces, f.namespace[slots]),
        "subject": subjects,
        "subject_key": object_column([subject_key(s) for s in subjects]),
        "text": object_column([cols.texts[s] for s in slots.tolist()]),
        "confidence": f.confidence[slots],
        "source_agent": _strings(cols.agents, f.source_agent[slots]),
        "source_ref": _strings(cols.refs, f.source_ref[slots]),
        "entities": object_column([
            [entity_names[c] for c in run] for run in cols.entities.runs(f.entities_end, slots)
        ]),
        "created_at": f.created_at[slots],
        "supersedes": _nullable(f.supersedes[slots]),
        "revision": object_column([REVISION_KINDS[k] for k in f.revision[slots].tolist()]),
        "reason": _strings(cols.reasons, f.reason[slots]),
        "superseded_by": _nullable(f.superseded_by[slots]),
        "superseded_at": _nullable(f.superseded_at[slots]),
        "forgotten_seq": _nullable(f.forgotten_seq[slots]),
        "forgotten_at": _nullable(f.forgotten_at[slots]),
        "forget_reason": _strings(cols.reasons, f.forget_reason[slots]),
        "doc_len": f.doc_len[slots],
        "derived_from": object_column(cols.derived.runs(f.derived_end, slots)),
        "extractor": _strings(cols.labels, f.extractor[slots]),
        "prompt_version": _strings(cols.labels, f.prompt_version[slots]),
        "category": _strings(cols.labels, f.category[slots]),
        "importance": _importance(cols, slots),
    }


def version_rows(cols: FactColumns, ids: Sequence[int]) -> dict[str, np.ndarray]:
    """The ``fact_versions`` rows (every version row, numbered from 0) of the facts ``ids``."""
    slots = cols.slot_of[np.asarray(ids, dtype=np.int64)].astype(np.int64)
    f, r = cols.table, cols.rows
    found_rows, found_at, found_no = [], [], []
    row = f.first_row[slots].astype(np.int64)  # every fact has a first row
    at = np.arange(len(slots))
    number = 0
    while len(row):
        found_rows.append(row)
        found_at.append(at)
        found_no.append(np.full(len(row), number, dtype=np.int32))
        nxt = r.next[row].astype(np.int64)
        keep = nxt >= 0
        row, at, number = nxt[keep], at[keep], number + 1
    rows, which, numbers = (
        np.concatenate(found_rows), np.concatenate(found_at), np.concatenate(found_no)
    ) if found_rows else (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32))
    order = np.lexsort((numbers, which))  # by fact, then row number
    rows, which, numbers = rows[order], which[order], numbers[order]
    return {
        "fact_id": f.ids[slots][which],
        "row_no": numbers,
        "namespace": _strings(cols.namespaces, f.namespace[slots][which]),
        "valid_from": r.valid_from[rows],
        "valid_to": _nullable(r.valid_to[rows]),
        "tx_from_seq": r.tx_from_seq[rows],
        "tx_from": r.tx_from[rows],
        "tx_to_seq": _nullable(r.tx_to_seq[rows]),
        "tx_to": _nullable(r.tx_to[rows]),
    }


def posting_rows(
    cols: FactColumns, new_facts: Sequence[tuple[int, dict[str, int]]]
) -> dict[str, np.ndarray]:
    """The ``postings`` rows of new facts, given as (id, term -> count)."""
    lengths = np.array([len(counts) for _, counts in new_facts], dtype=np.int64)
    ids = np.array([fid for fid, _ in new_facts], dtype=np.int64)
    namespaces = _strings(cols.namespaces, cols.table.namespace[cols.slot_of[ids]])
    return {
        "namespace": np.repeat(namespaces, lengths),
        "term": object_column(list(chain.from_iterable(counts for _, counts in new_facts))),
        "fact_id": np.repeat(ids, lengths),
        "tf": np.fromiter(
            chain.from_iterable(counts.values() for _, counts in new_facts),
            dtype=np.int32, count=int(lengths.sum()),
        ),
    }


def entity_rows(cols: FactColumns, ids: Sequence[int]) -> dict[str, np.ndarray]:
    """The ``entities`` rows (entity, fact, per namespace) of the facts ``ids``."""
    slots = cols.slot_of[np.asarray(ids, dtype=np.int64)].astype(np.int64)
    f, names = cols.table, cols.entity_names.values
    runs = cols.entities.runs(f.entities_end, slots)
    lengths = np.fromiter(map(len, runs), dtype=np.int64, count=len(runs))
    return {
        "namespace": np.repeat(_strings(cols.namespaces, f.namespace[slots]), lengths),
        "entity": object_column([names[c] for c in chain.from_iterable(runs)]),
        "fact_id": np.repeat(f.ids[slots], lengths),
    }


def _strings(strings: Strings | UniqueStrings, codes: npt.NDArray[Any]) -> np.ndarray:
    values = strings.values
    return object_column([None if c < 0 else values[c] for c in codes.tolist()])


def _nullable(values: npt.NDArray[np.int64]) -> np.ndarray:
    """An int64 column with the fold's NONE as NULL."""
    return np.ma.masked_array(values, mask=values == NONE)


def _importance(cols: FactColumns, slots: npt.NDArray[np.int64]) -> np.ndarray:
    code = cols.table.importance[slots].astype(np.int64)
    for i in np.flatnonzero(code < 0).tolist():
        code[i] = cols.odd[int(slots[i])]
    return np.ma.masked_array(code, mask=code == 0)
