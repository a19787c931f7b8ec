"""Client request ids: each event's key, so a retried write is found without reading the log.

A write's events carry the client's ``request_id``; the projection keeps, by seq - 1, a 64-bit
key of (namespace, request id) per event (0 for none). A key found names candidate seqs; the
caller reads those events back and compares the ids themselves, so a hash collision is harmless.
"""

from __future__ import annotations

from array import array
from hashlib import blake2b

import numpy as np

from eventlog.events import Event

__all__ = ["event_request_key", "request_key", "request_seqs"]


def request_key(namespace: str, request_id: str) -> int:
    """A nonzero signed 64-bit key of ``request_id`` in ``namespace``."""
    raw = f"{namespace}\x00{request_id}".encode("utf-8", "surrogatepass")
    key = int.from_bytes(blake2b(raw, digest_size=8).digest(), "little", signed=True)
    return key or 1


def event_request_key(ev: Event) -> int:
    """The key of the event's request id, 0 when it has none."""
    request_id = getattr(ev, "request_id", None)
    return 0 if request_id is None else request_key(ev.namespace, request_id)


def request_seqs(keys: array[int], key: int) -> list[int]:
    """Seqs of the events whose key (``keys``, by seq - 1) is ``key``, in order."""
    found = np.flatnonzero(np.frombuffer(keys, dtype=np.int64) == key)
    return (found + 1).tolist()
