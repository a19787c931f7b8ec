"""Where a store lives: a target (a directory, a ``postgresql://`` URL, or the default home)
and the backend that opens it (hmem/storage/backend.py)."""

from __future__ import annotations

import os
from pathlib import Path

from eventlog.fileio import FileIO
from eventlog.log import FsyncPolicy
from eventlog.pg_log import is_server_url
from hmem.errors import InvalidInput
from hmem.storage.backend import Backend

__all__ = ["default_root", "is_server_url", "open_backend", "store_directory", "store_target"]


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


def store_directory(path: str | os.PathLike[str] | None) -> Path:
    """The directory of the store at ``path``, for what reads a store's files themselves (its
    segment files, its usage log); ``InvalidInput`` for a store on PostgreSQL, which has none."""
    target = store_target(path)
    if isinstance(target, str):
        raise InvalidInput(
            "this command reads a store directory's files; a store on PostgreSQL keeps its log "
            "in the hmem_log table (check it with `hmem replay verify`; copy it with `hmem copy`)"
        )
    return target


def open_backend(
    target: str | os.PathLike[str],
    *,
    read_only: bool,
    shared: bool,
    fsync: FsyncPolicy = "always",
    segment_bytes: int = 64 * 1024 * 1024,
    io: FileIO | None = None,
    key_file: str | os.PathLike[str] | None = None,
    seal: bool = True,
) -> Backend:
    """The backend of the store at ``target``: a ``postgresql://`` URL or a directory."""
    if is_server_url(target):
        from hmem.storage.server_backend import ServerBackend

        return ServerBackend(str(target), read_only=read_only)
    from hmem.storage.file_backend import FileBackend

    return FileBackend(
        Path(target), read_only=read_only, shared=shared, fsync=fsync,
        segment_bytes=segment_bytes, io=io, key_file=key_file, seal=seal,
    )
