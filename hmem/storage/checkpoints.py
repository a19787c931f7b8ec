"""The checkpoint steps of a store (mixed into :class:`hmem.storage.store.Store`): the writer
publishes its projection for readers (``checkpoint.duckdb``, with the fold's columns beside
it), a reader or a shared writer opens a private copy of it and folds only the log's tail.
"""

from __future__ import annotations

from pathlib import Path
from typing import cast

import duckdb
import numpy as np

from eventlog.errors import StoreLocked
from eventlog.log import EventLog
from eventlog.pg_log import PgLog
from hmem.storage.server import fetch_checkpoint, server_checkpoint_seq, share_checkpoint
from projections import checkpoint
from projections.column_file import COLUMNS_FILE, save_column_file
from projections.duck import DuckProjection, from_log
from projections.projector import Projector

__all__ = ["CheckpointSteps"]


class CheckpointSteps:
    """Publishing and opening the checkpoint readers find."""

    root: Path
    log: EventLog
    notes: list[str]
    read_only: bool
    shared: bool
    checkpoint_seq: int
    checkpoint_every: int
    projector: Projector
    url: str | None

    @property
    def db(self) -> DuckProjection:
        raise NotImplementedError

    def catch_up(self) -> int:
        raise NotImplementedError

    @property
    def checkpoint_path(self) -> Path:
        return self.root / checkpoint.CHECKPOINT_FILE

    @property
    def columns_path(self) -> Path:
        return self.root / COLUMNS_FILE

    def _reader_copy(self) -> DuckProjection:
        """A reader's projection: its private copy of the checkpoint, or an empty in-memory one
        (the log is then replayed) when there is no checkpoint from this log."""
        self.log.refresh()
        if self.url is not None:  # a newer checkpoint shared on the server than this host's
            stamp = checkpoint.read_stamp(self.checkpoint_path)
            fetch_checkpoint(cast(PgLog, self.log), self.root, stamp[0] if stamp else 0)
        db, note = checkpoint.open_copy(self.checkpoint_path, self.log.last_seq,
                                        self.log.chain_at)
        if note:
            self.notes.append(note)
        if db is None:
            self.checkpoint_seq = 0
            # a shared writer's copy is a file, so that it can publish a checkpoint
            return checkpoint.empty_copy() if self.shared else DuckProjection(None)
        self.checkpoint_seq = db.cursor()[0]
        return db

    def _find_checkpoint(self) -> None:
        """The writer's view of the checkpoint on disk: its seq if it is from this log."""
        stamp = checkpoint.read_stamp(self.checkpoint_path)
        self.checkpoint_seq = 0
        if stamp is not None and from_log(stamp, self.log.last_seq, self.log.chain_at):
            self.checkpoint_seq = stamp[0]

    def _maybe_publish(self, *, closing: bool = False) -> None:
        if self.read_only or self.db.path is None or not self._publish_due(closing):
            return
        if self.shared:  # under its writer lock: whoever published last counts; its stamp is
            self._find_checkpoint()  # read only when a publish seems due (not on every write)
            if not self._publish_due(closing):
                return
        self.publish_checkpoint()
        if self.url is not None:
            self._share_checkpoint(closing)

    def _share_checkpoint(self, closing: bool) -> None:
        """Put the checkpoint just published on the server when the log has grown by a tenth
        since the one there (or at close), for processes on other hosts."""
        server = cast(PgLog, self.log)
        seq = self.checkpoint_seq
        shared = server_checkpoint_seq(server)
        if seq <= shared or not (closing or seq - shared >= max(self.checkpoint_every, seq // 10)):
            return
        try:
            share_checkpoint(server, {checkpoint.CHECKPOINT_FILE: self.checkpoint_path,
                                      COLUMNS_FILE: self.columns_path}, seq, server.chain_at(seq))
        except OSError as e:
            self.notes.append(f"checkpoint not shared on the server ({e})")

    def _publish_due(self, closing: bool) -> bool:
        tail = self.projector.last_seq - self.checkpoint_seq
        return tail > 0 and (
            closing or tail >= max(self.checkpoint_every, self.projector.last_seq // 100)
        )

    def _publish_shared(self) -> None:
        """A shared writer's close: publish its copy as the checkpoint if it is ahead of the one
        published (under the log's writer lock; if another writer holds it long, skip)."""
        try:
            with self.log.writing():
                self.catch_up()
                self.projector.flush()
                self._maybe_publish(closing=True)
        except StoreLocked:
            self.notes.append("checkpoint not published at close: another writer was busy")

    def publish_checkpoint(self) -> int:
        """Publish the projection as the checkpoint readers open (the writer does this on its
        own; see the module docstring). Returns the checkpoint's seq. A failure (e.g. a full
        disk) is a note, not an error: readers then fold a longer tail of the log."""
        self.projector.flush()
        try:
            stamp = checkpoint.publish(self.db, self.checkpoint_path)
            self.checkpoint_seq = stamp[0]
            p = self.projector
            save_column_file(
                self.columns_path, p.state, np.frombuffer(p.tx_times, dtype=np.int64),
                np.frombuffer(p.event_namespaces, dtype=np.int32),
                np.frombuffer(p.event_requests, dtype=np.int64), stamp,
            )
        except (OSError, duckdb.Error) as e:
            self.notes.append(f"checkpoint not published ({e}); readers replay more of the log")
        return self.checkpoint_seq
