"""Background embedding (embed_mode="background"): writes return after the log write, a worker
embeds in batches, flush/close wait, failures surface, a crash's pending embeddings are redone.

No test sleeps to wait for something: a gated embedder holds the worker until the test lets it
go, so "remember returned before the embedder ran" is a fact, not a race."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from eventlog.events import EmbeddingRecorded, FactRemembered, FactRevised
from hmem import Memory
from hmem.adapters.cli import main
from hmem.embedders import HashEmbedder
from hmem.errors import EmbedderError, EmbeddingFailed, InvalidInput

REPO = Path(__file__).resolve().parents[2]


class Gated:
    """HashEmbedder behind a gate for the worker thread (the test's own calls, e.g. a recall's
    query, pass). Records each worker batch's size; ``broken`` makes worker calls fail."""

    def __init__(self, dims: int = 16) -> None:
        self.inner = HashEmbedder(dims)
        self.model, self.dims = self.inner.model, self.inner.dims
        self.caller = threading.current_thread()
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.batches: list[int] = []
        self.broken = False

    def embed(self, texts):
        if threading.current_thread() is not self.caller:
            self.entered.set()
            assert self.gate.wait(timeout=60), "the test never opened the gate"
            if self.broken:
                raise RuntimeError("model server is down")
            self.batches.append(len(texts))
        return self.inner.embed(texts)


def vectors_by_fact(m: Memory) -> Counter[int]:
    return Counter(e.fact_id for e in m.store.log.read() if isinstance(e, EmbeddingRecorded))


def fact_ids(m: Memory) -> list[int]:
    return [e.seq for e in m.store.log.read() if isinstance(e, (FactRemembered, FactRevised))]


def test_remember_returns_before_the_embedder_runs_and_flush_records_one_vector_each(tmp_path):
    emb = Gated()
    with Memory(tmp_path / "s", embedder=emb) as m:
        ids = [m.remember("maya", f"Maya plays game {i}") for i in range(3)]
        ids += m.remember_many([{"subject": "tom", "text": f"Tom reads book {i}"}
                                for i in range(2)])
        ids.append(m.revise(ids[0], "Maya plays chess"))
        assert not emb.gate.is_set()  # every write returned with the embedder held
        assert vectors_by_fact(m) == Counter()
        assert m.stats().embedding_backlog == 6 and m.stats().vectors == 0
        emb.gate.set()
        m.flush()
        assert m.stats().embedding_backlog == 0
        assert vectors_by_fact(m) == Counter(ids)  # exactly one vector per fact
        events = list(m.store.log.read())
        order = [e.fact_id for e in events if isinstance(e, EmbeddingRecorded)]
        assert order == sorted(ids)  # in seq order, each after its fact
        assert all(e.seq > e.fact_id for e in events if isinstance(e, EmbeddingRecorded))
        assert m.verify().ok


def test_the_worker_takes_what_is_queued_up_to_64_at_a_time(tmp_path):
    emb = Gated()
    with Memory(tmp_path / "s", embedder=emb) as m:
        m.remember("maya", "Maya likes tea")
        assert emb.entered.wait(timeout=60)  # the worker holds a batch of one
        for i in range(9):
            m.remember("maya", f"Maya likes tea number {i}")
        m.remember_many([{"subject": "tom", "text": f"Tom fact {i}"} for i in range(140)])
        emb.gate.set()
        m.flush()
        assert emb.batches == [1, 64, 64, 21]
        assert m.stats().vectors == 150


def test_a_fact_not_yet_embedded_is_found_by_its_words(tmp_path):
    emb = Gated()
    with Memory(tmp_path / "s", embedder=emb) as m:
        m.remember("maya", "Maya lives in London")
        emb.gate.set()
        m.flush()
        emb.gate.clear()
        cello = m.remember("maya", "Maya plays the cello")
        hits = m.recall("cello", explain=True)
        assert hits[0].id == cello and hits[0].explain["bm25"] > 0
        assert m.stats().embedding_backlog == 1
        hits = m.recall("where does maya live", explain=True)  # hybrid, one fact without vector
        assert {h.id for h in hits} >= {1}
        emb.gate.set()
        m.flush()
        assert m.recall("cello", explain=True)[0].explain["dense"] > 0


def test_facts_revised_or_forgotten_before_their_embedding_keep_it(tmp_path):
    emb = Gated()
    with Memory(tmp_path / "s", embedder=emb) as m:
        a = m.remember("maya", "Maya lives in London")
        b = m.revise(a, "Maya lives in Paris")
        m.forget(b)
        c = m.remember("tom", "Tom lives in Rome")
        emb.gate.set()
        m.flush()
        assert vectors_by_fact(m) == Counter([a, b, c])
        assert [h.id for h in m.recall("lives")] == [c]
        assert m.verify().ok
    with Memory(tmp_path / "s", embedder=HashEmbedder(16)) as m:
        assert m.verify().ok and m.stats().vectors == 3


def test_an_embedder_failure_surfaces_from_flush_and_the_facts_stay_pending(tmp_path):
    emb = Gated()
    emb.broken = True
    emb.gate.set()
    with Memory(tmp_path / "s", embedder=emb) as m:
        a = m.remember("maya", "Maya likes tea")
        b = m.remember("maya", "Maya likes jazz")
        with pytest.raises(EmbeddingFailed, match="model server is down") as caught:
            m.flush()
        assert isinstance(caught.value, EmbedderError)
        assert set(caught.value.fact_ids) <= {a, b} and a in caught.value.fact_ids
        assert "flush() retries" in str(caught.value)
        assert m.stats().vectors == 0
        assert m.recall("jazz")[0].id == b  # stored, and found by its words
        emb.broken = False
        m.flush()  # retried
        assert vectors_by_fact(m) == Counter([a, b])
        assert m.stats().embedding_error is None
        assert m.verify().ok


def test_stats_names_a_failure_until_flush_raises_it(tmp_path):
    emb = Gated()
    emb.broken = True
    with Memory(tmp_path / "s", embedder=emb) as m:
        m.remember("maya", "Maya likes tea")
        worker = m.embedding_worker()
        assert worker is not None
        emb.gate.set()
        assert worker.wait_idle(timeout=60)  # paused by the failure
        stats = m.stats()
        assert stats.embedding_backlog == 1 and "model server is down" in stats.embedding_error
        with pytest.raises(EmbeddingFailed):
            m.flush()
        emb.broken = False
        m.flush()


def test_close_raises_a_failure_and_the_next_open_redoes_the_tail(tmp_path):
    path = tmp_path / "s"
    emb = Gated()
    emb.gate.set()
    m = Memory(path, embedder=emb)
    first = m.remember("maya", "Maya likes tea")
    m.flush()
    emb.broken = True
    rest = [m.remember("maya", f"Maya likes thing {i}") for i in range(3)]
    with pytest.raises(EmbeddingFailed):
        m.close()
    with pytest.raises(Exception, match="closed"):
        m.remember("maya", "after close")
    with Memory(path, embedder=HashEmbedder(16)) as m2:  # the writer lock was released
        assert m2.stats().vectors == 1
        m2.flush()  # a reopen queues the facts after the newest embedded one
        assert vectors_by_fact(m2) == Counter([first, *rest])
        assert m2.verify().ok


def test_close_waits_for_the_queue(tmp_path):
    emb = Gated()
    m = Memory(tmp_path / "s", embedder=emb)
    ids = [m.remember("maya", f"Maya fact {i}") for i in range(5)]
    worker = m.embedding_worker()
    assert worker is not None
    closer = threading.Thread(target=m.close)
    closer.start()
    assert emb.entered.wait(timeout=60)
    assert closer.is_alive()  # it cannot finish while the embedder is held
    emb.gate.set()
    closer.join(timeout=60)
    assert not closer.is_alive() and not worker.running
    with Memory(tmp_path / "s", read_only=True, embedder=None) as r:
        assert vectors_by_fact(r) == Counter(ids)


def test_in_namespace_views_share_the_worker_and_the_owner_drains_them(tmp_path):
    emb = Gated()
    m = Memory(tmp_path / "s", embedder=emb)
    work = m.in_namespace("work")
    again = m.in_namespace("work")
    assert work.embed_mode == "background"
    assert m.in_namespace("x", embed_mode="inline").embed_mode == "inline"
    a = m.remember("maya", "Maya likes tea")
    b = work.remember("tom", "Tom fixes the build")
    c = again.remember("tom", "Tom reviews the patch")
    assert work.embedding_worker() is again.embedding_worker() is not m.embedding_worker()
    assert work.stats().embedding_backlog == 2 and m.stats().embedding_backlog == 1
    workers = [m.embedding_worker(), work.embedding_worker()]
    emb.gate.set()
    m.close()  # the owner finishes every view's embeddings before the store closes
    assert all(w is not None and not w.running for w in workers)
    with Memory(tmp_path / "s", read_only=True, embedder=None) as r:
        assert vectors_by_fact(r) == Counter([a, b, c])
        assert r.in_namespace("work").stats().vectors == 2


def test_flush_on_the_store_waits_for_every_views_queue_and_raises_its_failure(tmp_path):
    emb = Gated()
    emb.broken = True
    emb.gate.set()
    with Memory(tmp_path / "s", embedder=emb) as m:
        work = m.in_namespace("work")
        ids = [work.remember("tom", f"Tom fixes bug {i}") for i in range(150)]
        worker = work.embedding_worker()
        assert worker is not None and worker.wait_idle(timeout=60)  # paused by the failure
        assert work.stats().embedding_backlog == 150
        with pytest.raises(EmbeddingFailed, match="'work'"):
            m.flush()  # the view's failure is the store's: not "nothing pending"
        emb.broken = False
        m.flush()  # retries the view's queue and waits for all of it
        assert work.stats().embedding_backlog == 0 and work.stats().vectors == 150
        assert vectors_by_fact(m) == Counter(ids)


def test_flush_on_the_store_returns_only_when_every_view_has_its_vectors(tmp_path):
    emb = Gated()
    with Memory(tmp_path / "s", embedder=emb) as m:
        views = [m.in_namespace("a"), m.in_namespace("b", source_agent="other")]
        ids = [v.remember_many([{"subject": "s", "text": f"view {k} fact {i}"}
                                for i in range(200)]) for k, v in enumerate(views)]
        assert emb.entered.wait(timeout=60)  # a worker holds its first batch
        emb.gate.set()
        m.flush()  # the store's handle: its own queue (empty) and both views' (four batches)
        assert [v.stats().embedding_backlog for v in views] == [0, 0]
        assert vectors_by_fact(m) == Counter(i for group in ids for i in group)


def test_flush_on_a_view_waits_for_its_namespace_and_not_for_others(tmp_path):
    held, broken = Gated(), Gated()
    broken.broken = True
    broken.gate.set()
    with Memory(tmp_path / "s", embedder=HashEmbedder(16)) as m:
        other = m.in_namespace("other", embedder=held)
        other.remember("tom", "Tom fixes the build")
        work = m.in_namespace("work")
        again = m.in_namespace("work", embedder=broken)  # another worker of "work"
        a = work.remember("maya", "Maya likes tea")
        b = again.remember("maya", "Maya likes jazz")
        worker = again.embedding_worker()
        assert worker is not None and worker is not work.embedding_worker()
        assert worker.wait_idle(timeout=60)  # paused by the failure
        with pytest.raises(EmbeddingFailed, match="model server is down"):
            work.flush()  # a fact of its namespace is pending, whichever view wrote it
        broken.broken = False
        work.flush()  # both workers of "work"; "other" is still held by its embedder
        assert work.stats().embedding_backlog == 0 and vectors_by_fact(m) == Counter([a, b])
        assert other.stats().embedding_backlog == 1
        held.gate.set()


def test_a_reader_sees_the_vectors_after_the_writer_flushes(tmp_path):
    path = tmp_path / "s"
    with Memory(path, embedder=HashEmbedder(16)) as w:
        w.remember("maya", "Maya lives in London")
        w.flush()
        with Memory(path, read_only=True, embedder=HashEmbedder(16)) as r:
            assert r.embedding_worker() is None
            r.flush()  # nothing to wait for on a reader
            ids = [w.remember("maya", f"Maya visited city {i}") for i in range(4)]
            w.flush()
            assert r.stats().vectors == 5
            hit = r.recall("city 3", explain=True)[0]
            assert hit.id == ids[3] and hit.explain["dense"] > 0


def test_no_worker_without_an_embedder_in_inline_mode_or_on_a_reader(tmp_path):
    path = tmp_path / "s"
    with Memory(path, embedder=None) as m:
        m.remember("maya", "Maya likes tea")
        assert m.embedding_worker() is None and m.stats().embedding_backlog == 0
    with Memory(path, embedder=HashEmbedder(16), embed_mode="inline") as m:
        a = m.remember("maya", "Maya likes jazz")
        assert m.embedding_worker() is None
        assert vectors_by_fact(m) == Counter([a])  # inline: the vector came with the fact
        assert list(m.store.log.read())[-1].seq == a + 1
    with Memory(path, read_only=True, embedder=HashEmbedder(16)) as m:
        assert m.embedding_worker() is None


def test_embed_mode_is_checked_before_anything_is_created(tmp_path):
    with pytest.raises(InvalidInput, match="'background'.*'inline'"):
        Memory(tmp_path / "s", embed_mode="later")  # type: ignore[arg-type]
    assert not (tmp_path / "s").exists()


def test_a_store_never_embedded_with_the_model_is_left_to_reembed(tmp_path):
    path = tmp_path / "s"
    with Memory(path, embedder=None) as m:
        m.remember_many([{"subject": "maya", "text": f"Maya fact {i}"} for i in range(3)])
    with Memory(path, embedder=HashEmbedder(16)) as m:
        m.flush()
        assert m.stats().vectors == 0  # not this open's job
        assert m.reembed() == 3
        m.flush()
        assert m.stats().vectors == 3


def test_many_writer_threads_each_fact_gets_one_vector(tmp_path):
    with Memory(tmp_path / "s", embedder=HashEmbedder(16)) as m:
        views = [m, m.in_namespace("a"), m.in_namespace("b")]
        ids: list[list[int]] = [[] for _ in views]

        def write(k: int) -> None:
            for i in range(40):
                ids[k].append(views[k].remember("s", f"writer {k} fact {i}"))
                if i % 10 == 0:
                    views[k].recall(f"fact {i}")

        threads = [threading.Thread(target=write, args=(k,)) for k in range(len(views))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        for v in views:
            v.flush()
        assert vectors_by_fact(m) == Counter(i for group in ids for i in group)
        assert m.verify().ok


def test_cli_writes_are_embedded_before_the_command_exits(tmp_path, capsys):
    path = str(tmp_path / "s")
    assert main(["--path", path, "--embedder", "hash-16", "remember", "maya",
                 "Maya likes tea"]) == 0
    with Memory(path, read_only=True, embedder=None) as r:
        assert r.stats().vectors == 1


CRASHING_WRITER = textwrap.dedent("""
    import os, signal, sys, threading
    from hmem import Memory
    from hmem.embedders import HashEmbedder

    class Stuck(HashEmbedder):
        calls = 0
        def embed(self, texts):
            Stuck.calls += 1
            if Stuck.calls > 1:  # the first batch goes through, then the model hangs
                threading.Event().wait()
            return super().embed(texts)

    m = Memory(sys.argv[1], embedder=Stuck(16))
    m.remember("maya", "Maya likes tea")
    m.flush()
    ids = [m.remember("maya", f"Maya likes thing {i}") for i in range(5)]
    ids += m.remember_many([{"subject": "tom", "text": f"Tom fact {i}"} for i in range(3)])
    print(" ".join(map(str, ids)), flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # a crash: no close, no flush
""")


def test_a_crash_loses_only_pending_embeddings_and_the_reopen_redoes_them(tmp_path):
    path = tmp_path / "s"
    run = subprocess.run([sys.executable, "-c", CRASHING_WRITER, str(path)], cwd=REPO,
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == -9, run.stderr
    crashed = [int(x) for x in run.stdout.split()]
    assert len(crashed) == 8
    with Memory(path, embedder=HashEmbedder(16)) as m:
        facts = fact_ids(m)
        assert set(crashed) < set(facts)  # no fact was lost
        assert vectors_by_fact(m) == Counter([facts[0]])
        m.flush()
        assert vectors_by_fact(m) == Counter(facts)  # exactly one each
        assert m.verify().ok
        last = m.last_seq
    with Memory(path, embedder=HashEmbedder(16)) as m:
        m.flush()
        assert m.last_seq == last  # nothing left to redo: no second vector
        vec = m.store.projector.space(m.namespace).state.vectors[-1]
        assert np.frombuffer(vec.vector, "<f4").shape == (16,)


def test_the_worker_thread_runs_only_while_there_is_work():
    from hmem.embedding.worker import EmbedWorker

    got: list[int] = []
    worker = EmbedWorker(
        "unit", lambda pairs: np.zeros((len(pairs), 2), "<f4"),
        lambda facts, vectors: got.extend(fid for fid, _, _ in facts), idle=0.0,
    )
    assert not worker.running  # nothing queued, no thread
    worker.put([(1, "s", "one")])
    worker.flush()
    for t in threading.enumerate():  # idle=0: the thread ends once the queue is empty
        if t.name == "hmem-embed-unit":
            t.join(timeout=60)
    assert not worker.running
    worker.put([(2, "s", "two"), (3, "s", "three")])  # a new thread takes it
    worker.flush()
    assert got == [1, 2, 3]
    worker.close()
    worker.put([(4, "s", "four")])  # after close: kept queued (a reopen redoes it), not run
    worker.flush()
    assert worker.backlog == 1 and not worker.running and got == [1, 2, 3]
