"""Dedup at write: the current fact that a new one would only repeat.

A new fact repeats a fact of its namespace when that fact is still believed (a current chain
head, not forgotten), has the same subject (compared as ``subject_key``: case and spacing aside)
and the same normalised text (``normalise``: case, punctuation and spacing aside), and holds for
the same period: the same ``valid_to``, and the same ``valid_from`` when the new fact gives one
(without one, a fact starts "now": remembering it again only says it is still true, so it
repeats a fact already true now, not one that starts later). Provenance
is not compared: the first fact keeps its own source, and ``dedup=False`` stores the repeat.

Two facts that agree so have the same index tokens (projections/index_docs.py: the subject's
words and the text's, case and punctuation aside), so the facts a checkpoint part brought are
searched through the postings it kept: the facts that hold the new fact's rarest term as often,
with as many tokens. The facts folded after the part (or all, without one) are found through a
hash of (subject key, normalised text) per fact, made from the state's columns the first time
the namespace is asked and brought up to its new facts at every later ask (no recall index is
built for a write: a writer's first write in a namespace of 1M facts read and normalised every
text, 14 s). The few facts either names are then held to the rule from the columns.
"""

from __future__ import annotations

import re
import weakref
from collections.abc import Sequence
from datetime import datetime

import numpy as np

from projections.arrays import NONE
from projections.fold_state import FactColumns, TermPostings, opt
from projections.index_docs import index_counts
from projections.projector import Projector
from projections.records import subject_key
from projections.timeutil import to_us

__all__ = ["DedupKey", "dedup_key", "duplicate_of", "duplicates_of", "normalise"]

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


def duplicate_of(projector: Projector, namespace: str, key: DedupKey, now_us: int) -> int | None:
    """The id of the current fact of ``namespace`` that a new fact (its :func:`dedup_key`
    ``key``, written at ``now_us``) repeats, the newest if several; None if there is none.
    Without a ``valid_from`` the new fact says it is true now: a fact that becomes true only
    later is no repeat of it."""
    return duplicates_of(projector, namespace, [key], now_us)[0]


def duplicates_of(
    projector: Projector, namespace: str, keys: Sequence[DedupKey], now_us: int
) -> list[int | None]:
    """:func:`duplicate_of` of each of ``keys``, the namespace's facts searched for them all at
    once (a batch of new facts, each checked against the stored ones only)."""
    space = projector.held(namespace)
    if space is None:  # a namespace without events repeats nothing
        return [None] * len(keys)
    cols = space.state
    index = _KEYS.get(cols)
    if index is None:
        index = _KEYS[cols] = _Keys(namespace, cols.postings)
    index.sync(cols)
    found = index.candidates([hash((subject, text)) for subject, text, _, _ in keys])
    if index.kept is not None:
        for fids, (subject, text, _, _) in zip(found, keys, strict=True):
            fids += _kept_candidates(cols, namespace, index.kept, subject, text)
    return [_current_repeat(cols, fids, key, now_us) if fids else None
            for fids, key in zip(found, keys, strict=True)]


def _kept_candidates(
    cols: FactColumns, namespace: str, kept: TermPostings, subject: str, text: str
) -> list[int]:
    """The ids of the namespace's facts among ``kept``'s documents (the postings kept for the
    first facts: a checkpoint part's) with the index tokens of a fact of ``subject`` and
    ``text``, or some more: those that hold its rarest term as often and as many tokens."""
    docs, f = kept.docs, cols.table
    counts = index_counts(subject, text)
    if not counts:  # no index token: the facts without one
        slots = np.flatnonzero(f.doc_len[:docs] == 0)
    else:
        find = cols.terms.find
        rarest: tuple[int, int, int] | None = None  # (postings, code, tf)
        for term, tf in counts.items():
            code = find(term)
            at = int(np.searchsorted(kept.codes, code)) if code is not None else len(kept.codes)
            if at == len(kept.codes) or int(kept.codes[at]) != code:
                return []  # a term no fact of the part holds
            held = int(kept.starts[at + 1] if at + 1 < len(kept.starts) else len(kept.documents))
            size = held - int(kept.starts[at])
            if rarest is None or size < rarest[0]:
                rarest = (size, at, tf)
        assert rarest is not None
        _, at, tf = rarest
        lo = int(kept.starts[at])
        hi = lo + rarest[0]
        slots = kept.documents[lo:hi][kept.tfs[lo:hi] == tf]
        slots = slots[f.doc_len[slots] == sum(counts.values())]
    # a state may hold several namespaces' facts (a space holds one: then this keeps all)
    slots = slots[f.namespace[slots] == cols.namespaces.codes.get(namespace, -2)]
    ids: list[int] = f.ids[slots].tolist()
    return ids


def _current_repeat(cols: FactColumns, fids: list[int], key: DedupKey, now_us: int) -> int | None:
    """The newest of ``fids`` (facts whose hash is the key's) that is current and repeats it."""
    want_subject, want_text, valid_from, valid_to = key
    f, rows, subjects = cols.table, cols.rows, cols.subjects.values
    for fid in sorted(fids, reverse=True):
        slot = cols.slot(fid)
        if f.superseded_by.item(slot) != NONE or f.forgotten_seq.item(slot) != NONE:
            continue  # not current
        row = f.last_row.item(slot)  # a current fact's last row is its open one
        starts = rows.valid_from.item(row)
        if (subject_key(subjects[f.subject.item(slot)]) == want_subject
                and normalise(cols.texts[slot]) == want_text
                and opt(rows.valid_to.item(row)) == valid_to
                and (starts == valid_from if valid_from is not None else starts <= now_us)):
            return fid
    return None


class _Keys:
    """One namespace's facts by the hash of their (subject key, normalised text): sorted
    arrays, and a dict of the facts added since they were last merged in."""

    def __init__(self, namespace: str, kept: TermPostings | None) -> None:
        self.namespace = namespace
        # the postings kept for the first facts when this was made (held: the state may
        # replace its own), through which those facts are searched
        self.kept = kept
        self.through = 0 if kept is None else kept.docs  # the slots below this are in
        self.hashes = np.zeros(0, dtype=np.int64)
        self.ids = np.zeros(0, dtype=np.int64)
        self.recent: dict[int, list[int]] = {}

    def sync(self, cols: FactColumns) -> None:
        """Take in the facts folded since the last call."""
        n = cols.n
        if self.through >= n:
            return
        code = cols.namespaces.codes.get(self.namespace)
        f = cols.table
        if code is not None:
            slots = np.flatnonzero(f.namespace[self.through:n] == code) + self.through
            subjects, texts = cols.subjects.values, cols.texts
            recent = self.recent
            for slot in slots.tolist():
                h = hash((subject_key(subjects[f.subject.item(slot)]), normalise(texts[slot])))
                recent.setdefault(h, []).append(f.ids.item(slot))
        self.through = n
        if len(self.recent) > max(1024, len(self.hashes) // 8):
            self._merge()

    def candidates(self, hashes: list[int]) -> list[list[int]]:
        """For each of ``hashes``, the ids of the facts with that hash (one search for all)."""
        wanted = np.array(hashes, dtype=np.int64)
        lo = np.searchsorted(self.hashes, wanted, "left").tolist()
        hi = np.searchsorted(self.hashes, wanted, "right").tolist()
        recent, ids = self.recent, self.ids
        return [(ids[a:b].tolist() if b > a else []) + recent.get(h, [])
                for h, a, b in zip(hashes, lo, hi, strict=True)]

    def _merge(self) -> None:
        pairs = [(h, fid) for h, fids in self.recent.items() for fid in fids]
        hashes = np.concatenate([self.hashes, np.fromiter((h for h, _ in pairs), np.int64)])
        ids = np.concatenate([self.ids, np.fromiter((fid for _, fid in pairs), np.int64)])
        order = np.argsort(hashes, kind="stable")
        self.hashes, self.ids, self.recent = hashes[order], ids[order], {}


# Each namespace's keys, by its fold state (a state replaced, by a rebuild or an erasure, takes
# its keys with it)
_KEYS: weakref.WeakKeyDictionary[FactColumns, _Keys] = weakref.WeakKeyDictionary()
