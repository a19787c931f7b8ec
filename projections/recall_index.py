"""What recall needs, in memory: per namespace, a BM25 index plus per-document arrays.

Rebuilt from the fold state on open and updated per event; never persisted (the DuckDB
``postings`` table is the durable text index).

Time travel is answered from arrays too, exactly as :meth:`Fact.visible_row` and
:meth:`Fact.is_head_at` would answer it, so recall never loops over candidates in Python:

* ``heads``: per document the seqs ``[from, to)`` at which the fact is a *believed head* (some
  row believed and not yet superseded). It is derived from the rows when they change.
* ``rows``: per document the fact's version rows (at most two: a world-change revise adds the
  second) as ``tx_from, tx_to, valid_from, valid_to`` with ``_NEVER`` for an open end; an
  absent second row is ``0, 0, 0, 0`` (believed at no seq).

A fact that does not fit (more than two rows, or a head period in pieces) is kept in
``irregular`` and checked row by row; the fold as written never produces one. Both arrays are
filled on the first time-travel query after documents were added (``_sync``; a bulk load's
come from the callable it was given), so building the index and recall of current beliefs do
not pay for them.
"""

from __future__ import annotations

import re
from array import array
from bisect import bisect_left
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from projections.arrays import as_bytes
from projections.dense import VECTOR_DTYPES, DocVectors
from projections.entity_docs import EntityDocs
from projections.records import Fact
from projections.text import TextIndex
from projections.turn_links import FirstDocs, TurnLinks

__all__ = ["NamespaceIndex", "DocColumns", "NEVER", "ROW_WIDTH", "source_position"]

NEVER = _NEVER = 2**63 - 1  # an open end, in seqs or microseconds
_ROW_SLOTS = 2
_ROW_FIELDS = 4  # tx_from_seq, tx_to_seq, valid_from, valid_to
ROW_WIDTH = _ROW_WIDTH = _ROW_SLOTS * _ROW_FIELDS


_Runs = tuple[np.ndarray, np.ndarray, np.ndarray]  # see NamespaceIndex.link_runs

# (heads n x 2, rows n x ROW_WIDTH, irregular doc -> Fact) of n documents loaded in bulk
Visibility = tuple[np.ndarray, np.ndarray, dict[int, Fact]]


class DocColumns(NamedTuple):
    """A namespace's documents as columns, for :meth:`NamespaceIndex.load_documents`: one entry
    per document (in id order) in each array; ``visibility`` makes ``heads``, ``rows`` and
    ``irregular`` (the module docstring) when time travel first needs them, from the documents'
    state at that moment; ``subject_keys`` the distinct keys in order of first
    use, ``subject_codes`` each document's position in it; ``turns`` the links between
    neighbouring turns (:func:`projections.turn_links.link_turns`)."""

    ids: np.ndarray
    current: np.ndarray
    recency: np.ndarray
    confidence: np.ndarray
    subject_keys: list[str]
    subject_codes: np.ndarray
    visibility: Callable[[], Visibility]
    entity_docs: tuple[list[str], np.ndarray, np.ndarray]  # EntityDocs.load's arguments
    turns: TurnLinks


class NamespaceIndex:
    """Documents are facts of one namespace, numbered in creation order.

    ``vector_dtype`` is how dense vectors are kept: ``"float32"`` (default) or ``"int8"``
    (a quarter of the memory, cosines within a per-row bound; see :mod:`projections.dense`).
    """

    def __init__(self, vector_dtype: str = "float32") -> None:
        if vector_dtype not in VECTOR_DTYPES:
            raise ValueError(
                f"vector_dtype {vector_dtype!r} is not one of {', '.join(VECTOR_DTYPES)}"
            )
        self.vector_dtype = vector_dtype
        self.text = TextIndex()
        self.fact_ids = array("q")
        self.current = bytearray()  # 1 while the fact is a believed, unsuperseded head
        self.recency = array("q")  # valid_from of the fact's first row, microseconds
        self.confidence = array("f")
        self.subject_codes = array("q")  # per document its subject key's code
        self._subject_code: dict[str, int] = {}  # subject key -> code, in order of first use
        self.heads = array("q")  # 2 per document: believed head for from <= seq < to
        self.rows = array("q")  # _ROW_WIDTH per document, see the module docstring
        self.irregular: dict[int, Fact] = {}  # doc -> fact, visibility checked in Python
        self._unsynced: list[Fact] = []  # facts of the documents not yet in heads and rows
        # a bulk load's heads, rows and irregular, made when first needed (they come first)
        self._loaded_later: Callable[[], Visibility] | None = None
        self.entity_docs = EntityDocs()  # entity -> documents mentioning it
        self.prev_doc = array("q")  # the document of the previous turn of the same source, or -1
        self.next_doc = array("q")
        self._turns: FirstDocs = {}  # source session -> turn number -> its first doc
        self._turns_later: Callable[[], FirstDocs] | None = None  # a bulk build's, made on use
        # link_pairs' cache, by (n, documents): links change only when documents are added
        self._pairs: dict[str, tuple[tuple[int, int], np.ndarray, np.ndarray]] = {}
        self._runs: dict[str, tuple[tuple[int, int, float], _Runs]] = {}  # link_runs', and weight
        self._by_lender: dict[str, tuple[tuple[int, int], np.ndarray, np.ndarray]] = {}  # the same
        self.vectors: dict[str, DocVectors] = {}  # model -> vectors aligned with documents
        self.ignored_vectors = 0  # vectors of the wrong length (see set_vector)

    def __len__(self) -> int:
        return len(self.fact_ids)

    def add(self, fact: Fact, tokens: list[str] | dict[str, int]) -> None:
        doc = self.text.add(tokens)
        if doc != len(self.fact_ids):
            raise ValueError(f"text document {doc} is not the next document ({len(self)})")
        self.add_documents([fact])

    def add_documents(self, facts: Sequence[Fact]) -> None:
        """Everything but the text of ``facts``, as the next documents in order: the caller
        fills the text index (:meth:`add`, or a bulk build: ``text.load_postings``)."""
        base = len(self.fact_ids)
        ids = [f.id for f in facts]
        last = self.fact_ids[-1] if self.fact_ids else 0
        if any(b <= a for a, b in zip([last, *ids], ids, strict=False)):
            raise ValueError("documents are added in ascending fact id order")
        self.fact_ids.extend(ids)
        self.current.extend(map(_is_current, facts))
        self.recency.extend([f.rows[0].valid_from for f in facts])
        self.confidence.extend([f.confidence for f in facts])
        keys = [f.subject_key for f in facts]
        codes = self._subject_code
        self.subject_codes.extend([codes.setdefault(key, len(codes)) for key in keys])
        self._unsynced.extend(facts)
        self.prev_doc.extend([-1] * len(ids))
        self.next_doc.extend([-1] * len(ids))
        for doc, fact in enumerate(facts, base):
            for name in fact.entities:
                self.entity_docs.append(name, doc)
            place = source_position(fact.source_ref)
            if place is not None:
                self._link_turn(doc, *place)

    def load_documents(self, docs: DocColumns) -> None:
        """Everything but the text of a namespace's facts, given as columns (a bulk build of an
        empty index: what :meth:`add_documents` of the same facts in id order makes)."""
        if len(self):
            raise ValueError("load_documents builds an empty index")
        if len(docs.ids) > 1 and not bool(np.all(np.diff(docs.ids) > 0)):
            raise ValueError("documents are loaded in ascending fact id order")
        self.fact_ids.frombytes(as_bytes(docs.ids, np.int64))
        self.current.extend(as_bytes(docs.current, np.uint8))
        self.recency.frombytes(as_bytes(docs.recency, np.int64))
        self.confidence.frombytes(as_bytes(docs.confidence, np.float32))
        self._subject_code = {key: code for code, key in enumerate(docs.subject_keys)}
        self.subject_codes.frombytes(as_bytes(docs.subject_codes, np.int64))
        self._loaded_later = docs.visibility
        self.entity_docs.load(*docs.entity_docs)
        prev_doc, next_doc, self._turns_later = docs.turns
        self.prev_doc.frombytes(as_bytes(prev_doc, np.int64))
        self.next_doc.frombytes(as_bytes(next_doc, np.int64))

    @property
    def turns(self) -> FirstDocs:
        """Source session -> turn number -> the first document at that turn."""
        if self._turns_later is not None:
            self._turns, self._turns_later = self._turns_later(), None
        return self._turns

    def _link_turn(self, doc: int, session: str, turn: int) -> None:
        turns = self.turns.setdefault(session, {})
        turns.setdefault(turn, doc)
        before, after = turns.get(turn - 1), turns.get(turn + 1)
        if before is not None:
            self.prev_doc[doc], self.next_doc[before] = before, doc
        if after is not None:
            self.next_doc[doc], self.prev_doc[after] = after, doc

    def set_vector(self, fact_id: int, model: str, vector: np.ndarray) -> None:
        """Record ``fact_id``'s vector from ``model`` (a later one replaces an earlier one). A
        vector whose length differs from the model's first one (only an old log can hold one)
        is left out of recall and counted in ``ignored_vectors``."""
        vectors = self.vectors.get(model)
        if vectors is None:
            vectors = self.vectors[model] = DocVectors(model, len(vector), self.vector_dtype)
        if not vectors.set(self.doc_at(fact_id), vector):
            self.ignored_vectors += 1

    def doc(self, fact_id: int) -> int | None:
        """The document of fact ``fact_id`` (None if it is not one of this index's): documents
        are numbered in ascending fact id order, so a binary search finds it."""
        doc = bisect_left(self.fact_ids, fact_id)
        return doc if doc < len(self.fact_ids) and self.fact_ids[doc] == fact_id else None

    def doc_at(self, fact_id: int) -> int:
        """:meth:`doc` of a fact that must be here (KeyError if not)."""
        doc = self.doc(fact_id)
        if doc is None:
            raise KeyError(fact_id)
        return doc

    def update(self, fact: Fact) -> None:
        doc = self.doc_at(fact.id)
        self.current[doc] = _is_current(fact)
        if self._loaded_later is not None:
            self._sync()
        synced = len(self.heads) // 2
        if doc >= synced:
            self._unsynced[doc - synced] = fact
            return
        head, rows = _visibility(fact)
        if head is None:
            self.irregular[doc] = fact
            head = (0, 0)
        else:
            self.irregular.pop(doc, None)
        self.heads[2 * doc : 2 * doc + 2] = array("q", head)
        self.rows[_ROW_WIDTH * doc : _ROW_WIDTH * (doc + 1)] = array("q", rows)

    def fields(self) -> dict[str, object]:
        """Every field, as comparable values (time-travel arrays synced first): two indexes of
        the same facts are equal exactly when these are (what ``verify`` compares)."""
        self._synced()
        text = self.text
        return {
            "terms": {t: tuple(map(list, text.postings(t))) for t in text.terms()},  # type: ignore[arg-type]
            "doc_len": [text.doc_len(d) for d in range(len(text))],
            "total_len": text.total_len,
            "fact_ids": list(self.fact_ids),
            "current": bytes(self.current),
            "recency": list(self.recency),
            "confidence": list(self.confidence),
            "subject_codes": list(self.subject_codes),
            "subject_code": dict(self._subject_code),
            "heads": list(self.heads),
            "rows": list(self.rows),
            "irregular": sorted(self.irregular),
            "entity_docs": self.entity_docs.as_dict(),
            "prev_doc": list(self.prev_doc),
            "next_doc": list(self.next_doc),
            "turns": self.turns,
            "vectors": {model: v.fields() for model, v in sorted(self.vectors.items())},
            "ignored_vectors": self.ignored_vectors,
        }

    def link_pairs(self, which: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        """(documents below ``n`` that have a previous turn (``which="prev"``) or a next one
        (``"next"``), that turn's document for each): what neighbours lend along. Kept until the
        links change, so a query does not rebuild them from all N documents."""
        cached = self._pairs.get(which)
        if cached is not None and cached[0] == (n, len(self)):
            return cached[1], cached[2]
        links = self.prev_doc if which == "prev" else self.next_doc
        other = np.frombuffer(links, dtype=np.int64)[:n]
        docs = np.flatnonzero(other >= 0)
        pair = (_frozen(docs), _frozen(other[docs]))
        self._pairs[which] = ((n, len(self)), *pair)
        return pair

    def links_by_lender(self, which: str, n: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`link_pairs` ordered by the linked turn, the one that lends: (those turns'
        documents ascending, a repeat for each document linking to it; the linking document).
        Where every link has its reverse (turns seen once each), that is the other direction's
        pairs and nothing new is kept. Cached as link_pairs is."""
        cached = self._by_lender.get(which)
        if cached is not None and cached[0] == (n, len(self)):
            return cached[1], cached[2]
        docs, other = self.link_pairs(which, n)
        back_docs, back_other = self.link_pairs("next" if which == "prev" else "prev", n)
        back = np.frombuffer(self.next_doc if which == "prev" else self.prev_doc, dtype=np.int64)
        if len(back_docs) == len(docs) and np.array_equal(back[other], docs):
            pair = (back_docs, back_other)
        else:
            order = np.argsort(other, kind="stable")
            pair = (_frozen(other[order]), _frozen(docs[order]))
        self._by_lender[which] = ((n, len(self)), *pair)
        return pair

    def link_runs(self, which: str, n: int, weight: float = 1.0) -> _Runs:
        """:meth:`link_pairs` split for a pass over all documents: (per document below ``n``,
        ``weight`` as a float32 if it links to the document beside it, else 0: ``doc - 1`` for
        ``"prev"``, ``doc + 1`` for ``"next"``; the other linked documents; their links). Turns
        written in order are mostly beside each other, so a shifted array does most of the
        work. Cached as link_pairs is, for the last weight asked."""
        cached = self._runs.get(which)
        if cached is not None and cached[0] == (n, len(self), weight):
            return cached[1]
        docs, other = self.link_pairs(which, n)
        beside = other == docs + (-1 if which == "prev" else 1)
        factor = np.zeros(n, dtype=np.float32)
        factor[docs[beside]] = weight
        runs = (_frozen(factor), _frozen(docs[~beside]), _frozen(other[~beside]))
        self._runs[which] = ((n, len(self), weight), runs)
        return runs

    def ranking_arrays(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(fact ids, recency, confidence) of the given documents."""
        return (
            np.frombuffer(self.fact_ids, dtype=np.int64)[docs],
            np.frombuffer(self.recency, dtype=np.int64)[docs],
            np.frombuffer(self.confidence, dtype=np.float32)[docs],
        )

    def current_mask(self, docs: np.ndarray | None = None) -> np.ndarray:
        """Which documents are current beliefs (believed, unsuperseded heads now); all of them
        when ``docs`` is None. A new array: the caller may change it."""
        mask: np.ndarray = np.frombuffer(self.current, dtype=np.bool_)
        return mask.copy() if docs is None else mask[docs]

    def visible_mask(
        self, docs: np.ndarray | None, seq: int, valid_at: int | None
    ) -> np.ndarray:
        """Which documents (all when ``docs`` is None) recall shows at ``seq``: without
        ``valid_at``, the believed heads (``fact.visible_row(seq, None) is not None and
        fact.is_head_at(seq)``); with it, every fact with a row believed at ``seq`` and valid at
        ``valid_at``."""
        self._synced()
        if valid_at is None:
            h = np.frombuffer(self.heads, dtype=np.int64).reshape(-1, 2)
            h = h if docs is None else h[docs]
            keep: np.ndarray = h[:, 0] <= seq
            keep &= h[:, 1] > seq
        else:
            r = np.frombuffer(self.rows, dtype=np.int64).reshape(-1, _ROW_WIDTH)
            r = r if docs is None else r[docs]
            keep = np.zeros(len(r), dtype=bool)
            for base in range(0, _ROW_WIDTH, _ROW_FIELDS):
                row = r[:, base] <= seq
                row &= r[:, base + 1] > seq
                row &= r[:, base + 2] <= valid_at
                row &= r[:, base + 3] > valid_at
                keep |= row
        if self.irregular:
            irregular = np.fromiter(self.irregular, dtype=np.int64, count=len(self.irregular))
            at = irregular if docs is None else np.flatnonzero(np.isin(docs, irregular))
            for i in at.tolist():
                fact = self.irregular[i if docs is None else int(docs[i])]
                keep[i] = fact.visible_row(seq, valid_at) is not None and (
                    valid_at is not None or fact.is_head_at(seq)
                )
        return keep

    def shown_periods(
        self, docs: np.ndarray, seq: int, valid_at: int | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(valid_from, valid_to) of the row recall shows for each of ``docs``: the first row
        believed at ``seq`` (and valid at ``valid_at`` if given), else the last row, as
        ``fact.visible_row(seq, valid_at) or fact.rows[-1]`` picks it; an open end is NEVER."""
        self._synced()
        r = np.frombuffer(self.rows, dtype=np.int64).reshape(-1, _ROW_WIDTH)[docs]
        first = (r[:, 0] <= seq) & (seq < r[:, 1])  # the first row is believed (and valid)
        if valid_at is not None:
            first &= (r[:, 2] <= valid_at) & (valid_at < r[:, 3])
        # otherwise the second row: the one believed, or the last (an absent one is all 0)
        second = (r[:, _ROW_FIELDS:] != 0).any(axis=1) & ~first
        valid_from = np.where(second, r[:, _ROW_FIELDS + 2], r[:, 2])
        valid_to = np.where(second, r[:, _ROW_FIELDS + 3], r[:, 3])
        for i in np.flatnonzero(np.isin(docs, list(self.irregular))).tolist():
            fact = self.irregular[int(docs[i])]
            row = fact.visible_row(seq, valid_at) or fact.rows[-1]
            valid_from[i] = row.valid_from
            valid_to[i] = _NEVER if row.valid_to is None else row.valid_to
        return valid_from, valid_to

    def has_subject(self, key: str) -> bool:
        """Whether some document has this subject key."""
        return key in self._subject_code

    def subject_mask(self, docs: np.ndarray | None, key: str) -> np.ndarray | None:
        """Which documents (all when ``docs`` is None) have this subject key; None if no
        document has it."""
        code = self._subject_code.get(key)
        if code is None:
            return None
        codes = np.frombuffer(self.subject_codes, dtype=np.int64)
        mask: np.ndarray = (codes if docs is None else codes[docs]) == code
        return mask

    def _synced(self) -> None:
        """Heads and rows filled for every document."""
        if self._unsynced or self._loaded_later is not None:
            self._sync()

    def _sync(self) -> None:
        """Write heads and rows of the documents added since the last time-travel query (a
        bulk load's first: they are the first documents)."""
        if self._loaded_later is not None:
            loaded, self._loaded_later = self._loaded_later, None
            heads_of, rows_of, irregular = loaded()
            self.heads.frombytes(as_bytes(heads_of, np.int64))
            self.rows.frombytes(as_bytes(rows_of, np.int64))
            self.irregular.update(irregular)
        heads: list[int] = []
        rows: list[int] = []
        base = len(self.heads) // 2
        for i, fact in enumerate(self._unsynced):
            head, packed = _visibility(fact)
            if head is None:
                self.irregular[base + i] = fact
                head = (0, 0)
            heads += head
            rows += packed
        self.heads.extend(heads)
        self.rows.extend(rows)
        self._unsynced.clear()


_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


def source_position(source_ref: str | None) -> tuple[str, int] | None:
    """(session, turn number) of a source_ref like 'D3:12' or 's1:t3' (split at the last ':'
    and the number, of at most 18 digits, that ends it), or None: then the fact has no
    neighbouring turns."""
    if not source_ref or ":" not in source_ref:
        return None
    session, _, turn = source_ref.rpartition(":")
    m = _TRAILING_NUMBER.match(turn)
    if m is None or len(m.group(2)) > 18:  # a longer number is no turn number (nor an int64)
        return None
    return f"{session}:{m.group(1)}", int(m.group(2))


def _frozen(arr: np.ndarray) -> np.ndarray:
    """``arr``, read-only: a cached array handed to every query."""
    arr.setflags(write=False)
    return arr


def _is_current(fact: Fact) -> int:
    return int(fact.superseded_by is None and fact.forgotten_seq is None)


_NO_ROW = (0, 0, 0, 0)  # believed at no seq


def _visibility(fact: Fact) -> tuple[tuple[int, int] | None, tuple[int, ...]]:
    """(head period, packed rows) of ``fact``; the head period is None (and the fact must be
    checked row by row) if it is not one period or the fact has more rows than the slots."""
    packed: tuple[int, ...] = ()
    for row in fact.rows[:_ROW_SLOTS]:
        packed += (
            row.tx_from_seq,
            _NEVER if row.tx_to_seq is None else row.tx_to_seq,
            row.valid_from,
            _NEVER if row.valid_to is None else row.valid_to,
        )
    packed += _NO_ROW * (_ROW_SLOTS - len(fact.rows))
    head = _head_period(fact) if len(fact.rows) <= _ROW_SLOTS else None
    return head, packed


def _head_period(fact: Fact) -> tuple[int, int] | None:
    """The seqs at which ``fact`` is a believed head, as ``(from, to)``: ``(0, 0)`` if none,
    None if they are not one period (then only a row-by-row check is exact)."""
    stop = _NEVER if fact.superseded_by is None else fact.superseded_by
    if len(fact.rows) == 1:
        row = fact.rows[0]
        lo, hi = row.tx_from_seq, min(stop, _NEVER if row.tx_to_seq is None else row.tx_to_seq)
        return (lo, hi) if lo < hi else (0, 0)
    spans = sorted(
        (row.tx_from_seq, min(stop, _NEVER if row.tx_to_seq is None else row.tx_to_seq))
        for row in fact.rows
    )
    start = end = 0
    for lo, hi in spans:
        if lo >= hi:
            continue
        if start == end:
            start, end = lo, hi
        elif lo <= end:
            end = max(end, hi)
        else:
            return None
    return start, end
