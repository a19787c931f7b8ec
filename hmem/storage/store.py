"""A store: its event log and the state derived from it, kept in step, on one backend.

The log (eventlog/) is the only source of truth. The state derived from it (the fold, the event
columns, the recall indexes: projections/projector.py) is held in memory and saved at
checkpoints (hmem/storage/checkpoints.py: its one persisted form); where the store lives (a
directory, a PostgreSQL database) is its backend's business (hmem/storage/backend.py).

Modes: a *lifetime writer* (``Store(path)``) holds the log's writer lock from open to close; a
*shared writer* (``shared=True``, and every writer of a server store) takes it for one write
transaction at a time, folding what the others appended first; a *reader* (``read_only=True``)
never writes and folds what the writers appended before each read. Every one of them opens
from the last checkpoint and folds only the log's tail after it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from datetime import datetime, timezone
from pathlib import Path

from eventlog.errors import StoreLocked
from eventlog.events import (
    EmbeddingRecorded,
    Event,
    EventBase,
    FactForgotten,
    FactRemembered,
    FactRevised,
    FactsErased,
)
from eventlog.fileio import OS, FileIO
from eventlog.format import SEGMENT_BYTES
from eventlog.log import FsyncPolicy
from hmem.embedding.worker import EmbedWorker
from hmem.errors import EmbeddingFailed, InvalidInput, RecordRejected
from hmem.storage.checkpoints import Checkpoints
from hmem.storage.retries import check_not_written
from hmem.storage.shredding import Shredding
from hmem.storage.targets import open_backend
from hmem.time.arguments import Now, parse_when
from hmem.time.iso import TimeLike
from projections.checks import check_fields, check_timing
from projections.fold import check
from projections.projector import Projector
from projections.timeutil import to_us
from replay.asof import seq_at
from replay.rebuild import Progress, rebuild_projection
from replay.verify import ProjectionDiff, verify_projection

__all__ = ["Store"]


class Store:
    """The log and its derived state, kept in step (see the module docstring).

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
        segment_bytes: int = SEGMENT_BYTES,
        io: FileIO = OS,
        checkpoint_every: int = 1000,
        key_file: str | os.PathLike[str] | None = None,
        seal: bool = True,
        shared: bool = False,
        memory_mb: int | None = None,
    ) -> None:
        if memory_mb is not None and (type(memory_mb) is not int or memory_mb < 1):
            raise InvalidInput(f"memory_mb must be a whole number of MiB >= 1 (what the loaded "
                               f"namespaces may take) or None, not {memory_mb!r}")
        self.memory_mb = memory_mb
        for name, value, what in (
            ("flush_every", flush_every, "no longer used: the state is saved at checkpoints"),
            ("checkpoint_every", checkpoint_every, "events between checkpoints"),
        ):
            if type(value) is not int or value < 1:
                raise InvalidInput(f"{name} must be a whole number >= 1 ({what}), not {value!r}")
        if shared and read_only:
            raise InvalidInput("a store is opened shared (one of many writers) or read_only")
        self.backend = open_backend(
            root, read_only=read_only, shared=shared, fsync=fsync, segment_bytes=segment_bytes,
            io=io, key_file=key_file, seal=seal,
        )
        self.log = self.backend.log
        self.root: Path = self.backend.root
        self.read_only = read_only
        # one of many writers (a server store's writers all are): each write takes the log's
        # writer lock for its transaction only, after folding what the others appended
        self.shared = not read_only and (shared or self.log.shared)
        self.follows = read_only or self.shared  # follows the log others append to
        self.lock = threading.RLock()
        self.notes: list[str] = []
        # the state holds events a rolled-back append never logged (or misses some it logged):
        # loaded again before the next read or write
        self.diverged = False
        # The background embedding workers of every Memory over this store (closed before it),
        # and the (namespace, model) pairs whose unembedded tail a worker has already queued.
        self.embed_workers: list[EmbedWorker] = []
        self.embed_tails: set[tuple[str, str]] = set()
        self.checkpoints = Checkpoints(self.backend, every=checkpoint_every, notes=self.notes)
        self.shredding = Shredding(self)
        self.group = self.backend.group_commit(self)  # a server's: writes numbered in groups
        try:
            if read_only:
                self.shredding.check_no_unfinished()
            if not self.log.recovery.clean:
                self.notes.append(f"log recovery: {self.log.recovery}")
            self.projector = self._loaded()
            self.catch_up()
            self.shredding.note_all_receipts()
            if not read_only:
                with self.log.writing():
                    self.catch_up()
                    if self.log.sealer is not None:
                        self.shredding.finish()
                    self.notes += self.backend.after_open(self.projector)
                    self.maybe_publish()
        except BaseException:
            self.backend.close()
            raise

    @property
    def shown(self) -> str:
        """The store as messages show it: its directory, or its URL without the password."""
        return self.backend.shown

    # ------------------------------------------------------------------ following the log

    def _loaded(self) -> Projector:
        """The state from the checkpoint (each namespace loaded when first used), kept within
        ``memory_mb``."""
        projector = self.checkpoints.load(self.log)
        projector.budget = None if self.memory_mb is None else self.memory_mb << 20
        return projector

    def catch_up(self) -> int:
        """Fold the events the state has not seen (a reader first looks for new ones)."""
        if self.diverged:
            self.diverged = False
            self.projector = self._loaded()
        if self.follows:
            self.log.refresh()
            self.backend.refresh()
        receipts: list[FactsErased] = []

        def noting_receipts(events: Iterable[Event]) -> Iterator[Event]:
            for ev in events:
                if isinstance(ev, FactsErased):
                    receipts.append(ev)
                yield ev

        n = self.projector.apply_all(
            noting_receipts(self.log.read(self.projector.last_seq + 1)), bulk=True)
        if receipts:  # another process erased: what this one holds of those goes
            self.shredding.note_receipts(receipts)
            self.shredding.follow(list(dict.fromkeys(ev.namespace for ev in receipts)))
        return n

    def finish_interrupted_erasure(self) -> None:
        """Under the writer lock: finish an erasure whose writer died (see
        :meth:`Shredding.finish_if_interrupted`)."""
        self.shredding.finish_if_interrupted()

    # ------------------------------------------------------------------ writing

    def append(self, event: EventBase) -> Event:
        """Check, log (durably, per the fsync policy) and fold one event."""
        return self.append_batch([event])[0]

    def append_batch(
        self,
        events: Sequence[EventBase],
        links: Mapping[int, int] | None = None,
        *,
        durable: bool = True,
        checked: Collection[int] = (),
    ) -> list[Event]:
        """Check, then log as one write (one fsync) and fold, a batch of events; a shared
        writer does it in one write transaction of the log, after folding what the others
        appended. ``checked``: positions whose own fields the caller already checked
        (``check_fields(..., at_tx=False)``): only their timing is checked here.

        Each event is checked against the state before the batch. ``links[j] = i`` makes the
        ``EmbeddingRecorded`` at position ``j`` the vector of the fact that event ``i`` of this
        batch creates (the log sets its ``fact_id`` to that event's seq). A batch may revise or
        forget a fact only once. All or nothing: an invalid event rejects the whole batch
        before anything is written.
        """
        if self.group is not None and self.group.usable():  # a server: numbered in a group
            return self.group.append(events, dict(links or {}), checked)
        with self.log.writing():
            if self.shared:
                self.catch_up()
                self.shredding.finish_if_interrupted()
            return self._append_batch(events, dict(links or {}), durable, checked)

    def check_batch(self, events: Sequence[EventBase], links: Mapping[int, int]) -> None:
        """What a batch whose fields were checked is checked for against the state (the
        caller holds the writer lock, the state caught up): a retry (``AlreadyWritten``), and
        :meth:`_check`'s rules."""
        check_not_written(self.projector, self.log, events)
        self._check(events, links, range(len(events)))

    def append_checked(self, events: Sequence[EventBase], links: Mapping[int, int],
                       settle: Callable[[list[Event]], None]) -> list[Event]:
        """Append a batch of a group that passed :meth:`check_batch` against the state as it
        is (hmem/storage/group_commit.py; the writer lock held); ``settle(stamped)`` runs in
        the append's transaction."""
        return self._append_batch(events, dict(links), True, (), settle)

    def _append_batch(
        self, events: Sequence[EventBase], links: dict[int, int], durable: bool,
        checked: Collection[int], settle: Callable[[list[Event]], None] | None = None,
    ) -> list[Event]:
        if settle is None:  # a group's batch was checked as a whole (append_checked)
            check_not_written(self.projector, self.log, events)  # a retry: answered
            self._check(events, links, checked)
        projector = self.projector
        also = self.backend.on_append(projector)  # e.g. a server's tables, in the transaction

        def fold(stamped: list[Event]) -> None:
            projector.apply_all(stamped)
            if also is not None:
                also(stamped)
            if settle is not None:
                settle(stamped)

        try:
            stamped = self.log.append_many(events, links, durable=durable, then=fold)
        except RecordRejected as e:
            raise InvalidInput(str(e)) from e
        except BaseException:
            if projector.last_seq != self.log.last_seq:  # folded, then rolled back (or not)
                self.diverged = True
            raise
        if settle is None:  # a group publishes once its transaction committed
            self.maybe_publish()
        return stamped

    def _check(
        self, events: Sequence[EventBase], links: Mapping[int, int], checked: Collection[int]
    ) -> None:
        """Every check a batch passes before it is logged: each event's fields (once: of the
        ones the caller checked, only their timing), its links, the fold's checks against the
        state before the batch, and the write rules."""
        for j, ev in enumerate(events):
            if j in checked:
                check_timing(ev)
            else:
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
        by_namespace: dict[str, list[int]] = {}
        for j, ev in enumerate(events):
            by_namespace.setdefault(ev.namespace, []).append(j)
        for namespace, positions in by_namespace.items():  # each against its namespace's state
            check([events[j] for j in positions], self.projector.space(namespace).state,
                  skip=[k for k, j in enumerate(positions) if j in links])
        touched: set[int] = set()
        dims: dict[tuple[str, str], int] = {}
        for ev in events:
            if isinstance(ev, EmbeddingRecorded):
                self.projector.space(ev.namespace).state.check_dims(ev, dims)
                self.shredding.check_not_erased(ev.fact_id)
            if isinstance(ev, (FactRevised, FactForgotten)):
                if ev.fact_id in touched:
                    raise InvalidInput(
                        f"fact {ev.fact_id} is revised or forgotten twice in one batch"
                    )
                touched.add(ev.fact_id)

    def maybe_publish(self, *, closing: bool = False) -> None:
        """Publish a checkpoint when one is due (the caller holds the log's writer lock); at a
        close that publishes none, share the one this host holds if the backend's is older."""
        if self.read_only:
            return
        due = self.checkpoints.due(self.projector.last_seq, closing=closing)
        if due and self.shared:  # whoever published last counts: its stamp is read only when
            self.checkpoints.find(self.log)  # a publish seems due (not on every write)
            due = self.checkpoints.due(self.projector.last_seq, closing=closing)
        if due:  # a shared writer's publish goes in steps (other writers wait for the lock),
            # but not at close: a CLI write closes after one call, so its steps would never end
            self.checkpoints.publish(self.projector, self.log, closing=closing,
                                     step=self.shared and not closing)
        elif closing:
            self.checkpoints.share_held(self.log)

    # ------------------------------------------------------------------ maintenance

    def rebuild(self, progress: Progress | None = None) -> int:
        """Fold the whole log again into a new state (and, for a writer, publish it as the
        checkpoint); returns the events folded."""
        self.projector = rebuild_projection(self.log, progress=progress)
        if not self.read_only:
            with self.log.writing():
                self.catch_up()
                self.backend.after_rebuild(self.projector)
                self.checkpoints.publish(self.projector, self.log)
        return self.projector.last_seq

    def verify(self) -> ProjectionDiff:
        """Fold the log again and compare the result with the state that answers queries, the
        checkpoint this store opens from, and what the backend keeps apart (see
        :mod:`replay.verify`)."""
        self.catch_up()
        saved = self.checkpoints.examined(self.log)
        report = verify_projection(self.log, self.projector,
                                   checkpoint=saved if isinstance(saved, Projector) else None)
        if isinstance(saved, str):  # an open folds the log instead: no difference, but said
            report.notes.append(f"{saved}; an open folds the log instead")

        def caught_up() -> Projector:
            self.catch_up()
            return self.projector

        report.tables.update(self.backend.table_differences(caught_up))
        return report

    def tx_seq_or_now(self, point: TimeLike | int | None, label: str, now: Now = None) -> int:
        """:meth:`tx_seq` of ``point``, or the last seq applied when it is None (now)."""
        return self.projector.last_seq if point is None else self.tx_seq(point, label, now)

    def tx_seq(self, point: TimeLike | int, label: str, now: Now = None) -> int:
        """A transaction point as a seq: an int is a seq; a time (datetime, date, ISO string or
        spoken, relative to ``now``: see :mod:`hmem.time.arguments`) means the last seq at or
        before it. A spoken time is read as a past one (a clock time with no day, ``2pm``, is its
        last occurrence; ``tomorrow`` is refused: :func:`hmem.time.arguments.parse_when`); an
        exact time after the last event (the end of a period asked about) means the last
        seq."""
        if isinstance(point, bool):
            raise InvalidInput(f"{label} must be a datetime, an ISO string or a seq")
        if isinstance(point, int):
            last = self.projector.last_seq
            if not 0 <= point <= last:
                raise InvalidInput(f"{label} seq {point} is outside the log (0..{last})")
            return point
        if not (isinstance(point, datetime) and point.tzinfo is timezone.utc):
            point = parse_when(point, label, now, past=True)  # a UTC datetime was parsed already
        return seq_at(self.projector.tx_times, to_us(point))

    # ------------------------------------------------------------------ closing

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
        """Publish the state as the checkpoint if it is ahead of it by at least 1/256 of the
        log (:meth:`Checkpoints.due`), close the log and the backend (background embedding
        workers are finished first; see :meth:`close_embed_workers`)."""
        try:
            self.close_embed_workers()
        finally:
            try:
                if not self.read_only:
                    self._publish_at_close()
            finally:
                self.backend.close()

    def _publish_at_close(self) -> None:
        """A writer's close: publish its state if it is ahead of the checkpoint (a shared
        writer under the log's writer lock; if another writer holds it long, it skips)."""
        try:
            with self.log.writing():
                if self.shared:
                    self.catch_up()
                self.maybe_publish(closing=True)
        except StoreLocked:
            self.notes.append("checkpoint not published at close: another writer was busy")
