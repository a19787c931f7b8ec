"""One namespace's handle on an open store: lifecycle, and the seams every caller uses.

:class:`StoreHandle` is the base of :class:`~hmem.memory.Memory`. It owns (or shares) the open
:class:`~hmem.storage.store.Store` and gives the rest of hmem three public seams, so no module
reaches into another's private names:

* :meth:`~StoreHandle.transaction`: the one write path (see :mod:`hmem.storage.transaction`);
* :meth:`~StoreHandle.reading`: the store, caught up with the log, under its lock;
* :meth:`~StoreHandle.embed_facts`: vectors of facts as the store embeds them, and
  :meth:`~StoreHandle.embedding_worker`: the thread that does it after the write
  (``embed_mode="background"``, see :mod:`hmem.embedding.worker`).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal, Self

import numpy as np

from eventlog.log import FSYNC_POLICIES, FsyncPolicy
from hmem.args import check_namespace
from hmem.embedders import Embedder, resolve_embedder
from hmem.embedding.facts import check_dims, embed_pairs, worker_for
from hmem.embedding.worker import EmbedWorker
from hmem.errors import EmbeddingFailed, InvalidInput, StoreClosed
from hmem.notebook.sql import NamespaceCopy
from hmem.recall.request import RecallConfig
from hmem.storage.store import Store
from hmem.storage.targets import store_target
from hmem.storage.transaction import Clock, Transaction, utc_now
from hmem.time.iso import TimeLike
from replay.rebuild import Progress
from replay.verify import ProjectionDiff

__all__ = ["EMBED_MODES", "EmbedMode", "StoreHandle", "TxPoint"]

TxPoint = TimeLike | int  # a transaction time, or a seq
EmbedMode = Literal["background", "inline"]
EMBED_MODES: tuple[EmbedMode, ...] = ("background", "inline")


class StoreHandle:
    """An open store seen from one namespace (see :class:`~hmem.memory.Memory`)."""

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        namespace: str = "default",
        read_only: bool = False,
        fsync: FsyncPolicy = "always",
        clock: Clock = utc_now,
        source_agent: str | None = None,
        recall_config: RecallConfig | None = None,
        embedder: Embedder | str | None = "auto",
        flush_every: int = 256,
        checkpoint_every: int = 1000,
        store: Store | None = None,
        embed_mode: EmbedMode = "background",
        log_recalls: bool | None = None,
        key_file: str | os.PathLike[str] | None = None,
        shared: bool = False,
        memory_mb: int | None = None,
    ) -> None:
        self.namespace = check_namespace(namespace)
        if fsync not in FSYNC_POLICIES:
            raise InvalidInput(f"fsync must be one of {', '.join(FSYNC_POLICIES)}, not {fsync!r}")
        if embed_mode not in EMBED_MODES:
            raise InvalidInput(
                f"embed_mode must be 'background' (writes return before their facts are "
                f"embedded; flush() waits) or 'inline' (each write embeds first), not "
                f"{embed_mode!r}"
            )
        self.embed_mode: EmbedMode = embed_mode
        self._worker: EmbedWorker | None = None
        self.clock = clock
        self.source_agent = source_agent
        self.recall_config = recall_config or RecallConfig()
        self.copies: dict[str, NamespaceCopy] = {}  # Memory.sql's private copy, per seq
        self._embedder_spec = embedder
        self._embedder_resolved = False
        self._embedder: Embedder | None = None
        self.log_recalls = _recall_logging(
            log_recalls, read_only if store is None else store.read_only
        )
        self.owns_store = store is None
        if store is None:
            store = Store(store_target(path), read_only=read_only, fsync=fsync,
                          flush_every=flush_every, checkpoint_every=checkpoint_every,
                          key_file=key_file, shared=shared, memory_mb=memory_mb)
        self._store: Store | None = store

    # ------------------------------------------------------------------ lifecycle

    def in_namespace(self, namespace: str, **overrides: Any) -> Self:
        """A view of the same open store in another namespace (shares the store, its lock and,
        unless ``overrides`` say otherwise, the clock, source agent, recall config, embedder
        and embed mode). Closing the view leaves the store open; closing the store's owner
        finishes the view's background embeddings first."""
        settings: dict[str, Any] = dict(
            clock=self.clock, source_agent=self.source_agent, recall_config=self.recall_config,
            embedder=self.embedder, embed_mode=self.embed_mode, log_recalls=self.log_recalls,
        )
        unknown = set(overrides) - set(settings)
        if unknown:
            raise InvalidInput(f"in_namespace takes only {sorted(settings)}, not {sorted(unknown)}")
        settings.update(overrides)
        return type(self)(namespace=namespace, store=self.store, **settings)

    @property
    def store(self) -> Store:
        """The open store (the log and its projection); raises ``StoreClosed`` after close."""
        if self._store is None:
            raise StoreClosed("this Memory is closed; open a new one")
        return self._store

    @property
    def path(self) -> Path:
        return self.store.root

    @property
    def read_only(self) -> bool:
        return self.store.read_only

    @property
    def notes(self) -> list[str]:
        """What opening the store found and repaired (torn log tail, rebuilt projection)."""
        return list(self.store.notes)

    @property
    def embedder(self) -> Embedder | None:
        """The embedder new facts and queries are embedded with (resolved on first use)."""
        if not self._embedder_resolved:
            self._embedder = resolve_embedder(self._embedder_spec)
            self._embedder_resolved = True
        return self._embedder

    def flush(self) -> None:
        """Wait until the facts written so far have their embeddings recorded.

        In ``embed_mode="background"`` writes return before their facts are embedded; this
        waits for the workers (and, on a store just reopened, first queues the facts a crash
        left unembedded: see :mod:`hmem.embedding.worker`). The store's own handle (the Memory
        that opened it) waits for every worker of the store, so for every view's queue too; a
        view (:meth:`in_namespace`) waits for every worker of its namespace, whichever view of
        it wrote (what its ``stats().embedding_backlog`` counts). Raises
        :class:`~hmem.errors.EmbeddingFailed` if embedding failed since the last flush (the
        first failure, after waiting for the other workers): the facts stay stored (found by
        their words) and queued; the next flush (or write) retries them. A no-op without a
        worker (no embedder, inline mode everywhere, a read-only store)."""
        self.embedding_worker()  # queues what a crash left, on a store just reopened
        store = self.store
        with store.lock:
            workers = [w for w in store.embed_workers
                       if self.owns_store or w.namespace == self.namespace]
        failed: EmbeddingFailed | None = None
        for worker in workers:  # not under the lock: the workers need it to record
            try:
                worker.flush()
            except EmbeddingFailed as e:
                failed = failed or e
        if failed is not None:
            raise failed

    def sync(self) -> None:
        """Force everything appended so far to stable storage now: logged recalls (not fsynced
        on their own) and, with ``fsync="batch"`` or ``"never"``, every write since the last
        sync. A no-op on a read-only store."""
        store = self.store
        if store.read_only:
            return
        with store.lock:
            store.log.sync()

    def close(self) -> None:
        """Finish background embeddings (the owner of the store: every view's too), write the
        projection, sync the log, release the writer lock. Idempotent. Raises
        :class:`~hmem.errors.EmbeddingFailed` after closing if embeddings could not be
        finished (the next open of the store redoes them)."""
        store = self._store
        if store is None:
            return
        try:
            if self.owns_store:
                store.close_embed_workers()  # not under the lock: the workers need it
            elif self._worker is not None:
                self._worker.flush()  # the worker is the store's: it outlives this view
        finally:
            self._worker = None
            with store.lock:
                for copy in self.copies.values():
                    copy.close()
                self.copies.clear()
                if self.owns_store:
                    store.close()
                self._store = None

    # ------------------------------------------------------------------ seams

    @contextmanager
    def reading(self, *, caught_up: bool = True) -> Iterator[Store]:
        """The store under its lock, with every event the log holds applied (a read-only
        store first picks up what the writer appended); without ``caught_up``, as it is."""
        store = self.store
        with store.lock:
            if caught_up and store.follows:  # a reader, or one of many writers: the others'
                store.catch_up()
            yield store

    def transaction(self) -> Transaction:
        """A batch of events appended as one write when its ``with`` block ends without an
        error (nothing is appended if it raises). Holds the store's lock throughout."""
        return Transaction(self.store, self.namespace, self.clock, self.embedder)

    def embed_facts(self, pairs: list[tuple[str, str]]) -> np.ndarray | None:
        """Vectors of (subject, text) pairs with the configured embedder, as the store embeds
        facts (the subject leads a text that lacks its words); None without an embedder."""
        embedder = self.embedder
        if embedder is None or not pairs:
            return None
        self.check_embedder_dims()
        return embed_pairs(embedder, pairs)

    def check_embedder_dims(self) -> None:
        """Raise :class:`~hmem.errors.EmbedderError` if the embedder's vectors would not fit
        this namespace's earlier vectors of its model."""
        embedder = self.embedder
        if embedder is not None:
            with self.reading() as store:
                check_dims(store, self.namespace, embedder)

    def embedding_worker(self) -> EmbedWorker | None:
        """The store's background embedding worker for this Memory (see
        :mod:`hmem.embedding.facts`), started on first use; None in inline mode, without an
        embedder and on a read-only store."""
        if self._worker is not None or self.embed_mode != "background":
            return self._worker
        store = self.store
        embedder = None if store.read_only else self.embedder
        if embedder is not None:
            self._worker = worker_for(
                store, self.namespace, embedder, self.clock, self.source_agent
            )
        return self._worker

    # ------------------------------------------------------------------ maintenance

    def rebuild(self, progress: Progress | None = None) -> int:
        """Drop the projection and replay the whole log; returns the number of events replayed."""
        with self.store.lock:
            return self.store.rebuild(progress)

    def verify(self) -> ProjectionDiff:
        """Replay the log into a fresh database and compare it with the live projection.

        On a writer this checks the projection file that was updated incrementally (and across
        reopens); on a read-only Memory, the in-memory projection that followed the log. On a
        store on PostgreSQL, the server's tables are compared with the projection too."""
        with self.reading() as store:
            return store.verify()


def _recall_logging(asked: bool | None, read_only: bool) -> bool:
    """Whether recalls are logged: as asked, else ``$HMEM_LOG_RECALLS`` (1/true/yes/on) for a
    writer. Only the writer can log: asking a reader to is an error."""
    if asked is None:
        flag = os.environ.get("HMEM_LOG_RECALLS", "").strip().lower()
        return flag in ("1", "true", "yes", "on") and not read_only
    if not isinstance(asked, bool):
        raise InvalidInput(f"log_recalls must be True or False, not {asked!r}")
    if asked and read_only:
        raise InvalidInput(
            "log_recalls needs the store's writer: a read-only Memory cannot append the recall "
            "events; open the store without read_only, or log recalls where the agent writes"
        )
    return asked
