"""The notebook surface: one namespace's tables as a private, read-only DuckDB database.

``Memory.sql`` and ``Memory.events`` run user SQL on a database of their own: the namespace's
rows are made from the store's state (projections/sql_tables.py) into a separate in-memory
database (cached, and brought up to date by what changed), so a query can neither see another
namespace nor change the store. The copy has no file
access (``enable_external_access = false``): ``read_text``/``read_blob`` of the store's own log
files would otherwise show every namespace. ``hmem.notebook.export`` writes files from an
unsandboxed copy of its own.
"""

from __future__ import annotations

import threading
from typing import Any

import duckdb

from hmem.errors import HmemError, InvalidInput, QueryTimeout
from projections.projector import Projector
from projections.sql_tables import DDL, insert, namespace_rows

__all__ = ["NamespaceCopy", "check_read_only", "run_query"]

_EVENTS_VIEW = """
CREATE VIEW event_log AS
SELECT e.seq, e.type, e.tx_at, e.namespace, e.fact_id, e.target_id, f.subject, f.subject_key,
       coalesce(f.text, ep.text, r.query) AS text, e.source_agent, e.source_ref, e.reason
FROM events e LEFT JOIN facts f ON f.id = e.fact_id LEFT JOIN episodes ep ON ep.seq = e.seq
     LEFT JOIN recalls r ON r.seq = e.seq
"""


def check_read_only(query: str) -> None:
    """Reject anything but queries (SELECT, WITH ..., EXPLAIN, SUMMARIZE, DESCRIBE ...)."""
    if not isinstance(query, str):
        raise InvalidInput(f"SQL must be a string, not {type(query).__name__}")
    try:
        query.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InvalidInput(
            f"SQL is not valid Unicode text ({e.reason} at {e.start}); "
            f"decode it with errors='replace' first"
        ) from e
    try:
        statements = duckdb.extract_statements(query)
    except duckdb.Error as e:
        raise InvalidInput(f"SQL does not parse: {e}") from e
    if not statements:
        raise InvalidInput("SQL is empty; e.g. m.sql('SELECT * FROM facts')")
    allowed = {duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN}
    for statement in statements:
        if statement.type not in allowed:
            raise InvalidInput(
                f"m.sql is read-only: {statement.type.name} statements are not allowed "
                f"(the projection is derived from the log; change beliefs with remember, "
                f"revise and forget)"
            )


class NamespaceCopy:
    """A private in-memory database with one namespace's tables (projections/sql_tables.py),
    made from the store's state and brought up to a later seq by :meth:`refresh` (only what
    changed since is copied)."""

    def __init__(
        self, projector: Projector, namespace: str, *, sandboxed: bool = True
    ) -> None:
        self.seq = projector.last_seq
        self.namespace = namespace
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET TimeZone = 'UTC'")
        self.con.execute(DDL)
        space = projector.space(namespace)
        for table, columns in namespace_rows(space.state, space.events, namespace).items():
            insert(self.con, table, columns)
        self.con.execute(_EVENTS_VIEW)
        if sandboxed:  # no file access: a query cannot read the log (every namespace) from disk
            self.con.execute("SET enable_external_access = false")
            self.con.execute("SET lock_configuration = true")

    def erased_since(self, projector: Projector) -> bool:
        """Whether an erasure of this namespace came after the copy's seq: rows it holds were
        then rewritten (texts emptied, vectors gone), so the copy must be made anew."""
        events = projector.space(self.namespace).events
        return bool(len(events.seqs_in(self.namespace, self.seq, kinds=("erased",))))

    def refresh(self, projector: Projector) -> None:
        """Bring the copy from its seq to the projector's: new rows of the tables that only
        grow, and every row of a fact an event after the copy's seq touched. One transaction:
        a query running meanwhile sees the old copy or the new one."""
        seq = projector.last_seq
        if seq == self.seq:
            return
        space = projector.space(self.namespace)
        rows = namespace_rows(space.state, space.events, self.namespace, since=self.seq)
        touched = rows["facts"]["id"].tolist()
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            for table, key in (("facts", "id"), ("fact_versions", "fact_id")):
                con.execute(f"DELETE FROM {table} WHERE {key} IN (SELECT unnest(?::BIGINT[]))",
                            [touched])
            for table, columns in rows.items():
                insert(con, table, columns)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
        self.seq = seq

    def query(self, sql: str, params: Any = None) -> duckdb.DuckDBPyRelation:
        """A lazy relation on a fresh cursor (so relations never share an open result)."""
        return self.con.cursor().sql(sql, params=params)

    def close(self) -> None:
        self.con.close()


def run_query(
    copy: NamespaceCopy, sql: str, params: Any, *, timeout: float, max_rows: int
) -> duckdb.DuckDBPyRelation:
    """Run ``sql`` on ``copy`` now and return its result, materialized in a database of its own.

    Errors surface here, as :class:`InvalidInput`, not at fetch time; the result outlives later
    writes and the copy; what is run on it (``.query(...)``) touches only the result; and a
    query that runs longer than ``timeout`` seconds, or that Ctrl-C interrupts, is stopped.
    """
    cursor = copy.con.cursor()
    box: dict[str, Any] = {}
    done = threading.Event()

    def work() -> None:
        try:
            relation = cursor.sql(sql, params=params)
            if relation is None:
                raise InvalidInput("SQL returned no result; ask with SELECT")
            limited = relation.limit(max_rows + 1)
            box["names"], box["types"] = limited.columns, limited.types
            box["data"] = limited.fetchnumpy()
        except BaseException as e:  # handed to the caller's thread
            box["error"] = e
        finally:
            done.set()

    threading.Thread(target=work, name="hmem-sql", daemon=True).start()
    try:
        finished = done.wait(timeout)
    except KeyboardInterrupt:
        cursor.interrupt()
        done.wait(5)
        raise
    if not finished:
        cursor.interrupt()
        done.wait(5)
        raise QueryTimeout(
            f"the query ran longer than {timeout:g} s and was stopped; narrow it (WHERE, LIMIT) "
            f"or pass a larger timeout="
        )
    error = box.get("error")
    if isinstance(error, HmemError):
        raise error
    if error is not None:
        raise InvalidInput(f"SQL failed: {error}") from error
    data: dict[str, Any] = box["data"]
    rows = len(next(iter(data.values()))) if data else 0
    if rows > max_rows:
        raise InvalidInput(
            f"the result has more than {max_rows:,} rows; aggregate or add a LIMIT, or pass a "
            f"larger max_rows="
        )
    return _materialized(box["names"], box["types"], data)


def _materialized(
    names: list[str], types: list[Any], data: dict[str, Any]
) -> duckdb.DuckDBPyRelation:
    out = duckdb.connect(":memory:")
    out.execute("SET TimeZone = 'UTC'")
    out.register("_rows", data)
    casts = ", ".join(f'"{n}"::{t} AS "{n}"' for n, t in zip(names, types, strict=True))
    out.execute(f"CREATE TABLE result AS SELECT {casts} FROM _rows")
    out.unregister("_rows")
    out.execute("SET enable_external_access = false")  # the result cannot reach the store either
    out.execute("SET lock_configuration = true")
    return out.table("result")
