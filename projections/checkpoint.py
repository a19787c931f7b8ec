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

A reader opens a private copy of the file (``open_copy``): the checkpoint is copied byte for byte
into a directory of its own under the system's temporary directory (owner-only; removed when the
reader closes, and by the next reader if its process died), and DuckDB opens that copy as a file,
so the reader's tables stay compressed on disk and are read on demand instead of being loaded
into memory.

Publishing: the writer checkpoints DuckDB (its file then holds every committed row and no WAL is
needed), copies the file to ``checkpoint.duckdb.tmp`` while it holds the store's lock (no write in
between), fsyncs it and renames it over the last one, so a reader sees the old checkpoint or the
new one, never a part.
"""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import duckdb

from projections.duck import SCHEMA_VERSION, DuckProjection, from_log
from projections.errors import ProjectionError

__all__ = [
    "sweep_dead_copies", "CHECKPOINT_FILE", "Stamp", "empty_copy", "open_copy", "publish",
    "read_stamp",
]

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


def empty_copy() -> DuckProjection:
    """An empty private projection in a file of its own (removed when it is closed): a shared
    writer's when there is no checkpoint yet, so that it can publish one."""
    sweep_dead_copies()
    scratch = Path(tempfile.mkdtemp(prefix=f"{_COPY_PREFIX}{os.getpid()}-"))
    return DuckProjection(scratch / CHECKPOINT_FILE, scratch=scratch)


def open_copy(
    path: Path, last_seq: int, chain_at: Callable[[int], bytes]
) -> tuple[DuckProjection | None, str | None]:
    """A reader's private on-disk copy of the checkpoint at ``path`` when it was published from
    this log; else ``(None, why)`` (``why`` None when there is no checkpoint to speak of). The
    copy's directory is removed when the returned projection is closed."""
    if not path.exists():
        return None, None
    sweep_dead_copies()
    scratch = Path(tempfile.mkdtemp(prefix=f"{_COPY_PREFIX}{os.getpid()}-"))
    db: DuckProjection | None = None
    try:
        copy = scratch / CHECKPOINT_FILE
        shutil.copyfile(path, copy)  # one open file: the old checkpoint or the new, not a mix
        db = DuckProjection(copy, scratch=scratch, check_later=True)
        stamp = db.cursor()
        note = None
        if db.recreated:
            note = f"checkpoint {path} is unreadable or of another schema version; replayed the log"
        elif stamp[0] > 0 and not from_log(stamp, last_seq, chain_at):
            note = (f"checkpoint (seq {stamp[0]}) was published from a different log; "
                    "replayed the log")
        if note is None and stamp[0] > 0:
            return db, None
    except (duckdb.Error, ProjectionError) as e:
        note = f"checkpoint {path} is unreadable ({e}); replayed the log"
    if db is not None:
        db.close()
    shutil.rmtree(scratch, ignore_errors=True)
    return None, note


_COPY_PREFIX = "hmem-reader-"


def sweep_dead_copies() -> None:
    """Remove reader copies left by processes that died without closing them."""
    for left in Path(tempfile.gettempdir()).glob(f"{_COPY_PREFIX}*-*"):
        pid = left.name[len(_COPY_PREFIX):].split("-", 1)[0]
        if pid.isdigit() and not _alive(int(pid)):
            shutil.rmtree(left, ignore_errors=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's process: alive, and not ours to sweep
    return True


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
