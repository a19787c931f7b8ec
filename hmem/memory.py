"""The ``Memory`` facade: the library API over one store and one namespace."""

from __future__ import annotations

from hmem.handle import TxPoint
from hmem.lifecycle import LifecycleMethods
from hmem.reads import ReadMethods
from hmem.storage.transaction import Clock, utc_now
from hmem.writes import WriteMethods

__all__ = ["Memory", "Clock", "TxPoint", "utc_now"]


class Memory(WriteMethods, ReadMethods, LifecycleMethods):
    """What an agent believes, in one namespace of a store, with full history.

    ``Memory(path)`` opens (or creates) the store at ``path`` as its single writer;
    ``Memory()`` uses ``$HMEM_HOME`` or the XDG data dir. ``read_only=True`` never writes, never
    takes the writer lock and works beside a live writer in another process: every read first
    picks up what the writer has appended. ``Memory(store=...)`` works over a
    :class:`~hmem.storage.store.Store` the caller opened (and closes).

    With an embedder, ``embed_mode="background"`` (the default) makes ``remember``,
    ``remember_many`` and ``revise`` return after the log write; a worker thread embeds the
    facts in batches and records their vectors (recall finds a fact by its words meanwhile).
    ``flush()`` waits for it, ``close()`` too; a crash loses only pending embeddings, which
    the next open redoes. ``embed_mode="inline"`` embeds before each write instead.

    Writes (:mod:`hmem.writes`): ``remember``, ``remember_many``, ``revise``, ``forget``,
    ``record_embedding``, ``reembed``, ``add``, ``extract``. Reads (:mod:`hmem.reads`):
    ``recall``, ``get``, ``why``, ``history``, ``episodes``, ``as_of``, ``snapshot``, ``diff``,
    ``stats``, ``sql``, ``events``. Lifecycle (:mod:`hmem.lifecycle`): ``consolidate``.
    Seams (:mod:`hmem.handle`): ``transaction``, ``reading``, ``embed_facts``,
    ``embedding_worker``, ``in_namespace``, ``rebuild``, ``verify``, ``flush``, ``sync``,
    ``close``.

    Time-travel arguments are keyword-only: ``as_of`` is a transaction time (what we believed
    then; a datetime, ISO string or seq) and ``valid_at`` a world time (what was true then).

    Writes return a :class:`~hmem.views.Written`: the id (an int) and whether it was stored
    now, a repeat or a retry. Every process opens from the store's checkpoint and folds the
    log after it; a writer publishes one every ``checkpoint_every`` events (or 1% of the log,
    spending at most a tenth of its time publishing) and at close (unless what it would publish
    is under 1/256 of the log: the next open folds that tail). ``flush_every`` is accepted
    and no longer used. A process loads a namespace's state when it first uses it;
    ``memory_mb`` bounds what the loaded namespaces take (the least recently used are dropped,
    and loaded again when next used; default: no bound).
    """

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
