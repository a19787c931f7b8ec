"""The DuckDB projection: derived from the log, written in batches, disposable.

Tables (see the README for the documented schema):

* ``facts``: one row per fact (statement), with provenance and its place in a revision chain.
* ``fact_versions``: the bi-temporal rows (valid_from/valid_to x tx_from/tx_to, with seqs).
* ``entities``: entity -> fact, per namespace.
* ``postings``: the text index (term, fact, term frequency) for BM25; ``facts.doc_len`` holds
  document lengths.
* ``events``: one row per logged event (seq, type, tx_at, namespace, fact, provenance; no text).
* ``vectors``: recorded embeddings.
* ``meta``: schema version, the last applied seq and the log's hash chain at that seq.

Every batch, including its cursor in ``meta``, is written in one transaction, so the projection is
always exactly "the log folded up to ``last_seq``".
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import duckdb
import numpy as np

from hmem.errors import ProjectionError
from projections.state import Fact, FactState, Row, Vector

__all__ = ["SCHEMA_VERSION", "DuckProjection", "EventRow", "TABLES"]

SCHEMA_VERSION = 1

_DDL = """
CREATE TABLE IF NOT EXISTS meta (key VARCHAR NOT NULL, value VARCHAR NOT NULL);
CREATE TABLE IF NOT EXISTS facts (
    id BIGINT NOT NULL,
    namespace VARCHAR NOT NULL,
    subject VARCHAR NOT NULL,
    subject_key VARCHAR NOT NULL,
    text VARCHAR NOT NULL,
    confidence DOUBLE NOT NULL,
    source_agent VARCHAR,
    source_ref VARCHAR,
    entities VARCHAR[] NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    supersedes BIGINT,
    revision VARCHAR,
    reason VARCHAR,
    superseded_by BIGINT,
    superseded_at TIMESTAMPTZ,
    forgotten_seq BIGINT,
    forgotten_at TIMESTAMPTZ,
    forget_reason VARCHAR,
    doc_len INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS fact_versions (
    fact_id BIGINT NOT NULL,
    row_no INTEGER NOT NULL,
    namespace VARCHAR NOT NULL,
    valid_from TIMESTAMPTZ NOT NULL,
    valid_to TIMESTAMPTZ,
    tx_from_seq BIGINT NOT NULL,
    tx_from TIMESTAMPTZ NOT NULL,
    tx_to_seq BIGINT,
    tx_to TIMESTAMPTZ
);
CREATE TABLE IF NOT EXISTS entities (
    namespace VARCHAR NOT NULL, entity VARCHAR NOT NULL, fact_id BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS postings (
    namespace VARCHAR NOT NULL, term VARCHAR NOT NULL, fact_id BIGINT NOT NULL, tf INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS events (
    seq BIGINT NOT NULL, type VARCHAR NOT NULL, tx_at TIMESTAMPTZ NOT NULL,
    namespace VARCHAR NOT NULL, fact_id BIGINT NOT NULL, target_id BIGINT,
    source_agent VARCHAR, source_ref VARCHAR, reason VARCHAR
);
CREATE TABLE IF NOT EXISTS vectors (
    fact_id BIGINT NOT NULL, namespace VARCHAR NOT NULL, model VARCHAR NOT NULL,
    dims INTEGER NOT NULL, vector FLOAT[] NOT NULL, seq BIGINT NOT NULL
);
"""

# Table -> ORDER BY that makes a dump canonical (used by verify and the tests).
TABLES: dict[str, str] = {
    "events": "seq",
    "facts": "id",
    "fact_versions": "fact_id, row_no",
    "entities": "namespace, entity, fact_id",
    "postings": "namespace, term, fact_id",
    "vectors": "seq",
}

_US = "make_timestamp({0})::TIMESTAMPTZ"


def _objects(values: Sequence[Any]) -> np.ndarray:
    arr = np.empty(len(values), dtype=object)
    arr[:] = values
    return arr


def _ints(values: Sequence[int | None]) -> np.ndarray:
    """int64 column; None becomes NULL."""
    if all(v is not None for v in values):
        return np.array(values, dtype=np.int64)
    mask = [v is None for v in values]
    return np.ma.masked_array([0 if v is None else v for v in values], mask=mask, dtype=np.int64)


# In-memory projections (readers, verify) are databases attached to one shared in-memory
# DuckDB instance: attaching costs ~1 ms where a new instance costs ~25 ms.
_shared: duckdb.DuckDBPyConnection | None = None
_shared_lock = threading.Lock()
_shared_count = itertools.count()


def _attach_memory_db() -> tuple[str, duckdb.DuckDBPyConnection]:
    global _shared
    with _shared_lock:
        if _shared is None:
            _shared = duckdb.connect(":memory:")
        name = f"projection_{next(_shared_count)}"
        _shared.execute(f"ATTACH ':memory:' AS {name}")
        con = _shared.cursor()
    con.execute(f"USE {name}")
    return name, con


def _detach_memory_db(name: str) -> None:
    with _shared_lock:
        if _shared is not None:
            _shared.execute(f"DETACH {name}")


class DuckProjection:
    """A DuckDB database holding the projection (a file, or in memory when ``path`` is None)."""

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = None if path is None else Path(path)
        self.recreated = ""
        self._attached: tuple[str, duckdb.DuckDBPyConnection] | None = None
        self.con = self._connect()
        self.con.execute("SET TimeZone = 'UTC'")
        self._ensure_schema()

    def _connect(self) -> duckdb.DuckDBPyConnection:
        if self.path is None:
            self._attached = _attach_memory_db()
            return self._attached[1]
        try:
            return duckdb.connect(str(self.path))
        except duckdb.Error as e:
            if "lock" in str(e).lower():
                raise ProjectionError(f"projection {self.path} is held by another process: {e}") from e
            # The projection is disposable: move the damaged file aside and start empty.
            aside = self.path.with_suffix(self.path.suffix + ".damaged")
            for p in (self.path, Path(str(self.path) + ".wal")):
                if p.exists():
                    os.replace(p, aside if p == self.path else Path(str(aside) + ".wal"))
            self.recreated = f"projection {self.path} did not open ({e}); moved to {aside}"
            return duckdb.connect(str(self.path))

    def _ensure_schema(self) -> None:
        con = self.con
        has_meta = con.execute(
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'meta' "
            "AND database_name = current_database() AND schema_name = 'main'"
        ).fetchone()[0]
        if has_meta:
            row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
            version = int(row[0]) if row else None
            if version == SCHEMA_VERSION:
                return
            self.recreated = (
                f"projection schema {version} differs from {SCHEMA_VERSION}; rebuilt from log"
            )
            self.drop_all()
        con.execute(_DDL)
        con.execute(
            "INSERT INTO meta VALUES ('schema_version', ?), ('last_seq', '0'), ('chain', '')",
            [str(SCHEMA_VERSION)],
        )

    def drop_all(self) -> None:
        for table in (*TABLES, "meta"):
            self.con.execute(f"DROP TABLE IF EXISTS {table}")

    def reset(self) -> None:
        """Empty every table (the next writes rebuild the projection from seq 1)."""
        self.drop_all()
        self._ensure_schema()

    def cursor(self) -> tuple[int, str]:
        """(last applied seq, hex of the log's chain at that seq)."""
        rows = dict(self.con.execute("SELECT key, value FROM meta").fetchall())
        return int(rows.get("last_seq", "0")), rows.get("chain", "")

    # ------------------------------------------------------------------ write

    def write(
        self,
        state: FactState,
        dirty: Iterable[int],
        new_events: Sequence[EventRow],
        new_facts: Sequence[tuple[int, dict[str, int]]],
        new_vectors: Sequence[Vector],
        last_seq: int,
        chain: bytes,
    ) -> None:
        """Write one batch: new events, changed facts (replacing their rows), new postings,
        entities and vectors, and the cursor, in one transaction."""
        facts = [state.facts[i] for i in sorted(set(dirty))]
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            self._insert("events", _event_columns(new_events))
            if facts:
                ids = {"id": np.array([f.id for f in facts], dtype=np.int64)}
                con.register("_dirty", ids)
                con.execute("DELETE FROM facts WHERE id IN (SELECT id FROM _dirty)")
                con.execute("DELETE FROM fact_versions WHERE fact_id IN (SELECT id FROM _dirty)")
                con.unregister("_dirty")
                self._insert("facts", _fact_columns(facts))
                self._insert("fact_versions", _row_columns(facts))
            if new_facts:
                self._insert("postings", _posting_columns(state, new_facts))
                self._insert("entities", _entity_columns(state, new_facts))
            if new_vectors:
                self._insert("vectors", _vector_columns(new_vectors))
            con.execute(
                "UPDATE meta SET value = CASE key WHEN 'last_seq' THEN ? ELSE ? END "
                "WHERE key IN ('last_seq', 'chain')",
                [str(last_seq), chain.hex()],
            )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def _insert(self, table: str, columns: dict[str, np.ndarray]) -> None:
        if not len(next(iter(columns.values()))):
            return
        self.con.register("_batch", columns)
        try:
            names = ", ".join(columns)
            select = ", ".join(
                _US.format(c) if c.endswith(_TIME_SUFFIXES) else c for c in columns
            )
            self.con.execute(f"INSERT INTO {table} ({names}) SELECT {select} FROM _batch")
        finally:
            self.con.unregister("_batch")

    # ------------------------------------------------------------------ read back

    def load_state(self) -> FactState:
        """Rebuild the in-memory fold state from the tables (fast reopen)."""
        state = FactState()
        con = self.con
        rows_by_fact: dict[int, list[Row]] = {}
        for r in con.execute(
            "SELECT fact_id, epoch_us(valid_from), epoch_us(valid_to), tx_from_seq, "
            "epoch_us(tx_from), tx_to_seq, epoch_us(tx_to) FROM fact_versions "
            "ORDER BY fact_id, row_no"
        ).fetchall():
            rows_by_fact.setdefault(r[0], []).append(Row(*r[1:]))
        for r in con.execute(
            "SELECT id, namespace, subject, text, confidence, source_agent, source_ref, entities, "
            "epoch_us(created_at), supersedes, revision, reason, superseded_by, "
            "epoch_us(superseded_at), forgotten_seq, epoch_us(forgotten_at), forget_reason, "
            "doc_len FROM facts ORDER BY id"
        ).fetchall():
            fid = r[0]
            state.facts[fid] = Fact(
                id=fid, namespace=r[1], subject=r[2], text=r[3], confidence=r[4],
                source_agent=r[5], source_ref=r[6], entities=tuple(r[7]), created_at=r[8],
                rows=rows_by_fact.get(fid, []), supersedes=r[9], revision=r[10], reason=r[11],
                superseded_by=r[12], superseded_at=r[13], forgotten_seq=r[14],
                forgotten_at=r[15], forget_reason=r[16], doc_len=r[17],
            )
        for r in con.execute(
            "SELECT fact_id, namespace, model, dims, vector, seq FROM vectors ORDER BY seq"
        ).fetchall():
            vec = np.asarray(r[4], dtype="<f4").tobytes()
            state.vectors.append(Vector(r[0], r[1], r[2], r[3], vec, r[5]))
        state.last_seq = self.cursor()[0]
        return state

    def tx_times(self) -> np.ndarray:
        """tx_at (microseconds) of every applied event, indexed by seq - 1."""
        got = self.con.execute("SELECT epoch_us(tx_at) AS t FROM events ORDER BY seq").fetchnumpy()
        return np.asarray(got["t"], dtype=np.int64)

    def dump(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every table's rows in canonical order (for verify and tests)."""
        return {
            table: [
                tuple(tuple(v) if isinstance(v, list) else v for v in row)
                for row in self.con.execute(f"SELECT * FROM {table} ORDER BY {order}").fetchall()
            ]
            for table, order in TABLES.items()
        }

    def close(self) -> None:
        self.con.close()
        if self._attached is not None:
            _detach_memory_db(self._attached[0])
            self._attached = None


_TIME_SUFFIXES = ("_at", "valid_from", "valid_to", "tx_from", "tx_to")



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


def _event_columns(events: Sequence[EventRow]) -> dict[str, np.ndarray]:
    cols = list(zip(*events)) if events else [[] for _ in EventRow._fields]
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


def _fact_columns(facts: list[Fact]) -> dict[str, np.ndarray]:
    return {
        "id": np.array([f.id for f in facts], dtype=np.int64),
        "namespace": _objects([f.namespace for f in facts]),
        "subject": _objects([f.subject for f in facts]),
        "subject_key": _objects([f.subject_key for f in facts]),
        "text": _objects([f.text for f in facts]),
        "confidence": np.array([f.confidence for f in facts], dtype=np.float64),
        "source_agent": _objects([f.source_agent for f in facts]),
        "source_ref": _objects([f.source_ref for f in facts]),
        "entities": _objects([list(f.entities) for f in facts]),
        "created_at": np.array([f.created_at for f in facts], dtype=np.int64),
        "supersedes": _ints([f.supersedes for f in facts]),
        "revision": _objects([f.revision for f in facts]),
        "reason": _objects([f.reason for f in facts]),
        "superseded_by": _ints([f.superseded_by for f in facts]),
        "superseded_at": _ints([f.superseded_at for f in facts]),
        "forgotten_seq": _ints([f.forgotten_seq for f in facts]),
        "forgotten_at": _ints([f.forgotten_at for f in facts]),
        "forget_reason": _objects([f.forget_reason for f in facts]),
        "doc_len": np.array([f.doc_len for f in facts], dtype=np.int32),
    }


def _row_columns(facts: list[Fact]) -> dict[str, np.ndarray]:
    rows = [(f, i, r) for f in facts for i, r in enumerate(f.rows)]
    return {
        "fact_id": np.array([f.id for f, _, _ in rows], dtype=np.int64),
        "row_no": np.array([i for _, i, _ in rows], dtype=np.int32),
        "namespace": _objects([f.namespace for f, _, _ in rows]),
        "valid_from": np.array([r.valid_from for _, _, r in rows], dtype=np.int64),
        "valid_to": _ints([r.valid_to for _, _, r in rows]),
        "tx_from_seq": np.array([r.tx_from_seq for _, _, r in rows], dtype=np.int64),
        "tx_from": np.array([r.tx_from for _, _, r in rows], dtype=np.int64),
        "tx_to_seq": _ints([r.tx_to_seq for _, _, r in rows]),
        "tx_to": _ints([r.tx_to for _, _, r in rows]),
    }


def _posting_columns(
    state: FactState, new_facts: Sequence[tuple[int, dict[str, int]]]
) -> dict[str, np.ndarray]:
    ns, terms, ids, tfs = [], [], [], []
    for fid, counts in new_facts:
        namespace = state.facts[fid].namespace
        for term, tf in counts.items():
            ns.append(namespace)
            terms.append(term)
            ids.append(fid)
            tfs.append(tf)
    return {
        "namespace": _objects(ns),
        "term": _objects(terms),
        "fact_id": np.array(ids, dtype=np.int64),
        "tf": np.array(tfs, dtype=np.int32),
    }


def _entity_columns(
    state: FactState, new_facts: Sequence[tuple[int, dict[str, int]]]
) -> dict[str, np.ndarray]:
    ns, names, ids = [], [], []
    for fid, _ in new_facts:
        fact = state.facts[fid]
        for name in fact.entities:
            ns.append(fact.namespace)
            names.append(name)
            ids.append(fid)
    return {
        "namespace": _objects(ns),
        "entity": _objects(names),
        "fact_id": np.array(ids, dtype=np.int64),
    }


def _vector_columns(vectors: Sequence[Vector]) -> dict[str, np.ndarray]:
    return {
        "fact_id": np.array([v.fact_id for v in vectors], dtype=np.int64),
        "namespace": _objects([v.namespace for v in vectors]),
        "model": _objects([v.model for v in vectors]),
        "dims": np.array([v.dims for v in vectors], dtype=np.int32),
        "vector": _objects([np.frombuffer(v.vector, dtype="<f4").tolist() for v in vectors]),
        "seq": np.array([v.seq for v in vectors], dtype=np.int64),
    }
