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
from typing import Any

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
        spec = SEALED_FIELDS.get(type(ev))
        if spec is None:
            return ev
        names, empty = spec
        values = tuple(getattr(ev, name) for name in names)
        if values == empty:
            return ev
        owner = key_owner(ev)
        key = self.keys.key(owner)
        if key is None:
            raise KeyFileDamaged(
                f"event {ev.seq} would be sealed with the key of event {owner}, which was "
                f"erased; nothing about an erased fact can be written"
            )
        nonce = os.urandom(_NONCE)
        blob = nonce + AESGCM(key).encrypt(nonce, _encoder.encode(values), _aad(ev))
        return msgspec.structs.replace(ev, sealed=blob, **dict(zip(names, empty, strict=True)))

    def open(self, ev: EventBase) -> Any:
        """``ev`` as read from the log, with its texts back; if its key was erased, with them
        empty and ``sealed`` set to :data:`ERASED` (see :func:`is_erased`)."""
        if not ev.sealed:
            return ev
        owner = key_owner(ev)
        if owner in self.erased:
            return blanked(ev)
        key = self.keys.key(owner)
        if key is None:
            return msgspec.structs.replace(ev, sealed=ERASED)
        blob = ev.sealed
        try:
            raw = AESGCM(key).decrypt(blob[:_NONCE], blob[_NONCE:], _aad(ev))
            values = _DECODERS[type(ev)].decode(raw)
        except (InvalidTag, msgspec.DecodeError, KeyError) as e:
            raise KeyFileDamaged(
                f"event {ev.seq} does not open with the key file {self.keys.path} "
                f"({type(e).__name__}): the key file is another store's or damaged"
            ) from None
        names = SEALED_FIELDS[type(ev)][0]
        return msgspec.structs.replace(ev, sealed=b"", **dict(zip(names, values, strict=True)))


def _aad(ev: EventBase) -> bytes:
    return _AAD.pack(ev.seq) + str(ev.__struct_config__.tag).encode()
