"""A store's erasure steps: destroying the keys of what an erasure names, and every derived copy
of it (crypto-shredding), so that a crash between the steps is finished at the next open.

An erasure (``Memory.erase``, hmem/lifecycle.py) runs in steps, each noted in the key file's
header (eventlog/keyfile.py):

1. :meth:`Shredding.begin`: every key record is checked, then the flag ERASING set;
2. the receipt (``FactsErased``) is logged;
3. :meth:`Shredding.erased`: its keys are destroyed, the derived state is replaced by one
   folded from the log again and a new checkpoint published in place of the old
   (:meth:`Shredding.scrub`), and the flag cleared.

A reader that finds the flag set (a writer died mid-erasure) refuses to open
(``ErasureUnfinished``): its checkpoint could still hold the texts. The store owns one
:class:`Shredding` and calls it; it calls only the store's public methods.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timezone
from typing import Protocol

from msgspec.structs import replace

from eventlog.events import Event, EventBase, FactsErased
from eventlog.keyfile import KeyFile
from eventlog.protocol import Log
from hmem.errors import ErasureUnavailable, ErasureUnfinished, InvalidInput
from hmem.storage.backend import Backend
from hmem.storage.checkpoints import Checkpoints
from hmem.storage.keys import missing_receipts, shred
from projections.projector import Projector

__all__ = ["ErasingStore", "Shredding", "unfinished_erasure"]


class ErasingStore(Protocol):
    """What the erasure steps use of their store (:class:`hmem.storage.store.Store`)."""

    log: Log
    backend: Backend
    checkpoints: Checkpoints
    notes: list[str]

    @property
    def projector(self) -> Projector: ...

    def append(self, event: EventBase) -> Event: ...

    def rebuild(self) -> int: ...


class Shredding:
    """What a store does for an erasure, and to finish one a crash interrupted."""

    def __init__(self, store: ErasingStore) -> None:
        self.store = store
        self.active = False  # this process is erasing (or finishing an erasure) now

    def keys(self) -> KeyFile:
        """The key file, for an erasure; :class:`~hmem.errors.ErasureUnavailable` (saying why)
        where texts are kept in the clear."""
        store = self.store
        sealer = store.log.sealer
        capabilities = store.backend.capabilities
        if sealer is None or not capabilities.erase:
            raise ErasureUnavailable(capabilities.no_erase or (
                f"the store {store.backend.shown} keeps its texts in the clear: forget() "
                f"tombstones a fact, but nothing can be erased from its log"
            ))
        return sealer.keys

    def begin(self) -> None:
        """Check every key record (``KeyFileDamaged`` before anything is destroyed), then note
        that an erasure is under way."""
        keys = self.keys()
        keys.check(self.store.log.last_seq)
        keys.mark(erasing=True)
        self.active = True

    def abandon(self) -> None:
        """The receipt was not logged: nothing to finish."""
        self.keys().mark(erasing=False)
        self.active = False

    def erased(self, receipt_seq: int) -> None:
        """After the erasure receipt ``receipt_seq`` was logged: destroy the keys it names, then
        replace the derived state and its checkpoint (:meth:`scrub`)."""
        keys = self.keys()
        try:
            shred(self.store.log, keys, receipt_seq)
            namespace = self.store.projector.namespace_of_receipt(receipt_seq)
            self.scrub(None if namespace is None else [namespace])
            keys.mark(scrubbed_through=receipt_seq, erasing=False, exports_pending=True)
        finally:
            self.active = False

    def scrub(self, namespaces: list[str] | None = None) -> None:
        """Remove what the checkpoint holds of ``namespaces`` (all: the whole checkpoint),
        which held the erased texts, fold their events of the log again into a new state and
        publish it as a new checkpoint: new files, so no page of the old ones is kept. (An
        erasure's receipt and everything it erased are of one namespace.)"""
        store = self.store
        if namespaces is None:
            store.checkpoints.remove()
            store.rebuild()
        else:
            seqs = self._held_seqs(namespaces)  # before the parts they may be read from go
            store.checkpoints.remove(namespaces)
            for namespace in namespaces:
                store.projector.replace(namespace, store.checkpoints.replayed(
                    store.log, namespace, store.projector.last_seq, seqs.get(namespace)))
            store.backend.after_scrub(store.projector, namespaces)
        # shared at once where a backend shares it: the one other hosts fetch held the texts
        store.checkpoints.publish(store.projector, store.log, closing=True, scrubbed=True)

    def note_receipts(self, receipts: Sequence[EventBase]) -> None:
        """What the erasure receipts among ``receipts`` name is read as erased by this
        process from now on, whatever the state of its keys
        (:attr:`eventlog.sealing.Sealer.erased`)."""
        sealer = self.store.log.sealer
        if sealer is not None:
            for ev in receipts:
                if isinstance(ev, FactsErased):
                    sealer.erased.update(ev.named)

    def note_all_receipts(self) -> None:
        """:meth:`note_receipts` of every receipt the state holds whose keys the key file does
        not record destroyed (at open; normally none)."""
        sealer = self.store.log.sealer
        if sealer is not None:
            log, done = self.store.log, sealer.keys.erased_through
            self.note_receipts([ev for seq in self.store.projector.seqs_of("erased")
                                if seq > done and isinstance(ev := log.get_raw(seq),
                                                             FactsErased)])

    def finish_if_interrupted(self) -> None:
        """A writer holding the writer lock that finds an erasure under way in the key file
        finishes it: an erasure holds the lock from its start to its end, so its writer died
        (on a server, the tables and the shared checkpoint would hold the texts until the next
        writer's open otherwise)."""
        store = self.store
        sealer = store.log.sealer
        if self.active or sealer is None or store.log.read_only or not sealer.keys.erasing_now():
            return
        sealer.keys.reread()
        self.finish()

    def follow(self, namespaces: list[str]) -> None:
        """Another process logged erasure receipts in ``namespaces`` (a store on a server, where
        every host learns of an erasure from its receipt): this host's checkpoint parts of them
        are deleted when they are its own cache, and a loaded namespace is folded again from
        the log, what the receipts name read as erased whether its keys are destroyed yet or
        not. A deferred one is replayed when first used (its part predates the receipt)."""
        store = self.store
        if store.backend.capabilities.many_hosts:
            store.checkpoints.drop_parts(namespaces)
        projector = store.projector
        seqs = self._held_seqs(namespaces)
        for namespace in seqs:
            projector.replace(namespace, store.checkpoints.replayed(
                store.log, namespace, projector.last_seq, seqs[namespace]))

    def _held_seqs(self, namespaces: list[str]) -> dict[str, list[int]]:
        """The seqs of every event of each loaded namespace of ``namespaces``, as its state
        holds them (folded through the projector's last seq): what folding it again reads of
        the log."""
        loaded = dict(self.store.projector.loaded())
        return {ns: loaded[ns].events.seqs_in(ns).tolist() for ns in namespaces if ns in loaded}

    def is_erased(self, seq: int) -> bool:
        """Whether the key of event ``seq`` was erased (never, in a store in the clear)."""
        sealer = self.store.log.sealer
        keys = None if sealer is None else sealer.keys
        return keys is not None and 0 < seq <= keys.made_through and keys.key(seq) is None

    def check_not_erased(self, fact_id: int) -> None:
        """``InvalidInput`` for a write about an erased fact."""
        if self.is_erased(fact_id):
            raise InvalidInput(
                f"fact {fact_id} was erased (receipt {self.keys().receipt(fact_id)}): nothing "
                f"about it can be written"
            )

    # ------------------------------------------------------------------ at open

    def check_no_unfinished(self) -> None:
        """A reader's check: ``ErasureUnfinished`` if a writer died mid-erasure (none on a store
        of many hosts, whose readers fold what a receipt names as erased: :meth:`follow`)."""
        if self.store.backend.capabilities.many_hosts:
            return
        erasure = unfinished_erasure(self.store.log, self.store.backend.shown)
        if erasure is not None:
            raise erasure

    def finish(self) -> None:
        """The writer's open: finish an erasure a crash interrupted; on a log restored (or cut
        back) from before erasures its key file records, log their receipts, give the erased
        seqs after the log's end new keys, and replace the derived state."""
        if self.active:
            return
        self.active = True
        try:
            self._finish()
        finally:
            self.active = False

    def _finish(self) -> None:
        store = self.store
        log = store.log
        keys = self.keys()
        keys.renew_erased_after(log.last_seq)
        receipts = store.projector.seqs_of("erased")
        restored = missing_receipts(log, keys, receipts, self._kind_of)
        if restored is not None:
            now = max(datetime.now(timezone.utc), log.last_tx_at)
            receipts += [store.append(replace(ev, tx_at=now)).seq for ev in restored]
            last = receipts[-1] if receipts else 0
            self.scrub()
            keys.mark(erased_through=last, scrubbed_through=last, erasing=False,
                      exports_pending=True)
            store.notes.append(
                "this log is a backup restored from before erasures its key file records: their "
                "texts stay unreadable; receipts logged and the derived state rebuilt"
            )
            return
        todo = [s for s in receipts if s > keys.scrubbed_through]
        for seq in todo:
            if seq > keys.erased_through:
                shred(log, keys, seq)
        if todo or keys.erasing:
            self.scrub()
            keys.mark(scrubbed_through=max(todo, default=keys.scrubbed_through), erasing=False,
                      exports_pending=True)
            store.notes.append("finished an erasure a crash interrupted"
                               + (f" (receipt {todo[-1]})" if todo else " (before its receipt)"))

    def _kind_of(self, seq: int) -> tuple[str, str]:
        projector = self.store.projector
        namespace = projector.namespace_of(seq)
        assert namespace is not None  # a seq a receipt lists: an event of the log folded
        state = projector.space(namespace).state
        if state.slot(seq) >= 0:
            return "fact", namespace
        return ("episode" if seq in state.episodes else "recall"), namespace


def unfinished_erasure(log: Log, shown: str) -> ErasureUnfinished | None:
    """The error for reading a store whose erasure a crash interrupted (its derived files may
    still hold the texts), None when there is none."""
    sealer = log.sealer
    if sealer is None or not sealer.keys.erasing:
        return None
    return ErasureUnfinished(
        f"an erasure in the store {shown} was interrupted; open the store as its writer once "
        f"(Memory(path), or any hmem write command) to finish it, then read"
    )
