"""The DuckDB projection: derived from the log, written in batches, disposable.

Tables (see the README for the documented schema):

* ``facts``: one row per fact (statement), with provenance and its place in a revision chain.
* ``fact_versions``: the bi-temporal rows (valid_from/valid_to x tx_from/tx_to, with seqs).
* ``entities``: entity -> fact, per namespace.
* ``postings``: the text index (term, fact, term frequency) for BM25; ``facts.doc_len`` holds
  document lengths.
* ``events``: one row per logged event (seq, type, tx_at, namespace, fact, provenance; no text).
* ``vectors``: recorded embeddings.
* ``episodes``: raw conversation turns (``EpisodeRecorded``); not facts, never recalled as facts.
* ``recalls`` / ``recall_hits``: logged recalls (``RecallServed``, when recall logging is on)
  and the facts each returned, with rank and score.
* ``meta``: schema version, the last applied seq and the log's hash chain at that seq.

Every batch, including its cursor in ``meta``, is written in one transaction, so the projection is
always exactly "the log folded up to ``last_seq``".
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import duckdb
import numpy as np

from eventlog.events import RecallServed
from projections.column_load import load_columns
from projections.column_store import Strings
from projections.columns import (
    TIME_COLUMNS,
    EventRow,
    episode_columns,
    event_columns,
    recall_columns,
    recall_hit_columns,
    vector_columns,
)
from projections.errors import DamagedProjection, ProjectionError
from projections.fact_columns import FactColumns
from projections.fact_rows import entity_rows, fact_rows, posting_rows, version_rows
from projections.records import Episode, Vector
from projections.requests import request_key

__all__ = [
    "MEMORY_LIMIT", "SCHEMA_VERSION", "DuckProjection", "TABLES", "check_readable", "from_log",
    "is_lock_conflict",
    "one_row",
]

# 2: Snowball stems in postings; subject in indexed text. 3: episodes table, fact lineage.
# 4: recalls and recall_hits (logged recalls).
SCHEMA_VERSION = 5

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
    doc_len INTEGER NOT NULL,
    derived_from BIGINT[] NOT NULL,
    extractor VARCHAR,
    prompt_version VARCHAR,
    category VARCHAR,
    importance INTEGER
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
    source_agent VARCHAR, source_ref VARCHAR, reason VARCHAR, request_id VARCHAR
);
CREATE TABLE IF NOT EXISTS vectors (
    fact_id BIGINT NOT NULL, namespace VARCHAR NOT NULL, model VARCHAR NOT NULL,
    dims INTEGER NOT NULL, vector FLOAT[] NOT NULL, seq BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS episodes (
    seq BIGINT NOT NULL, namespace VARCHAR NOT NULL, session_id VARCHAR NOT NULL,
    turn INTEGER NOT NULL, role VARCHAR NOT NULL, speaker VARCHAR, text VARCHAR NOT NULL,
    observed_at TIMESTAMPTZ NOT NULL, recorded_at TIMESTAMPTZ NOT NULL,
    source_agent VARCHAR, source_ref VARCHAR
);
CREATE TABLE IF NOT EXISTS recalls (
    seq BIGINT NOT NULL, namespace VARCHAR NOT NULL, served_at TIMESTAMPTZ NOT NULL,
    query VARCHAR NOT NULL, hit_limit INTEGER NOT NULL, max_tokens INTEGER NOT NULL,
    as_of_seq BIGINT, valid_at TIMESTAMPTZ, subject VARCHAR, reference_at TIMESTAMPTZ,
    config VARCHAR NOT NULL, model VARCHAR, source_agent VARCHAR, source_ref VARCHAR,
    hit_count INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS recall_hits (
    seq BIGINT NOT NULL, namespace VARCHAR NOT NULL, fact_id BIGINT NOT NULL,
    rank INTEGER NOT NULL, score DOUBLE NOT NULL
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
    "episodes": "seq",
    "recalls": "seq",
    "recall_hits": "seq, rank",
}

_US = "make_timestamp({0})::TIMESTAMPTZ"



def _owner_only(path: Path) -> None:
    """The projection holds every text of the store: readable by its owner only."""
    for p in (path, Path(str(path) + ".wal")):
        try:
            os.chmod(p, 0o600)
        except FileNotFoundError:
            pass


def from_log(cursor: tuple[int, str], last_seq: int, chain_at: Callable[[int], bytes]) -> bool:
    """Whether a cursor ``(seq, chain hex)`` names a point of this log: a seq it has, with the
    log's chain at it (not a projection of another store, or of a log cut shorter since)."""
    seq, chain = cursor
    return 0 < seq <= last_seq and chain_at(seq).hex() == chain


def is_lock_conflict(error: BaseException) -> bool:
    """Whether DuckDB refused a file because another process holds it (not because it is
    damaged: a damaged block's message may mention anything, "lock" included)."""
    text = str(error)
    return "Could not set lock on file" in text or "Conflicting lock is held" in text


# DuckDB's memory for a projection on disk (its buffer pool and its queries' working memory;
# more spills to a temporary directory beside the file). The projection's own queries are
# bulk loads and index reads that run once; without a bound DuckDB keeps up to 80% of RAM and
# its allocator holds on to what a large query used (about 800 MiB after a 500k-fact
# namespace's postings were read). `m.sql` runs on its own in-memory copy: not bound by this.
MEMORY_LIMIT = "256MB"


def check_readable(con: duckdb.DuckDBPyConnection) -> None:
    """Read every block of every table (DuckDB checks each block's checksum as it reads): a
    damaged file raises ``duckdb.Error`` here, at open, instead of in a later query."""
    tables = [
        r[0] for r in con.execute(
            "SELECT table_name FROM duckdb_tables() WHERE database_name = current_database()"
        ).fetchall()
    ]
    for table in tables:
        con.execute(f'SELECT count(*), bit_xor(hash(COLUMNS(*))) FROM "{table}"').fetchall()


def one_row(
    con: duckdb.DuckDBPyConnection, sql: str, params: object = None
) -> tuple[Any, ...]:
    """The single row an aggregate query returns."""
    row = con.execute(sql, params).fetchone()
    if row is None:
        raise ProjectionError(f"query returned no row: {sql}")
    return row


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

    def __init__(
        self, path: str | os.PathLike[str] | None, *, scratch: Path | None = None,
        check_later: bool = False,
    ) -> None:
        """``scratch``: a directory holding ``path`` that is removed on :meth:`close` (a
        reader's private copy of the checkpoint). ``check_later``: read every block
        (:func:`check_readable`) at the first use of :attr:`con`, not now; a damaged block
        then raises ``ProjectionError`` there (a reader that may never query its tables)."""
        self.path = None if path is None else Path(path)
        self.scratch = scratch
        self.recreated = ""
        self._attached: tuple[str, duckdb.DuckDBPyConnection] | None = None
        self._check_later = check_later and self.path is not None
        self._con = self._connect()
        try:
            self._con.execute("SET TimeZone = 'UTC'")
            self._ensure_schema()
        except BaseException:
            self.close()  # release the file, so it can be moved aside and recreated
            raise

    @property
    def con(self) -> duckdb.DuckDBPyConnection:
        """The connection (every block read and checked first, if that was left for later)."""
        if self._check_later:
            try:
                check_readable(self._con)
            except duckdb.Error as e:
                raise DamagedProjection(f"the projection {self.path} is damaged ({e})") from e
            self._check_later = False
        return self._con

    def _connect(self) -> duckdb.DuckDBPyConnection:
        if self.path is None:
            self._attached = _attach_memory_db()
            return self._attached[1]
        try:
            con = duckdb.connect(str(self.path))
            _owner_only(self.path)
            try:
                con.execute("SET TimeZone = 'UTC'")
                con.execute(f"SET memory_limit = '{MEMORY_LIMIT}'")
                if not self._check_later:
                    check_readable(con)
            except BaseException:
                con.close()
                raise
            return con
        except duckdb.Error as e:
            if is_lock_conflict(e):
                raise ProjectionError(
                    f"projection {self.path} is held by another process: {e}"
                ) from e
            # The projection is disposable: move the damaged file aside and start empty.
            aside = self.move_aside(self.path)
            self.recreated = f"projection {self.path} did not open ({e}); moved to {aside}"
            con = duckdb.connect(str(self.path))
            _owner_only(self.path)
            return con

    @staticmethod
    def move_aside(path: Path) -> Path:
        """Rename a damaged projection file (and its WAL) to ``*.damaged``; returns the name."""
        aside = path.with_suffix(path.suffix + ".damaged")
        for p in (path, Path(str(path) + ".wal")):
            if p.exists():
                os.replace(p, aside if p == path else Path(str(aside) + ".wal"))
        return aside

    def _ensure_schema(self) -> None:
        con = self._con  # the catalog and meta only: no need to check every block first
        has_meta = one_row(
            con,
            "SELECT count(*) FROM duckdb_tables() WHERE table_name = 'meta' "
            "AND database_name = current_database() AND schema_name = 'main'",
        )[0]
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
        rows = dict(self._con.execute("SELECT key, value FROM meta").fetchall())
        return int(rows.get("last_seq", "0")), rows.get("chain", "")

    def set_cursor(self, seq: int, chain: str) -> None:
        """Record that the tables hold the log up to ``seq`` (``chain``: the log's chain there,
        hex). Run it in the transaction that wrote the rows."""
        self.con.execute(
            "UPDATE meta SET value = CASE key WHEN 'last_seq' THEN ? ELSE ? END "
            "WHERE key IN ('last_seq', 'chain')",
            [str(seq), chain],
        )

    # ------------------------------------------------------------------ write

    def write(
        self,
        state: FactColumns,
        dirty: Iterable[int],
        new_events: Sequence[EventRow],
        new_facts: Sequence[tuple[int, dict[str, int]]],
        new_vectors: Sequence[Vector],
        last_seq: int,
        chain: bytes,
        *,
        written_seq: int,
        new_episodes: Sequence[Episode] = (),
        new_recalls: Sequence[RecallServed] = (),
    ) -> None:
        """Write one batch: new events, changed facts (replacing their rows), new postings,
        entities and vectors, and the cursor, in one transaction. Facts with ids up to
        ``written_seq`` are already in the tables: their rows are replaced."""
        ids = sorted(set(dirty))
        old = [i for i in ids if i <= written_seq]
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            self._insert("events", event_columns(new_events))
            if old:
                con.register("_dirty", {"id": np.array(old, dtype=np.int64)})
                con.execute("DELETE FROM facts WHERE id IN (SELECT id FROM _dirty)")
                con.execute("DELETE FROM fact_versions WHERE fact_id IN (SELECT id FROM _dirty)")
                con.unregister("_dirty")
            if ids:
                self._insert("facts", fact_rows(state, ids))
                self._insert("fact_versions", version_rows(state, ids))
            if new_facts:
                self._insert("postings", posting_rows(state, new_facts))
                self._insert("entities", entity_rows(state, [fid for fid, _ in new_facts]))
            if new_vectors:
                self._insert("vectors", vector_columns(new_vectors))
            if new_episodes:
                self._insert("episodes", episode_columns(new_episodes))
            if new_recalls:
                self._insert("recalls", recall_columns(new_recalls))
                self._insert("recall_hits", recall_hit_columns(new_recalls))
            self.set_cursor(last_seq, chain.hex())
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
                _US.format(c) if c.endswith(TIME_COLUMNS) else c for c in columns
            )
            self.con.execute(f"INSERT INTO {table} ({names}) SELECT {select} FROM _batch")
        finally:
            self.con.unregister("_batch")

    # ------------------------------------------------------------------ read back

    def load_state(self) -> FactColumns:
        """The in-memory fold state, loaded from the tables in bulk (fast reopen)."""
        return load_columns(self.con, self.cursor()[0])

    def event_columns(self, namespaces: Strings) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """tx_at (microseconds), namespace (its code in ``namespaces``, new ones added) and
        request key (projections/requests.py; 0 for none) of every applied event, by seq - 1."""
        got = self.con.execute(
            "SELECT epoch_us(tx_at) AS t, namespace, request_id FROM events ORDER BY seq"
        ).fetchnumpy()
        namespaces_, requests = got["namespace"], got["request_id"]
        keys = np.zeros(len(got["t"]), dtype=np.int64)
        given = np.ma.getdata(requests)
        for i in np.flatnonzero(~np.ma.getmaskarray(requests)):  # NULL: masked (or None)
            if given[i] is not None:
                keys[i] = request_key(namespaces_[i], given[i])
        return np.asarray(got["t"], dtype=np.int64), namespaces.encode(list(namespaces_)), keys

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
        self._con.close()
        if self._attached is not None:
            _detach_memory_db(self._attached[0])
            self._attached = None
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)
            self.scratch = None
