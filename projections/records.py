"""The records the fold's state hands out: a fact with its bi-temporal version rows, an episode
(a recorded conversation turn), a vector. Times are microseconds since the epoch.

A fact's version rows are rectangles in the bi-temporal plane::

    valid_from <= world time < valid_to        (valid_to None = still true / open-ended)
    tx_from_seq <= belief seq < tx_to_seq      (tx_to_seq None = still believed)

How events make and close them is written in :mod:`projections.fold`.
"""

from __future__ import annotations

import msgspec

__all__ = ["Row", "Fact", "Vector", "Episode", "subject_key"]


class Row(msgspec.Struct, gc=False):
    """One version row of a fact (times in microseconds since the epoch)."""

    valid_from: int
    valid_to: int | None
    tx_from_seq: int
    tx_from: int
    tx_to_seq: int | None = None
    tx_to: int | None = None

    def believed_at(self, seq: int) -> bool:
        return self.tx_from_seq <= seq and (self.tx_to_seq is None or seq < self.tx_to_seq)

    def valid_at(self, us: int) -> bool:
        return self.valid_from <= us and (self.valid_to is None or us < self.valid_to)


class Fact(msgspec.Struct):
    """A fact and everything the log says about it."""

    id: int
    namespace: str
    subject: str
    text: str
    confidence: float
    source_agent: str | None
    source_ref: str | None
    entities: tuple[str, ...]
    created_at: int
    rows: list[Row]
    supersedes: int | None = None
    revision: str | None = None  # how this fact replaced `supersedes`: "world" or "correction"
    reason: str | None = None  # the reason given when this fact was created by a revise
    superseded_by: int | None = None
    superseded_at: int | None = None
    forgotten_seq: int | None = None
    forgotten_at: int | None = None
    forget_reason: str | None = None
    doc_len: int = 0  # number of index tokens in text (set by the projector)
    derived_from: tuple[int, ...] = ()  # lineage of an extracted fact: episode seqs
    extractor: str | None = None
    prompt_version: str | None = None
    category: str | None = None
    importance: int | None = None

    @property
    def open_row(self) -> Row | None:
        last = self.rows[-1]
        return last if last.tx_to_seq is None else None

    @property
    def subject_key(self) -> str:
        return subject_key(self.subject)

    def visible_row(self, seq: int, valid_at: int | None) -> Row | None:
        """The row believed at ``seq`` (and valid at ``valid_at`` if given), if any."""
        for row in self.rows:
            if row.believed_at(seq) and (valid_at is None or row.valid_at(valid_at)):
                return row
        return None

    def is_head_at(self, seq: int) -> bool:
        return self.superseded_by is None or self.superseded_by > seq


class Episode(msgspec.Struct, gc=False):
    """One recorded conversation turn (times in microseconds since the epoch)."""

    seq: int
    namespace: str
    session_id: str
    turn: int
    role: str
    speaker: str | None
    text: str
    observed_at: int  # valid time: when it was said (tx time when not given)
    recorded_at: int
    source_agent: str | None
    source_ref: str | None


class Vector(msgspec.Struct, gc=False):
    fact_id: int
    namespace: str
    model: str
    dims: int
    vector: bytes
    seq: int


def subject_key(subject: str) -> str:
    return " ".join(subject.split()).casefold()
