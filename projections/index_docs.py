"""A fact's BM25 document: its text, led by its subject's words when the text lacks them.

:func:`index_counts` makes one document's term counts (a live write, a query's neighbours);
:func:`index_runs` makes the documents of many facts at once (replay, a bulk write, a copy),
equal token for token to :func:`index_counts` of each (tests/projections/test_index_docs.py),
with one pass over all the texts (two when some are not ASCII) and numpy in place of a loop
per token.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from projections.arrays import in_sorted
from projections.text import STOPWORDS, WORD, stem_token, tokenize, words_of

__all__ = ["TOKENS_ID", "index_counts", "index_runs", "index_text"]


def index_text(subject: str, text: str) -> str:
    """What the text index (and embedders) see of a fact: its text, led by its subject when
    the text does not already contain the subject's words."""
    subject_words = set(tokenize(subject))
    if subject_words and not subject_words <= set(tokenize(text)):
        return f"{subject}: {text}"
    return text


def index_counts(subject: str, text: str) -> dict[str, int]:
    """Token counts of ``index_text(subject, text)`` (the document's postings), in order of
    first occurrence."""
    tokens = tokenize(text)
    subject_tokens = _subject_tokens(subject)
    if subject_tokens and not subject_tokens[1] <= set(tokens):
        tokens = subject_tokens[0] + tokens
    return Counter(tokens)


_SUBJECTS: dict[str, tuple[list[str], frozenset[str]]] = {}


def _subject_tokens(subject: str) -> tuple[list[str], frozenset[str]] | None:
    got = _SUBJECTS.get(subject)
    if got is None:
        tokens = tokenize(subject)
        got = (tokens, frozenset(tokens))
        if len(_SUBJECTS) < 100_000:
            _SUBJECTS[subject] = got
    return got if got[0] else None


def _tokens_id() -> str:
    """What identifies the rule that makes a fact's index tokens (the words, the stopwords,
    the stemmer, the subject's words led in), by what it makes of a probe: the index tokens a
    checkpoint keeps are used only by a process that makes the same (a process whose stemmer or
    rules differ would find neither repeats nor hits among them)."""
    probe = index_counts(
        "Maya Lee", "Running cities' generously-organised meetings: 42 cafés, naïve "
        "\u2018quotes\u2019, İstanbul STRASSE straße, the_end; don't stop")
    rule = "\n".join([WORD.pattern, " ".join(sorted(STOPWORDS)), repr(sorted(probe.items()))])
    return hashlib.blake2b(rule.encode("utf-8"), digest_size=8).hexdigest()


# Between two casefolded texts: a word no casefolded text holds (casefold lowers A-Z)
_SEPARATOR = "HMEMDOCEND"


def index_runs(
    subjects: Sequence[str], texts: Sequence[str]
) -> tuple[list[str], npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The documents of many facts at once: ``(terms, runs, lengths)``. Document ``i`` is
    ``terms[t] for t in runs[start:start + lengths[i]]`` (documents back to back): each term
    of ``index_counts(subjects[i], texts[i])`` repeated as often as it occurs, in that dict's
    order. ``terms`` are the distinct terms in order of first appearance in the runs."""
    n = len(texts)
    if n == 0:
        return [], np.zeros(0, np.int64), np.zeros(0, np.int64)
    # the texts back to back, the ASCII ones first (split in C: see words_of), then the others
    folded = [t.casefold() for t in texts]
    head = [i for i, t in enumerate(folded) if t.isascii()]
    tail = [i for i, t in enumerate(folded) if not t.isascii()]
    by_kind = head + tail
    words = words_of(f" {_SEPARATOR} ".join([folded[i] for i in head]))
    if head and tail:
        words.append(_SEPARATOR)
    words += words_of(f" {_SEPARATOR} ".join([folded[i] for i in tail]))
    tokens = list(map(stem_token, words))  # '' for a stopword
    # the subjects' tokens (distinct subjects once), in the same vocabulary
    per_subject = {s: _subject_tokens(s) for s in dict.fromkeys(subjects)}
    vocab_list = list(dict.fromkeys(tokens))
    for got in per_subject.values():
        if got is not None:
            vocab_list += got[0]
    vocab = {t: i for i, t in enumerate(dict.fromkeys(vocab_list))}
    ids = np.fromiter(map(vocab.__getitem__, tokens), dtype=np.int64, count=len(tokens))
    width = len(vocab)
    # the separator's token is upper case: no casefolded word stems to it
    is_end = ids == vocab.get(stem_token(_SEPARATOR), -1)
    doc = np.asarray(by_kind, dtype=np.int64)[np.cumsum(is_end)]
    keep = ~is_end
    if "" in vocab:
        keep &= ids != vocab[""]
    text_doc, text_ids = doc[keep], ids[keep]
    # the subject leads a document whose text lacks one of the subject's tokens
    lead_doc, lead_ids = _subject_leads(subjects, per_subject, vocab)
    if len(lead_doc):
        have = np.sort(text_doc * width + text_ids)
        want = lead_doc * width + lead_ids
        present = in_sorted(have, want)
        lacking = np.bincount(lead_doc[~present], minlength=n) > 0
        chosen = lacking[lead_doc]
        lead_doc, lead_ids = lead_doc[chosen], lead_ids[chosen]
    # one stream, document by document, the subject's tokens first
    all_doc = np.concatenate([lead_doc, text_doc])
    all_ids = np.concatenate([lead_ids, text_ids])
    part = np.concatenate([np.zeros(len(lead_doc), np.int8), np.ones(len(text_doc), np.int8)])
    stream = np.lexsort((np.arange(len(all_doc)), part, all_doc))
    all_doc, all_ids = all_doc[stream], all_ids[stream]
    # each term's occurrences together, at its first occurrence in its document
    _, first, inverse = np.unique(all_doc * width + all_ids, return_index=True,
                                  return_inverse=True)
    runs = all_ids[np.argsort(first[inverse.reshape(-1)], kind="stable")]
    lengths = np.bincount(all_doc, minlength=n).astype(np.int64)
    # the terms numbered in order of first appearance
    used, at = np.unique(runs, return_index=True)
    order = used[np.argsort(at)]
    number = np.zeros(width, np.int64)
    number[order] = np.arange(len(order))
    terms = list(vocab)
    return [terms[i] for i in order.tolist()], number[runs], lengths


def _subject_leads(
    subjects: Sequence[str], per_subject: dict[str, tuple[list[str], frozenset[str]] | None],
    vocab: dict[str, int],
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(document, token id) of every subject token, documents ascending, in subject order."""
    code = {s: np.array([vocab[t] for t in got[0]], np.int64)
            for s, got in per_subject.items() if got is not None}
    empty = np.zeros(0, np.int64)
    parts = [code.get(s, empty) for s in subjects]
    lengths = np.fromiter(map(len, parts), dtype=np.int64, count=len(parts))
    ids = np.concatenate(parts) if parts else empty
    return np.repeat(np.arange(len(subjects), dtype=np.int64), lengths), ids


TOKENS_ID = _tokens_id()
