"""Build every namespace's recall index in bulk from the columnar fold.

The result equals adding every fact in id order (tests/projections/test_index_build.py holds
them equal, field by field): per namespace, the document columns are slices of the fact columns, the
time-travel arrays (``heads``, ``rows``: see projections/recall_index.py) are computed with array
arithmetic over the version rows, and the text index is loaded from the postings the facts'
index tokens make (projections/index_tokens.py), so no text is tokenized again and no Python
object is made per fact (only per distinct subject, entity and source position, and per fact
whose visibility does not fit the arrays).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from projections.arrays import NONE
from projections.fold_state import FactColumns
from projections.index_tokens import kept_postings_and_later, token_counts
from projections.kept_entities import namespace_entity_runs
from projections.kept_turns import namespace_turns
from projections.recall_index import NEVER, DocColumns, NamespaceIndex
from projections.records import Fact, subject_key

__all__ = ["build_index", "build_indexes"]

assert NONE == NEVER  # the fold's "open" is the index's: values are copied as they are


def build_index(cols: FactColumns, namespace: str) -> NamespaceIndex:
    """The recall index of ``namespace`` that adding its facts in id order would build:
    documents from the fold's columns, the text index from the facts' index tokens."""
    slots = cols.namespace_slots(namespace)
    index = NamespaceIndex()
    index.load_documents(_documents(cols, slots))
    (terms, starts, docs, tfs), later = kept_postings_and_later(cols, slots)
    first = slots[: len(slots) - len(later)]
    index.text.load_postings(cols.table.doc_len[first].astype(np.int64), terms, starts, docs, tfs)
    for slot in later.tolist():
        index.text.add(token_counts(cols, slot))
    return index


def build_indexes(cols: FactColumns) -> dict[str, NamespaceIndex]:
    """Every namespace's index (:func:`build_index`)."""
    return {namespace: build_index(cols, namespace) for namespace in cols.namespaces_with_facts()}


def _documents(cols: FactColumns, slots: npt.NDArray[np.intp]) -> DocColumns:
    f, r = cols.table, cols.rows
    # the turns linked first, so that their temporaries come and go before the other columns
    links = namespace_turns(cols, slots)
    first = f.first_row[slots]
    keys, key_codes = _subject_keys(cols, f.subject[slots])
    return DocColumns(
        ids=f.ids[slots],
        current=(f.superseded_by[slots] == NONE) & (f.forgotten_seq[slots] == NONE),
        recency=r.valid_from[first],
        confidence=f.confidence[slots],
        subject_keys=keys,
        subject_codes=key_codes,
        visibility=lambda: _visibility(cols, slots),
        entity_docs=_entity_docs(cols, slots),
        turns=links,
    )


def _subject_keys(
    cols: FactColumns, subjects: npt.NDArray[np.int32]
) -> tuple[list[str], npt.NDArray[np.int64]]:
    """(distinct subject keys in order of first use, each document's code among them)."""
    distinct, inverse = _distinct(subjects)
    key_of = [subject_key(cols.subjects.values[c]) for c in distinct.tolist()]
    key_ids: dict[str, int] = {}
    per_subject = np.array([key_ids.setdefault(k, len(key_ids)) for k in key_of], dtype=np.int64)
    per_doc = per_subject[inverse] if len(subjects) else np.zeros(0, dtype=np.int64)
    first_doc = np.full(len(key_ids), len(per_doc), dtype=np.int64)
    np.minimum.at(first_doc, per_doc, np.arange(len(per_doc), dtype=np.int64))
    order = np.argsort(first_doc, kind="stable")  # key ids by first use
    code_of = np.empty(len(key_ids), dtype=np.int64)
    code_of[order] = np.arange(len(order))
    names = list(key_ids)
    return [names[k] for k in order.tolist()], code_of[per_doc]


def _distinct(codes: npt.NDArray[np.int32]) -> tuple[npt.NDArray[np.intp], npt.NDArray[np.intp]]:
    """``np.unique(codes, return_inverse=True)`` for codes into a string table (0 or more):
    counted, not sorted."""
    present = np.bincount(codes) > 0
    return np.flatnonzero(present), (np.cumsum(present) - 1)[codes]


def _visibility(
    cols: FactColumns, slots: npt.NDArray[np.intp]
) -> tuple[np.ndarray, np.ndarray, dict[int, Fact]]:
    """(heads n x 2, rows n x 8, irregular doc -> Fact) as NamespaceIndex keeps them: the first
    two version rows packed, and the seqs at which the fact is a believed head when they are
    one period (a fact with more rows, or a head period in pieces, is irregular). Most facts
    have one row: the two-row rule runs over the others only."""
    f, r = cols.table, cols.rows
    n = len(slots)
    columns = (r.tx_from_seq, r.tx_to_seq, r.valid_from, r.valid_to)
    r0 = f.first_row[slots].astype(np.int64)
    rows = np.zeros((n, 8), dtype=np.int64)
    for k, column in enumerate(columns):
        rows[:, k] = column[r0]
    stop = f.superseded_by[slots]
    lo, hi = rows[:, 0], np.minimum(stop, rows[:, 1])
    shown = lo < hi
    heads = np.stack([np.where(shown, lo, 0), np.where(shown, hi, 0)], axis=1)
    two = np.flatnonzero(r.next[r0] >= 0)
    bad = np.zeros(0, dtype=np.int64)
    if len(two):
        r1 = r.next[r0[two]].astype(np.int64)
        for k, column in enumerate(columns):
            rows[two, 4 + k] = column[r1]
        lo0, hi0, ok0 = lo[two], hi[two], shown[two]
        lo1, hi1 = rows[two, 4], np.minimum(stop[two], rows[two, 5])
        ok1 = lo1 < hi1
        # with two spans: sorted by (lo, hi), merged when they touch or overlap
        swap = (lo1 < lo0) | ((lo1 == lo0) & (hi1 < hi0))
        a_lo, a_hi = np.where(swap, lo1, lo0), np.where(swap, hi1, hi0)
        b_lo = np.where(swap, lo0, lo1)
        both = ok0 & ok1
        start = np.where(both, a_lo, np.where(ok0, lo0, np.where(ok1, lo1, 0)))
        end = np.where(both, np.maximum(a_hi, np.where(swap, hi0, hi1)),
                       np.where(ok0, hi0, np.where(ok1, hi1, 0)))
        more = r.next[r1] >= 0
        wrong = more | (both & (b_lo > a_hi))
        heads[two, 0] = np.where(wrong, 0, start)
        heads[two, 1] = np.where(wrong, 0, end)
        bad = two[wrong]
    irregular: dict[int, Fact] = {doc: cols.fact_at(int(slots[doc])) for doc in bad.tolist()}
    return heads, rows, irregular


def _entity_docs(
    cols: FactColumns, slots: npt.NDArray[np.intp]
) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Every naming of an entity by a document, by entity: what EntityDocs.load takes."""
    runs = namespace_entity_runs(cols, slots)
    names = cols.entity_names.values
    return [names[c] for c in runs.codes.tolist()], runs.bounds, runs.documents
