"""What replay and the reads return: frozen msgspec Structs (``msgspec.json.encode`` gives JSON).

``hmem.views`` re-exports every one of them."""

from __future__ import annotations

from datetime import datetime

import msgspec

from eventlog.events import Event
from projections.state import Episode, Fact, Row
from projections.timeutil import from_us, from_us_opt

__all__ = [
    "Version",
    "FactView",
    "Belief",
    "Why",
    "SeenBy",
    "Revision",
    "Diff",
    "EpisodeView",
    "fact_view",
    "episode_view",
    "version_view",
]


class Version(msgspec.Struct, frozen=True):
    """One bi-temporal row: true in the world over [valid_from, valid_to), believed over
    [tx_from, tx_to). ``None`` ends are open."""

    valid_from: datetime
    valid_to: datetime | None
    tx_from: datetime
    tx_to: datetime | None
    tx_from_seq: int
    tx_to_seq: int | None


class FactView(msgspec.Struct, frozen=True):
    """A fact with its provenance, chain links and every version row."""

    id: int
    namespace: str
    subject: str
    text: str
    confidence: float
    source_agent: str | None
    source_ref: str | None
    entities: tuple[str, ...]
    recorded_at: datetime
    supersedes: int | None
    revision: str | None
    reason: str | None
    superseded_by: int | None
    superseded_at: datetime | None
    forgotten_at: datetime | None
    forget_reason: str | None
    versions: tuple[Version, ...]
    derived_from: tuple[int, ...] = ()  # lineage: seqs of the episodes it was extracted from
    extractor: str | None = None  # the model that extracted it
    prompt_version: str | None = None
    category: str | None = None
    importance: int | None = None

    @property
    def forgotten(self) -> bool:
        return self.forgotten_at is not None

    @property
    def current(self) -> bool:
        """Believed now and not replaced by a newer version."""
        return self.superseded_by is None and self.forgotten_at is None


class Belief(msgspec.Struct, frozen=True):
    """One row of an as-of answer: a fact as it was believed at a transaction time."""

    id: int
    subject: str
    text: str
    valid_from: datetime
    valid_to: datetime | None
    recorded_at: datetime
    confidence: float
    superseded: bool
    source_agent: str | None
    source_ref: str | None


class EpisodeView(msgspec.Struct, frozen=True):
    """One recorded conversation turn (an ``EpisodeRecorded`` event); ``seq`` is its id."""

    seq: int
    namespace: str
    session_id: str
    turn: int
    role: str
    speaker: str | None
    text: str
    observed_at: datetime
    recorded_at: datetime
    source_agent: str | None
    source_ref: str | None


class SeenBy(msgspec.Struct, frozen=True):
    """A logged recall that returned a version of the fact: when, to whom, at which rank."""

    seq: int
    served_at: datetime
    fact_id: int  # the version it returned
    rank: int
    query: str
    source_agent: str | None
    source_ref: str | None


class Why(msgspec.Struct, frozen=True):
    """Provenance of a fact: its source, the whole revision chain (oldest first) and the events;
    for extracted facts, ``episodes`` are the turns the chain was derived from; ``seen_by`` the
    logged recalls that returned any version of it (when recall logging is on)."""

    fact: FactView
    chain: tuple[FactView, ...]
    events: tuple[Event, ...]
    episodes: tuple[EpisodeView, ...] = ()
    seen_by: tuple[SeenBy, ...] = ()


class Revision(msgspec.Struct, frozen=True):
    old: FactView
    new: FactView
    kind: str  # "world" (the world changed) or "correction"


class Diff(msgspec.Struct, frozen=True):
    """What changed between two transaction times: events with since < seq <= until."""

    since_seq: int
    until_seq: int
    # When this namespace last changed at or before since_seq / until_seq (None if it had not):
    # the times of other namespaces' events are not shown.
    since_tx: datetime | None
    until_tx: datetime | None
    added: tuple[FactView, ...]
    revised: tuple[Revision, ...]
    forgotten: tuple[FactView, ...]

    @property
    def empty(self) -> bool:
        return not (self.added or self.revised or self.forgotten)


def version_view(row: Row) -> Version:
    return Version(
        valid_from=from_us(row.valid_from),
        valid_to=from_us_opt(row.valid_to),
        tx_from=from_us(row.tx_from),
        tx_to=from_us_opt(row.tx_to),
        tx_from_seq=row.tx_from_seq,
        tx_to_seq=row.tx_to_seq,
    )


# Fields a FactView copies from the Fact as they are, and those it shows as datetimes.
_FACT_TIMES = ("superseded_at", "forgotten_at")
_FACT_COPIED = tuple(
    name for name in FactView.__struct_fields__
    if name in Fact.__struct_fields__ and name not in _FACT_TIMES
)


def fact_view(fact: Fact) -> FactView:
    """The public view of a fact: its fields, with times as datetimes and rows as versions."""
    fields = {name: getattr(fact, name) for name in _FACT_COPIED}
    fields.update({name: from_us_opt(getattr(fact, name)) for name in _FACT_TIMES})
    return FactView(
        **fields,
        recorded_at=from_us(fact.created_at),
        versions=tuple(version_view(r) for r in fact.rows),
    )


def episode_view(e: Episode) -> EpisodeView:
    return EpisodeView(
        seq=e.seq, namespace=e.namespace, session_id=e.session_id, turn=e.turn, role=e.role,
        speaker=e.speaker, text=e.text, observed_at=from_us(e.observed_at),
        recorded_at=from_us(e.recorded_at), source_agent=e.source_agent, source_ref=e.source_ref,
    )
