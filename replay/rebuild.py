"""Rebuild a projection from the log."""

from __future__ import annotations

import gc
from collections.abc import Callable

from eventlog.log import EventLog
from projections.duck import DuckProjection
from projections.projector import Projector

__all__ = ["rebuild_projection"]

Progress = Callable[[int, int], None]


def rebuild_projection(
    log: EventLog,
    db: DuckProjection,
    *,
    flush_every: int = 256,
    progress: Progress | None = None,
    every: int = 10_000,
) -> Projector:
    """Empty ``db`` and replay every event of ``log`` into it; returns the new projector.

    ``progress(done, total)`` is called every ``every`` events and at the end.
    """
    db.reset()
    projector = Projector(db, log.chain_at, flush_every=flush_every)
    total = log.last_seq
    done = 0
    gc_was_on = gc.isenabled()
    gc.disable()  # replay allocates millions of objects and frees none: skip the GC passes
    try:
        while done < total:
            stop = min(done + every, total)
            projector.apply_all(log.read(done + 1, stop), bulk=True)
            done = stop
            if progress is not None:
                progress(done, total)
        projector.flush()
    finally:
        if gc_was_on:
            gc.enable()
    return projector
