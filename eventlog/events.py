"""Event types: the only things the log stores.

Every event is a frozen, tagged msgspec Struct; the union :data:`Event` is decoded by one reused
typed decoder. Schema evolution follows msgspec's rules: new fields get defaults, field types never
change, tags never change.

Identity: a fact's id is the ``seq`` of the event that created it (``FactRemembered`` or
``FactRevised``), so ids are deterministic under replay and need no separate generator.
"""

from __future__ import annotations

from datetime import datetime, timezone

import msgspec

__all__ = [
    "EPOCH",
    "EventBase",
    "FactRemembered",
    "FactRevised",
    "FactForgotten",
    "EmbeddingRecorded",
    "EpisodeRecorded",
    "RecallServed",
    "Event",
    "EVENT_TYPES",
    "EVENT_TAGS",
    "LINEAGE_FIELDS",
    "encode",
    "decode",
]

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class EventBase(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", gc=False):
    """Fields every event carries. ``seq`` and ``tx_at`` are stamped when the log appends."""

    seq: int = 0
    tx_at: datetime = EPOCH
    namespace: str = "default"
    source_agent: str | None = None
    source_ref: str | None = None


class FactRemembered(EventBase, frozen=True, tag="remembered"):
    """A new belief. ``valid_from=None`` means "since tx_at" (it became true when we learned it).

    ``entities`` are the fact's entities, normalised, subject included, as resolved when the
    event was written (so replay never re-runs entity extraction); empty means "derive them".

    Lineage of a fact an LLM extracted (all optional, empty for facts stated directly):
    ``derived_from`` are the seqs of the ``EpisodeRecorded`` turns it came from, ``extractor``
    the model and ``prompt_version`` the extraction prompt; ``category`` (semantic, episodic,
    procedural) and ``importance`` (1-10) are the extractor's judgement.
    """

    subject: str
    text: str
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    confidence: float = 1.0
    entities: tuple[str, ...] = ()
    derived_from: tuple[int, ...] = ()
    extractor: str | None = None
    prompt_version: str | None = None
    category: str | None = None
    importance: int | None = None


class FactRevised(EventBase, frozen=True, tag="revised"):
    """A new version of ``fact_id``; its own id is this event's seq.

    With ``valid_from`` the world changed: the old fact stays believed for its earlier valid
    period, which now ends at ``valid_from``. Without it this is a correction: the old statement is
    no longer believed at all from ``tx_at`` on, and the new one takes over its valid period.
    ``subject=None`` keeps the old subject. The lineage fields are as in ``FactRemembered``.
    """

    fact_id: int
    text: str
    subject: str | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    confidence: float = 1.0
    entities: tuple[str, ...] = ()
    reason: str | None = None
    derived_from: tuple[int, ...] = ()
    extractor: str | None = None
    prompt_version: str | None = None
    category: str | None = None
    importance: int | None = None


class FactForgotten(EventBase, frozen=True, tag="forgotten"):
    """A tombstone: ``fact_id`` is no longer believed from ``tx_at`` on; nothing is deleted."""

    fact_id: int
    reason: str | None = None


class EmbeddingRecorded(EventBase, frozen=True, tag="embedding"):
    """A vector for ``fact_id`` computed by ``model``: little-endian float32, ``dims`` values.

    Recorded as an event so that replay never calls a model.
    """

    fact_id: int
    model: str
    dims: int
    vector: bytes


class EpisodeRecorded(EventBase, frozen=True, tag="episode"):
    """One raw conversation turn, stored as said (before, and whatever, any extraction).

    Episodes are not facts: recall of facts never returns them. ``turn`` is the turn's index in
    its session (0-based, in order of recording); ``role`` is the chat role (user, assistant,
    ...), ``speaker`` an optional name; ``observed_at`` is when it was said (valid time),
    ``None`` meaning at ``tx_at``.
    """

    session_id: str
    turn: int
    role: str
    text: str
    speaker: str | None = None
    observed_at: datetime | None = None


class RecallServed(EventBase, frozen=True, tag="recall"):
    """A recall the store answered, logged only when recall logging is on: what was asked,
    everything that shaped the answer, and what it returned. Not a fact: the fold ignores it.

    ``tx_at`` is the time the recall ranked against ("now"); ``source_agent`` / ``source_ref``
    name the caller (e.g. the agent's session and turn). ``as_of_seq`` is the transaction point
    asked for, resolved to a seq; ``config`` the ranking knobs as JSON; ``model`` and
    ``query_vector`` (little-endian float32) the query's embedding when dense search took part,
    so a replay needs no model. ``hits`` are the fact ids returned, best first, with ``scores``.
    """

    query: str
    limit: int
    max_tokens: int
    as_of_seq: int | None = None
    valid_at: datetime | None = None
    subject: str | None = None
    reference_time: datetime | None = None
    config: str = "{}"
    model: str | None = None
    query_vector: bytes = b""
    hits: tuple[int, ...] = ()
    scores: tuple[float, ...] = ()


Event = (
    FactRemembered | FactRevised | FactForgotten | EmbeddingRecorded | EpisodeRecorded
    | RecallServed
)
EVENT_TYPES: tuple[type[EventBase], ...] = (
    FactRemembered,
    FactRevised,
    FactForgotten,
    EmbeddingRecorded,
    EpisodeRecorded,
    RecallServed,
)

EVENT_TAGS: tuple[str, ...] = tuple(
    str(t.__struct_config__.tag) for t in EVENT_TYPES
)  # "remembered", "revised", "forgotten", "embedding", "episode", "recall"

# The lineage an extracted fact carries (FactRemembered and FactRevised both have these fields).
LINEAGE_FIELDS = ("derived_from", "extractor", "prompt_version", "category", "importance")

_encoder = msgspec.msgpack.Encoder()
_decoder = msgspec.msgpack.Decoder(Event)


def encode(event: EventBase) -> bytes:
    """Encode one event as a msgpack payload."""
    return _encoder.encode(event)


def decode(payload: bytes | memoryview) -> Event:
    """Decode one msgpack payload; raises ``msgspec.DecodeError``/``ValidationError`` if invalid."""
    return _decoder.decode(payload)
