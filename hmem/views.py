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
    pretty_text,
    tx,
    version_view,
)

__all__ = [
    "OUTCOMES",
    "Written",
    "plain_int",
    "Version",
    "FactView",
    "Belief",
    "Why",
    "SeenBy",
    "stats_lines",
    "Revision",
    "Diff",
    "Stats",
    "EpisodeView",
    "fact_view",
    "episode_view",
    "version_view",
]


OUTCOMES = ("new", "repeat", "retry")


class Written(int):
    """What a write returns: the id (or seq) it names, an ``int``, and what the write did.

    ``outcome`` is ``"new"`` (stored now), ``"repeat"`` (a current fact already says it, or an
    earlier item of the same batch does: nothing stored, that fact's id returned) or
    ``"retry"`` (a write with this request id was stored before: answered as then, nothing
    stored); :attr:`new` says whether it was stored now. It is used as the id it is
    (``m.revise(written, ...)``); ``int(written)`` is the plain int, for encoders that take
    only exact ints (msgspec).
    """

    outcome: str

    def __new__(cls, value: int, outcome: str = "new") -> Written:
        if outcome not in OUTCOMES:
            raise ValueError(f"outcome must be one of {OUTCOMES}, not {outcome!r}")
        self = super().__new__(cls, value)
        self.outcome = outcome
        return self

    @property
    def new(self) -> bool:
        """Whether this write stored something now."""
        return self.outcome == "new"

    def __reduce__(self) -> tuple[type[Written], tuple[int, str]]:
        return Written, (int(self), self.outcome)


def plain_int(value: object) -> object:
    """msgspec's ``enc_hook`` for a :class:`Written` (or any int subclass): its int."""
    if isinstance(value, int):
        return int(value)
    raise NotImplementedError(f"cannot encode {type(value).__name__}")


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

    def __str__(self) -> str:
        return "\n".join(stats_lines(self))

    _repr_pretty_ = pretty_text  # IPython / Jupyter show str()


def stats_lines(s: Stats) -> list[str]:
    span = f"{tx(s.first_tx)} to {tx(s.last_tx)}" if s.first_tx else "-"
    mode = "read-only" if s.read_only else f"writer, fsync {s.fsync}"
    return [
        f"store       {s.path} ({mode})",
        f"namespace   {s.namespace}",
        f"facts       {s.facts} ({s.current} current, {s.superseded} superseded, "
        f"{s.forgotten} forgotten)",
        f"subjects    {s.subjects}, entities {s.entities}, vectors {s.vectors}"
        + (f" ({s.embedding_backlog} facts waiting to be embedded)" if s.embedding_backlog
           else ""),
        *([f"embedding   failed: {s.embedding_error}"] if s.embedding_error else []),
        f"events      {s.namespace_events} in namespace",
        f"tx time     {span}",
        f"log head    {s.head}  (note it; `hmem log verify --expect` checks it later)"
        if s.head_seq else "log head    empty (no event logged yet)",
        f"projection  at seq {s.projection_seq}",
    ]
