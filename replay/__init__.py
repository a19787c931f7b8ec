"""Rebuild, verify, time travel and provenance over the log and the state derived from it."""

from replay.asof import as_of, seq_at, snapshot_query
from replay.diff import diff
from replay.rebuild import rebuild_projection
from replay.verify import ProjectionDiff, verify_projection
from replay.why import why

__all__ = [
    "as_of",
    "diff",
    "rebuild_projection",
    "seq_at",
    "snapshot_query",
    "verify_projection",
    "why",
    "ProjectionDiff",
]
