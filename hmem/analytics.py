"""The notebook surface: one namespace's projection as a private, read-only DuckDB database.

``Memory.sql`` and ``Memory.events`` never run user SQL against the store's own connection: the
namespace's rows are copied into a separate in-memory database (cached until the store changes),
so a query can neither see another namespace nor change the projection. The copy has no file
access (``enable_external_access = false``): ``read_text``/``read_blob`` of the store's own log
files would otherwise show every namespace. ``hmem.export`` writes files from an unsandboxed
copy of its own.
"""

from __future__ import annotations

from typing import Any

import duckdb

from hmem.errors import InvalidInput
from projections.duck import TABLES

__all__ = ["NamespaceCopy", "check_read_only"]

_EVENTS_VIEW = """
CREATE VIEW event_log AS
SELECT e.seq, e.type, e.tx_at, e.namespace, e.fact_id, e.target_id, f.subject, f.subject_key,
       coalesce(f.text, ep.text) AS text, e.source_agent, e.source_ref, e.reason
FROM events e LEFT JOIN facts f ON f.id = e.fact_id LEFT JOIN episodes ep ON ep.seq = e.seq
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
    """A private in-memory database with one namespace's projection tables."""

    def __init__(
        self, source: duckdb.DuckDBPyConnection, namespace: str, seq: int, *, sandboxed: bool = True
    ) -> None:
        self.seq = seq
        self.con = duckdb.connect(":memory:")
        self.con.execute("SET TimeZone = 'UTC'")
        for table in TABLES:
            data: dict[str, Any] = source.execute(
                f"SELECT * FROM {table} WHERE namespace = ?", [namespace]
            ).fetchnumpy()
            self.con.register("_rows", data)
            types = source.execute(f"DESCRIBE {table}").fetchall()
            casts = ", ".join(f'"{name}"::{kind} AS "{name}"' for name, kind, *_ in types)
            self.con.execute(f"CREATE TABLE {table} AS SELECT {casts} FROM _rows")
            self.con.unregister("_rows")
        self.con.execute(_EVENTS_VIEW)
        if sandboxed:  # no file access: a query cannot read the log (every namespace) from disk
            self.con.execute("SET enable_external_access = false")
            self.con.execute("SET lock_configuration = true")

    def query(self, sql: str, params: Any = None) -> duckdb.DuckDBPyRelation:
        """A lazy relation on a fresh cursor (so relations never share an open result)."""
        return self.con.cursor().sql(sql, params=params)

    def close(self) -> None:
        self.con.close()
