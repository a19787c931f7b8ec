"""What a store on PostgreSQL needs beyond the embedded one (issue 15): its log on the server
(:class:`~eventlog.pg_log.PgLog`), its tables there (:mod:`projections.pg_tables`), written in
each append's transaction, and a local cache directory for the process's own projection.

Every process that opens ``postgresql://...`` keeps the projection hmem reads from (the fold,
the recall indexes, DuckDB for ``sql``) as a shared writer of a file store does: a private copy
of the last checkpoint published on this host, plus the log's tail read from the server. The
cache is keyed by the store's id, so two databases never share one, and is disposable: without
it the process replays the log.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from eventlog.events import Event
from eventlog.pg_log import PgLog, is_server_url
from projections import pg_tables
from projections.fact_columns import FactColumns
from projections.projector import touched_facts

__all__ = ["cache_home", "is_server_url", "open_server_log", "rewrite_tables", "write_tables"]


def cache_home() -> Path:
    """``$HMEM_CACHE``, else ``$XDG_CACHE_HOME/hmem``, else ``~/.cache/hmem``."""
    if os.environ.get("HMEM_CACHE"):
        return Path(os.environ["HMEM_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hmem"


def open_server_log(url: str, *, read_only: bool) -> tuple[PgLog, Path]:
    """The store's log at ``url`` (its tables made, for a writer) and its cache directory."""
    log = PgLog(url, read_only=read_only)
    try:
        if not read_only:
            with log.writing(), log.con.transaction():
                pg_tables.create_tables(log.con)
        sid = pg_tables.store_id(log.con)
        if sid is None:  # a log written without hmem's tables (e.g. by a bare PgLog)
            sid = "log-" + (log.chain_at(1).hex()[:16] if log.last_seq else "empty")
    except BaseException:
        log.close()
        raise
    root = cache_home() / "pg" / sid
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    return log, root


def write_tables(log: PgLog, state: FactColumns, events: Sequence[Event]) -> None:
    """Bring the server's tables to ``state`` (the fold after ``events``, the batch just
    appended), in the append's transaction."""
    pg_tables.write_facts(log.con, state, touched_facts(events), after=events[0].seq - 1)


def rewrite_tables(log: PgLog, state: FactColumns) -> None:
    """Write every fact's rows again (the tables were missing, behind, or rebuilt)."""
    with log.writing(), log.con.transaction():
        pg_tables.write_facts(log.con, state, (), after=-1)  # with COPY
