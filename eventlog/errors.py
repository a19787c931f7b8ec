"""The errors of the ground floor: the base of every hmem error, and the log's and store's own.

Every error hmem raises on purpose is an :class:`HmemError`; each floor defines the errors it
raises (this module, ``projections.errors``, ``hmem.errors``) and :mod:`hmem.errors` re-exports
them all. Messages say what was wrong and what to do about it.
"""

from __future__ import annotations

__all__ = [
    "HmemError",
    "StoreLocked",
    "StoreNotFound",
    "ReadOnlyStore",
    "StoreClosed",
    "LogError",
    "LogCorrupted",
    "UnsupportedFormat",
    "LogWriteFailed",
    "ServerUnavailable",
    "RepairUnavailable",
    "RecordRejected",
    "KeyFileError",
    "KeyFileMissing",
    "KeyFileDamaged",
    "ReadersOpen",
    "shown",
]


class HmemError(Exception):
    """Base class of every error hmem raises on purpose."""


class StoreLocked(HmemError):
    """Another process holds this store open for writing."""


class StoreNotFound(HmemError, FileNotFoundError):
    """No store exists at this path (and it was opened read-only, so none was created)."""


class ReadOnlyStore(HmemError):
    """A write was attempted on a store opened read-only."""


class StoreClosed(HmemError):
    """The store was used after close()."""


class LogError(HmemError):
    """Base class of event-log errors."""


class LogCorrupted(LogError):
    """A record before the tail of the log failed its checks.

    Carries the segment path and byte offset of the first bad record.
    """

    def __init__(self, segment: str, offset: int, detail: str, store: str | None = None) -> None:
        where = f" --path {store}" if store else ""
        super().__init__(
            f"event log corrupted in {segment} at byte {offset}: {detail}. "
            f"Inspect with `hmem{where} log verify`; `hmem{where} log repair` keeps a backup and "
            f"truncates the log to the last good record (events after it are lost)"
        )
        self.segment = segment
        self.offset = offset
        self.detail = detail


class UnsupportedFormat(LogError):
    """The log was written by a newer (or unknown) format version."""


class ServerLogCorrupted(LogCorrupted):
    """A row of a log held by a database server (PostgreSQL) failed its checks: ``offset`` is
    its seq. Nothing from it on is read."""

    def __init__(self, where: str, seq: int, detail: str) -> None:
        LogError.__init__(
            self,
            f"event log corrupted in {where} at seq {seq}: {detail}. Nothing from it on can be "
            f"trusted: restore the database from a backup, or copy the events before it out",
        )
        self.segment, self.offset, self.detail = where, seq, detail


class RepairUnavailable(LogError):
    """``hmem log repair`` on a log that is not repaired in place (a store on PostgreSQL: its
    rows are append-only, and a commit the server confirmed has no torn tail to cut)."""


class ServerUnavailable(LogError):
    """The database server that holds the store's log could not be reached (down, restarting,
    or the connection was cut). Nothing was read or written by the call; try it again when
    the server is back (the store reconnects on its own)."""


class AccessDenied(HmemError, PermissionError):
    """The database role (or the file system user) may not do what the call needs with this
    store: the message names the role and what to connect as instead. Nothing was written."""


class RecordRejected(LogError, ValueError):
    """An event cannot be written as a record: a field holds a value msgpack cannot encode, or
    the record would exceed the 64 MiB limit. Nothing of the call was written."""


class LogWriteFailed(LogError):
    """A write or fsync of the log failed; the log refuses writes until it is reopened."""


class KeyFileError(HmemError):
    """Base class of key-file errors: a sealed text is never read, nor written, without its key."""


class KeyFileMissing(KeyFileError, FileNotFoundError):
    """The store seals its texts but its key file is not where it should be."""


class KeyFileDamaged(KeyFileError):
    """The key file fails its checks, lacks a key the log needs, or does not open the log."""


class ReadersOpen(HmemError):
    """An operation that needs every reader closed (an erasure) found readers open."""


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` for an error message, cut after ``limit`` characters (a user's value may
    be megabytes long)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f" ({len(value)} characters)" if isinstance(value, str) else ""
    return text[:limit] + "..." + size
