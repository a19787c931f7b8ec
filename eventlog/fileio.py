"""The system calls the log's write path makes, behind one small object.

Production uses :data:`OS`; the fault-injection tests pass a subclass that fails chosen calls
(short writes, ENOSPC, EIO on write or fsync) to prove every failure is loud and loses nothing
that was acknowledged.
"""

from __future__ import annotations

import os

__all__ = ["FileIO", "OS", "write_all"]


class FileIO:
    """Thin wrappers over ``os``; override any of them to inject faults."""

    def open(self, path: str | os.PathLike[str], flags: int, mode: int = 0o600) -> int:
        return os.open(path, flags, mode)

    def write(self, fd: int, data: memoryview | bytes) -> int:
        return os.write(fd, data)

    def fdatasync(self, fd: int) -> None:
        os.fdatasync(fd)

    def fsync(self, fd: int) -> None:
        os.fsync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        os.ftruncate(fd, length)

    def lseek(self, fd: int, pos: int, how: int) -> int:
        return os.lseek(fd, pos, how)

    def close(self, fd: int) -> None:
        os.close(fd)


OS = FileIO()


def write_all(io: FileIO, fd: int, data: bytes) -> None:
    """Write all of ``data`` (a write may take only part of it); a write of nothing is an
    ``OSError``."""
    view = memoryview(data)
    while view:
        n = io.write(fd, view)
        if n <= 0:
            raise OSError("short write")
        view = view[n:]
