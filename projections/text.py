"""Tokenizer and an incrementally updated in-memory BM25 index (one per namespace)."""

from __future__ import annotations

import math
import re
from array import array
from collections import Counter
from collections.abc import Iterable
from typing import Protocol

import numpy as np
import snowballstemmer

from projections.arrays import array_of, distinct

__all__ = [
    "tokenize", "term_counts", "stem_token", "TextIndex", "TermGroups", "STOPWORDS", "STEMMER",
    "WORD", "words_of",
]

WORD = re.compile(r"[^\W_]+")  # a word of a text: letters and digits, no underscore
# every ASCII character but a letter or a digit, to a space: WORD's matches in an ASCII text
# are what is left between spaces
_NOT_WORD = str.maketrans({c: " " for c in map(chr, range(128)) if not c.isalnum()})
STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before being
    below between both but by can could did do does doing down during each few for from further
    had has have having he her here hers herself him himself his how i if in into is it its itself
    just me more most my myself no nor not now of off on once only or other our ours ourselves out
    over own same she should so some such than that the their theirs them themselves then there
    these they this those through to too under until up very was we were what when where which
    while who whom why will with would you your yours yourself yourselves s t don""".split()
)


# English Snowball (Porter 2): PyStemmer's compiled one (snowballstemmer returns it when installed)
STEMMER = snowballstemmer.stemmer("english")


def _stem(word: str) -> str:
    """The Snowball (Porter 2) English stem: "camping" -> "camp", "cities" -> "citi"."""
    stem: str = STEMMER.stemWord(word)
    return stem


class _StemCache(dict[str, str]):
    """word -> index token ('' for a stopword); computed once per distinct word."""

    def __missing__(self, word: str) -> str:
        token = "" if word in STOPWORDS else _stem(word)
        if len(self) < 1_000_000:
            self[word] = token
        return token


_TOKENS = _StemCache()
stem_token = _TOKENS.__getitem__
"""The index token of one lower-cased word: its stem, or '' for a stopword (cached)."""


def words_of(text: str) -> list[str]:
    """``WORD.findall(text)``: the runs of letters and digits. An ASCII text (most are) is
    split in C by ``str.translate`` and ``str.split``, ~4x the regular expression's speed."""
    if text.isascii():
        return text.translate(_NOT_WORD).split()
    found: list[str] = WORD.findall(text)
    return found


def tokenize(text: str, *, keep_stopwords: bool = False) -> list[str]:
    """Lower-cased, stemmed word tokens; stopwords dropped unless asked to keep them."""
    words = words_of(text.casefold())
    if keep_stopwords:
        return [_stem(w) for w in words]
    return [t for t in map(stem_token, words) if t]


def term_counts(text: str) -> dict[str, int]:
    """How often each index token occurs in ``text`` (the document's postings)."""
    counts: dict[str, int] = {}
    get = counts.get
    for token in tokenize(text):
        counts[token] = get(token, 0) + 1
    return counts


class TermGroups(Protocol):
    """Term -> its group of postings loaded in bulk (a dict, or one that makes none:
    projections/index_tokens.py)."""

    def get(self, term: str) -> int | None: ...

    def keys(self) -> Iterable[str]: ...


class _Postings:
    __slots__ = ("docs", "tfs", "_cache")

    def __init__(self) -> None:
        self.docs = array("i")
        self.tfs = array("f")
        self._cache: tuple[np.ndarray, np.ndarray] | None = None

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        if self._cache is None or len(self._cache[0]) != len(self.docs):
            self._cache = (
                np.array(self.docs, dtype=np.int64), np.array(self.tfs, dtype=np.float32)
            )
        return self._cache


def _idf(df: int, n: int) -> float:
    """BM25's inverse document frequency of a term in ``df`` of ``n`` documents."""
    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


class TextIndex:
    """BM25 over documents numbered 0, 1, 2... in the order they were added; append-only.

    Postings loaded in bulk (:meth:`load_postings`) stay as three flat arrays (documents, term
    frequencies, each term's bounds) with a term -> position dict, not an object per term;
    documents added one by one afterwards get an object per term of their own, and a term's
    postings are the loaded ones followed by those.
    """

    def __init__(self, k1: float = 1.0, b: float = 0.85) -> None:
        self.k1 = k1
        self.b = b
        self._terms: dict[str, _Postings] = {}
        self._doc_len = array("f")
        self._total_len = 0.0
        self._loaded: TermGroups = {}  # term -> its group in the loaded postings
        self._bounds = np.zeros(1, dtype=np.int64)
        self._docs = np.zeros(0, dtype=np.int32)
        self._tfs = np.zeros(0, dtype=np.uint8)  # counts, widened per query (_contribution)
        self._norm_of: tuple[tuple[int, float], np.ndarray] = ((-1, 0.0), np.zeros(0, np.float32))

    def __len__(self) -> int:
        return len(self._doc_len)

    def add(self, tokens: list[str] | dict[str, int]) -> int:
        """Index one document, given its tokens or its term counts; returns its number."""
        doc = len(self._doc_len)
        counts = tokens if isinstance(tokens, dict) else Counter(tokens)
        length = sum(counts.values())
        for term, tf in counts.items():
            p = self._terms.get(term)
            if p is None:
                p = self._terms[term] = _Postings()
            p.docs.append(doc)
            p.tfs.append(tf)
        self._doc_len.append(length)
        self._total_len += length
        return doc

    def load_postings(
        self,
        doc_len: np.ndarray,
        terms: list[str] | TermGroups,
        starts: np.ndarray,
        docs: np.ndarray,
        tfs: np.ndarray,
    ) -> None:
        """Fill this empty index with what :meth:`add` builds from documents
        ``0 .. len(doc_len) - 1``, given each document's length and every posting:
        ``terms[i]``'s postings are ``docs[starts[i]:starts[i + 1]]`` (ascending) with term
        frequencies ``tfs`` (``terms`` a list, or what gives each term's ``i``)."""
        if len(self._doc_len):
            raise ValueError("load_postings fills an empty index only")
        self._doc_len = array_of("f", doc_len, np.float32)
        self._total_len = float(np.asarray(doc_len, dtype=np.int64).sum())
        self._loaded = dict(zip(terms, range(len(terms)), strict=True)) if isinstance(
            terms, list) else terms
        self._bounds = np.append(np.asarray(starts, dtype=np.int64), len(docs))
        self._docs = np.asarray(docs, dtype=np.int32)
        self._tfs = np.asarray(tfs)

    def df(self, term: str) -> int:
        """The number of documents holding ``term`` (its postings are not gathered)."""
        group = self._loaded.get(term)
        added = self._terms.get(term)
        loaded = 0 if group is None else int(self._bounds[group + 1] - self._bounds[group])
        return loaded + (0 if added is None else len(added.docs))

    def doc_lengths(self) -> np.ndarray:
        """Every document's number of index tokens (a view: do not change it)."""
        return np.frombuffer(self._doc_len, dtype=np.float32, count=len(self._doc_len))

    def doc_len(self, doc: int) -> float:
        """The number of index tokens of document ``doc``."""
        return self._doc_len[doc]

    @property
    def total_len(self) -> float:
        """The number of index tokens of all documents (BM25's average length is this / n)."""
        return self._total_len

    def terms(self) -> list[str]:
        """Every term with a posting, sorted."""
        return sorted(set(self._loaded.keys()) | self._terms.keys())

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(documents ascending, term frequencies) of ``term``; None if no document has it."""
        group = self._loaded.get(term)
        added = self._terms.get(term)
        if group is None:
            return None if added is None else added.arrays()
        lo, hi = int(self._bounds[group]), int(self._bounds[group + 1])
        docs, tfs = self._docs[lo:hi], self._tfs[lo:hi]
        if added is None:
            return docs, tfs
        more_docs, more_tfs = added.arrays()
        return np.concatenate([docs, more_docs]), np.concatenate([tfs, more_tfs])

    def idf(self, term: str) -> float:
        """BM25's inverse document frequency of ``term`` (0 for a term no document has)."""
        p = self.postings(term)
        n = len(self._doc_len)
        if p is None or not n:
            return 0.0
        return _idf(len(p[0]), n)

    def score(self, query_tokens: list[str] | dict[str, float]) -> tuple[np.ndarray, np.ndarray]:
        """(doc numbers, BM25 scores) of every document sharing a term with the query; a dict
        query weighs each term's contribution. Only the documents the postings name are
        touched: no pass over all n."""
        n = len(self._doc_len)
        postings = self._weighted(query_tokens)
        if not n or not postings:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        parts = [self._contribution(p, weight, n) for p, weight in postings]
        hit = distinct(np.concatenate([docs for docs, _ in parts]))
        found_scores = np.zeros(len(hit), dtype=np.float32)
        for docs, contribution in parts:  # term by term, in float32, as accumulate() adds
            found_scores[np.searchsorted(hit, docs)] += contribution
        keep = np.flatnonzero(found_scores)
        return hit[keep].astype(np.int64), found_scores[keep]

    def accumulate(self, query_tokens: list[str] | dict[str, float], into: np.ndarray) -> None:
        """Add the query's BM25 scores to ``into`` (one float32 per document, changed in place),
        term by term: the same float32 sums as :meth:`score`."""
        n = len(self._doc_len)
        if len(into) != n:
            raise ValueError(f"accumulate needs one score per document ({n}), not {len(into)}")
        for p, weight in self._weighted(query_tokens) if n else ():
            docs, contribution = self._contribution(p, weight, n)
            np.add.at(into, docs, contribution)  # a term's postings are distinct documents

    def _weighted(
        self, query_tokens: list[str] | dict[str, float]
    ) -> list[tuple[tuple[np.ndarray, np.ndarray], float]]:
        """(postings, weight) of each query term that some document holds, in query order."""
        if isinstance(query_tokens, dict):
            weights = query_tokens
        else:
            weights = dict.fromkeys(query_tokens, 1.0)
        found = [(self.postings(t), w) for t, w in weights.items()]
        return [(p, w) for p, w in found if p is not None]

    def term_scores(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        """``score([term])`` without a pass over every document: the term's postings (doc
        numbers ascending) and their BM25 scores, the same float32 values."""
        p = self.postings(term)
        n = len(self._doc_len)
        if p is None or not n:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        docs, contribution = self._contribution(p, 1.0, n)
        scores: np.ndarray = np.float32(0) + contribution  # what score() adds to its zeros
        return docs.astype(np.int64), scores

    def _contribution(
        self, p: tuple[np.ndarray, np.ndarray], weight: float, n: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """A term's postings and what it adds to each of their BM25 scores."""
        docs = p[0]
        # idf * tfs * (k1 + 1) / (tfs + norm), the same float32 steps, in place
        contribution: np.ndarray = p[1].astype(np.float32)
        denominator = np.take(self._norms(n), docs)
        denominator += contribution
        contribution *= float(weight) * _idf(len(docs), n)  # a Python float: stays float32
        contribution *= self.k1 + 1.0
        contribution /= denominator
        return docs, contribution

    def _norms(self, n: int) -> np.ndarray:
        """Each document's length term of BM25, ``k1 * (1 - b + b * doc_len / avgdl)``: kept
        until a document is added (every term of every query reads it)."""
        if self._norm_of[0] != (n, self._total_len):
            avgdl = self._total_len / n or 1.0
            doc_len = np.frombuffer(self._doc_len, dtype=np.float32, count=n)
            k1, b = self.k1, self.b
            self._norm_of = ((n, self._total_len), k1 * (1.0 - b + b * doc_len / avgdl))
        return self._norm_of[1]
