"""Each fact's index tokens, kept with the columnar fold, and a namespace's postings made from them.

The projector tokenizes every fact it folds (``index_counts``: its BM25 document) and records
the tokens here: term codes (into ``FactColumns.terms``) in a ragged column, each term repeated
as often as it occurs, so a fact's run is exactly ``doc_len`` long and no term frequency is
stored. A namespace's postings are then one sort of its facts' runs: the recall index is built
without reading DuckDB's ``postings`` table and without tokenizing a text again
(projections/index_build.py; tests/projections/test_index_build.py holds the result equal to
adding the facts one by one). The postings so made for a space's facts are kept
(``FactColumns.postings``) and saved with its checkpoint part, so a namespace loaded from its part
sorts only the facts folded after it and merges them in (:func:`namespace_postings`), or, when
only a few facts follow the part (a reader beside a working writer), leaves them to be added one
by one (:func:`kept_postings_and_later`): merging copies every posting, ~0.3 GB at peak for a
1M-fact namespace and one later fact.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import chain

import numpy as np
import numpy.typing as npt

from projections.arrays import code_major, narrow_counts, run_starts
from projections.errors import ProjectionError
from projections.fold_state import FactColumns, TermPostings
from projections.string_columns import Strings

__all__ = [
    "CodedTerms", "Postings", "first_postings", "kept_postings_and_later", "kept_postings_hold",
    "namespace_postings", "set_runs", "set_tokens", "token_counts",
]

# later facts added one by one to the kept postings rather than merged in: this many, or a 64th
# of the kept ones (a writer publishes at 1% of the log: a reader of a 1M-fact namespace folds up
# to ~10k; merged, they cost ~0.3 GB more at peak and more time than adding them)
_ADDED_AT_MOST, _ADDED_SHARE = 4096, 64

# A namespace's postings: (terms, where each term's postings start, documents ascending within
# a term, term frequencies), documents numbered by position in the namespace's slots
Postings = tuple["CodedTerms", np.ndarray, np.ndarray, np.ndarray]


class CodedTerms:
    """Each term's group of postings kept in the order of its code in ``strings``
    (``codes``: the terms' codes, ascending), found by code: no dict, and no term decoded
    until it is asked for (a 1M-fact namespace holds ~265k terms)."""

    __slots__ = ("_strings", "_find", "_codes", "_n", "_dense")

    def __init__(self, strings: Strings, codes: npt.NDArray[np.int32]) -> None:
        self._strings, self._find, self._codes, self._n = strings, strings.find, codes, len(codes)
        self._dense = not len(codes) or int(codes[-1]) == len(codes) - 1  # 0 .. n - 1

    def get(self, term: str) -> int | None:
        """The group of ``term``'s postings; None if no posting holds it."""
        code = self._find(term)
        if code is None or code < 0:
            return None
        if self._dense:
            return code if code < self._n else None
        at = int(np.searchsorted(self._codes, code))
        return at if at < self._n and int(self._codes[at]) == code else None

    def keys(self) -> list[str]:
        """The terms, group by group."""
        name = self._strings.get
        return [name(c) for c in self._codes.tolist()]  # type: ignore[misc]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CodedTerms) and self.keys() == other.keys()

    __hash__ = None  # type: ignore[assignment]


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
    return cols.slot_term_counts(slot)


def namespace_postings(cols: FactColumns, slots: npt.NDArray[np.intp]) -> Postings:
    """The postings of the facts at ``slots`` (ascending, as ``namespace_slots`` gives them),
    document ``i`` being ``slots[i]``; terms in order of their codes. The postings kept for the
    first facts (``cols.postings``: a checkpoint part's, or an earlier call's) are not made
    again; when ``slots`` are the first facts (a space's are), the result is kept."""
    made = _postings(cols, slots)
    if len(slots) and int(slots[-1]) == len(slots) - 1:
        cols.postings = made
    return CodedTerms(cols.terms, made.codes), made.starts, made.documents, made.tfs


def kept_postings_and_later(
    cols: FactColumns, slots: npt.NDArray[np.intp]
) -> tuple[Postings, npt.NDArray[np.intp]]:
    """(the postings of the first of ``slots``, the slots after them): the kept postings and
    the few facts after them, to add one by one (:func:`token_counts`); else
    :func:`namespace_postings` of all and none after."""
    kept = cols.postings
    later = len(slots) - kept.docs if kept is not None else -1
    if kept is None or not 0 < later <= max(_ADDED_AT_MOST, kept.docs // _ADDED_SHARE) or int(
        slots[kept.docs - 1]
    ) != kept.docs - 1:
        return namespace_postings(cols, slots), slots[len(slots):]
    postings = CodedTerms(cols.terms, kept.codes), kept.starts, kept.documents, kept.tfs
    return postings, slots[kept.docs:]


def first_postings(cols: FactColumns) -> TermPostings:
    """The postings of every fact with index tokens (slots ``0 .. tokened - 1``), what a
    checkpoint part keeps (made from the kept ones and the later facts' tokens; none kept)."""
    return _postings(cols, np.arange(cols.tokened, dtype=np.intp))


def kept_postings_hold(cols: FactColumns) -> bool:
    """Whether the postings kept for the first facts (if any) are the ones their index tokens
    make (what ``verify`` asks of a checkpoint's)."""
    kept = cols.postings
    if kept is None:
        return True
    if not 0 <= kept.docs <= cols.tokened:
        return False
    made = _sorted(cols, np.arange(kept.docs, dtype=np.intp), 0)
    return all(np.array_equal(getattr(kept, name), getattr(made, name))
               for name in ("codes", "starts", "documents", "tfs"))


def _postings(cols: FactColumns, slots: npt.NDArray[np.intp]) -> TermPostings:
    n = len(slots)
    if n and int(slots[-1]) >= cols.tokened:
        raise ProjectionError(
            f"the fact at slot {int(slots[-1])} has no index tokens ({cols.tokened} have them)"
        )
    kept = cols.postings
    # the kept postings are the first ``kept.docs`` facts': ascending slots start with them
    # exactly when slot kept.docs - 1 is the document kept.docs - 1
    if kept is None or not 0 < kept.docs <= n or int(slots[kept.docs - 1]) != kept.docs - 1:
        return _sorted(cols, slots, 0)
    if kept.docs == n:
        return kept
    return _merged(kept, _sorted(cols, slots[kept.docs:], kept.docs))


def _sorted(cols: FactColumns, slots: npt.NDArray[np.intp], first_doc: int) -> TermPostings:
    """The postings of ``slots``, document ``first_doc + i`` being ``slots[i]``."""
    codes, lengths = cols.tokens.gather(cols.table.tokens_end, slots)
    # one key per token, (term, document); equal keys are one posting and its tf
    key, width = code_major(codes, lengths)
    first = run_starts(key)
    tfs = narrow_counts(np.diff(np.append(first, len(key))))
    unique = key[first]
    term = unique // width
    unique -= term * width - first_doc
    starts = run_starts(term)
    return TermPostings(term[starts].astype(np.int32), starts.astype(np.int64),
                        unique.astype(np.int32), tfs, first_doc + len(slots))


def _merged(a: TermPostings, b: TermPostings) -> TermPostings:
    """The postings of ``a``'s documents followed by ``b``'s (all of ``b``'s come after): each
    term's postings are its postings in ``a`` then its postings in ``b``, placed in one pass."""
    codes = np.union1d(a.codes, b.codes).astype(np.int32)
    at_a, at_b = np.searchsorted(codes, a.codes), np.searchsorted(codes, b.codes)
    len_a = np.diff(np.append(a.starts, len(a.documents)))
    len_b = np.diff(np.append(b.starts, len(b.documents)))
    in_a = np.zeros(len(codes), dtype=np.int64)
    in_a[at_a] = len_a
    counts = in_a.copy()
    counts[at_b] += len_b
    starts = np.cumsum(counts) - counts
    # a posting's place: where its term starts, (after the term's postings in a, for b's)
    # plus its rank within its term
    to_a = np.repeat(starts[at_a] - a.starts, len_a) + np.arange(len(a.documents))
    to_b = np.repeat(starts[at_b] + in_a[at_b] - b.starts, len_b) + np.arange(len(b.documents))
    documents = np.empty(int(counts.sum()), dtype=np.int32)
    tfs = np.empty(len(documents), dtype=np.promote_types(a.tfs.dtype, b.tfs.dtype))
    documents[to_a], tfs[to_a] = a.documents, a.tfs
    documents[to_b], tfs[to_b] = b.documents, b.tfs
    return TermPostings(codes, starts, documents, tfs, b.docs)
