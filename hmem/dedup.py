"""Dedup at write: the current fact that a new one would only repeat.

A new fact repeats a fact of its namespace when that fact is still believed (a current chain
head, not forgotten), has the same subject (compared as ``subject_key``: case and spacing aside)
and the same normalised text (``normalise``: case, punctuation and spacing aside), and holds for
the same period: the same ``valid_to``, and the same ``valid_from`` when the new fact gives one
(without one, a fact starts "now": remembering it again only says it is still true, so it
repeats a fact already true now, not one that starts later). Provenance
is not compared: the first fact keeps its own source, and ``dedup=False`` stores the repeat.

Found through the recall index: equal normalised texts have equal index tokens, so only the
documents holding the new text's rarest term, with its number of tokens, are read.
"""

from __future__ import annotations

import re
from datetime import datetime

import numpy as np

from projections.fold_state import opt
from projections.projector import Projector, index_counts
from projections.records import subject_key
from projections.timeutil import to_us

__all__ = ["DedupKey", "dedup_key", "duplicate_of", "normalise"]

_PUNCT = re.compile(r"[^\w\s]")


def normalise(text: str) -> str:
    """The text as duplicates are compared: case-folded, without punctuation, spaces collapsed."""
    return " ".join(_PUNCT.sub(" ", text.casefold()).split())


# (subject key, normalised text, valid_from in us or None, valid_to in us or None)
DedupKey = tuple[str, str, int | None, int | None]


def dedup_key(
    subject: str, text: str, valid_from: datetime | None, valid_to: datetime | None
) -> DedupKey:
    """What two new facts share when one repeats the other."""
    return (
        subject_key(subject), normalise(text),
        None if valid_from is None else to_us(valid_from),
        None if valid_to is None else to_us(valid_to),
    )


def duplicate_of(
    projector: Projector, namespace: str, subject: str, text: str, key: DedupKey, now_us: int
) -> int | None:
    """The id of the current fact of ``namespace`` that a new fact (``subject``, ``text``,
    with :func:`dedup_key` ``key``, written at ``now_us``) repeats, the newest if several; None
    if there is none. Without a ``valid_from`` the new fact says it is true now: a fact that
    becomes true only later is no repeat of it."""
    index = projector.indexes.get(namespace)
    if index is None:
        return None
    counts = index_counts(subject, text)
    text_index = index.text
    if counts:
        found = text_index.postings(min(counts, key=text_index.df))
        if found is None:
            return None
        docs = found[0]
    else:  # no index token (only stopwords or punctuation): read every document
        docs = np.arange(len(index))
    docs = docs[text_index.doc_lengths()[docs] == sum(counts.values())]
    docs = docs[index.current_mask(docs)]
    want_subject, want_text, valid_from, valid_to = key
    cols = projector.state
    subjects, rows = cols.subjects.values, cols.rows
    for doc in docs[::-1].tolist():  # read from the columns: no Fact is made
        fid = int(index.fact_ids[doc])
        slot = cols.slot(fid)
        row = int(cols.table.last_row[slot])  # a current fact's last row is its open one
        starts = int(rows.valid_from[row])
        if (subject_key(subjects[cols.table.subject[slot]]) == want_subject
                and normalise(cols.texts[slot]) == want_text
                and opt(int(rows.valid_to[row])) == valid_to
                and (starts == valid_from if valid_from is not None else starts <= now_us)):
            return fid
    return None
