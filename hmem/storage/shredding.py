"""The erasure steps of a store (mixed into :class:`hmem.storage.store.Store`).

An erasure (``Memory.erase``, hmem/lifecycle.py) runs in steps, each noted in the key file's
header (eventlog/keyfile.py) so that a crash between them is finished at the next writer open:

1. :meth:`ErasureSteps.begin_erasure`: every key record is checked, then the flag ERASING set;
2. the receipt (``FactsErased``) is logged;
3. :meth:`ErasureSteps.erased`: its keys are destroyed, every projection file is replaced by
   one rebuilt from the log (:meth:`ErasureSteps.scrub`), and the flag cleared.

A reader that finds the flag set (a writer died mid-erasure) refuses to open
(``ErasureUnfinished``): its copy of the projection could still hold the texts.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path

from msgspec.structs import replace

from eventlog.events import Event, EventBase
from eventlog.keyfile import KeyFile
from eventlog.lock import ReaderMark, readers_excluded
from eventlog.log import EventLog
from hmem.errors import ErasureUnavailable, ErasureUnfinished, InvalidInput
from hmem.storage.keys import missing_receipts, shred
from projections.checkpoint import sweep_dead_copies
from projections.duck import DuckProjection
from projections.projector import Projector

__all__ = ["ErasureSteps", "PROJECTION_FILES"]

# what a scrub replaces: the projection, the checkpoint and the fold's columns beside it, with
# their WALs, temporary copies and the ones a damaged open moved aside
PROJECTION_FILES = ("projection.duckdb*", "checkpoint.*")


class ErasureSteps:
    """What a store does for an erasure, and to finish one a crash interrupted."""

    root: Path
    log: EventLog
    _reader_mark: ReaderMark | None
    notes: list[str]
    read_only: bool
    projector: Projector

    @property
    def db(self) -> DuckProjection:
        raise NotImplementedError

    def _open_projection(self, flush_every: int, *, replay: bool = False) -> None:
        raise NotImplementedError

    def publish_checkpoint(self) -> int:
        raise NotImplementedError

    def append(self, event: EventBase) -> Event:
        raise NotImplementedError

    # ------------------------------------------------------------------ the steps

    def erasable_keys(self) -> KeyFile:
        """The key file, for an erasure; :class:`~hmem.errors.ErasureUnavailable` if the store
        keeps its texts in the clear."""
        if self.log.sealer is None:
            raise ErasureUnavailable(
                f"the store {self.root} keeps its texts in the clear (it was made before hmem "
                f"sealed texts, or with seal=False): forget() tombstones a fact, but nothing "
                f"can be erased from its log"
            )
        return self.log.sealer.keys

    @contextmanager
    def excluding_readers(self, what: str) -> Iterator[None]:
        """No reader open, none opening, for ``what`` (``ReadersOpen`` names them): a shared
        writer, which marks itself as a reader, steps aside for its own erasure."""
        mark = self._reader_mark
        if mark is not None:
            mark.release()
        try:
            with readers_excluded(self.log.directory, what):
                yield
        finally:
            if mark is not None:
                self._reader_mark = ReaderMark(self.log.directory)

    def begin_erasure(self) -> None:
        """Check every key record (``KeyFileDamaged`` before anything is destroyed), then note
        that an erasure is under way."""
        keys = self.erasable_keys()
        keys.check(self.log.last_seq)
        sweep_dead_copies()  # copies of the checkpoint left by readers that died
        keys.mark(erasing=True)

    def erased(self, receipt_seq: int) -> None:
        """After the erasure receipt ``receipt_seq`` was logged: destroy the keys it names, then
        rebuild every projection file from the log (:meth:`scrub`)."""
        keys = self.erasable_keys()
        shred(self.log, keys, receipt_seq)
        self.scrub()
        keys.mark(scrubbed_through=receipt_seq, erasing=False, exports_pending=True)

    def scrub(self) -> None:
        """Replace every projection file (tables, checkpoint, columns) by one rebuilt from the
        log: new files, so no page of the old ones (which held erased texts) is kept."""
        flush_every = self.projector.flush_every
        self.db.close()
        for pattern in PROJECTION_FILES:
            for path in self.root.glob(pattern):
                path.unlink(missing_ok=True)
        self._open_projection(flush_every)
        self.publish_checkpoint()

    def is_erased(self, seq: int) -> bool:
        """Whether the key of event ``seq`` was erased (never, in a store in the clear)."""
        keys = None if self.log.sealer is None else self.log.sealer.keys
        return keys is not None and 0 < seq <= keys.made_through and keys.key(seq) is None

    def check_not_erased(self, fact_id: int) -> None:
        """``InvalidInput`` for a write about an erased fact."""
        if self.is_erased(fact_id):
            raise InvalidInput(
                f"fact {fact_id} was erased (receipt "
                f"{self.erasable_keys().receipt(fact_id)}): nothing about it can be written"
            )

    # ------------------------------------------------------------------ at open

    def check_no_unfinished_erasure(self) -> None:
        """A reader's check: ``ErasureUnfinished`` if a writer died mid-erasure."""
        keys = None if self.log.sealer is None else self.log.sealer.keys
        if keys is not None and keys.erasing:
            raise ErasureUnfinished(
                f"an erasure in the store {self.root} was interrupted; open the store as its "
                f"writer once (Memory(path), or any hmem write command) to finish it, then read"
            )

    def finish_erasures(self) -> None:
        """The writer's open: finish an erasure a crash interrupted; on a log restored (or cut
        back) from before erasures its key file records, log their receipts, give the erased
        seqs after the log's end new keys, and rebuild the projection files."""
        keys = self.erasable_keys()
        self.projector.flush()
        keys.renew_erased_after(self.log.last_seq)
        receipts = [s for (s,) in self.db.con.execute(
            "SELECT seq FROM events WHERE type = 'erased' ORDER BY seq").fetchall()]
        restored = missing_receipts(self.log, keys, receipts, self._kind_of)
        if restored is not None:
            now = max(datetime.now(timezone.utc), self.log.last_tx_at)
            receipts += [self.append(replace(ev, tx_at=now)).seq for ev in restored]
            last = receipts[-1] if receipts else 0
            self.scrub()
            keys.mark(erased_through=last, scrubbed_through=last, erasing=False,
                      exports_pending=True)
            self.notes.append(
                "this log is a backup restored from before erasures its key file records: their "
                "texts stay unreadable; receipts logged and projection files rebuilt"
            )
            return
        todo = [s for s in receipts if s > keys.scrubbed_through]
        for seq in todo:
            if seq > keys.erased_through:
                shred(self.log, keys, seq)
        if todo or keys.erasing:
            self.scrub()
            keys.mark(scrubbed_through=max(todo, default=keys.scrubbed_through), erasing=False,
                      exports_pending=True)
            self.notes.append("finished an erasure a crash interrupted"
                              + (f" (receipt {todo[-1]})" if todo else " (before its receipt)"))

    def _kind_of(self, seq: int) -> tuple[str, str]:
        state = self.projector.state
        namespace = state.namespaces.values[self.projector.event_namespaces[seq - 1]]
        if state.slot(seq) >= 0:
            return "fact", namespace
        return ("episode" if seq in state.episodes else "recall"), namespace
