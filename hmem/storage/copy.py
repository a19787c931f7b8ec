"""``hmem copy SRC DST``: a store copied into a new one, embedded or on PostgreSQL, either way,
by replaying its log (issue 15).

Every event is appended to the destination's log in order, so it keeps its seq, its times, its
request id and its provenance; the destination seals texts if it is a new embedded store (with
its own key file) and keeps them in the clear on a server. What an erasure destroyed in the
source stays destroyed: its events arrive without their texts, and an embedded destination
destroys the same keys when the receipt arrives. On arrival the copy is read back through the
destination's hash chain and every event is held equal to the source's; when both logs store
the same bytes (neither seals), their heads are the same hash too. The destination's
projection (and a server's tables) is then built from its log.

The destination must be empty. A copy that stops half way leaves a log that is a valid prefix
of the source: remove it and copy again.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from eventlog.events import Event, FactsErased
from eventlog.pg_log import PgLog, redacted
from hmem.errors import CopyFailed, InvalidInput
from hmem.storage.keys import read_store_log, shred
from hmem.storage.server import rewrite_tables
from hmem.storage.store import Store, missing_store, store_target
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
    with _source_log(src_target, key_file) as src:
        total = src.last_seq
        dst = Store(dst_target)
        try:
            with dst.lock, dst.log.writing():
                dst.catch_up()
                if dst.log.last_seq:
                    raise InvalidInput(
                        f"{_shown(dst_target)} already holds {dst.log.last_seq:,} events; copy "
                        f"into a new or empty store"
                    )
                _append_all(src, dst, total, progress)
                _check_arrived(src, dst, total)
                dst.catch_up()
                if dst.url is not None:
                    rewrite_tables(cast(PgLog, dst.log), dst.projector.state)
            head = str(dst.log.head())
        finally:
            dst.close()
        same = str(src.head()) == head
    return CopyReport(_shown(src_target), _shown(dst_target), total, head, same,
                      time.perf_counter() - started)


def _shown(target: Path | str) -> str:
    return redacted(target) if isinstance(target, str) else str(target)


def _append_all(src: Any, dst: Store, total: int, progress: Progress | None) -> None:
    batch: list[Event] = []
    done = 0
    for ev in src.read(1, total):
        batch.append(ev)
        if len(batch) == _BATCH:
            done += _append(dst, batch)
            batch = []
            if progress is not None:
                progress(done, total)
    if batch:
        done += _append(dst, batch)
    if progress is not None:
        progress(done, total)


def _append(dst: Store, batch: list[Event]) -> int:
    """Append ``batch`` (the destination's seqs are the source's: it started empty), then
    destroy the keys any erasure receipt in it names."""
    stamped = dst.log.append_many(batch)
    if stamped[0].seq != batch[0].seq:
        raise InvalidInput(
            f"another writer appended to {_shown(dst.url or dst.root)} during the copy; "
            f"remove the destination and copy again"
        )
    sealer = dst.log.sealer
    if sealer is not None:
        for ev in batch:
            if isinstance(ev, FactsErased):
                shred(dst.log, sealer.keys, ev.seq)
    return len(batch)


def _check_arrived(src: Any, dst: Store, total: int) -> None:
    """Read the copy back through the destination's chain; every event equals the source's."""
    dst.log.refresh()
    if dst.log.last_seq != total:
        raise CopyFailed(f"the copy holds {dst.log.last_seq:,} events, the source {total:,}")
    for want, got in zip(src.read(1, total), dst.log.read(1, total), strict=True):
        if want != got:
            raise CopyFailed(
                f"event {want.seq} did not arrive as it left: the copy cannot be trusted; "
                f"remove it and copy again"
            )


@contextmanager
def _source_log(target: Path | str, key_file: str | os.PathLike[str] | None) -> Iterator[Any]:
    """The source's log, read only, its texts opened with its key file."""
    if isinstance(target, str):
        with PgLog(target, read_only=True) as server:
            yield server
        return
    if not (target / "log").is_dir():
        raise missing_store(target)
    with read_store_log(target, key_file) as log:
        yield log

