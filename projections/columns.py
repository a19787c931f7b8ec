"""Rows of the projection's tables as numpy columns, ready for one DuckDB ``INSERT ... SELECT``.

Each ``*_columns`` function turns what the fold made (facts, version rows, postings, entities,
vectors, episodes, event rows, logged recalls) into a dict of column name -> array, named as the
table's columns (times in microseconds; :data:`TIME_COLUMNS` says which are converted to
TIMESTAMPTZ on insert).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, NamedTuple

import msgspec
import numpy as np

from eventlog.events import RecallServed
from projections.records import Episode, Vector
from projections.timeutil import to_us

__all__ = [
    "object_column",
    "TIME_COLUMNS",
    "EventRow",
    "episode_columns",
    "event_columns",
    "recall_columns",
    "recall_hit_columns",
    "vector_columns",
]


def object_column(values: Sequence[Any]) -> np.ndarray:
    """A column of Python objects (strings, lists, None) for DuckDB."""
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _ints(values: Sequence[int | None]) -> np.ndarray:
    """int64 column; None becomes NULL."""
    if None not in values:
        return np.array(values, dtype=np.int64)
    arr = np.array(values, dtype=object)
    mask = arr == None  # noqa: E711  (elementwise)
    arr[mask] = 0
    return np.ma.masked_array(arr.astype(np.int64), mask=mask)


TIME_COLUMNS = ("_at", "valid_from", "valid_to", "tx_from", "tx_to")  # name endings



class EventRow(NamedTuple):
    seq: int
    type: str
    tx_at: int
    namespace: str
    fact_id: int
    target_id: int | None
    source_agent: str | None
    source_ref: str | None
    reason: str | None
    request_id: str | None


def event_columns(events: Sequence[EventRow]) -> dict[str, np.ndarray]:
    cols: list[Sequence[Any]] = (
        list(zip(*events, strict=True)) if events else [[] for _ in EventRow._fields]
    )
    return {
        "seq": np.array(cols[0], dtype=np.int64),
        "type": object_column(cols[1]),
        "tx_at": np.array(cols[2], dtype=np.int64),
        "namespace": object_column(cols[3]),
        "fact_id": np.array(cols[4], dtype=np.int64),
        "target_id": _ints(cols[5]),
        "source_agent": object_column(cols[6]),
        "source_ref": object_column(cols[7]),
        "reason": object_column(cols[8]),
        "request_id": object_column(cols[9]),
    }


def vector_columns(vectors: Sequence[Vector]) -> dict[str, np.ndarray]:
    return {
        "fact_id": np.array([v.fact_id for v in vectors], dtype=np.int64),
        "namespace": object_column([v.namespace for v in vectors]),
        "model": object_column([v.model for v in vectors]),
        "dims": np.array([v.dims for v in vectors], dtype=np.int32),
        "vector": object_column([np.frombuffer(v.vector, dtype="<f4").tolist() for v in vectors]),
        "seq": np.array([v.seq for v in vectors], dtype=np.int64),
    }


def episode_columns(episodes: Sequence[Episode]) -> dict[str, np.ndarray]:
    cols = list(zip(*map(msgspec.structs.astuple, episodes), strict=True))
    names = Episode.__struct_fields__
    out: dict[str, np.ndarray] = {}
    for name, column in zip(names, cols, strict=True):
        if name in ("seq", "turn", "observed_at", "recorded_at"):
            out[name] = np.array(column, dtype=np.int64)
        else:
            out[name] = object_column(column)
    return out


def recall_columns(recalls: Sequence[RecallServed]) -> dict[str, np.ndarray]:
    """The ``recalls`` table: one row per logged recall (its hits are in ``recall_hits``)."""

    def us(values: Sequence[datetime | None]) -> np.ndarray:
        return _ints([None if v is None else to_us(v) for v in values])

    return {
        "seq": np.array([r.seq for r in recalls], dtype=np.int64),
        "namespace": object_column([r.namespace for r in recalls]),
        "served_at": us([r.tx_at for r in recalls]),
        "query": object_column([r.query for r in recalls]),
        "hit_limit": np.array([r.limit for r in recalls], dtype=np.int64),
        "max_tokens": np.array([r.max_tokens for r in recalls], dtype=np.int64),
        "as_of_seq": _ints([r.as_of_seq for r in recalls]),
        "valid_at": us([r.valid_at for r in recalls]),
        "subject": object_column([r.subject for r in recalls]),
        "reference_at": us([r.reference_time for r in recalls]),
        "config": object_column([r.config for r in recalls]),
        "model": object_column([r.model for r in recalls]),
        "source_agent": object_column([r.source_agent for r in recalls]),
        "source_ref": object_column([r.source_ref for r in recalls]),
        "hit_count": np.array([len(r.hits) for r in recalls], dtype=np.int64),
    }


def recall_hit_columns(recalls: Sequence[RecallServed]) -> dict[str, np.ndarray]:
    """The ``recall_hits`` table: one row per fact a logged recall returned, with its rank."""
    rows = [
        (r.seq, r.namespace, fid, rank, score)
        for r in recalls
        for rank, (fid, score) in enumerate(zip(r.hits, r.scores, strict=True), 1)
    ]
    cols: list[Sequence[Any]] = list(zip(*rows, strict=True)) if rows else [[]] * 5
    return {
        "seq": np.array(cols[0], dtype=np.int64),
        "namespace": object_column(cols[1]),
        "fact_id": np.array(cols[2], dtype=np.int64),
        "rank": np.array(cols[3], dtype=np.int64),
        "score": np.array(cols[4], dtype=np.float64),
    }
