"""The SQL surface: the tables a namespace is seen as in DuckDB, made from the state on demand.

Nothing here is stored: ``Memory.sql``, ``Memory.events`` and the exports load one namespace's
rows into a private DuckDB database (hmem/notebook/sql.py), and ``verify`` compares these rows
of the live state with a replay's. Tables (docs/audit.md documents every column):

* ``facts``: one row per fact (statement), with provenance and its place in a revision chain.
* ``fact_versions``: the bi-temporal rows (valid_from/valid_to x tx_from/tx_to, with seqs).
* ``entities``: entity -> fact.
* ``postings``: the text index (term, fact, term frequency); ``facts.doc_len`` the lengths.
* ``events``: one row per logged event (seq, type, tx_at, fact, provenance; no text).
* ``vectors``: recorded embeddings.
* ``episodes``: raw conversation turns; not facts, never recalled as facts.
* ``recalls`` / ``recall_hits``: logged recalls and the facts each returned (rank, score).

:func:`namespace_rows` makes every table's rows of one namespace as numpy columns (times in
microseconds; :data:`TIME_COLUMNS` names the ones loaded as TIMESTAMPTZ), each column as the
DDL names it, ready for one ``INSERT ... SELECT`` per table.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from itertools import chain
from typing import Any

import duckdb
import msgspec
import numpy as np
import numpy.typing as npt

from eventlog.events import EVENT_TAGS, RecallServed
from projections.arrays import NONE
from projections.event_columns import EventColumns
from projections.fold_state import REVISION_KINDS, FactColumns
from projections.records import Episode, Vector, subject_key
from projections.string_columns import Strings, UniqueStrings
from projections.timeutil import to_us

__all__ = [
    "DDL", "TABLES", "TIME_COLUMNS", "Columns", "entity_rows", "fact_rows", "insert",
    "namespace_rows", "object_column", "posting_rows", "version_rows",
]

Columns = dict[str, np.ndarray]  # column name -> values, as the table names them

DDL = """
CREATE TABLE facts (
    id BIGINT NOT NULL, namespace VARCHAR NOT NULL, subject VARCHAR NOT NULL,
    subject_key VARCHAR NOT NULL, text VARCHAR NOT NULL, confidence DOUBLE NOT NULL,
    source_agent VARCHAR, source_ref VARCHAR, entities VARCHAR[] NOT NULL,
    created_at TIMESTAMPTZ NOT NULL, supersedes BIGINT, revision VARCHAR, reason VARCHAR,
    superseded_by BIGINT, superseded_at TIMESTAMPTZ, forgotten_seq BIGINT,
    forgotten_at TIMESTAMPTZ, forget_reason VARCHAR, doc_len INTEGER NOT NULL,
    derived_from BIGINT[] NOT NULL, extractor VARCHAR, prompt_version VARCHAR,
    category VARCHAR, importance INTEGER
);
CREATE TABLE fact_versions (
    fact_id BIGINT NOT NULL, row_no INTEGER NOT NULL, namespace VARCHAR NOT NULL,
    valid_from TIMESTAMPTZ NOT NULL, valid_to TIMESTAMPTZ, tx_from_seq BIGINT NOT NULL,
    tx_from TIMESTAMPTZ NOT NULL, tx_to_seq BIGINT, tx_to TIMESTAMPTZ
);
CREATE TABLE entities (
    namespace VARCHAR NOT NULL, entity VARCHAR NOT NULL, fact_id BIGINT NOT NULL
);
CREATE TABLE postings (
    namespace VARCHAR NOT NULL, term VARCHAR NOT NULL, fact_id BIGINT NOT NULL, tf INTEGER NOT NULL
);
CREATE TABLE events (
    seq BIGINT NOT NULL, type VARCHAR NOT NULL, tx_at TIMESTAMPTZ NOT NULL,
    namespace VARCHAR NOT NULL, fact_id BIGINT NOT NULL, target_id BIGINT,
    source_agent VARCHAR, source_ref VARCHAR, reason VARCHAR, request_id VARCHAR
);
CREATE TABLE vectors (
    fact_id BIGINT NOT NULL, namespace VARCHAR NOT NULL, model VARCHAR NOT NULL,
    dims INTEGER NOT NULL, vector FLOAT[] NOT NULL, seq BIGINT NOT NULL
);
CREATE TABLE episodes (
    seq BIGINT NOT NULL, namespace VARCHAR NOT NULL, session_id VARCHAR NOT NULL,
    turn INTEGER NOT NULL, role VARCHAR NOT NULL, speaker VARCHAR, text VARCHAR NOT NULL,
    observed_at TIMESTAMPTZ NOT NULL, recorded_at TIMESTAMPTZ NOT NULL,
    source_agent VARCHAR, source_ref VARCHAR
);
CREATE TABLE recalls (
    seq BIGINT NOT NULL, namespace VARCHAR NOT NULL, served_at TIMESTAMPTZ NOT NULL,
    query VARCHAR NOT NULL, hit_limit INTEGER NOT NULL, max_tokens INTEGER NOT NULL,
    as_of_seq BIGINT, valid_at TIMESTAMPTZ, subject VARCHAR, reference_at TIMESTAMPTZ,
    config VARCHAR NOT NULL, model VARCHAR, source_agent VARCHAR, source_ref VARCHAR,
    hit_count INTEGER NOT NULL
);
CREATE TABLE recall_hits (
    seq BIGINT NOT NULL, namespace VARCHAR NOT NULL, fact_id BIGINT NOT NULL,
    rank INTEGER NOT NULL, score DOUBLE NOT NULL
);
"""

# Table -> ORDER BY that makes a dump canonical (verify, the tests, the exports).
TABLES: dict[str, str] = {
    "events": "seq",
    "facts": "id",
    "fact_versions": "fact_id, row_no",
    "entities": "namespace, entity, fact_id",
    "postings": "namespace, term, fact_id",
    "vectors": "seq",
    "episodes": "seq",
    "recalls": "seq",
    "recall_hits": "seq, rank",
}

TIME_COLUMNS = ("_at", "valid_from", "valid_to", "tx_from", "tx_to")  # name endings


def namespace_rows(
    facts: FactColumns, events: EventColumns, namespace: str, *, since: int = 0
) -> dict[str, Columns]:
    """Every table's rows of ``namespace`` (see the module docstring). With ``since``, only
    what changed after that seq: the rows of the tables that only grow added since, and every
    row of the facts an event since then made or changed (a copy made at ``since`` replaces
    those facts' rows and appends the rest)."""
    seqs = events.seqs_in(namespace, since)
    if since:
        fact_col, target_col = events.column("fact"), events.column("target")
        at = events.rows(seqs)
        touched = set(fact_col[at].tolist()) | set(target_col[at].tolist())
        touched.discard(NONE)
        ids = [i for i in sorted(touched) if facts.slot(i) >= 0]
        new = [i for i in ids if i > since]
    else:
        ids = new = facts.ids_in(namespace).tolist()
    recalls = [r for r in events.recalls_in(namespace) if r.seq > since]
    return {
        "events": event_rows(events, seqs),
        "facts": fact_rows(facts, ids),
        "fact_versions": version_rows(facts, ids),
        "entities": entity_rows(facts, new),
        "postings": posting_rows(facts, new),
        "vectors": vector_rows(
            [v for v in facts.vectors if v.namespace == namespace and v.seq > since]),
        "episodes": episode_rows(
            [e for e in facts.episodes_in(namespace) if e.seq > since]),
        "recalls": recall_rows(recalls),
        "recall_hits": recall_hit_rows(recalls),
    }


def insert(con: duckdb.DuckDBPyConnection, table: str, columns: Columns) -> None:
    """Append rows given as columns to ``table`` (time columns in microseconds, loaded as
    TIMESTAMPTZ; masked values as NULL), in one ``INSERT ... SELECT``."""
    if not len(next(iter(columns.values()))):
        return
    con.register("_batch", columns)
    try:
        names = ", ".join(columns)
        select = ", ".join(
            f"make_timestamp({c})::TIMESTAMPTZ" if c.endswith(TIME_COLUMNS) else c
            for c in columns
        )
        con.execute(f"INSERT INTO {table} ({names}) SELECT {select} FROM _batch")
    finally:
        con.unregister("_batch")


# ---------------------------------------------------------------------- facts and their rows


def fact_rows(cols: FactColumns, ids: Sequence[int]) -> Columns:
    """The ``facts`` rows of the facts ``ids``, in that order."""
    slots = _slots(cols, ids)
    f = cols.table
    subjects = _strings(cols.subjects, f.subject[slots])
    entity_names = cols.entity_names.values
    return {
        "id": f.ids[slots],
        "namespace": _strings(cols.namespaces, f.namespace[slots]),
        "subject": subjects,
        "subject_key": object_column([subject_key(s) for s in subjects]),
        "text": object_column([cols.texts[s] for s in slots.tolist()]),
        "confidence": f.confidence[slots],
        "source_agent": _strings(cols.agents, f.source_agent[slots]),
        "source_ref": _strings(cols.refs, f.source_ref[slots]),
        "entities": object_column([
            [entity_names[c] for c in run] for run in cols.entities.runs(f.entities_end, slots)
        ]),
        "created_at": f.created_at[slots],
        "supersedes": _nullable(f.supersedes[slots]),
        "revision": object_column([REVISION_KINDS[k] for k in f.revision[slots].tolist()]),
        "reason": _strings(cols.reasons, f.reason[slots]),
        "superseded_by": _nullable(f.superseded_by[slots]),
        "superseded_at": _nullable(f.superseded_at[slots]),
        "forgotten_seq": _nullable(f.forgotten_seq[slots]),
        "forgotten_at": _nullable(f.forgotten_at[slots]),
        "forget_reason": _strings(cols.reasons, f.forget_reason[slots]),
        "doc_len": f.doc_len[slots],
        "derived_from": object_column(cols.derived.runs(f.derived_end, slots)),
        "extractor": _strings(cols.labels, f.extractor[slots]),
        "prompt_version": _strings(cols.labels, f.prompt_version[slots]),
        "category": _strings(cols.labels, f.category[slots]),
        "importance": _importance(cols, slots),
    }


def version_rows(cols: FactColumns, ids: Sequence[int]) -> Columns:
    """The ``fact_versions`` rows (every version row, numbered from 0) of the facts ``ids``."""
    slots = _slots(cols, ids)
    f, r = cols.table, cols.rows
    found_rows, found_at, found_no = [], [], []
    row = f.first_row[slots].astype(np.int64)  # every fact has a first row
    at = np.arange(len(slots))
    number = 0
    while len(row):
        found_rows.append(row)
        found_at.append(at)
        found_no.append(np.full(len(row), number, dtype=np.int32))
        nxt = r.next[row].astype(np.int64)
        keep = nxt >= 0
        row, at, number = nxt[keep], at[keep], number + 1
    rows, which, numbers = (
        np.concatenate(found_rows), np.concatenate(found_at), np.concatenate(found_no)
    ) if found_rows else (np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int32))
    order = np.lexsort((numbers, which))  # by fact, then row number
    rows, which, numbers = rows[order], which[order], numbers[order]
    return {
        "fact_id": f.ids[slots][which],
        "row_no": numbers,
        "namespace": _strings(cols.namespaces, f.namespace[slots][which]),
        "valid_from": r.valid_from[rows],
        "valid_to": _nullable(r.valid_to[rows]),
        "tx_from_seq": r.tx_from_seq[rows],
        "tx_from": r.tx_from[rows],
        "tx_to_seq": _nullable(r.tx_to_seq[rows]),
        "tx_to": _nullable(r.tx_to[rows]),
    }


def posting_rows(cols: FactColumns, ids: Sequence[int]) -> Columns:
    """The ``postings`` rows of the facts ``ids``: (term, fact, term frequency), from each
    fact's index tokens (projections/index_tokens.py)."""
    slots = _slots(cols, ids)
    codes, lengths = cols.tokens.gather(cols.table.tokens_end, slots)
    width = max(len(cols.terms), 1)
    key = np.repeat(np.arange(len(slots), dtype=np.int64), lengths) * width + codes
    unique, tfs = np.unique(key, return_counts=True)
    at, term = unique // width, unique % width
    names = cols.terms.values
    return {
        "namespace": _strings(cols.namespaces, cols.table.namespace[slots][at]),
        "term": object_column([names[c] for c in term.tolist()]),
        "fact_id": cols.table.ids[slots][at],
        "tf": tfs.astype(np.int32),
    }


def entity_rows(cols: FactColumns, ids: Sequence[int]) -> Columns:
    """The ``entities`` rows (entity, fact, per namespace) of the facts ``ids``."""
    slots = _slots(cols, ids)
    f, names = cols.table, cols.entity_names.values
    runs = cols.entities.runs(f.entities_end, slots)
    lengths = np.fromiter(map(len, runs), dtype=np.int64, count=len(runs))
    return {
        "namespace": np.repeat(_strings(cols.namespaces, f.namespace[slots]), lengths),
        "entity": object_column([names[c] for c in chain.from_iterable(runs)]),
        "fact_id": np.repeat(f.ids[slots], lengths),
    }


# ---------------------------------------------------------------------- events and the rest


def event_rows(events: EventColumns, seqs: npt.NDArray[np.int64]) -> Columns:
    """The ``events`` rows of the events ``seqs``."""
    at = events.rows(seqs)
    facts = events.facts
    return {
        "seq": seqs.astype(np.int64),
        "type": object_column([EVENT_TAGS[k] for k in events.column("kind")[at].tolist()]),
        "tx_at": events.column("tx")[at],
        "namespace": _strings(facts.namespaces, events.column("namespace")[at]),
        "fact_id": events.column("fact")[at],
        "target_id": _nullable(events.column("target")[at]),
        "source_agent": _strings(facts.agents, events.column("agent")[at]),
        "source_ref": _strings(events.refs, events.column("ref")[at]),
        "reason": _strings(facts.reasons, events.column("reason")[at]),
        "request_id": _strings(events.requests, events.column("request")[at]),
    }


def vector_rows(vectors: Sequence[Vector]) -> Columns:
    return {
        "fact_id": np.array([v.fact_id for v in vectors], dtype=np.int64),
        "namespace": object_column([v.namespace for v in vectors]),
        "model": object_column([v.model for v in vectors]),
        "dims": np.array([v.dims for v in vectors], dtype=np.int32),
        "vector": object_column([np.frombuffer(v.vector, dtype="<f4").tolist() for v in vectors]),
        "seq": np.array([v.seq for v in vectors], dtype=np.int64),
    }


def episode_rows(episodes: Sequence[Episode]) -> Columns:
    names = Episode.__struct_fields__
    cols = list(zip(*map(msgspec.structs.astuple, episodes), strict=True)) or [()] * len(names)
    out: Columns = {}
    for name, column in zip(names, cols, strict=True):
        if name in ("seq", "turn", "observed_at", "recorded_at"):
            out[name] = np.array(column, dtype=np.int64)
        else:
            out[name] = object_column(column)
    return out


def recall_rows(recalls: Sequence[RecallServed]) -> Columns:
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


def recall_hit_rows(recalls: Sequence[RecallServed]) -> Columns:
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


# ---------------------------------------------------------------------- column helpers


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


def _slots(cols: FactColumns, ids: Sequence[int]) -> npt.NDArray[np.int64]:
    return cols.slots(ids)


def _strings(strings: Strings | UniqueStrings, codes: npt.NDArray[Any]) -> np.ndarray:
    values = strings.values
    return object_column([None if c < 0 else values[c] for c in codes.tolist()])


def _nullable(values: npt.NDArray[np.int64]) -> np.ndarray:
    """An int64 column with the fold's NONE as NULL."""
    return np.ma.masked_array(values, mask=values == NONE)


def _importance(cols: FactColumns, slots: npt.NDArray[np.int64]) -> np.ndarray:
    code = cols.table.importance[slots].astype(np.int64)
    for i in np.flatnonzero(code < 0).tolist():
        code[i] = cols.odd[int(slots[i])]
    return np.ma.masked_array(code, mask=code == 0)
