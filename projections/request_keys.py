"""Client request ids: each event's key, so a retried write is found without reading the log.

A write's events carry the client's ``request_id``; the projection keeps, a 64-bit key
of (namespace, request id) per event row (0 for none). A key found names candidate seqs; the
caller reads those events back and compares the ids themselves, so a hash collision is harmless.
"""

from __future__ import annotations

from array import array
from hashlib import blake2b

import numpy as np
import numpy.typing as npt

from eventlog.events import Event

__all__ = ["event_request_key", "key_rows", "request_key"]


def request_key(namespace: str, request_id: str) -> int:
    """A nonzero signed 64-bit key of ``request_id`` in ``namespace``."""
    raw = f"{namespace}\x00{request_id}".encode("utf-8", "surrogatepass")
    key = int.from_bytes(blake2b(raw, digest_size=8).digest(), "little", signed=True)
    return key or 1


def event_request_key(ev: Event) -> int:
    """The key of the event's request id, 0 when it has none."""
    request_id = getattr(ev, "request_id", None)
    return 0 if request_id is None else request_key(ev.namespace, request_id)


def key_rows(keys: array[int], key: int) -> npt.NDArray[np.intp]:
    """Positions in ``keys`` (one key per event row) that hold ``key``, in order."""
    return np.flatnonzero(np.frombuffer(keys, dtype=np.int64) == key)
