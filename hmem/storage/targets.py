"""Where a store lives: a target (a directory, a ``postgresql://`` URL, or the default home)
and the backend that opens it (hmem/storage/backend.py)."""

from __future__ import annotations

import os
from pathlib import Path

from eventlog.fileio import FileIO
from eventlog.format import SEGMENT_BYTES
from eventlog.log import FsyncPolicy
from eventlog.repair import RepairReport, VerifyReport
from eventlog.segments import ChainHead
from eventlog.server_urls import is_server_url, redacted
from hmem.errors import RepairUnavailable
from hmem.storage.backend import Backend

__all__ = ["default_root", "is_server_url", "local_directory", "open_backend", "repair_log_at",
           "store_target", "verify_log_at"]


def default_root() -> Path:
    """``$HMEM_HOME``, else ``$XDG_DATA_HOME/hmem``, else ``~/.local/share/hmem``."""
    if os.environ.get("HMEM_HOME"):
        return Path(os.environ["HMEM_HOME"]).expanduser()
    home = os.path.expanduser("~")
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    return Path(base) / "hmem"


def store_target(path: str | os.PathLike[str] | None) -> Path | str:
    """Where a store lives: a ``postgresql://`` URL as given, else a directory (``~``
    expanded); None means :func:`default_root` (``$HMEM_HOME`` may be a URL too)."""
    if path is None:
        home = os.environ.get("HMEM_HOME")
        return home if home is not None and is_server_url(home) else default_root()
    if is_server_url(path):
        return str(path)
    return Path(path).expanduser()


def local_directory(path: str | os.PathLike[str] | None) -> Path:
    """The directory of the store's local files (its usage log, ...): the store's own, or for
    a store on PostgreSQL the cache directory this host keeps for it
    (hmem/storage/server_backend.py)."""
    target = store_target(path)
    if isinstance(target, Path):
        return target
    backend = open_backend(target, read_only=True, shared=False)
    try:
        return backend.root
    finally:
        backend.close()


def verify_log_at(
    path: str | os.PathLike[str] | None, *, expect: ChainHead | None = None,
    key: bytes | None = None, witness: str | os.PathLike[str] | None = None,
) -> VerifyReport:
    """``hmem log verify`` of the store at ``path``: its segment files read one by one (a log
    too damaged to open is still reported), or every row of its ``hmem_log`` table on a
    server."""
    target = store_target(path)
    if isinstance(target, str):
        from hmem.storage.server_backend import verify_server_log

        return verify_server_log(target, expect=expect, key=key, witness=witness)
    from eventlog.repair import verify_log

    return verify_log(_log_directory(target), expect=expect, key=key, witness=witness)


def repair_log_at(path: str | os.PathLike[str] | None) -> RepairReport:
    """``hmem log repair`` of the store directory at ``path`` (what it cuts is kept in its
    ``backups/``); ``RepairUnavailable`` for a store on PostgreSQL."""
    target = store_target(path)
    if isinstance(target, str):
        raise RepairUnavailable(
            f"the log of the store at {redacted(target)} is not repaired in place: its table's "
            f"rows are append-only (triggers refuse UPDATE and DELETE) and every write is a "
            f"commit the server confirmed, so there is no torn tail to cut. `hmem log verify` "
            f"names the first row that fails its checks; restore the database from a backup "
            f"taken before it"
        )
    from eventlog.repair import repair_log

    return repair_log(_log_directory(target), target / "backups")


def _log_directory(root: Path) -> Path:
    from hmem.storage.file_backend import missing_store

    if not (root / "log").is_dir():
        raise missing_store(root)
    return root / "log"


def open_backend(
    target: str | os.PathLike[str],
    *,
    read_only: bool,
    shared: bool,
    fsync: FsyncPolicy = "always",
    segment_bytes: int = SEGMENT_BYTES,
    io: FileIO | None = None,
    key_file: str | os.PathLike[str] | None = None,
    seal: bool = True,
) -> Backend:
    """The backend of the store at ``target``: a ``postgresql://`` URL or a directory."""
    if is_server_url(target):
        from hmem.storage.server_backend import ServerBackend

        return ServerBackend(str(target), read_only=read_only, key_file=key_file, seal=seal)
    from hmem.storage.file_backend import FileBackend

    return FileBackend(
        Path(target), read_only=read_only, shared=shared, fsync=fsync,
        segment_bytes=segment_bytes, io=io, key_file=key_file, seal=seal,
    )
