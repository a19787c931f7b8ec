"""Background embedding: a worker thread that embeds queued facts in batches and records them.

A Memory in ``embed_mode="background"`` appends its facts and returns; their embeddings are
queued here. The worker takes up to ``batch_size`` queued facts at a time (whatever is queued),
runs the embedder on them *without* the store's lock, then appends one ``EmbeddingRecorded``
per fact through the Memory's transaction (which holds the lock only for the write).

Facts are embedded in queue order and none is ever skipped: when the embedder (or the write)
fails, the worker records the error, keeps the batch and everything after it queued, and
pauses. The next :meth:`EmbedWorker.flush` raises that error (an
:class:`~hmem.errors.EmbeddingFailed`); a flush after it, or more work queued, retries. So at
any moment the facts without a vector
are the newest ones (the tail after the newest embedded fact), which is what a reopen redoes
after a crash or a close that could not finish (:func:`unembedded_tail`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from hmem.errors import EmbeddingFailed, HmemError
from projections.fold_state import FactColumns

__all__ = ["EmbedWorker", "Pending", "unembedded_tail"]

Pending = tuple[int, str, str]  # (fact id, subject, text): a fact waiting for its vector
Embed = Callable[[list[tuple[str, str]]], np.ndarray]
Record = Callable[[Sequence[Pending], np.ndarray], None]


def unembedded_tail(state: FactColumns, namespace: str, model: str) -> list[Pending]:
    """The facts of ``namespace`` (oldest first) that a background worker had not reached:
    no vector of ``model`` and created after the newest fact that has one. Empty when the
    namespace has no vector of ``model`` at all (embedding a whole store is ``reembed``'s job,
    never an open's)."""
    have = {v.fact_id for v in state.vectors if v.namespace == namespace and v.model == model}
    if not have:
        return []
    ids = state.ids_in(namespace)  # ascending
    tail = (state.fact(fid) for fid in ids[ids > max(have)].tolist())
    return [(f.id, f.subject, f.text) for f in tail if f.text]  # an erased text is empty


class EmbedWorker:
    """Embeds queued facts of one namespace on a thread: ``put`` queues, ``flush`` waits.

    ``embed`` maps (subject, text) pairs to vectors; ``record`` appends the vectors of a batch
    (see :func:`hmem.embedding.facts.worker_for`). Both run on the worker's thread, never under
    the caller's locks. The thread runs only while there is work: it starts on ``put`` and
    ends after ``idle`` seconds with nothing queued (or when a failure pauses it), so idle
    namespaces cost no thread. It is a daemon: a process that exits without ``close`` loses
    only pending embeddings, which the next open redoes."""

    def __init__(
        self, namespace: str, embed: Embed, record: Record, *, batch_size: int = 64,
        idle: float = 2.0, key: object = None,
    ) -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be at least 1")
        self.namespace = namespace
        self.key = key  # what the Memories that share this worker have in common
        self.batch_size = batch_size
        self.idle = idle
        self._embed = embed
        self._record = record
        self._cond = threading.Condition()
        self._queue: list[Pending] = []  # the head is the batch in progress
        self._error: EmbeddingFailed | None = None
        self._paused = False  # by a failure: nothing is embedded until a flush or a put
        self._closed = False
        self._thread: threading.Thread | None = None  # while it runs

    @property
    def backlog(self) -> int:
        """Facts queued and not yet embedded and recorded (the batch in progress included)."""
        with self._cond:
            return len(self._queue)

    @property
    def error(self) -> EmbeddingFailed | None:
        """The failure the next :meth:`flush` raises, if any (the facts stay queued)."""
        with self._cond:
            return self._error

    @property
    def running(self) -> bool:
        """Whether the worker's thread is running."""
        with self._cond:
            return self._thread is not None

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait, without raising, until the queue is empty or a failure paused the worker;
        False if ``timeout`` (seconds) passed first."""
        with self._cond:
            return self._cond.wait_for(
                lambda: not self._queue or self._paused or self._thread is None, timeout
            )

    def put(self, items: Iterable[Pending]) -> None:
        """Queue facts to embed (in order); a worker paused by a failure retries its queue.
        After :meth:`close` the facts stay queued (the next open of the store redoes them)."""
        items = list(items)
        if not items:
            return
        with self._cond:
            self._queue.extend(items)
            self._paused = False
            self._wake()

    def flush(self) -> None:
        """Wait until every queued fact is embedded and recorded.

        Raises :class:`~hmem.errors.EmbeddingFailed` if the worker failed since the last
        flush (before or during the wait); the facts stay queued. A flush after that retries
        them (so does queueing more)."""
        with self._cond:
            if self._error is None:
                self._paused = False  # retry what a failure (already raised) left queued
                self._wake()
            while True:
                if self._error is not None:
                    error, self._error = self._error, None
                    raise error
                if not self._queue or self._thread is None:
                    return
                self._cond.wait()

    def close(self) -> None:
        """Flush (a failure already raised is retried once more), then stop. Raises what
        :meth:`flush` raises; the worker stops either way (facts still queued are redone when
        the store is next opened)."""
        try:
            self.flush()
        finally:
            with self._cond:
                self._closed = True
                self._paused = True  # a failed batch is not retried on the way out
                thread = self._thread
                self._cond.notify_all()
            if thread is not None:
                thread.join()

    # ------------------------------------------------------------------ the thread

    def _wake(self) -> None:
        """Start the thread if there is work and none runs (called holding the condition)."""
        self._cond.notify_all()
        if self._thread is None and self._queue and not self._paused and not self._closed:
            self._thread = threading.Thread(
                target=self._run, name=f"hmem-embed-{self.namespace}", daemon=True
            )
            self._thread.start()

    def _next_batch(self) -> list[Pending] | None:
        with self._cond:
            if not self._queue and not self._paused and not self._closed:
                self._cond.wait_for(lambda: self._queue or self._paused or self._closed,
                                    self.idle)
            if not self._queue or self._paused or self._closed:
                self._thread = None  # the thread ends; put() or flush() starts another
                self._cond.notify_all()
                return None
            return self._queue[: self.batch_size]

    def _run(self) -> None:
        try:
            while (batch := self._next_batch()) is not None:
                try:
                    self._record(batch, self._embed([(s, t) for _, s, t in batch]))
                except Exception as e:  # kept for flush(): never lost, never fatal
                    self._failed(batch, e)
                    continue
                with self._cond:
                    del self._queue[: len(batch)]
                    self._cond.notify_all()
        finally:  # however the thread ends, a waiting flush() is not left waiting
            with self._cond:
                if self._thread is threading.current_thread():
                    self._thread = None
                    self._cond.notify_all()

    def _failed(self, batch: list[Pending], e: Exception) -> None:
        with self._cond:
            self._paused = True
            if self._error is None:  # the first failure since the last flush is the one shown
                cause = str(e) if isinstance(e, HmemError) else f"{type(e).__name__}: {e}"
                error = EmbeddingFailed(
                    f"embedding {len(self._queue)} queued fact(s) of namespace "
                    f"{self.namespace!r} failed (from fact {batch[0][0]}): {cause}. The facts "
                    f"are stored and found by text search; flush() retries their embeddings, a "
                    f"reopen redoes any left, `hmem reembed` embeds any fact without a vector",
                    fact_ids=tuple(fid for fid, _, _ in self._queue),
                )
                error.__cause__ = e
                self._error = error
            self._cond.notify_all()
