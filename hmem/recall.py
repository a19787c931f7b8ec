"""recall v1: BM25 from the in-memory index, times recency and confidence, within a token budget.

Ranking is a product of signals so that later signals (vectors, entities, time expressions) plug
in as further factors or through a fusion step that replaces ``relevance``::

    score = relevance(BM25) * confidence * ((1 - w) + w * 0.5 ** (age_days / half_life_days))

``age`` is measured from the fact's valid_from to the reference time (``valid_at`` if given,
else the ``as_of`` time, else now); facts from the future count as age 0.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime

import msgspec
import numpy as np

from projections.projector import Projector
from projections.state import Fact, Row, subject_key
from projections.text import tokenize
from projections.timeutil import from_us, from_us_opt

__all__ = ["RecallConfig", "Hit", "PastVersion", "RecallResult", "run_recall"]

_DAY_US = 86_400 * 1_000_000


@dataclass(frozen=True)
class RecallConfig:
    """Ranking knobs. ``recency_weight`` 0 ignores age; 1 multiplies by the full decay."""

    half_life_days: float = 90.0
    recency_weight: float = 0.5
    limit: int = 10
    max_tokens: int = 1000
    chars_per_token: float = 4.0


class PastVersion(msgspec.Struct, frozen=True):
    """An earlier version in a hit's revision chain, as believed at the query's as_of time."""

    id: int
    text: str
    valid_from: datetime
    valid_to: datetime | None
    revision: str  # how its successor replaced it: "world" or "correction"


class Hit(msgspec.Struct, frozen=True):
    id: int
    text: str
    subject: str
    score: float
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    confidence: float
    source_agent: str | None
    source_ref: str | None
    superseded_by: int | None
    history: tuple[PastVersion, ...]

    def render(self) -> str:
        """One line for a prompt: text, when it was true, what it replaced."""
        when = f"since {_day(self.valid_from)}"
        if self.valid_to is not None:
            when = f"{_day(self.valid_from)} to {_day(self.valid_to)}"
        parts = [when]
        for past in self.history[:3]:
            if past.revision == "correction":
                parts.append(f'corrected from "{past.text}"')
            else:
                span = f"{_day(past.valid_from)} to {_day(past.valid_to) if past.valid_to else '?'}"
                parts.append(f'replaced "{past.text}", {span}')
        return f"- {self.text} ({'; '.join(parts)}) [#{self.id}]"


def _day(dt: datetime | None) -> str:
    return "?" if dt is None else dt.date().isoformat()


class RecallResult(msgspec.Struct, frozen=True):
    """Hits in rank order, plus what the token budget cut."""

    query: str
    hits: tuple[Hit, ...]
    tokens: int
    omitted: int  # ranked hits left out by the limit or the token budget

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i: int) -> Hit:
        return self.hits[i]

    def format_block(self) -> str:
        """The hits as a prompt block, newest first, with dates."""
        ordered = sorted(self.hits, key=lambda h: (h.valid_from, h.id), reverse=True)
        return "\n".join(h.render() for h in ordered)


def run_recall(
    projector: Projector,
    namespace: str,
    query: str,
    *,
    config: RecallConfig,
    limit: int,
    max_tokens: int,
    as_of_seq: int | None,
    valid_at_us: int | None,
    reference_us: int,
    subject: str | None,
) -> RecallResult:
    index = projector.indexes.get(namespace)
    tokens = tokenize(query) or tokenize(query, keep_stopwords=True)
    if index is None or not tokens:
        return RecallResult(query, (), 0, 0)
    docs, relevance = index.text.score(tokens)
    state = projector.state
    seq = projector.last_seq if as_of_seq is None else as_of_seq
    if as_of_seq is None and valid_at_us is None:
        keep = index.current_mask(docs)
    else:
        keep = index.visible_mask(docs, seq, valid_at_us)
    if subject is not None:
        same = index.subject_mask(docs, subject_key(subject))
        if same is None:
            return RecallResult(query, (), 0, 0)
        keep &= same
    idx = np.flatnonzero(keep)
    if not len(idx):
        return RecallResult(query, (), 0, 0)
    ids, recency, confidence = index.ranking_arrays(docs[idx])
    age_days = np.maximum(reference_us - recency, 0) / _DAY_US
    decay = np.power(0.5, age_days / config.half_life_days)
    w = config.recency_weight
    score = relevance[idx] * confidence * ((1.0 - w) + w * decay)
    hits: list[Hit] = []
    used = 0
    for rank in _ranked(score, ids, max(4 * limit, _MIN_TOP)):
        if len(hits) >= limit:
            break
        fact = state.facts[int(ids[rank])]
        row = fact.visible_row(seq, valid_at_us) or fact.rows[-1]
        hit = _hit(state.facts, fact, row, float(score[rank]), seq)
        cost = math.ceil(len(hit.render()) / config.chars_per_token)
        if used + cost > max_tokens:
            continue
        hits.append(hit)
        used += cost
    return RecallResult(query, tuple(hits), used, len(idx) - len(hits))


_MIN_TOP = 32


def _ranked(score: np.ndarray, ids: np.ndarray, top: int) -> Iterator[int]:
    """Positions in rank order (best score first; the newer fact, higher id, first on ties).

    Only the ``top`` best are sorted up front; the rest are sorted if the caller gets that far
    (the token budget skipped many hits). The order is that of a full
    ``np.lexsort((-ids, -score))``: every position left for later scores strictly worse than
    every position sorted first.
    """
    neg = -score
    if len(neg) <= top:
        yield from np.lexsort((-ids, neg)).tolist()
        return
    cut = np.partition(neg, top - 1)[top - 1]
    first = neg <= cut  # at least `top` positions; more if the cut falls on a tie
    chosen = np.flatnonzero(first)
    yield from chosen[np.lexsort((-ids[chosen], neg[chosen]))].tolist()
    rest = np.flatnonzero(~first)
    yield from rest[np.lexsort((-ids[rest], neg[rest]))].tolist()


def _hit(facts: dict[int, Fact], fact: Fact, row: Row, score: float, seq: int) -> Hit:
    history = []
    prev_id, kind = fact.supersedes, fact.revision
    while prev_id is not None:
        prev = facts[prev_id]
        believed = [r for r in prev.rows if r.tx_from_seq <= seq]
        shown = believed[-1] if believed else prev.rows[0]
        history.append(
            PastVersion(prev.id, prev.text, from_us(shown.valid_from), from_us_opt(shown.valid_to), kind or "world")
        )
        prev_id, kind = prev.supersedes, prev.revision
    superseded_by = fact.superseded_by if not fact.is_head_at(seq) else None
    return Hit(
        id=fact.id,
        text=fact.text,
        subject=fact.subject,
        score=round(score, 6),
        valid_from=from_us(row.valid_from),
        valid_to=from_us_opt(row.valid_to),
        recorded_at=from_us(fact.created_at),
        confidence=fact.confidence,
        source_agent=fact.source_agent,
        source_ref=fact.source_ref,
        superseded_by=superseded_by,
        history=tuple(history),
    )
