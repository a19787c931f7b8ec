"""Rows of the projection's tables as numpy columns, ready for one DuckDB ``INSERT ... SELECT``.

Each ``*_columns`` function turns what the fold made (facts, version rows, postings, entities,
vectors, episodes, event rows, logged recalls) into a dict of column name -> array, named as the
table's columns (times in microseconds; :data:`TIME_COLUMNS` says which are converted to
TIMESTAMPTZ on insert).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from itertools import chain
from typing import Any, NamedTuple

import msgspec
import numpy as np

from eventlog.events import RecallServed
from projections.state import Episode, Fact, Vector, subject_key
from projections.timeutil import to_us

__all__ = [
    "FACT_COLUMNS",
    "FACT_TIMES",
    "TIME_COLUMNS",
    "EventRow",
    "entity_columns",
    "episode_columns",
    "event_columns",
    "fact_columns",
    "posting_columns",
    "recall_columns",
    "recall_hit_columns",
    "row_columns",
    "vector_columns",
]


def _objects(values: Sequence[Any]) -> np.ndarray:
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


def event_columns(events: Sequence[EventRow]) -> dict[str, np.ndarray]:
    cols: list[Sequence[Any]] = (
        list(zip(*events, strict=True)) if events else [[] for _ in EventRow._fields]
    )
    return {
        "seq": np.array(cols[0], dtype=np.int64),
        "type": _objects(cols[1]),
        "tx_at": np.array(cols[2], dtype=np.int64),
        "namespace": _objects(cols[3]),
        "fact_id": np.array(cols[4], dtype=np.int64),
        "target_id": _ints(cols[5]),
        "source_agent": _objects(cols[6]),
        "source_ref": _objects(cols[7]),
        "reason": _objects(cols[8]),
    }


_FACT_FIELDS = tuple(Fact.__struct_fields__)
FACT_COLUMNS = tuple(name for name in _FACT_FIELDS if name != "rows")  # the facts table
FACT_TIMES = ("created_at", "superseded_at", "forgotten_at")
_INT64 = {"id", "created_at"}
_NULLABLE_INT64 = {
    "supersedes", "superseded_by", "superseded_at", "forgotten_seq", "forgotten_at", "importance",
}


def fact_columns(facts: list[Fact]) -> dict[str, np.ndarray]:
    columns = zip(*map(msgspec.structs.astuple, facts), strict=True)
    cols: dict[str, np.ndarray] = {}
    for name, column in zip(_FACT_FIELDS, columns, strict=True):
        if name == "rows":
            continue
        if name in _INT64:
            cols[name] = np.array(column, dtype=np.int64)
        elif name in _NULLABLE_INT64:
            cols[name] = _ints(column)
        elif name == "confidence":
            cols[name] = np.array(column, dtype=np.float64)
        elif name == "doc_len":
            cols[name] = np.array(column, dtype=np.int32)
        elif name == "entities":
            cols[name] = _objects([list(e) for e in column])
        elif name == "derived_from":
            cols[name] = _objects([[int(x) for x in e] for e in column])
        else:
            cols[name] = _objects(column)
    cols["subject_key"] = _objects([subject_key(s) for s in cols["subject"]])
    return cols


def row_columns(facts: list[Fact]) -> dict[str, np.ndarray]:
    counts = np.array([len(f.rows) for f in facts], dtype=np.int64)
    rows = list(chain.from_iterable(f.rows for f in facts))
    vf, vt, tfs, tf, tts, tt = zip(*map(msgspec.structs.astuple, rows), strict=True)
    return {
        "fact_id": np.repeat(np.array([f.id for f in facts], dtype=np.int64), counts),
        "row_no": np.fromiter(
            chain.from_iterable(range(len(f.rows)) for f in facts), dtype=np.int32,
            count=len(rows),
        ),
        "namespace": np.repeat(_objects([f.namespace for f in facts]), counts),
        "valid_from": np.array(vf, dtype=np.int64),
        "valid_to": _ints(vt),
        "tx_from_seq": np.array(tfs, dtype=np.int64),
        "tx_from": np.array(tf, dtype=np.int64),
        "tx_to_seq": _ints(tts),
        "tx_to": _ints(tt),
    }


def posting_columns(
    facts: Mapping[int, Fact], new_facts: Sequence[tuple[int, dict[str, int]]]
) -> dict[str, np.ndarray]:
    """Postings of the new facts (``facts``: at least those, by id)."""
    lengths = np.array([len(counts) for _, counts in new_facts], dtype=np.int64)
    ids = np.array([fid for fid, _ in new_facts], dtype=np.int64)
    namespaces = _objects([facts[fid].namespace for fid, _ in new_facts])
    return {
        "namespace": np.repeat(namespaces, lengths),
        "term": _objects(list(chain.from_iterable(counts for _, counts in new_facts))),
        "fact_id": np.repeat(ids, lengths),
        "tf": np.fromiter(
            chain.from_iterable(counts.values() for _, counts in new_facts),
            dtype=np.int32, count=int(lengths.sum()),
        ),
    }


def entity_columns(
    by_id: Mapping[int, Fact], new_facts: Sequence[tuple[int, dict[str, int]]]
) -> dict[str, np.ndarray]:
    """Entity rows of the new facts (``by_id``: at least those)."""
    facts = [by_id[fid] for fid, _ in new_facts]
    lengths = np.array([len(f.entities) for f in facts], dtype=np.int64)
    return {
        "namespace": np.repeat(_objects([f.namespace for f in facts]), lengths),
        "entity": _objects(list(chain.from_iterable(f.entities for f in facts))),
        "fact_id": np.repeat(np.array([f.id for f in facts], dtype=np.int64), lengths),
    }


def vector_columns(vectors: Sequence[Vector]) -> dict[str, np.ndarray]:
    return {
        "fact_id": np.array([v.fact_id for v in vectors], dtype=np.int64),
        "namespace": _objects([v.namespace for v in vectors]),
        "model": _objects([v.model for v in vectors]),
        "dims": np.array([v.dims for v in vectors], dtype=np.int32),
        "vector": _objects([np.frombuffer(v.vector, dtype="<f4").tolist() for v in vectors]),
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
            out[name] = _objects(column)
    return out


def recall_columns(recalls: Sequence[RecallServed]) -> dict[str, np.ndarray]:
    """The ``recalls`` table: one row per logged recall (its hits are in ``recall_hits``)."""

    def us(values: Sequence[datetime | None]) -> np.ndarray:
        return _ints([None if v is None else to_us(v) for v in values])

    return {
        "seq": np.array([r.seq for r in recalls], dtype=np.int64),
        "namespace": _objects([r.namespace for r in recalls]),
        "served_at": us([r.tx_at for r in recalls]),
        "query": _objects([r.query for r in recalls]),
        "hit_limit": np.array([r.limit for r in recalls], dtype=np.int64),
        "max_tokens": np.array([r.max_tokens for r in recalls], dtype=np.int64),
        "as_of_seq": _ints([r.as_of_seq for r in recalls]),
        "valid_at": us([r.valid_at for r in recalls]),
        "subject": _objects([r.subject for r in recalls]),
        "reference_at": us([r.reference_time for r in recalls]),
        "config": _objects([r.config for r in recalls]),
        "model": _objects([r.model for r in recalls]),
        "source_agent": _objects([r.source_agent for r in recalls]),
        "source_ref": _objects([r.source_ref for r in recalls]),
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
        "namespace": _objects(cols[1]),
        "fact_id": np.array(cols[2], dtype=np.int64),
        "rank": np.array(cols[3], dtype=np.int64),
        "score": np.array(cols[4], dtype=np.float64),
    }
