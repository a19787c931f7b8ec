"""Loans in recall: neighbouring turns and feedback terms lend a match, and what a loan may not do.

A turn scores with ``neighbor_weight`` times its previous turn's BM25 match and ``next_weight``
times its next turn's (facts whose source_ref reads ``session:turn``), and pseudo-relevance
feedback adds the best terms of the top visible hits to the query. Both are *loans*: the fact's
score then holds a match that is not its own. Two rules bound them.

1. Only a fact believed at the query's time lends (a current belief, or one of ``as_of`` /
   ``valid_at``; the subject filter plays no part): a forgotten fact, a superseded version or a
   fact recorded after ``as_of`` lifts no neighbour.
2. A loan never lifts a fact above a fact it merely borrows from. A candidate B *merely borrows
   from* a visible fact L when the query words B holds (in its text or subject; maybe none) are
   a proper subset of those L holds, and either L is B's previous or next turn, or L is one of
   the feedback documents and B scored on the terms they added (itself or through a neighbour's
   share). Then B ranks below L, unless B would still rank above L with L's loan taken away: its
   share of L's match and, for a feedback document, every feedback share in its score, at the
   rank that lower score takes in the same ranked list, the rest of its score (its own words,
   its own vector, other loans, confidence, recency, entity and time factors) unchanged. A fact
   so ranked below L is not returned without L: when L does not fit the token budget, B is left
   out too. Every such lender is a candidate (added to the BM25 list if it fell past its depth).

So a fact whose own text is the only match is never outranked by facts that merely borrow it:
``recall("zebra194")`` puts "writer fact 194 zebra194" above zebra193 and zebra195 (and
``"writer zebra194"`` too, though every turn holds "writer"), with BM25 alone or fused with any
embedder's cosines, at any ``as_of`` / ``valid_at``, for any subject filter, context size and
token budget. A turn that holds a query word its neighbour lacks is not bound by it (an answer
that names what the question asked keeps its lead). The word sets order the lenders strictly,
so no two facts must each rank below the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from projections.arrays import distinct, in_sorted, run_positions
from projections.recall_index import NamespaceIndex

__all__ = ["Bound", "Lists", "Loans", "Words", "borrow", "lend", "lend_from", "own_words"]

Lists = dict[str, tuple[np.ndarray, np.ndarray]]  # name -> (docs, scores), best first
# A list's contribution to relevance for a score ``value`` of a member (True) or not of it:
Fusion = Callable[[str, np.ndarray, np.ndarray, np.ndarray], np.ndarray]
_EMPTY = np.empty(0, dtype=np.int64)
_SPARSE = 8  # borrow follows the lenders' links when at most 1/this of the documents lend
_TABLE_DOCS = 1 << 16  # Words.held tables every document up to this many (8 bytes a word each)


class Words:
    """The query's own words: each document's BM25 score of them (``own``, for all of the
    namespace's documents), and the documents holding each distinct word (``postings``, in the
    order of the query), from which :meth:`held` tells which words a document holds."""

    def __init__(self, own: np.ndarray, postings: tuple[np.ndarray, ...]) -> None:
        self.own = own
        self.postings = postings
        self._table: np.ndarray | None = None  # held() of every document, for a small namespace

    def held(self, docs: np.ndarray) -> np.ndarray:
        """Which query words each of ``docs`` holds, as uint64 bits: bit ``j % 64`` of column
        ``j // 64`` for the j-th distinct word (shape ``docs.shape + (columns,)``). Looked up
        in the postings; for a namespace of up to ``_TABLE_DOCS`` documents, a table of them all
        is made at the first call instead."""
        columns = (len(self.postings) + 63) // 64
        if len(self.own) <= _TABLE_DOCS:
            if self._table is None:
                self._table = np.zeros((len(self.own), columns), dtype=np.uint64)
                for j, postings in enumerate(self.postings):
                    self._table[postings, j // 64] |= np.uint64(1 << (j % 64))
            table: np.ndarray = self._table[docs]
            return table
        flat = np.asarray(docs, dtype=np.int64).ravel()
        out = np.zeros((len(flat), columns), dtype=np.uint64)
        for j, postings in enumerate(self.postings):
            out[in_sorted(postings, flat), j // 64] |= np.uint64(1 << (j % 64))
        return out.reshape(*np.shape(docs), columns)

    def fewer(self, docs: np.ndarray, others: np.ndarray) -> np.ndarray:
        """Whether each of ``docs`` holds a proper subset of the query words that the
        document in ``others`` at the same place holds (-1 there: a turn that does not exist,
        holding nothing). ``others`` may have more leading dimensions than ``docs``."""
        mine = self.held(docs)
        theirs = np.where((others >= 0)[..., None], self.held(np.maximum(others, 0)), 0)
        subset: np.ndarray = ((mine & ~theirs) == 0).all(axis=-1)
        subset &= ((theirs & ~mine) != 0).any(axis=-1)
        return subset


def own_words(index: NamespaceIndex, tokens: list[str]) -> Words:
    """Score the query's words one at a time: their sum is bit for bit ``TextIndex.score`` of
    them all, which adds up per word in this order."""
    distinct = list(dict.fromkeys(tokens))
    own = np.zeros(len(index), dtype=np.float32)
    postings = []
    for token in distinct:
        docs, scores = index.text.term_scores(token)
        np.add.at(own, docs, scores)  # the same sums as ``own[docs] += scores``: docs distinct
        postings.append(docs)
    return Words(own, tuple(postings))


def lend(index: NamespaceIndex, scores: np.ndarray, before: float, after: float) -> np.ndarray:
    """Each document's score plus ``before`` times its previous turn's and ``after`` times its
    next turn's (same source session): a turn often answers what the turn before it asked.
    Links to the document beside are added as one shifted pass (:meth:`link_runs`): each
    score times the weight or 0, the same float32 sums as adding ``weight * score`` where there
    is a link (the scores are finite; a weight is taken as a Python float)."""
    out = scores.copy()
    for which, weight in (("prev", float(before)), ("next", float(after))):
        if weight and len(scores) > 1:
            factor, docs, other = index.link_runs(which, len(scores), weight)
            if which == "prev":  # document d lends to d + 1
                out[1:] += scores[:-1] * factor[1:]
            else:  # document d lends to d - 1
                out[:-1] += scores[1:] * factor[:-1]
            out[docs] += weight * scores[other]
    return out


def lend_from(
    index: NamespaceIndex, scores: np.ndarray, lenders: np.ndarray, before: float, after: float
) -> tuple[np.ndarray, np.ndarray]:
    """:func:`lend` when only ``lenders`` (ascending) have a nonzero score: their links are
    followed instead of passing over every document, bit for bit the same scores. Also returns
    the documents that may score above 0: ``lenders`` and those they lent to, each at most three
    times."""
    out = scores.copy()
    reached = [lenders]
    for which, weight in (("prev", float(before)), ("next", float(after))):
        if weight and len(scores) > 1:
            sources, targets = index.links_by_lender(which, len(scores))
            first = np.searchsorted(sources, lenders, "left")
            counts = np.searchsorted(sources, lenders, "right") - first
            at = run_positions(first, counts)  # every link of every lender
            to = targets[at]  # a document has one turn before it: no repeats
            out[to] += weight * scores[sources[at]]
            reached.append(to)
    return out, np.concatenate(reached)


@dataclass(frozen=True)
class Loans:
    """One query's loans. Per document (all of the namespace's): ``fed`` is its score of the
    query's words and the feedback terms (0 for a fact not believed at the query's time: it
    lends nothing), ``lexical`` that plus the neighbours' shares of theirs (what the BM25 list
    ranks), with the documents where that may be above 0 when they are known."""

    words: Words
    fed: np.ndarray
    lexical: np.ndarray
    feedback_docs: np.ndarray
    before: float
    after: float
    cosines: np.ndarray | None = None  # own cosines of believed facts, when cosines are lent
    scored: np.ndarray | None = None  # documents where ``lexical`` may be above 0 (None: any)
    repeats: int = 1  # how many times a document may be in ``scored``

    def with_lenders(
        self, index: NamespaceIndex, lists: Lists, visible: Callable[[np.ndarray], np.ndarray],
    ) -> tuple[np.ndarray, np.ndarray]:
        """The BM25 list (docs, scores, best first) and after it every visible lender of a
        candidate that fell past its depth, in the order of their scores."""
        docs, scores = lists["bm25"]
        members = docs
        if self.cosines is not None and "dense" in lists:  # cosines are lent too
            members = np.concatenate([docs, lists["dense"][0]])
        if not len(docs):
            return docs, scores
        lenders = [self.feedback_docs]
        for links, weight in ((index.prev_doc, self.before), (index.next_doc, self.after)):
            if weight:
                other = np.frombuffer(links, dtype=np.int64)[members]
                lenders.append(other[self.words.fewer(members, other)])
        extra = np.concatenate(lenders)
        extra = distinct(extra[self.lexical[extra] < scores[-1]])  # the list holds the rest
        extra = extra[visible(extra)] if len(extra) else extra
        if not len(extra):
            return docs, scores
        extra_scores = self.lexical[extra]
        order = np.lexsort((-extra, -extra_scores))
        return np.concatenate([docs, extra[order]]), np.concatenate([scores, extra_scores[order]])

    def cap(
        self, index: NamespaceIndex, cand: np.ndarray, lists: Lists, parts: dict[str, np.ndarray],
        fusion: Fusion, factor: np.ndarray, score: np.ndarray,
    ) -> tuple[np.ndarray, Bound]:
        """Rule 2 over the fused candidates (``cand`` sorted, ``score = sum(parts) * factor``):
        the scores with each borrower capped just below its lenders, and who is bound below
        whom."""
        b, lender, loan, cos_loan = self._edges(index, cand)
        if not len(b):
            return score, Bound(b, lender)
        without = np.zeros(len(b))
        for name, (docs, scores) in lists.items():
            pos = np.searchsorted(cand, docs)
            listed = np.zeros(len(cand), dtype=bool)
            listed[pos] = True
            there = np.zeros(len(cand))
            there[pos] = scores
            listed, there = listed[b], there[b]
            if name == "bm25":
                value = _less(self.lexical[cand[b]], self.words.own[cand[b]], loan)
                lent, listed = loan > 0, listed & (value > 0)  # a score of 0 leaves the list
            elif name == "dense" and self.cosines is not None:
                value, lent = _less(there, self.cosines[cand[b]], cos_loan), cos_loan > 0
            else:
                without += parts[name][b]
                continue
            without += np.where(lent, fusion(name, scores, value, listed), parts[name][b])
        without *= factor[b]
        keep = without < score[b]  # the loan lifted it at all
        b, lender, without = b[keep], lender[keep], without[keep]
        capped = score
        bind = np.zeros(len(b), dtype=bool)
        for _ in range(len(b) + 1):  # word sets grow along each chain of loans: it ends
            bind = without <= capped[lender]
            ceiling = np.full(len(score), np.inf)
            np.minimum.at(ceiling, b[bind], np.nextafter(capped[lender[bind]], -np.inf))
            new = np.minimum(score, ceiling)
            if np.array_equal(new, capped):
                break
            capped = new
        return capped, Bound(b[bind], lender[bind])

    def _edges(
        self, index: NamespaceIndex, cand: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(borrower, lender, lexical loan, cosine loan) for each pair of candidates (by
        position) where the borrower merely borrows from the lender. One row of lenders per
        neighbour link that lends and per feedback document."""
        m = len(cand)
        weights, rows = [], []
        for links, weight in ((index.prev_doc, self.before), (index.next_doc, self.after)):
            if weight:
                weights.append(weight)
                rows.append(np.frombuffer(links, dtype=np.int64)[cand])
        neighbours = np.array(rows).reshape(len(rows), m)
        for f in self.feedback_docs.tolist():
            row = np.full(m, f, dtype=np.int64)
            row[(neighbours == f).any(axis=0)] = -1  # that loan is counted in the neighbour's row
            rows.append(row)
            weights.append(0.0)
        if not rows:
            return _EMPTY, _EMPTY, np.empty(0), np.empty(0)
        lenders = np.array(rows)
        w = np.array(weights)[:, None]
        ok = lenders >= 0
        at = np.maximum(lenders, 0)
        fed = np.where(ok, self.fed[at], 0.0)
        fed_share = np.maximum(fed - np.where(ok, self.words.own[at], 0.0), 0)
        # every feedback share in the borrower's score: its own and its neighbours' shares
        fed_total = np.maximum(self.fed[cand] - self.words.own[cand], 0)
        fed_total += (w[: len(neighbours)] * fed_share[: len(neighbours)]).sum(axis=0)
        feeds = np.zeros_like(ok)
        for f in self.feedback_docs.tolist():
            feeds |= lenders == f
        loan = w * fed + np.where(feeds, fed_total - w * fed_share, 0.0)
        cos = w * np.where(ok, self.cosines[at], 0.0) if self.cosines is not None else 0 * loan
        pos = np.minimum(np.searchsorted(cand, lenders), m - 1)
        ok &= (cand[pos] == lenders) & ((loan > 0) | (cos > 0))
        ok &= self.words.fewer(cand, lenders)
        _, borrower = np.nonzero(ok)
        return borrower, pos[ok], loan[ok], cos[ok]


class Bound:
    """Which candidates (by position) are ranked below which of their lenders."""

    def __init__(self, borrowers: np.ndarray, lenders: np.ndarray) -> None:
        self._of: dict[int, list[int]] = {}
        for b, lender in zip(borrowers.tolist(), lenders.tolist(), strict=True):
            self._of.setdefault(b, []).append(lender)

    def of(self, position: int) -> list[int]:
        """The lenders ``position`` is ranked below."""
        return self._of.get(position, [])


def borrow(
    index: NamespaceIndex, words: Words, fed: np.ndarray, lending: np.ndarray, postings: int,
    feedback_docs: np.ndarray, before: float, after: float,
) -> Loans:
    """The loans of one query, from each document's score of its words and the feedback
    terms (``fed``, above 0 in at most ``postings`` documents; set to 0 here where ``lending``
    does not hold: a fact not believed at the query's time lends nothing)."""
    if postings * _SPARSE > len(fed):  # most documents lend: passes over them all
        np.multiply(fed, lending, out=fed)  # times 1 or 0: the scores are finite
        lexical = lend(index, fed, before, after) if before or after else fed
        return Loans(words, fed, lexical, feedback_docs, before, after)
    lenders = np.flatnonzero(fed > 0)
    fed[lenders[~lending[lenders]]] = 0
    lenders = lenders[lending[lenders]]
    if not (before or after):
        return Loans(words, fed, fed, feedback_docs, before, after, scored=lenders)
    lexical, scored = lend_from(index, fed, lenders, before, after)
    return Loans(words, fed, lexical, feedback_docs, before, after, scored=scored, repeats=3)


def _less(total: np.ndarray, own: np.ndarray, loan: np.ndarray) -> np.ndarray:
    """``total - loan``, leftovers of float32 sums dropped: a score that was its own part and this
    loan becomes exactly its own part (0 when it had none: it leaves the list)."""
    rest = total - own - loan
    rest[rest <= 1e-5 * np.abs(total)] = 0.0
    out: np.ndarray = own + rest
    return out
