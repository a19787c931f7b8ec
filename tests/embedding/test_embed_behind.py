"""The background worker embeds through an embedder's ``embed_behind`` when it has one (the local
model's: every core but one, so that queries keep a core), and those are the vectors ``embed``
makes; calls that wait for their vectors use ``embed``."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import numpy as np

from hmem import Memory
from hmem.embedders import HashEmbedder
from tests.embedding.test_embedder_local import needs_local


class Behind(HashEmbedder):
    """A hash embedder that counts which method each call used."""

    def __init__(self) -> None:
        super().__init__(dims=16)
        self.calls: list[str] = []
        self.lock = threading.Lock()

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        with self.lock:
            self.calls.append("embed")
        return super().embed(texts)

    def embed_behind(self, texts: Sequence[str]) -> np.ndarray:
        with self.lock:
            self.calls.append("behind")
        return super().embed(texts)


def test_the_background_worker_embeds_behind_and_inline_writes_do_not(tmp_path):
    embedder = Behind()
    with Memory(tmp_path / "bg", embedder=embedder) as m:
        m.remember_many([{"subject": "maya", "text": f"fact number {i}"} for i in range(5)])
        m.flush()
        assert set(embedder.calls) == {"behind"}
        assert m.recall("fact number 3", limit=1).hits  # the query: embed, not behind
        assert embedder.calls[-1] == "embed"
    embedder.calls.clear()
    with Memory(tmp_path / "inline", embedder=embedder, embed_mode="inline") as m:
        m.remember("maya", "Maya lives in Paris")
        assert embedder.calls == ["embed"]


@needs_local
def test_the_local_model_makes_the_same_vectors_behind(tmp_path):
    from hmem.embedders.local import LocalEmbedder

    texts = [f"turn {i}: " + "we talked about the trip to Lisbon and the museum " * (i % 7 + 1)
             for i in range(40)]  # several batches of different lengths
    for threads in (1, 2, 3):
        embedder = LocalEmbedder(threads=threads, batch_tokens=256)
        np.testing.assert_allclose(embedder.embed_behind(texts), embedder.embed(texts),
                                   atol=2e-6)


def blas_threads() -> list[int]:
    from threadpoolctl import threadpool_info

    return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]


@needs_local
def test_overlapping_calls_hold_one_blas_thread_until_the_last_one_ends():
    from hmem.embedders.blas import one_blas_thread

    before = blas_threads()
    with one_blas_thread() as first:
        assert first and set(blas_threads()) == {1}
        second = one_blas_thread()
        second.__enter__()
        assert set(blas_threads()) == {1}
    assert set(blas_threads()) == {1}  # the first ended: the second still holds the limit
    second.__exit__(None, None, None)
    assert blas_threads() == before  # the last one ended: the limits are what they were


TEXTS = [f"turn {i}: " + "we talked about the trip to Lisbon and the museum " * (i % 7 + 1)
         for i in range(24)]


@needs_local
def test_the_local_model_embeds_behind_in_a_child_process_the_same_vectors():
    """The worker's calls run in another process (no turns at the asking process's GIL), and
    make bit for bit the vectors the same call makes in this process."""
    import os

    from hmem.embedders.local import LocalEmbedder

    embedder = LocalEmbedder(threads=2)
    vectors = embedder.embed_behind(TEXTS)
    child = embedder._child
    assert child is not None and child._proc is not None and child._proc.pid != os.getpid()
    here = LocalEmbedder(threads=2, behind="thread").embed_behind(TEXTS)
    assert np.array_equal(vectors, here)
    assert embedder.embed_behind([]).shape == (0, embedder.dims)


@needs_local
def test_a_child_that_died_is_replaced_and_one_that_cannot_start_leaves_embedding_here(
    monkeypatch,
):
    import sys

    from hmem.embedders.local import LocalEmbedder

    embedder = LocalEmbedder(threads=2)
    expected = embedder.embed_behind(TEXTS)
    child = embedder._child
    assert child is not None and child._proc is not None
    first = child._proc
    first.kill()
    first.wait()
    assert np.array_equal(embedder.embed_behind(TEXTS), expected)  # the call went to a new one
    assert child._proc is not None and child._proc.pid != first.pid

    other = LocalEmbedder(threads=2)
    monkeypatch.setattr(sys, "executable", "/nonexistent/python")
    assert np.array_equal(other.embed_behind(TEXTS), expected)  # embedded here instead
    assert other._child is not None and not other._child.usable


@needs_local
def test_the_child_ends_with_its_embedder():
    import gc

    from hmem.embedders.local import LocalEmbedder

    embedder = LocalEmbedder(threads=2)
    embedder.embed_behind(TEXTS[:2])
    child = embedder._child
    assert child is not None and child._proc is not None
    proc = child._proc
    del embedder, child
    gc.collect()
    assert proc.wait(timeout=30) == 0  # its stdin closed: it returned
