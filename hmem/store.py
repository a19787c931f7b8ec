"""A store on disk: the event log plus its projection, opened as the writer or as a reader.

Layout of a store directory::

    log/                 segment files (*.hlog) and the writer LOCK: the source of truth
    projection.duckdb    the writer's projection (disposable; rebuilt from the log when needed)
    backups/             what `hmem log repair` cut off

DuckDB lets only one process open a database file while it is written, so a reader (another
process, e.g. the CLI while an agent's server writes) never touches ``projection.duckdb``: it
replays the log into an in-memory projection and follows the log as it grows.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb

from eventlog.events import (
    EmbeddingRecorded,
    Event,
    EventBase,
    FactForgotten,
    FactRemembered,
    FactRevised,
)
from eventlog.fileio import OS, FileIO
from eventlog.log import EventLog, FsyncPolicy
from hmem.errors import InvalidInput, StoreNotFound
from projections.duck import DuckProjection
from projections.projector import Projector
from projections.state import check_fields
from replay.rebuild import Progress, rebuild_projection

__all__ = ["Store", "StoreNotFound", "default_root"]

PROJECTION_FILE = "projection.duckdb"


def default_root() -> Path:
    """``$HMEM_HOME``, else ``$XDG_DATA_HOME/hmem``, else ``~/.local/share/hmem``."""
    if os.environ.get("HMEM_HOME"):
        return Path(os.environ["HMEM_HOME"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "hmem"


class Store:
    """The log and its projection, kept in step. Not thread-safe: the facade serialises calls."""

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        read_only: bool = False,
        fsync: FsyncPolicy = "always",
        flush_every: int = 256,
        segment_bytes: int = 64 * 1024 * 1024,
        io: FileIO = OS,
    ) -> None:
        self.root = Path(root)
        self.read_only = read_only
        self.notes: list[str] = []
        if read_only and not (self.root / "log").is_dir():
            raise StoreNotFound(
                f"no hmem store at {self.root}; create one by writing to it "
                f"(e.g. `hmem --path {self.root} remember SUBJECT TEXT`)"
            )
        self.log = EventLog(
            self.root / "log",
            read_only=read_only,
            fsync=fsync,
            segment_bytes=segment_bytes,
            lock_label=f"store {self.root}",
            io=io,
        )
        try:
            if not self.log.recovery.clean:
                self.notes.append(f"log recovery: {self.log.recovery}")
            try:
                self._open_projection(flush_every)
            except duckdb.Error as e:
                if read_only or "lock" in str(e).lower():
                    raise
                # The file opened but could not be read (e.g. truncated): it is disposable.
                self.notes.append(f"projection unreadable ({e}); rebuilt from the log")
                DuckProjection.move_aside(self.root / PROJECTION_FILE)
                self._open_projection(flush_every)
        except BaseException:
            self.log.close()
            raise

    def _open_projection(self, flush_every: int) -> None:
        db = DuckProjection(None if self.read_only else self.root / PROJECTION_FILE)
        try:
            if db.recreated:
                self.notes.append(db.recreated)
            if not self.read_only:
                self._check_cursor(db)
            self.projector = Projector(db, self.log.chain_at, flush_every=flush_every)
            self.catch_up()
            if not self.read_only:
                self.projector.flush()
        except BaseException:
            db.close()
            raise

    def _check_cursor(self, db: DuckProjection) -> None:
        """Reset a projection that is ahead of the log or was built from a different log."""
        seq, chain = db.cursor()
        if seq == 0:
            return
        if seq > self.log.last_seq or self.log.chain_at(seq).hex() != chain:
            self.notes.append(
                f"projection was built from a different log (at seq {seq}); rebuilt from the log"
            )
            db.reset()

    @property
    def db(self) -> DuckProjection:
        return self.projector.db

    def catch_up(self) -> int:
        """Apply events the projection has not seen (a reader first looks for new ones)."""
        if self.read_only:
            self.log.refresh()
        return self.projector.apply_all(self.log.read(self.projector.last_seq + 1), bulk=True)

    def append(self, event: EventBase) -> Event:
        """Validate, log (durably, per the fsync policy) and apply one event."""
        return self.append_batch([event])[0]

    def append_batch(self, events: list[EventBase]) -> list[Event]:
        """Validate, then log as one write (one fsync) and apply, a batch of events.

        Each event is validated against the state before the batch, except that an
        ``EmbeddingRecorded`` may refer to a fact created earlier in the same batch (its id is
        the seq that fact will get). A batch may revise or forget a fact only once. All or
        nothing: an invalid event rejects the whole batch before anything is written.
        """
        state = self.projector.state
        base = self.log.last_seq
        created: dict[int, str] = {}  # seq -> namespace of facts the batch creates
        touched: set[int] = set()
        for i, ev in enumerate(events):
            if isinstance(ev, EmbeddingRecorded) and ev.fact_id in created:
                check_fields(ev)
                if created[ev.fact_id] != ev.namespace:
                    raise InvalidInput("an embedding must be in its fact's namespace")
            else:
                state.validate(ev)
            if isinstance(ev, (FactRevised, FactForgotten)):
                if ev.fact_id in touched:
                    raise InvalidInput(f"fact {ev.fact_id} is revised or forgotten twice in one batch")
                touched.add(ev.fact_id)
            if isinstance(ev, (FactRemembered, FactRevised)):
                created[base + i + 1] = ev.namespace
        stamped = self.log.append_many(events)
        for ev in stamped:
            self.projector.apply(ev, validated=True)
        return stamped

    def tables(self):  # type: ignore[no-untyped-def]
        """The DuckDB connection, with every applied event written to it."""
        self.projector.flush()
        return self.db.con

    def rebuild(self, progress: Progress | None = None) -> int:
        """Drop the projection and replay the whole log into it; returns events replayed."""
        self.projector = rebuild_projection(
            self.log, self.db, flush_every=self.projector.flush_every, progress=progress
        )
        return self.projector.last_seq

    def close(self) -> None:
        try:
            if not self.read_only:
                self.projector.flush()
            self.db.close()
        finally:
            self.log.close()
