"""A store on disk: the event log plus its projection, opened as the writer or as a reader.

Layout of a store directory::

    log/                 segment files (*.hlog) and the writer LOCK: the source of truth
    projection.duckdb    the writer's projection (disposable; rebuilt from the log when needed)
    checkpoint.duckdb    the writer's last published copy of it, for readers (disposable)
    checkpoint.columns   the fold's columns at that checkpoint, read back on open (disposable)
    backups/             what `hmem log repair` cut off
    keys.hmk             the data keys that seal the log's texts (hmem/storage/keys.py; may live
                         elsewhere: key_file=, $HMEM_KEY_FILE)

DuckDB lets only one process open a database file while it is written, so a reader (another
process, e.g. the CLI while an agent's server writes) never touches ``projection.duckdb``: it
opens a private copy of the writer's last checkpoint (projections/checkpoint.py) as its projection,
folds the log's tail after it, and follows the log as it grows. The writer publishes a new
checkpoint when the tail reaches ``checkpoint_every`` events or 1% of the log, and on close.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from pathlib import Path
from typing import cast

import duckdb
from msgspec.structs import replace

from eventlog.events import (
    EmbeddingRecorded,
    Event,
    EventBase,
    FactForgotten,
    FactRemembered,
    FactRevised,
)
from eventlog.fileio import OS, FileIO
from eventlog.lock import ReaderMark
from eventlog.log import EventLog, FsyncPolicy
from eventlog.pg_log import PgLog
from hmem.embedding.worker import EmbedWorker
from hmem.errors import (
    EmbeddingFailed,
    InvalidInput,
    ProjectionError,
    RecordRejected,
    StoreNotFound,
)
from hmem.storage.checkpoints import CheckpointSteps
from hmem.storage.keys import key_path, open_sealer
from hmem.storage.retries import check_not_written
from hmem.storage.server import is_server_url, open_server_log, rewrite_tables, write_tables
from hmem.storage.shredding import ErasureSteps
from hmem.time.arguments import Now, parse_when
from hmem.time.iso import TimeLike
from projections.checks import check_fields
from projections.column_file import load_column_file
from projections.duck import DuckProjection, from_log, is_lock_conflict
from projections.errors import DamagedProjection
from projections.fact_fold import check
from projections.pg_tables import differences, tables_seq
from projections.projector import BULK_FLUSH_EVENTS, Projector
from projections.timeutil import to_us
from replay.asof import seq_at
from replay.rebuild import Progress, rebuild_projection

__all__ = ["Store", "StoreNotFound", "default_root", "missing_store", "store_target"]

PROJECTION_FILE = "projection.duckdb"


def default_root() -> Path:
    """``$HMEM_HOME``, else ``$XDG_DATA_HOME/hmem``, else ``~/.local/share/hmem``."""
    if os.environ.get("HMEM_HOME"):
        return Path(os.environ["HMEM_HOME"]).expanduser()
    home = os.path.expanduser("~")
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(home, ".local", "share")
    return Path(base) / "hmem"


def store_target(path: str | os.PathLike[str] | None) -> Path | str:
    """Where a store lives: a ``postgresql://`` URL as given, else a directory (``~``
    expanded); None means :func:`default_root` (``$HMEM_HOME`` may be a URL too)."""
    if path is None:
        home = os.environ.get("HMEM_HOME")
        return home if is_server_url(home) else default_root()  # type: ignore[return-value]
    if is_server_url(path):
        return str(path)
    return Path(path).expanduser()


def missing_store(root: Path) -> StoreNotFound:
    """The error for a read of a store that does not exist (nothing was created)."""
    return StoreNotFound(
        f"no hmem store at {root}; create one by writing to it "
        f"(e.g. `hmem --path {root} remember SUBJECT TEXT`)"
    )


class Store(CheckpointSteps, ErasureSteps):
    """The log and its projection, kept in step.

    Not thread-safe by itself: whoever uses it holds :attr:`lock` (every ``Memory`` over this
    store shares it, so namespace views serialise with each other).
    """

    def __init__(
        self,
        root: str | os.PathLike[str],
        *,
        read_only: bool = False,
        fsync: FsyncPolicy = "always",
        flush_every: int = 256,
        segment_bytes: int = 64 * 1024 * 1024,
        io: FileIO = OS,
        checkpoint_every: int = 1000,
        key_file: str | os.PathLike[str] | None = None,
        seal: bool = True,
        shared: bool = False,
    ) -> None:
        for name, value, what in (
            ("flush_every", flush_every, "events the tables may lag behind the log in memory"),
            ("checkpoint_every", checkpoint_every, "events between checkpoints for readers"),
        ):
            if type(value) is not int or value < 1:
                raise InvalidInput(f"{name} must be a whole number >= 1 ({what}), not {value!r}")
        if shared and read_only:
            raise InvalidInput("a store is opened shared (one of many writers) or read_only")
        # a store on PostgreSQL (hmem/storage/server.py): every writer is a shared one
        self.url = str(root) if is_server_url(root) else None
        shared = shared or (self.url is not None and not read_only)
        self.root = Path(root) if self.url is None else Path()
        self.read_only = read_only
        # shared: one of many writer processes; its projection is a private copy, as a
        # reader's, and each write takes the log's writer lock for its transaction only
        self.shared = shared
        self.follows = read_only or shared  # follows the log others append to
        self.checkpoint_every = checkpoint_every
        # The seq of the checkpoint readers find (the writer's last published one; for a
        # reader, the one it opened from). 0: none.
        self.checkpoint_seq = 0
        # the projection holds events a rolled-back server append never logged: reopened
        # before the next read or write
        self.diverged = False
        self.lock = threading.RLock()
        self.notes: list[str] = []
        # The background embedding workers of every Memory over this store (closed before it),
        # and the (namespace, model) pairs whose unembedded tail a worker has already queued.
        self.embed_workers: list[EmbedWorker] = []
        self.embed_tails: set[tuple[str, str]] = set()
        if self.url is not None:
            # PgLog speaks the protocol the store uses of a shared EventLog
            server_log, self.root = open_server_log(self.url, read_only=read_only)
            self.log = cast(EventLog, server_log)
        else:
            self.log = self._open_file_log(fsync, segment_bytes, io)
        # a reader is marked open (an erasure waits for none: eventlog/lock.py)
        self._reader_mark = (
            ReaderMark(self.root / "log") if self.follows and self.url is None else None
        )
        try:
            self.key_path = key_path(self.root, key_file)
            with self.log.writing() if shared else nullcontext():  # one makes the key file
                if self.url is None:  # a server log holds its texts in the clear
                    self.log.sealer = open_sealer(self.log, self.key_path, self.root, seal=seal)
            if read_only:
                self.check_no_unfinished_erasure()
            if not self.log.recovery.clean:
                self.notes.append(f"log recovery: {self.log.recovery}")
            try:
                self._open_projection(flush_every)
            except DamagedProjection as e:  # a reader's copy of the checkpoint, checked late
                self._replay_instead(e, flush_every)
            except duckdb.Error as e:
                if read_only or is_lock_conflict(e):
                    raise ProjectionError(f"the projection could not be opened: {e}") from e
                # The file opened but could not be read (e.g. truncated): it is disposable.
                self.notes.append(f"projection unreadable ({e}); rebuilt from the log")
                DuckProjection.move_aside(self.root / PROJECTION_FILE)
                self._open_projection(flush_every)
            if self.log.sealer is not None and not read_only:
                with self.log.writing():
                    self.catch_up()
                    self.finish_erasures()
            if self.url is not None and not read_only:
                self._check_server_tables()
        except BaseException:
            self._close_log()
            raise

    def _open_file_log(self, fsync: FsyncPolicy, segment_bytes: int, io: FileIO) -> EventLog:
        if self.read_only and not (self.root / "log").is_dir():
            raise missing_store(self.root)
        if not self.read_only:  # the store holds what an agent believes: its owner's eyes only
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        return EventLog(
            self.root / "log",
            read_only=self.read_only,
            fsync=fsync,
            segment_bytes=segment_bytes,
            lock_label=f"store {self.root}",
            io=io,
            lazy=self.follows,  # from a checkpoint, only the log's tail is read
            shared=self.shared,
        )

    def _check_server_tables(self) -> None:
        """A writer of a server store finds its tables behind the log (written by something
        that did not keep them) and writes them whole."""
        server = cast(PgLog, self.log)
        with self.log.writing():
            self.catch_up()
            if tables_seq(server.con) != self.projector.last_seq:
                rewrite_tables(server, self.projector.state)
                self.notes.append("the server's tables were behind the log; written again")

    def _open_projection(self, flush_every: int, *, replay: bool = False) -> None:
        """Open the projection and fold the log's tail; ``replay``: a reader replays the whole
        log into memory (no checkpoint)."""
        if not self.follows:
            db = DuckProjection(self.root / PROJECTION_FILE)
        elif replay:
            self.checkpoint_seq = 0
            db = DuckProjection(None)
        else:
            db = self._reader_copy()
            # a reader's tables are its private copy, read only through connection() (which
            # writes what is pending first): until then they need not be written, nor read
            flush_every = max(flush_every, BULK_FLUSH_EVENTS)
        try:
            if db.recreated:
                self.notes.append(db.recreated)
            if not self.follows:
                self._check_cursor(db)
            stamp = db.cursor()
            loaded = load_column_file(self.columns_path, stamp) if stamp[0] else None
            self.projector = Projector(
                db, self.log.chain_at, flush_every=flush_every, loaded=loaded
            )
            self.catch_up()
            if not self.follows:
                self.projector.flush()
                self._find_checkpoint()
                self._maybe_publish()
        except BaseException:
            db.close()
            raise

    def _check_cursor(self, db: DuckProjection) -> None:
        """Reset a projection that is ahead of the log or was built from a different log."""
        cursor = db.cursor()
        seq = cursor[0]
        if seq == 0:
            return
        if not from_log(cursor, self.log.last_seq, self.log.chain_at):
            self.notes.append(
                f"projection was built from a different log (at seq {seq}); rebuilt from the log"
            )
            db.reset()

    @property
    def db(self) -> DuckProjection:
        return self.projector.db

    def catch_up(self) -> int:
        """Apply events the projection has not seen (a reader first looks for new ones)."""
        if self.diverged:
            self._reopen_projection()
        if self.follows:
            self.log.refresh()
            if self.log.sealer is None and self.url is None and self.key_path.exists():
                # opened when it was empty, before its key file was made
                self.log.sealer = open_sealer(self.log, self.key_path, self.root, seal=False)
        seq = self.projector.last_seq
        try:
            return self.projector.apply_all(self.log.read(seq + 1), bulk=True)
        except DamagedProjection as e:  # a large tail written to a reader's damaged copy
            self._replay_instead(e, self.projector.flush_every)
            return self.projector.last_seq - seq

    def append(self, event: EventBase) -> Event:
        """Validate, log (durably, per the fsync policy) and apply one event."""
        return self.append_batch([event])[0]

    def append_batch(
        self,
        events: Sequence[EventBase],
        links: Mapping[int, int] | None = None,
        *,
        durable: bool = True,
    ) -> list[Event]:
        """Validate, then log as one write and apply, a batch (:meth:`_append_batch`). A shared
        writer does it in one write transaction of the log, after folding what the others
        appended (its events take the log's last tx time if theirs is earlier)."""
        if not self.shared:
            return self._append_batch(events, links, durable=durable)
        with self.log.writing():
            self.catch_up()
            last = self.log.last_tx_at
            events = [ev if ev.tx_at >= last else replace(ev, tx_at=last) for ev in events]
            return self._append_batch(events, links, durable=durable)

    def _append_batch(
        self,
        events: Sequence[EventBase],
        links: Mapping[int, int] | None = None,
        *,
        durable: bool = True,
    ) -> list[Event]:
        """Validate, then log as one write (one fsync) and apply, a batch of events.

        Each event is validated against the state before the batch. ``links[j] = i`` makes the
        ``EmbeddingRecorded`` at position ``j`` the vector of the fact that event ``i`` of this
        batch creates (the log sets its ``fact_id`` to that event's seq). A batch may revise or
        forget a fact only once. All or nothing: an invalid event rejects the whole batch
        before anything is written.
        """
        check_not_written(self.projector, self.log, events)  # a retry: answered, not checked
        links = dict(links or {})
        state = self.projector.state
        for j, ev in enumerate(events):
            check_fields(ev)
            if j in links:
                i = links[j]
                fact = events[i] if 0 <= i < j else None
                if not isinstance(ev, EmbeddingRecorded) or not isinstance(
                    fact, (FactRemembered, FactRevised)
                ):
                    raise InvalidInput(
                        "only an embedding may be linked, and only to a fact remembered or "
                        "revised earlier in the same batch"
                    )
                if fact.namespace != ev.namespace:
                    raise InvalidInput("an embedding must be in its fact's namespace")
        check(events, state, skip=list(links))  # each against the state before the batch
        touched: set[int] = set()
        dims: dict[tuple[str, str], int] = {}
        for ev in events:
            if isinstance(ev, EmbeddingRecorded):
                state.check_dims(ev, dims)
                self.check_not_erased(ev.fact_id)
            if isinstance(ev, (FactRevised, FactForgotten)):
                if ev.fact_id in touched:
                    raise InvalidInput(
                        f"fact {ev.fact_id} is revised or forgotten twice in one batch"
                    )
                touched.add(ev.fact_id)
        try:
            if self.url is None:
                stamped = self.log.append_many(events, links, durable=durable)
                self.projector.apply_all(stamped)
            else:  # the server's tables commit with the log's rows
                stamped = cast(PgLog, self.log).append_many(
                    events, links, then=self._apply_to_tables
                )
        except RecordRejected as e:
            raise InvalidInput(str(e)) from e
        except BaseException:
            if self.projector.last_seq > self.log.last_seq:  # applied, then rolled back
                self.diverged = True
            raise
        self._maybe_publish()
        return stamped

    def server_table_differences(self) -> dict[str, tuple[int, int]]:
        """A server store's tables against the projection: (rows missing, rows extra) per
        table that differs, read in one snapshot with the log's head."""
        server = cast(PgLog, self.log)
        with server.con.transaction():
            server.con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            self.catch_up()
            return differences(server.con, self.connection())

    def _apply_to_tables(self, stamped: list[Event]) -> None:
        self.projector.apply_all(stamped)
        write_tables(cast(PgLog, self.log), self.projector.state, stamped)

    def _reopen_projection(self) -> None:
        """Drop a projection that holds events the log does not (a server append that was
        rolled back after they were applied) and open it again from the checkpoint."""
        old = self.projector
        self.diverged = False
        try:
            self._open_projection(old.flush_every)
        except BaseException:
            self.diverged = True
            raise
        old.db.close()

    def connection(self) -> duckdb.DuckDBPyConnection:
        """The projection's DuckDB connection, with every applied event written to it."""
        try:
            self.projector.flush()
            return self.db.con
        except DamagedProjection as e:
            self._replay_instead(e, self.projector.flush_every)
            return self.connection()

    def _replay_instead(self, damage: DamagedProjection, flush_every: int) -> None:
        """A reader whose copy of the checkpoint turned out damaged replays the log instead
        (what it does at open when the checkpoint is unusable)."""
        if not self.read_only:
            raise damage
        old = getattr(self, "projector", None)
        seq = self.checkpoint_seq
        try:
            self._open_projection(flush_every, replay=True)
        except BaseException:  # e.g. Ctrl-C mid-replay: keep the reader as it was (its next
            if old is not None:  # query tries again), never pointing at a closed projection
                self.projector, self.checkpoint_seq = old, seq
            raise
        self.notes.append(f"{damage}; replayed the log")
        if old is not None:
            old.db.close()

    def tx_seq_or_now(self, point: TimeLike | int | None, label: str, now: Now = None) -> int:
        """:meth:`tx_seq` of ``point``, or the last seq applied when it is None (now)."""
        return self.projector.last_seq if point is None else self.tx_seq(point, label, now)

    def tx_seq(self, point: TimeLike | int, label: str, now: Now = None) -> int:
        """A transaction point as a seq: an int is a seq; a time (datetime, date, ISO string or
        spoken, relative to ``now``: see :mod:`hmem.time.arguments`) means the last seq at or
        before it."""
        if isinstance(point, bool):
            raise InvalidInput(f"{label} must be a datetime, an ISO string or a seq")
        if isinstance(point, int):
            last = self.projector.last_seq
            if not 0 <= point <= last:
                raise InvalidInput(f"{label} seq {point} is outside the log (0..{last})")
            return point
        return seq_at(self.projector.tx_times, to_us(parse_when(point, label, now)))

    def rebuild(self, progress: Progress | None = None) -> int:
        """Drop the projection and replay the whole log into it; returns events replayed."""
        self.projector = rebuild_projection(
            self.log, self.db, flush_every=self.projector.flush_every, progress=progress
        )
        if self.url is not None and not self.read_only:  # the server's tables too
            with self.log.writing():
                self.catch_up()
                rewrite_tables(cast(PgLog, self.log), self.projector.state)
        return self.projector.last_seq

    def close_embed_workers(self) -> None:
        """Finish and stop every background embedding worker over this store. Call it without
        holding :attr:`lock` (the workers need it to record). Raises the first failure, after
        stopping them all; what they could not embed is redone when the store is next opened."""
        failed: EmbeddingFailed | None = None
        while self.embed_workers:
            try:
                self.embed_workers.pop(0).close()
            except EmbeddingFailed as e:
                failed = failed or e
        if failed is not None:
            raise failed

    def close(self) -> None:
        """Close the projection and the log (background embedding workers are finished
        first; see :meth:`close_embed_workers`)."""
        try:
            self.close_embed_workers()
        finally:
            self._close_files()

    def _close_files(self) -> None:
        try:
            if self.shared:
                self._publish_shared()
            elif not self.read_only:
                self.projector.flush()
                self._maybe_publish(closing=True)
            self.db.close()
        finally:
            self._close_log()

    def _close_log(self) -> None:
        """Close the log, its key file, and the reader's mark."""
        try:
            self.log.close()
        finally:
            if self.log.sealer is not None:
                self.log.sealer.keys.close()
            if self._reader_mark is not None:
                self._reader_mark.release()
