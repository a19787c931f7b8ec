"""``hmem copy SRC DST``: a store copied into a new one, embedded or on PostgreSQL, either way,
by replaying its log.

Every event is appended to the destination's log in order, so it keeps its seq, its times, its
request id and its provenance; the destination seals texts if it is a new embedded store (with
its own key file) and keeps them in the clear on a server. What an erasure destroyed in the
source stays destroyed: its events arrive without their texts, and an embedded destination
destroys the same keys when the receipt arrives. The destination's state is folded from the
events as they are appended. On arrival the copy is read back through the destination's hash
chain and every event is held equal to the source's (by a digest of each, kept from the first
read: the source is read once); when both logs store the same bytes (neither seals), their
heads are the same hash too. A server's tables are then built from the state.

The destination must be empty. A copy that stops half way leaves a log that is a valid prefix
of the source: remove it and copy again.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass

from eventlog.events import Event, FactsErased, encode
from eventlog.protocol import Log
from hmem.errors import CopyFailed, InvalidInput
from hmem.storage.keys import shred
from hmem.storage.shredding import unfinished_erasure
from hmem.storage.store import Store
from hmem.storage.targets import open_backend, store_target
from replay.rebuild import Progress

__all__ = ["CopyReport", "copy_store"]

_BATCH = 1000  # events per append


@dataclass(frozen=True)
class CopyReport:
    """What :func:`copy_store` did: ``head`` is the destination's (``SEQ:HASH``);
    ``same_chain`` whether the source's head is the same hash (neither log seals)."""

    source: str
    destination: str
    events: int
    head: str
    same_chain: bool
    seconds: float


def copy_store(
    source: str | os.PathLike[str],
    destination: str | os.PathLike[str],
    *,
    key_file: str | os.PathLike[str] | None = None,
    progress: Progress | None = None,
) -> CopyReport:
    """Copy the store at ``source`` into the new (or empty) store at ``destination``: a
    directory or a ``postgresql://`` URL each. ``key_file``: the source's key file when it is
    not in its directory (a new embedded destination makes its own). Raises ``InvalidInput``
    when the destination holds events, ``CopyFailed`` when the copy does not read back as the
    source."""
    started = time.perf_counter()
    src_target, dst_target = store_target(source), store_target(destination)
    if str(src_target) == str(dst_target):
        raise InvalidInput("the source and the destination are the same store")
    src = open_backend(src_target, read_only=True, shared=False, key_file=key_file)
    try:
        erasure = unfinished_erasure(src.log, src.shown)  # its texts may be in its copies
        if erasure is not None:
            raise erasure
        total = src.log.last_seq
        dst = Store(dst_target)
        try:
            with dst.lock, dst.log.writing():
                dst.catch_up()
                if dst.log.last_seq:
                    raise InvalidInput(
                        f"{dst.shown} already holds {dst.log.last_seq:,} events; copy into a "
                        f"new or empty store"
                    )
                digests = _append_all(src.log, dst, total, progress)
                _check_arrived(digests, dst, total)
                dst.catch_up()
                dst.backend.after_rebuild(dst.projector)
            head = str(dst.log.head())
            shown = dst.shown
        finally:
            dst.close()
        same = str(src.log.head()) == head
        return CopyReport(src.shown, shown, total, head, same, time.perf_counter() - started)
    finally:
        src.close()


def _append_all(src: Log, dst: Store, total: int, progress: Progress | None) -> list[bytes]:
    """Append the source's events to the destination, folding them into its state; returns a
    digest of each, in order."""
    batch: list[Event] = []
    digests: list[bytes] = []
    done = 0
    for ev in src.read(1, total):
        batch.append(ev)
        digests.append(_digest(ev))
        if len(batch) == _BATCH:
            done += _append(dst, batch)
            batch = []
            if progress is not None:
                progress(done, total)
    if batch:
        done += _append(dst, batch)
    if progress is not None:
        progress(done, total)
    return digests


def _digest(ev: Event) -> bytes:
    return hashlib.blake2b(encode(ev), digest_size=16).digest()


def _append(dst: Store, batch: list[Event]) -> int:
    """Append ``batch`` (the destination's seqs are the source's: it started empty) and fold
    it, then destroy the keys any erasure receipt in it names."""
    def fold(events: list[Event]) -> None:
        dst.projector.apply_all(events, bulk=True)

    stamped = dst.log.append_many(batch, then=fold)
    if stamped[0].seq != batch[0].seq:
        raise InvalidInput(
            f"another writer appended to {dst.shown} during the copy; "
            f"remove the destination and copy again"
        )
    sealer = dst.log.sealer
    if sealer is not None:
        for ev in batch:
            if isinstance(ev, FactsErased):
                shred(dst.log, sealer.keys, ev.seq)
    return len(batch)


def _check_arrived(digests: list[bytes], dst: Store, total: int) -> None:
    """Read the copy back through the destination's chain; every event equals the source's."""
    dst.log.refresh()
    if dst.log.last_seq != total:
        raise CopyFailed(f"the copy holds {dst.log.last_seq:,} events, the source {total:,}")
    for want, got in zip(digests, dst.log.read(1, total), strict=True):
        if want != _digest(got):
            raise CopyFailed(
                f"event {got.seq} did not arrive as it left: the copy cannot be trusted; "
                f"remove it and copy again"
            )
