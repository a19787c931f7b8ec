"""Recall in one place: its knobs, the request a caller makes, and how a request is answered.

1. Candidates come from two ranked lists over the facts visible to the query (current beliefs,
   or those of ``as_of`` / ``valid_at``): BM25 over the text index and, when the store has
   vectors of the configured model, dense cosine against the query's embedding. The BM25 query
   is expanded by pseudo-relevance feedback: the best tf-idf terms of its top visible hits are
   added at a lower weight (``feedback_*``), which finds turns that share no word with the
   question but do with its best answer.
2. Fusion (``RecallConfig.fusion``): ``"rrf"`` sums ``weight / (rrf_k + rank)`` over the lists
   a fact appears in; ``"weighted"`` sums each signal's score divided by its best score, times
   its weight.
3. The fused relevance is multiplied by factors::

       confidence
       * ((1 - w) + w * 0.5 ** (age_days / half_life_days))       recency
       * (1 + entity_boost * share of the query's entities the fact names)
       * (1 + time_boost) if the fact's valid period overlaps a time the query names

``age`` is measured from the fact's valid_from to the reference time (``valid_at`` if given,
else the ``as_of`` time, else now); facts from the future count as age 0. Every weight lives in
:class:`RecallConfig`; ``explain=True`` returns each signal's contribution per hit. The ranking
itself is :func:`hmem.ranking.rank`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, fields
from datetime import date, datetime

import numpy as np

from hmem.embedders import Embedder, check_output
from hmem.errors import EmbedderError, InvalidInput
from hmem.hits import ContextTurn, Hit, PastVersion, RecallResult
from hmem.store import Store
from hmem.timeexpr import parse_time_expression
from hmem.timeparse import TimeLike, parse_time_opt
from projections.timeutil import to_us

__all__ = [
    "FUSIONS",
    "ContextTurn",
    "Hit",
    "PastVersion",
    "RecallConfig",
    "RecallQuery",
    "RecallRequest",
    "RecallResult",
    "query_time_range",
    "recall",
]

FUSIONS = ("rrf", "weighted")


@dataclass(frozen=True)
class RecallConfig:
    """Ranking knobs. ``recency_weight`` 0 ignores age; 1 multiplies by the full decay."""

    half_life_days: float = 90.0
    recency_weight: float = 0.05  # a tie-breaker: a true old fact must not lose to a new aside
    limit: int = 10
    max_tokens: int = 1000
    chars_per_token: float = 4.0
    fusion: str = "rrf"  # or "weighted"
    rrf_k: float = 10.0
    bm25_weight: float = 1.0
    dense_weight: float = 0.5
    candidates: int = 100  # taken from each ranked list before fusion
    entity_boost: float = 0.25
    time_boost: float = 0.5
    neighbor_weight: float = 0.5  # a turn also scores with its previous turn's match, times this
    next_weight: float = 0.3  # ... and with its next turn's, times this
    context_turns: int = 0  # attach up to this many neighbouring turns on each side of a hit
    dense_neighbors: bool = False  # neighbour weights apply to cosines too
    feedback_docs: int = 2  # pseudo-relevance feedback: expand the query from the top docs...
    feedback_terms: int = 10  # ... with this many of their best terms ...
    feedback_weight: float = 0.3  # ... each weighted this much against a query term (0 = off)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name == "fusion":
                if value not in FUSIONS:
                    raise InvalidInput(
                        f"RecallConfig.fusion must be one of {', '.join(map(repr, FUSIONS))}, "
                        f"not {value!r}"
                    )
            elif f.name == "dense_neighbors":
                if not isinstance(value, bool):
                    raise InvalidInput(f"RecallConfig.dense_neighbors must be True or False, "
                                       f"not {value!r}")
            elif f.type == "int":
                low = 1 if f.name in _AT_LEAST_ONE else 0
                if isinstance(value, bool) or not isinstance(value, int) or value < low:
                    raise InvalidInput(
                        f"RecallConfig.{f.name} must be an integer >= {low}, not {value!r}"
                    )
            else:
                low_text, ok = _FLOAT_RANGES.get(f.name, (">= 0", _non_negative))
                if (
                    isinstance(value, bool) or not isinstance(value, (int, float))
                    or not math.isfinite(value) or not ok(value)
                ):
                    raise InvalidInput(
                        f"RecallConfig.{f.name} must be a finite number {low_text}, not {value!r}"
                    )


def _non_negative(x: float) -> bool:
    return x >= 0


_AT_LEAST_ONE = {"limit", "max_tokens", "candidates"}
_FLOAT_RANGES: dict[str, tuple[str, Callable[[float], bool]]] = {
    "half_life_days": ("> 0", lambda x: x > 0),
    "chars_per_token": ("> 0", lambda x: x > 0),
    "recency_weight": ("from 0 to 1", lambda x: 0 <= x <= 1),
}


@dataclass(frozen=True)
class RecallRequest:
    """A caller's recall, validated (build it with :meth:`build`)."""

    query: str
    limit: int
    max_tokens: int
    as_of: datetime | int | None
    valid_at: datetime | None
    subject: str | None
    reference_time: datetime | None
    explain: bool

    @classmethod
    def build(
        cls,
        query: str,
        config: RecallConfig,
        *,
        limit: int | None = None,
        max_tokens: int | None = None,
        as_of: TimeLike | int | None = None,
        valid_at: TimeLike | None = None,
        subject: str | None = None,
        reference_time: TimeLike | None = None,
        explain: bool = False,
    ) -> RecallRequest:
        """Check every argument before any work; defaults come from ``config``."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query is empty; ask about something, e.g. 'where does maya live'")
        limit = config.limit if limit is None else limit
        max_tokens = config.max_tokens if max_tokens is None else max_tokens
        for name, value in (("limit", limit), ("max_tokens", max_tokens)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
                raise InvalidInput(f"{name} must be an integer of at least 1, not {value!r}")
        if subject is not None and (not isinstance(subject, str) or not subject.strip()):
            raise InvalidInput("subject must be a non-empty string (or None for every subject)")
        if isinstance(as_of, bool) or not isinstance(
            as_of, (type(None), int, np.integer, str, datetime, date)
        ):
            raise InvalidInput("as_of must be a datetime, an ISO string or a seq")
        if not isinstance(as_of, (type(None), int, np.integer)):
            as_of = parse_time_opt(as_of, "as_of")
        return cls(
            query=query, limit=int(limit), max_tokens=int(max_tokens),
            as_of=int(as_of) if isinstance(as_of, np.integer) else as_of,
            valid_at=parse_time_opt(valid_at, "valid_at"), subject=subject,
            reference_time=parse_time_opt(reference_time, "reference_time"),
            explain=bool(explain),
        )


@dataclass(frozen=True)
class RecallQuery:
    """A request resolved against the store: what the ranking reads (times in microseconds)."""

    text: str
    limit: int
    max_tokens: int
    as_of_seq: int | None  # None: current beliefs
    valid_at_us: int | None
    reference_us: int  # the "now" that ages are measured from
    subject: str | None
    time_range: tuple[int, int] | None = None  # a period the query names
    model: str | None = None  # the embedder's model, when the query has a vector
    vector: np.ndarray | None = None
    explain: bool = False


def recall(
    store: Store,
    namespace: str,
    request: RecallRequest,
    config: RecallConfig,
    embedder: Embedder | None,
    now: datetime,
) -> RecallResult:
    """Answer ``request`` over ``namespace`` of ``store`` (held under its lock, caught up)."""
    from hmem.ranking import rank

    seq = None if request.as_of is None else store.tx_seq(request.as_of, "as_of")
    if request.valid_at is not None:
        reference = to_us(request.valid_at)
    elif seq is not None:
        reference = store.projector.tx_times[seq - 1] if seq else 0
    else:
        reference = to_us(now)
    time_range = query_time_range(request.query, request.reference_time or now)
    if time_range is not None:
        reference = min(reference, time_range[1])  # "last summer": age counts from then, not now
    model, vector = _query_vector(store, namespace, embedder, request.query)
    query = RecallQuery(
        text=request.query, limit=request.limit, max_tokens=request.max_tokens, as_of_seq=seq,
        valid_at_us=None if request.valid_at is None else to_us(request.valid_at),
        reference_us=reference, subject=request.subject, time_range=time_range, model=model,
        vector=vector, explain=request.explain,
    )
    return rank(store.projector, namespace, config, query)


def query_time_range(query: str, reference: datetime) -> tuple[int, int] | None:
    """The valid-time range a query names ("last summer"), in microseconds, if any."""
    found = parse_time_expression(query, reference)
    if found is None or found.asks_when:
        return None  # "when did ..." names no period to favour
    return to_us(found.start), to_us(found.end)


def _query_vector(
    store: Store, namespace: str, embedder: Embedder | None, query: str
) -> tuple[str | None, np.ndarray | None]:
    """(model, query vector) when this namespace has vectors of the embedder's model."""
    if embedder is None:
        return None, None
    index = store.projector.indexes.get(namespace)
    vectors = None if index is None else index.vectors.get(embedder.model)
    if vectors is None:
        return None, None
    if vectors.dims != embedder.dims:
        raise EmbedderError(
            f"stored vectors of {embedder.model!r} have {vectors.dims} dims but the embedder "
            f"makes {embedder.dims}; re-embed with `hmem reembed` or use the original model"
        )
    vector = check_output(embedder, [query], embedder.embed([query]))[0]
    return embedder.model, vector
