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
    SeenBy,
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
    "SeenBy",
    "Revision",
    "Diff",
    "Stats",
    "EpisodeView",
    "fact_view",
    "episode_view",
    "version_view",
]


class Stats(msgspec.Struct, frozen=True):
    """Counts of one namespace, and where the store's log stands.

    Every count is this namespace's own: nothing here counts, sizes or names what other
    namespaces hold. ``head_seq`` and ``head_hash`` are the log's head (its last seq and the
    hash chain after it): the position every id and ``as_of`` seq is drawn from, and the value
    to note for tamper evidence (``hmem log verify --expect SEQ:HASH``).

    ``embedding_backlog`` counts this namespace's facts queued for background embedding in
    this process and not yet embedded; ``embedding_error`` is a background embedding failure
    that the next ``flush()`` or ``close()`` raises (the facts stay queued)."""

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
    head_seq: int
    head_hash: str
    projection_seq: int
    first_tx: datetime | None
    last_tx: datetime | None
    fsync: str
    read_only: bool
    embedding_backlog: int = 0
    embedding_error: str | None = None

    @property
    def head(self) -> str:
        """``SEQ:HASH``, as ``hmem log verify --expect`` takes it."""
        return f"{self.head_seq}:{self.head_hash}"

    @property
    def log_events(self) -> int:
        """The log's last seq (the older name of ``head_seq``)."""
        return self.head_seq
