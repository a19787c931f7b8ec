"""What the public API returns: frozen msgspec Structs (so ``msgspec.json.encode`` gives JSON).

The answer types of time travel and provenance live in :mod:`replay.views`, on the floor that
makes them; they are re-exported here with the facade's own (:class:`Stats`)."""

from __future__ import annotations

from datetime import datetime

import msgspec

from replay.views import (
    Belief,
    Diff,
    EpisodeView,
    FactView,
    Revision,
    Version,
    Why,
    episode_view,
    fact_view,
    version_view,
)

__all__ = [
    "Version",
    "FactView",
    "Belief",
    "Why",
    "Revision",
    "Diff",
    "Stats",
    "EpisodeView",
    "fact_view",
    "episode_view",
    "version_view",
]


class Stats(msgspec.Struct, frozen=True):
    path: str
    namespace: str
    facts: int
    current: int
    superseded: int
    forgotten: int
    subjects: int
    entities: int
    vectors: int
    namespace_events: int
    log_events: int
    log_bytes: int
    log_segments: int
    projection_seq: int
    first_tx: datetime | None
    last_tx: datetime | None
    fsync: str
    read_only: bool
