"""Sealing: an event's texts (and vector) AES-GCM encrypted with a data key of the key file, so
that destroying the key erases them from the log (crypto-shredding) while its records stay.

Which key seals what: an event that states something (remember, revise, episode, recall) is
sealed with the key of its own seq; an embedding and a forget's reason with the key of the fact
they are about, so erasing a fact's versions erases its vectors and reasons too. What stays in
the clear: the event's type, seq, times, namespace, ids, confidence, lineage, session ids, roles,
source agent and ref, model names (what an auditor needs to follow the chain of events).

The cipher is ``cryptography``'s AESGCM: a random 96-bit nonce per seal, and the event's seq and
type as associated data, so a sealed blob opens only in the record it was written for.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from typing import Any, NamedTuple

import msgspec
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from eventlog.errors import KeyFileDamaged, KeyFileMissing
from eventlog.events import (
    EmbeddingRecorded,
    EpisodeRecorded,
    EventBase,
    FactForgotten,
    FactRemembered,
    FactRevised,
    RecallServed,
)
from eventlog.keyfile import KeyFile

__all__ = [
    "Sealer", "SEALED_FIELDS", "ERASED", "key_owner", "is_erased", "check_opened", "blanked",
]

# ``sealed`` of an event read back whose key was erased (a real sealed blob is at least 28 bytes:
# nonce and tag), so that an event read without its key file is never taken for an erased one
ERASED = b"\x00"

# event type -> (its sealed fields, what each holds once its key is erased)
SEALED_FIELDS: dict[type[EventBase], tuple[tuple[str, ...], tuple[Any, ...]]] = {
    FactRemembered: (("subject", "text", "entities"), ("", "", ())),
    FactRevised: (("subject", "text", "entities", "reason"), (None, "", (), None)),
    FactForgotten: (("reason",), (None,)),
    EmbeddingRecorded: (("vector",), (b"",)),
    EpisodeRecorded: (("text", "speaker"), ("", None)),
    RecallServed: (("query", "subject", "query_vector"), ("", None, b"")),
}
_DECODERS: dict[type[EventBase], msgspec.msgpack.Decoder[Any]] = {
    FactRemembered: msgspec.msgpack.Decoder(tuple[str, str, tuple[str, ...]]),
    FactRevised: msgspec.msgpack.Decoder(tuple[str | None, str, tuple[str, ...], str | None]),
    FactForgotten: msgspec.msgpack.Decoder(tuple[str | None]),
    EmbeddingRecorded: msgspec.msgpack.Decoder(tuple[bytes]),
    EpisodeRecorded: msgspec.msgpack.Decoder(tuple[str, str | None]),
    RecallServed: msgspec.msgpack.Decoder(tuple[str, str | None, bytes]),
}
_encoder = msgspec.msgpack.Encoder()


class _Kind(NamedTuple):
    """What sealing needs of an event type: its sealed fields, what each holds empty (as a
    tuple and by name), its tag for the associated data, the decoder of its sealed values."""

    names: tuple[str, ...]
    empty: tuple[Any, ...]
    cleared: dict[str, Any]
    tag: bytes
    decoder: msgspec.msgpack.Decoder[Any]


_KINDS: dict[type[EventBase], _Kind] = {
    kind: _Kind(names, empty, dict(zip(names, empty, strict=True)),
                str(kind.__struct_config__.tag).encode(), _DECODERS[kind])
    for kind, (names, empty) in SEALED_FIELDS.items()
}
_NONCE = 12
_AAD = struct.Struct("<Q")


def key_owner(ev: EventBase) -> int:
    """The seq whose key seals ``ev``: its own, or the fact's it is about."""
    if isinstance(ev, (EmbeddingRecorded, FactForgotten)):
        return ev.fact_id
    return ev.seq


def is_erased(ev: EventBase) -> bool:
    """True for an event read back without its texts: its key was erased."""
    return ev.sealed == ERASED


def blanked(ev: EventBase) -> Any:
    """``ev`` (as stored) as it reads once its key is erased (texts empty, ``sealed``
    :data:`ERASED`), whether its key is destroyed yet or not: what a process reads of an event
    an erasure receipt names (another process's erasure may not have destroyed the key yet)."""
    spec = SEALED_FIELDS.get(type(ev))
    if spec is None or not ev.sealed:  # nothing was sealed (a forget without a reason)
        return ev
    names, empty = spec
    return msgspec.structs.replace(ev, sealed=ERASED, **dict(zip(names, empty, strict=True)))


def check_opened(ev: EventBase) -> None:
    """Raise ``KeyFileMissing`` for an event still sealed (read without the key file)."""
    if ev.sealed and ev.sealed != ERASED:
        raise KeyFileMissing(
            f"event {ev.seq} is sealed, and the log was read without its key file; open the "
            f"store (hmem.storage.store.Store, Memory) or give the log its sealer "
            f"(hmem.storage.keys)"
        )


class Sealer:
    """Seals events for the log and opens them as it reads them, with one key file's keys."""

    def __init__(self, keys: KeyFile) -> None:
        self.keys = keys
        # seqs an erasure receipt names, known to this process: opened as erased whether their
        # keys are destroyed yet or not (the erasing writer logs its receipt first)
        self.erased: set[int] = set()

    def seal(self, ev: EventBase) -> EventBase:
        """``ev`` (stamped with its seq) as the log stores it: texts in ``sealed``, fields empty.
        An event with nothing to seal (a forget without a reason) is stored as it is."""
        return self.seal_many([ev])[0]

    def seal_many(self, events: Sequence[EventBase]) -> list[EventBase]:
        """:meth:`seal` of each of ``events``, their keys read in one pass and their nonces
        drawn at once."""
        todo: list[tuple[int, EventBase, tuple[Any, ...], _Kind]] = []
        for i, ev in enumerate(events):
            kind = _KINDS.get(type(ev))
            if kind is None:
                continue
            values = tuple(getattr(ev, name) for name in kind.names)
            if values != kind.empty:
                todo.append((i, ev, values, kind))
        out = list(events)
        if not todo:
            return out
        owners = [key_owner(ev) for _, ev, _, _ in todo]
        keys = self.keys.keys(owners)
        nonces = os.urandom(_NONCE * len(todo))
        encode, replace = _encoder.encode, msgspec.structs.replace
        for j, ((i, ev, values, kind), owner, key) in enumerate(zip(todo, owners, keys,
                                                                    strict=True)):
            if key is None:
                raise KeyFileDamaged(
                    f"event {ev.seq} would be sealed with the key of event {owner}, which was "
                    f"erased; nothing about an erased fact can be written"
                )
            nonce = nonces[_NONCE * j:_NONCE * j + _NONCE]
            blob = nonce + AESGCM(key).encrypt(nonce, encode(values), _AAD.pack(ev.seq) + kind.tag)
            out[i] = replace(ev, sealed=blob, **kind.cleared)
        return out

    def open(self, ev: EventBase) -> Any:
        """``ev`` as read from the log, with its texts back; if its key was erased, with them
        empty and ``sealed`` set to :data:`ERASED` (see :func:`is_erased`)."""
        if not ev.sealed:
            return ev
        kind = _kind_of(ev)
        owner = key_owner(ev)
        if owner in self.erased:
            return blanked(ev)
        return self._opened(ev, kind, self.keys.key(owner))

    def _opened(self, ev: EventBase, kind: _Kind, key: bytes | None) -> Any:
        """Sealed ``ev`` opened with ``key`` (None: erased)."""
        if key is None:
            return msgspec.structs.replace(ev, sealed=ERASED)
        blob = ev.sealed
        try:
            raw = AESGCM(key).decrypt(blob[:_NONCE], blob[_NONCE:], _AAD.pack(ev.seq) + kind.tag)
            values = kind.decoder.decode(raw)
        except (InvalidTag, msgspec.DecodeError) as e:
            raise KeyFileDamaged(
                f"event {ev.seq} does not open with the key file {self.keys.path} "
                f"({type(e).__name__}): the key file is another store's or damaged"
            ) from None
        return msgspec.structs.replace(ev, sealed=b"", **dict(zip(kind.names, values,
                                                                  strict=True)))


def _kind_of(ev: EventBase) -> _Kind:
    """The sealing of a sealed event's type; ``KeyFileDamaged`` for a type nothing seals (a
    record that says it is sealed when none of its kind is)."""
    kind = _KINDS.get(type(ev))
    if kind is None:
        raise KeyFileDamaged(f"event {ev.seq} is sealed, but no event of its kind is sealed: "
                             f"its record is damaged or forged")
    return kind
