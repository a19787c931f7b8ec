"""The writer's published checkpoint: a consistent copy of its projection that readers open.

DuckDB lets one process open a database file while it is written, so a reader (the CLI beside an
agent's server, ``Memory(read_only=True)``) cannot open ``projection.duckdb``. Instead of
replaying the whole log, a reader copies the writer's last *checkpoint* (``checkpoint.duckdb``)
and folds only the log's tail after it.

The checkpoint is stamped by the projection's own cursor (the seq it holds and the log's hash
chain at that seq, written in the same transaction as its rows), so a reader uses it only when
the log it opens has that chain at that seq: a checkpoint from another store, from a log that was
repaired (cut) since, from another schema version, or one that is damaged, is skipped with a note
and the reader replays the log as before. The checkpoint is derived, like the projection: deleting
it loses nothing.

Publishing: the writer checkpoints DuckDB (its file then holds every committed row and no WAL is
needed), copies the file to ``checkpoint.duckdb.tmp`` while it holds the store's lock (no write in
between), fsyncs it and renames it over the last one, so a reader sees the old checkpoint or the
new one, never a part.
"""

from __future__ import annotations

import itertools
import os
import shutil
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from projections.duck import SCHEMA_VERSION, TABLES, DuckProjection, from_log

__all__ = ["CHECKPOINT_FILE", "Stamp", "publish", "read_stamp", "load"]

CHECKPOINT_FILE = "checkpoint.duckdb"

Stamp = tuple[int, str]  # (seq the checkpoint holds, hex of the log's chain at that seq)

# One process may open several readers at once: DuckDB attaches a file only once per instance.
_attach_lock = threading.Lock()
_aliases = itertools.count()


def publish(db: DuckProjection, path: Path) -> Stamp:
    """Write a consistent copy of the writer's (flushed) projection ``db`` to ``path``, replacing
    the last one atomically; returns its stamp. The caller holds the store's lock."""
    if db.path is None:
        raise ValueError("only a projection on disk can be published")
    db.con.execute("CHECKPOINT")
    stamp = db.cursor()
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with open(db.path, "rb") as src, os.fdopen(fd, "wb", closefd=False) as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    return stamp


def read_stamp(path: Path) -> Stamp | None:
    """The stamp of the checkpoint at ``path``; None when there is none, it is unreadable or it
    was written by another schema version."""
    if not path.exists():
        return None
    con = duckdb.connect(":memory:")
    try:
        with _attached(con, path) as alias:
            return _stamp(con, alias)
    except duckdb.Error:
        return None
    finally:
        con.close()


def load(
    db: DuckProjection, path: Path, last_seq: int, chain_at: Callable[[int], bytes]
) -> tuple[int, str | None]:
    """Fill the empty in-memory projection ``db`` from the checkpoint at ``path`` when it was
    published from this log (the log's chain at the checkpoint's seq matches its stamp).

    Returns ``(seq, note)``: the seq the projection now holds (0 when nothing was loaded) and,
    when a checkpoint was there but skipped, why. On any failure ``db`` is left empty.
    """
    if not path.exists():
        return 0, None
    try:
        with _attached(db.con, path) as alias:
            return _copy(db, alias, last_seq, chain_at)
    except duckdb.Error as e:
        db.reset()
        return 0, f"checkpoint {path} is unreadable ({e}); replayed the log"


@contextmanager
def _attached(con: duckdb.DuckDBPyConnection, path: Path) -> Iterator[str]:
    """The checkpoint attached read-only to ``con`` for the block; yields its alias."""
    with _attach_lock:
        alias = f"checkpoint_{next(_aliases)}"
        con.execute(f"ATTACH '{_sql_path(path)}' AS {alias} (READ_ONLY)")
        try:
            yield alias
        finally:
            con.execute(f"DETACH {alias}")


def _copy(
    db: DuckProjection, alias: str, last_seq: int, chain_at: Callable[[int], bytes]
) -> tuple[int, str | None]:
    stamp = _stamp(db.con, alias)
    if stamp is None:
        return 0, "checkpoint is from another schema version; replayed the log"
    if stamp[0] == 0:
        return 0, None
    if not from_log(stamp, last_seq, chain_at):
        return 0, (
            f"checkpoint (seq {stamp[0]}) was published from a different log; replayed the log"
        )
    con = db.con
    con.execute("BEGIN TRANSACTION")
    try:
        for table in TABLES:
            con.execute(f"INSERT INTO {table} BY NAME SELECT * FROM {alias}.{table}")
        db.set_cursor(*stamp)
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise
    return stamp[0], None


def _stamp(con: duckdb.DuckDBPyConnection, alias: str) -> Stamp | None:
    rows = dict(con.execute(f"SELECT key, value FROM {alias}.meta").fetchall())
    if rows.get("schema_version") != str(SCHEMA_VERSION):
        return None
    return int(rows.get("last_seq", "0")), rows.get("chain", "")


def _sql_path(path: Path) -> str:
    return str(path).replace("'", "''")


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
