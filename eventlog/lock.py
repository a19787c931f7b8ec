"""One writer at a time: an OS advisory lock on a file in the store."""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from eventlog.errors import StoreLocked

__all__ = ["WriterLock"]


class WriterLock:
    """An exclusive, non-blocking ``flock`` held for the writer's lifetime.

    The kernel releases it when the process dies, so a crashed writer never leaves a stale lock.
    """

    def __init__(self, path: Path, label: str) -> None:
        self.path = path
        self.label = label
        self._fd: int | None = None

    def acquire(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
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
