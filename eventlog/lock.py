"""Locks on files in the log directory: one writer at a time (``LOCK``), and readers that never
see half of an append (``APPEND``)."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from eventlog.errors import StoreLocked

__all__ = ["AppendLock", "WriterLock"]


class WriterLock:
    """An exclusive, non-blocking ``flock`` held for the writer's lifetime.

    The kernel releases it when the process dies, so a crashed writer never leaves a stale lock.
    """

    def __init__(self, path: Path, label: str) -> None:
        self.path = path
        self.label = label
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_holder(fd)
            os.close(fd)
            raise StoreLocked(
                f"{self.label} is open for writing by another process{holder}. "
                f"Readers still work: open it read-only (Memory(path, read_only=True); the CLI's "
                f"read commands do this). To write, stop the other writer first"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _read_holder(fd: int) -> str:
    try:
        pid = os.pread(fd, 32, 0).decode().strip()
    except OSError:
        return ""
    return f" (pid {pid})" if pid.isdigit() else ""


class AppendLock:
    """Held exclusively by the writer while it writes one append (a whole ``append_many``
    batch), and shared by a reader while it scans for new records: a reader sees every batch
    whole or not at all. The kernel drops it when a process dies, so a crashed writer blocks
    nobody (its torn tail is then cut or ignored as usual).

    A reader of a log directory without the file (written by an older hmem, or on a read-only
    file system) scans without it.
    """

    def __init__(self, path: Path, *, create: bool) -> None:
        self.path = path
        self._fd: int | None = None
        if create:
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)

    def _open(self) -> int | None:
        if self._fd is None:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return None
        return self._fd

    @contextmanager
    def held(self, *, shared: bool) -> Iterator[None]:
        fd = self._open()
        if fd is None:
            yield
            return
        fcntl.flock(fd, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
