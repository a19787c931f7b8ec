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

from eventlog.errors import RecordRejected

__all__ = [
    "EPOCH",
    "EventBase",
    "FactRemembered",
    "FactRevised",
    "FactForgotten",
    "EmbeddingRecorded",
    "EpisodeRecorded",
    "RecallServed",
    "FactsErased",
    "Event",
    "EVENT_TYPES",
    "EVENT_TAGS",
    "LINEAGE_FIELDS",
    "encode",
    "encode_record",
    "decode",
]

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


class EventBase(msgspec.Struct, frozen=True, kw_only=True, tag_field="type", gc=False):
    """Fields every event carries. ``seq`` and ``tx_at`` are stamped when the log appends.

    ``sealed``: the event's texts (and vector), AES-GCM encrypted with a data key of the store's
    key file (eventlog/sealing.py); the log holds them only so, with those fields left empty.
    The log opens an event as it reads it; an event it cannot open, because its key was erased,
    has its texts empty and ``sealed`` set to ``eventlog.sealing.ERASED``.
    """

    seq: int = 0
    tx_at: datetime = EPOCH
    namespace: str = "default"
    source_agent: str | None = None
    source_ref: str | None = None
    sealed: bytes = b""


class FactRemembered(EventBase, frozen=True, tag="remembered"):
    """A new belief. ``valid_from=None`` means "since tx_at" (it became true when we learned it).

    ``entities`` are the fact's entities, normalised, subject included, as resolved when the
    event was written (so replay never re-runs entity extraction); empty means "derive them".

    Lineage of a fact an LLM extracted (all optional, empty for facts stated directly):
    ``derived_from`` are the seqs of the ``EpisodeRecorded`` turns it came from, ``extractor``
    the model and ``prompt_version`` the extraction prompt; ``category`` (semantic, episodic,
    procedural) and ``importance`` (1-10) are the extractor's judgement.

    ``request_id`` (here, in ``FactRevised`` and in ``FactForgotten``): the client's name for the
    write this event belongs to, so that a retried write is answered, not stored twice.
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
    request_id: str | None = None


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
    request_id: str | None = None


class FactForgotten(EventBase, frozen=True, tag="forgotten"):
    """A tombstone: ``fact_id`` is no longer believed from ``tx_at`` on; nothing is deleted."""

    fact_id: int
    reason: str | None = None
    request_id: str | None = None


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


class FactsErased(EventBase, frozen=True, tag="erased"):
    """The receipt of an erasure: the keys that sealed these events were destroyed, so their
    texts and vectors are gone from the log while its records (and hash chain) stay.

    ``scope`` is what was asked to be erased ("fact", "subject", "episode" or "namespace", never
    the subject's or the text's words); ``fact_ids`` every fact version erased (whole revision
    chains, and the facts derived from erased episodes), ``episode_ids`` the episodes and
    ``recall_ids`` the logged recalls. ``chain_head`` is the log's chain (``SEQ:HASH``) just
    before this receipt: what the erasure applied to. ``source_agent`` is who erased.
    ``subject_digest``: for a subject erasure, a keyed hash of the subject (keyed from the key
    file's secret: whoever holds the key file can check which subject a receipt erased; the log
    and the store's directory alone do not say). The fold ends belief in every listed fact
    still believed.
    """

    scope: str
    fact_ids: tuple[int, ...] = ()
    episode_ids: tuple[int, ...] = ()
    recall_ids: tuple[int, ...] = ()
    reason: str | None = None
    chain_head: str = ""
    subject_digest: str = ""

    @property
    def named(self) -> tuple[int, ...]:
        """Every event the receipt erases: its facts, episodes and logged recalls."""
        return self.fact_ids + self.episode_ids + self.recall_ids


Event = (
    FactRemembered | FactRevised | FactForgotten | EmbeddingRecorded | EpisodeRecorded
    | RecallServed | FactsErased
)
EVENT_TYPES: tuple[type[EventBase], ...] = (
    FactRemembered,
    FactRevised,
    FactForgotten,
    EmbeddingRecorded,
    EpisodeRecorded,
    RecallServed,
    FactsErased,
)

EVENT_TAGS: tuple[str, ...] = tuple(
    str(t.__struct_config__.tag) for t in EVENT_TYPES
)  # "remembered", "revised", "forgotten", "embedding", "episode", "recall", "erased"

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


def encode_record(event: EventBase) -> bytes:
    """Encode one event for the log; ``RecordRejected`` if a field holds a value msgpack
    cannot encode."""
    try:
        return encode(event)
    except (TypeError, msgspec.EncodeError, OverflowError) as e:
        raise RecordRejected(
            f"a {type(event).__name__} cannot be encoded ({e}); pass plain str, int, float, "
            f"bytes and datetime values"
        ) from e
