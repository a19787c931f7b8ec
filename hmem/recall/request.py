"""Recall in one place: its knobs, the request a caller makes, and how a request is resolved
against the store (:func:`resolve`; :func:`hmem.recall.ranking.rank` answers it).

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
       * (1 + subject_boost * share of the subjects the query names that is the fact's own;
              "I" / "my" name ``asker_subject``)
       * (1 + time_boost) if the fact's valid period overlaps a time the query names

``age`` is measured from the fact's valid_from to the reference time (``valid_at`` if given,
else the ``as_of`` time, else now); facts from the future count as age 0. Every weight lives in
:class:`RecallConfig`; ``explain=True`` returns each signal's contribution per hit. The ranking
itself is :func:`hmem.recall.ranking.rank`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, datetime

import numpy as np

from hmem.embedders import Embedder, check_output
from hmem.errors import EmbedderError, InvalidInput
from hmem.recall.hits import ContextTurn, Hit, PastVersion, RecallResult
from hmem.recall.ranking import FUSIONS, RecallConfig, RecallQuery
from hmem.recall.subjects import named_subjects
from hmem.storage.store import Store
from hmem.time.arguments import Now, parse_when_opt
from hmem.time.expressions import parse_time_expression
from hmem.time.iso import TimeLike
from projections.checks import MAX_NAME_CHARS, MAX_TEXT_CHARS, check_text
from projections.records import subject_key
from projections.timeutil import to_us

__all__ = [
    "FUSIONS",
    "NO_BUDGET",
    "ContextTurn",
    "Hit",
    "PastVersion",
    "RecallConfig",
    "RecallQuery",
    "RecallRequest",
    "RecallResult",
    "query_at",
    "query_time_range",
    "resolve",
]

# The budget of a recall asked without one (max_tokens None): ``limit`` hits, however long. A
# logged recall records it as this number; views show None.
NO_BUDGET = 2**31 - 1  # the largest budget the recall log's table holds

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
        now: Now = None,
    ) -> RecallRequest:
        """Check every argument before any work; defaults come from ``config``. Times may be
        spoken ("yesterday 14:02", see :mod:`hmem.time.arguments`), read relative to
        ``reference_time``, else to ``now`` (the store's clock)."""
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query is empty; ask about something, e.g. 'where does maya live'")
        check_text("query", query, MAX_TEXT_CHARS)
        limit = config.limit if limit is None else limit
        max_tokens = config.max_tokens if max_tokens is None else max_tokens
        if max_tokens is None:
            max_tokens = NO_BUDGET
        for name, value in (("limit", limit), ("max_tokens", max_tokens)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not (
                1 <= value <= NO_BUDGET
            ):
                raise InvalidInput(
                    f"{name} must be an integer from 1 to {NO_BUDGET:,}, not {value!r}"
                )
        if subject is not None and (not isinstance(subject, str) or not subject.strip()):
            raise InvalidInput("subject must be a non-empty string (or None for every subject)")
        if subject is not None:
            check_text("subject", subject, MAX_NAME_CHARS)
        if isinstance(as_of, bool) or not isinstance(
            as_of, (type(None), int, np.integer, str, datetime, date)
        ):
            raise InvalidInput("as_of must be a datetime, an ISO string or a seq")
        reference = parse_when_opt(reference_time, "reference_time", now)
        now = reference or now
        if not isinstance(as_of, (type(None), int, np.integer)):
            as_of = parse_when_opt(as_of, "as_of", now, past=True)
        return cls(
            query=query, limit=int(limit), max_tokens=int(max_tokens),
            as_of=int(as_of) if isinstance(as_of, np.integer) else as_of,
            valid_at=parse_when_opt(valid_at, "valid_at", now), subject=subject,
            reference_time=reference,
            explain=bool(explain),
        )


def resolve(
    store: Store,
    namespace: str,
    request: RecallRequest,
    embedder: Embedder | None,
    now: datetime,
    config: RecallConfig,
) -> RecallQuery:
    """``request`` resolved against the store: its transaction point as a seq, the query's
    embedding (when the namespace has vectors of the embedder's model; made without the names
    of the subjects it names unless ``config.embed_subject_names``: hmem.recall.subjects), the
    reference time."""
    seq = None if request.as_of is None else store.tx_seq(request.as_of, "as_of", now)
    model, vector = _query_vector(store, namespace, embedder, request.query,
                                  config.embed_subject_names, request.subject)
    return query_at(
        store.projector.tx_times, request.query, limit=request.limit,
        max_tokens=request.max_tokens, as_of_seq=seq, valid_at=request.valid_at,
        subject=request.subject, reference_time=request.reference_time, now=now, model=model,
        vector=vector, explain=request.explain,
    )


def query_at(
    tx_times: Sequence[int],
    text: str,
    *,
    limit: int,
    max_tokens: int,
    as_of_seq: int | None,
    valid_at: datetime | None,
    subject: str | None,
    reference_time: datetime | None,
    now: datetime,
    model: str | None,
    vector: np.ndarray | None,
    explain: bool = False,
) -> RecallQuery:
    """The :class:`RecallQuery` of a recall made at ``now`` (a logged recall is re-run through
    this too). Ages count from ``valid_at``, else the ``as_of`` time, else now, and never from
    after a period the query names."""
    if valid_at is not None:
        reference = to_us(valid_at)
    elif as_of_seq is not None:
        reference = tx_times[as_of_seq - 1] if as_of_seq else 0
    else:
        reference = to_us(now)
    time_range = query_time_range(text, reference_time or now)
    if time_range is not None:
        reference = min(reference, time_range[1])  # "last summer": age counts from then, not now
    return RecallQuery(
        text=text, limit=limit, max_tokens=max_tokens, as_of_seq=as_of_seq,
        valid_at_us=None if valid_at is None else to_us(valid_at), reference_us=reference,
        subject=subject, time_range=time_range, model=model, vector=vector, explain=explain,
    )


def query_time_range(query: str, reference: datetime) -> tuple[int, int] | None:
    """The valid-time range a query names ("last summer"), in microseconds, if any."""
    found = parse_time_expression(query, reference)
    if found is None or found.asks_when:
        return None  # "when did ..." names no period to favour
    return to_us(found.start), to_us(found.end)


def _query_vector(
    store: Store, namespace: str, embedder: Embedder | None, query: str, names: bool,
    subject: str | None,
) -> tuple[str | None, np.ndarray | None]:
    """(model, query vector) when this namespace has vectors of the embedder's model; the
    vector of the query without the subjects it names unless ``names`` (with a ``subject``
    filter, without that subject's name only)."""
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
    if not names:
        query = named_subjects(index, query).without(
            None if subject is None else subject_key(subject))
    vector = check_output(embedder, [query], embedder.embed([query]))[0]
    return embedder.model, vector
