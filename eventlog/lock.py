"""Locks on files in the log directory: one writer at a time (``LOCK``), readers that never
see half of an append (``APPEND``), and the readers open now (``READERS``, ``readers/``), which an
erasure waits for no one of."""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from eventlog.errors import ReadersOpen, StoreLocked

__all__ = ["AppendLock", "ReaderMark", "WriterKind", "WriterLock", "readers_excluded"]


class WriterLock:
    """An exclusive, non-blocking ``flock`` held for the writer's lifetime.

    The kernel releases it when the process dies, so a crashed writer never leaves a stale lock.
    """

    def __init__(self, path: Path, label: str) -> None:
        self.path = path
        self.label = label
        self._fd: int | None = None

    def acquire(self, wait: float = 0.0) -> None:
        """Take the lock; wait up to ``wait`` seconds for another holder to let go (a shared
        log's writers take it per append), then raise ``StoreLocked`` naming the holder."""
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + wait
        pause = 0.0005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() < deadline:
                    time.sleep(pause)
                    pause = min(pause * 2, 0.02)
                    continue
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


class ReaderMark:
    """Held by an open reader: a shared ``flock`` on ``READERS`` (an erasure takes it
    exclusively, so no reader opens while one runs: a reader waits for it) and an exclusive one on
    its own file ``readers/<pid>-<n>``, which names it. The kernel drops both when the process
    dies; a dead reader's file is removed by the next erasure. A log directory this process may
    not write (a read-only file system) is not marked: nothing can erase it either."""

    def __init__(self, directory: Path) -> None:
        self._fds: list[int] = []
        self._own: Path | None = None
        try:
            fd = os.open(directory / "READERS", os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return
        self._fds.append(fd)
        fcntl.flock(fd, fcntl.LOCK_SH)
        try:
            (directory / "readers").mkdir(mode=0o700, exist_ok=True)
            own = directory / "readers" / f"{os.getpid()}-{id(self):x}"
            mine = os.open(own, os.O_RDWR | os.O_CREAT, 0o600)
        except OSError:
            return
        self._fds.append(mine)
        fcntl.flock(mine, fcntl.LOCK_EX)
        self._own = own

    def release(self) -> None:
        if self._own is not None:
            self._own.unlink(missing_ok=True)
            self._own = None
        for fd in self._fds:
            os.close(fd)
        self._fds = []


@contextmanager
def readers_excluded(directory: Path, what: str) -> Iterator[None]:
    """Hold ``READERS`` exclusively (no reader is open, none opens) for ``what``; raises
    ``ReadersOpen`` naming the readers' pids if any is open."""
    fd = os.open(directory / "READERS", os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pids = _live_readers(directory / "readers")
            named = f" (pid {', '.join(pids)})" if pids else ""
            raise ReadersOpen(
                f"{what} needs every reader of this store closed, and readers are open{named}. "
                f"Close them (e.g. stop the MCP servers and CLI commands reading it) and retry"
            ) from None
        _live_readers(directory / "readers")  # sweep files of readers that died
        yield
    finally:
        os.close(fd)


def _live_readers(directory: Path) -> list[str]:
    """The pids of the readers whose files are locked; removes the files of dead ones."""
    pids: list[str] = []
    if not directory.is_dir():
        return pids
    for path in sorted(directory.iterdir()):
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pids.append(path.name.split("-")[0])
        else:
            path.unlink(missing_ok=True)
        finally:
            os.close(fd)
    return sorted(set(pids), key=int)


class WriterKind:
    """Held for a writer's lifetime on ``WRITERS``: shared by the writers of a shared log,
    exclusive by a lifetime writer, so the two kinds never meet (a lifetime writer would keep
    every shared one waiting at its first write)."""

    def __init__(self, path: Path, *, shared: bool, label: str) -> None:
        self._fd: int | None = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(self._fd)
            self._fd = None
            if shared:
                holder = _holder_of(path.with_name("LOCK"))
                raise StoreLocked(
                    f"{label} is open for writing by another process that does not share "
                    f"it{holder}; "
                    f"stop it (or open that one with shared=True) to write here, or read: "
                    f"Memory(path, read_only=True)"
                ) from None
            raise StoreLocked(
                f"{label} has shared writers open (MCP servers, hmem commands); write beside "
                f"them with Memory(path, shared=True), or read with read_only=True"
            ) from None

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _holder_of(path: Path) -> str:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return ""
    try:
        return _read_holder(fd)
    finally:
        os.close(fd)
