"""Each fact's index tokens, kept with the columnar fold, and a namespace's postings made from them.

The projector tokenizes every fact it folds (``index_counts``: its BM25 document) and records
the tokens here: term codes (into ``FactColumns.terms``) in a ragged column, each term repeated
as often as it occurs, so a fact's run is exactly ``doc_len`` long and no term frequency is
stored. A namespace's postings are then one sort of its facts' runs: the recall index is built
without reading DuckDB's ``postings`` table and without tokenizing a text again
(projections/index_build.py; tests/projections/test_index_build.py holds the result equal to
adding the facts one by one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain

import numpy as np
import numpy.typing as npt

from projections.errors import ProjectionError
from projections.fold_state import FactColumns

__all__ = ["Postings", "namespace_postings", "set_runs", "set_tokens", "token_counts"]

# A namespace's postings: (terms, where each term's postings start, documents ascending within
# a term, term frequencies), documents numbered by position in the namespace's slots
Postings = tuple[list[str], np.ndarray, np.ndarray, np.ndarray]


def set_tokens(cols: FactColumns, first_slot: int, counts: Sequence[Mapping[str, int]]) -> None:
    """Record the index tokens (term -> count) of the facts at ``first_slot``, ``first_slot + 1``
    ... (the next facts without tokens, in slot order) and set their ``doc_len``."""
    end = first_slot + len(counts)
    _check_next(cols, first_slot, end)
    f = cols.table
    if len(counts) == 1:  # a live write: lists, not arrays (a few microseconds, not 60)
        code = cols.terms.code
        run = [c for term, tf in counts[0].items() for c in [code(term)] * tf]
        f.tokens_end[first_slot] = cols.tokens.append(run)
        f.doc_len[first_slot] = len(run)
        cols.tokened = end
        return
    terms = list(chain.from_iterable(counts))
    tfs = np.fromiter(
        chain.from_iterable(c.values() for c in counts), dtype=np.int64, count=len(terms)
    )
    lengths = np.fromiter((sum(c.values()) for c in counts), dtype=np.int64, count=len(counts))
    before = cols.tokens.n
    cols.tokens.extend(np.repeat(cols.terms.encode(terms), tfs))
    f.doc_len[first_slot:end] = lengths
    f.tokens_end[first_slot:end] = before + np.cumsum(lengths)
    cols.tokened = end


def set_runs(
    cols: FactColumns, first_slot: int, terms: Sequence[str], runs: npt.NDArray[np.int64],
    lengths: npt.NDArray[np.int64],
) -> None:
    """:func:`set_tokens` given the documents as ``index_runs`` makes them: ``runs`` indexes
    ``terms`` (distinct, in order of first appearance), documents back to back."""
    end = first_slot + len(lengths)
    _check_next(cols, first_slot, end)
    f = cols.table
    before = cols.tokens.n
    cols.tokens.extend(cols.terms.encode(list(terms))[runs])
    f.doc_len[first_slot:end] = lengths
    f.tokens_end[first_slot:end] = before + np.cumsum(lengths)
    cols.tokened = end


def _check_next(cols: FactColumns, first_slot: int, end: int) -> None:
    if first_slot != cols.tokened or end > cols.n:
        raise ProjectionError(
            f"tokens for facts at slots {first_slot}..{end - 1} given out of order "
            f"({cols.tokened} of {cols.n} facts have them)"
        )


def token_counts(cols: FactColumns, slot: int) -> dict[str, int]:
    """The term counts recorded for the fact at ``slot``."""
    names = cols.terms.values
    counts: dict[str, int] = {}
    for code in cols.tokens.run(cols.table.tokens_end, slot):
        counts[names[code]] = counts.get(names[code], 0) + 1
    return counts


def namespace_postings(cols: FactColumns, slots: npt.NDArray[np.intp]) -> Postings:
    """The postings of the facts at ``slots`` (ascending), document ``i`` being ``slots[i]``;
    terms in order of their codes."""
    n = len(slots)
    if n and int(slots[-1]) >= cols.tokened:
        raise ProjectionError(
            f"the fact at slot {int(slots[-1])} has no index tokens ({cols.tokened} have them)"
        )
    codes, lengths = cols.tokens.gather(cols.table.tokens_end, slots)
    # one key per token, (term, document); sorted, equal keys are one posting and its tf
    key = np.multiply(codes, max(n, 1), dtype=np.int64)
    key += np.repeat(np.arange(n, dtype=np.int64), lengths)
    key.sort()
    first = np.flatnonzero(_changes(key))
    tfs = np.diff(np.append(first, len(key))).astype(np.float32)
    unique = key[first]
    term = unique // max(n, 1)
    docs = unique - term * n
    starts = np.flatnonzero(_changes(term))
    names = cols.terms.values
    return [names[c] for c in term[starts].tolist()], starts, docs, tfs


def _changes(values: npt.NDArray[np.int64]) -> npt.NDArray[np.bool_]:
    """Where a run of equal values starts (a bool per value)."""
    out = np.empty(len(values), dtype=bool)
    out[:1] = True
    np.not_equal(values[1:], values[:-1], out=out[1:])
    return out
