"""Rebuild, verify and time travel over the log and its projection."""

from replay.asof import as_of, seq_at, snapshot_query
from replay.diff import diff
from replay.rebuild import rebuild_projection
from replay.verify import ProjectionDiff, verify_projection

__all__ = [
    "as_of",
    "diff",
    "rebuild_projection",
    "seq_at",
    "snapshot_query",
    "verify_projection",
    "ProjectionDiff",
]
