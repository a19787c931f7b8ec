"""The backends every store-level suite runs on: ``file`` (a directory, the
embedded default) and ``postgres`` (a store on a throwaway server: tests/support/pg_support.py). A
suite parametrized with :data:`BACKENDS` and opening its stores with :func:`new_store` holds
both to the same assertions, as the eventsourcing library runs one suite over every
persistence module."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hmem.adapters.demo import StepClock

__all__ = ["BACKENDS", "new_store", "second_clock"]

BACKENDS = ["file", "postgres"]


@contextmanager
def new_store(backend: str) -> Iterator[str]:
    """Where a new, empty store of ``backend`` lives (removed afterwards)."""
    if backend == "file":
        with tempfile.TemporaryDirectory() as d:
            yield str(Path(d) / "store")
        return
    from tests.support.pg_support import drop_store, fresh_store_url  # skips without a server

    url = fresh_store_url()
    try:
        yield url
    finally:
        drop_store(url)


def second_clock() -> StepClock:
    """A store clock that reads 2026-01-01 00:00:00 UTC first, then one second later each time."""
    step = timedelta(seconds=1)
    return StepClock(datetime(2026, 1, 1, tzinfo=timezone.utc) - step, step)
