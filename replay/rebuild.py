"""Rebuild the derived state from the log: every event folded into a new projector."""

from __future__ import annotations

from collections.abc import Callable

from eventlog.protocol import Log
from projections.projector import Projector

__all__ = ["Progress", "rebuild_projection"]

Progress = Callable[[int, int], None]


def rebuild_projection(
    log: Log,
    *,
    upto: int | None = None,
    into: Projector | None = None,
    progress: Progress | None = None,
    every: int = 10_000,
) -> Projector:
    """Fold the log's events (up to ``upto``, default all) into ``into`` (a new, empty
    projector by default, else one holding a prefix of the log: it continues after it);
    returns it. ``progress(done, total)`` is called every ``every`` events and at the end."""
    projector = Projector() if into is None else into
    total = log.last_seq if upto is None else min(upto, log.last_seq)
    done = projector.last_seq
    while done < total:
        stop = min(done + every, total)
        projector.apply_all(log.read(done + 1, stop), bulk=True)
        done = stop
        if progress is not None:
            progress(done, total)
    if progress is not None and not total:
        progress(0, 0)
    return projector
