"""The errors the fold raises: input it refuses, facts it cannot find or change."""

from __future__ import annotations

from eventlog.errors import HmemError

__all__ = [
    "InvalidInput",
    "InvalidTime",
    "FactNotFound",
    "FactAlreadyForgotten",
    "FactSuperseded",
    "ProjectionError",
    "DamagedProjection",
]


class InvalidInput(HmemError, ValueError):
    """An argument was rejected before anything was written."""


class InvalidTime(InvalidInput):
    """A time argument was naive, unparseable, or out of order."""


class FactNotFound(HmemError, LookupError):
    """No fact with this id exists in this namespace."""

    def __init__(self, fact_id: object, namespace: str) -> None:
        super().__init__(
            f"no fact {fact_id!r} in namespace {namespace!r}; "
            f"list facts with `hmem history SUBJECT` or `hmem recall QUERY`"
        )
        self.fact_id = fact_id
        self.namespace = namespace


class FactAlreadyForgotten(HmemError):
    """The fact was forgotten (tombstoned); it can no longer be revised or forgotten again.

    (``hmem.errors.FactForgotten`` is the same class under its older name.)"""


class FactSuperseded(HmemError):
    """The fact was already revised; only the newest version of a chain can be revised."""

    def __init__(self, fact_id: int, head_id: int) -> None:
        super().__init__(
            f"fact {fact_id} was already revised; revise the newest version, fact {head_id}, "
            f"instead"
        )
        self.fact_id = fact_id
        self.head_id = head_id


class ProjectionError(HmemError):
    """The DuckDB projection could not be read or written; it can be rebuilt from the log."""


class DamagedProjection(ProjectionError):
    """A block of a checkpoint part changed on disk after the part was opened and checked (found
    when the block is first read, projections/part_blob.py); reopening the store refuses the
    part and replays its namespace from the log."""
