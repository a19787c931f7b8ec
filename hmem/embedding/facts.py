"""The background embedding workers of a store: which one a Memory uses, and what it runs.

A worker (:class:`~hmem.embedding.worker.EmbedWorker`) belongs to the store, not to one Memory:
every Memory over the store with the same namespace, embedder, clock and source agent (an
``in_namespace`` view made twice, say) shares it, so views cost no thread each. Workers live
until the store closes (:meth:`~hmem.storage.store.Store.close_embed_workers`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from hmem.embedders import Embedder, check_output
from hmem.embedders.base import embed_behind
from hmem.embedding.worker import EmbedWorker, Pending, unembedded_tail
from hmem.errors import EmbedderError
from hmem.storage.store import Store
from hmem.storage.transaction import Clock, Transaction
from projections.projector import index_text

__all__ = ["check_dims", "embed_pairs", "worker_for"]


def check_dims(store: Store, namespace: str, embedder: Embedder) -> None:
    """Raise :class:`~hmem.errors.EmbedderError` if ``embedder``'s vectors would not fit the
    namespace's earlier vectors of its model."""
    with store.lock:
        stored = store.projector.space(namespace).state.vector_dims.get(
            (namespace, embedder.model))
    if stored is not None and stored != embedder.dims:
        raise EmbedderError(
            f"this namespace's vectors of {embedder.model!r} have {stored} dims but the "
            f"embedder makes {embedder.dims}; restore its settings (e.g. HMEM_EMBED_DIMS) "
            f"or use another model name and re-embed with `hmem reembed`"
        )


def embed_pairs(
    embedder: Embedder, pairs: Sequence[tuple[str, str]], *, behind: bool = False
) -> np.ndarray:
    """Vectors of (subject, text) pairs as the store embeds facts (the subject leads a text
    that lacks its words); ``behind``: for the background worker (see
    :func:`~hmem.embedders.base.embed_behind`)."""
    texts = [index_text(subject, text) for subject, text in pairs]
    vectors = embed_behind(embedder, texts) if behind else embedder.embed(texts)
    return check_output(embedder, texts, vectors)


def worker_for(
    store: Store, namespace: str, embedder: Embedder, clock: Clock, source_agent: str | None
) -> EmbedWorker:
    """The store's worker for these settings, started if there is none yet. Starting the first
    worker of a (namespace, model) queues what a crash or an unfinished close left unembedded
    (:func:`~hmem.embedding.worker.unembedded_tail`)."""
    key = (namespace, embedder, clock, source_agent)
    with store.lock:  # the tail is read, and the worker registered, with the log still
        for worker in store.embed_workers:
            if worker.key == key:
                return worker

        def embed(pairs: list[tuple[str, str]]) -> np.ndarray:
            check_dims(store, namespace, embedder)
            return embed_pairs(embedder, pairs, behind=True)

        def record(facts: Sequence[Pending], vectors: np.ndarray) -> None:
            with Transaction(store, namespace, clock, embedder) as txn:
                for (fid, _, _), vector in zip(facts, vectors, strict=True):
                    if not store.shredding.is_erased(fid):  # erased since it was queued: no vector
                        txn.append(txn.vector(vector, fid, source_agent=source_agent))

        worker = EmbedWorker(namespace, embed, record, key=key)
        tail = (namespace, embedder.model)
        if tail not in store.embed_tails:
            store.embed_tails.add(tail)
            worker.put(unembedded_tail(store.projector.space(namespace).state, *tail))
        store.embed_workers.append(worker)
        return worker
