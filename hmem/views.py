"""What the public API returns: frozen msgspec Structs (so ``msgspec.json.encode`` gives JSON)."""

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
    "Revision",
    "Diff",
    "Stats",
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


class Why(msgspec.Struct, frozen=True):
    """Provenance of a fact: its source, the whole revision chain (oldest first) and the events;
    for extracted facts, ``episodes`` are the turns the chain was derived from."""

    fact: FactView
    chain: tuple[FactView, ...]
    events: tuple[Event, ...]
    episodes: tuple[EpisodeView, ...] = ()


class Revision(msgspec.Struct, frozen=True):
    old: FactView
    new: FactView
    kind: str  # "world" (the world changed) or "correction"


class Diff(msgspec.Struct, frozen=True):
    """What changed between two transaction times: events with since < seq <= until."""

    since_seq: int
    until_seq: int
    since_tx: datetime | None  # tx time of since_seq (None for seq 0)
    until_tx: datetime | None
    added: tuple[FactView, ...]
    revised: tuple[Revision, ...]
    forgotten: tuple[FactView, ...]

    @property
    def empty(self) -> bool:
        return not (self.added or self.revised or self.forgotten)


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


def version_view(row: Row) -> Version:
    return Version(
        valid_from=from_us(row.valid_from),
        valid_to=from_us_opt(row.valid_to),
        tx_from=from_us(row.tx_from),
        tx_to=from_us_opt(row.tx_to),
        tx_from_seq=row.tx_from_seq,
        tx_to_seq=row.tx_to_seq,
    )


def fact_view(fact: Fact) -> FactView:
    return FactView(
        id=fact.id,
        namespace=fact.namespace,
        subject=fact.subject,
        text=fact.text,
        confidence=fact.confidence,
        source_agent=fact.source_agent,
        source_ref=fact.source_ref,
        entities=fact.entities,
        recorded_at=from_us(fact.created_at),
        supersedes=fact.supersedes,
        revision=fact.revision,
        reason=fact.reason,
        superseded_by=fact.superseded_by,
        superseded_at=from_us_opt(fact.superseded_at),
        forgotten_at=from_us_opt(fact.forgotten_at),
        forget_reason=fact.forget_reason,
        versions=tuple(version_view(r) for r in fact.rows),
        derived_from=fact.derived_from,
        extractor=fact.extractor,
        prompt_version=fact.prompt_version,
        category=fact.category,
        importance=fact.importance,
    )


def episode_view(e: Episode) -> EpisodeView:
    return EpisodeView(
        seq=e.seq, namespace=e.namespace, session_id=e.session_id, turn=e.turn, role=e.role,
        speaker=e.speaker, text=e.text, observed_at=from_us(e.observed_at),
        recorded_at=from_us(e.recorded_at), source_agent=e.source_agent, source_ref=e.source_ref,
    )
