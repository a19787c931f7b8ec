"""The workload of ``bench.recall_speed`` (and of ``bench.scale``'s recall part): facts, random
unit vectors, and one namespace of N facts built through ``Memory`` or at the index layer.

Texts: ``bench.synthetic.TextGen`` sentences (60-120 chars, a few hundred subjects, Zipf-like
words), 1, 2 or 4 per fact, all current (no revisions), ``source_ref`` grouping them into
20-turn sessions (so the neighbouring-turn weights of the default ``RecallConfig`` do their
work), ``valid_from`` spread over 2024.

Dense vectors are random unit vectors of dimension 384 (MiniLM's), not model outputs: embedding
1M texts with MiniLM on 2 cores would take hours, and the cost of the dense scan depends on the
matrix size (rows x dims x 4 bytes read per query), not on the values. :func:`build_memory`
records them as ``EmbeddingRecorded`` events by ``Memory.remember_many`` with an embedder stub
that hands out the precomputed rows (fsync=never, no DuckDB flush until close), so
replay-built indexes see them exactly as real vectors. :func:`build_index_only` makes the same
``Fact`` structs, ``NamespaceIndex.add`` and ``NamespaceIndex.set_vector`` calls the projector
makes, without the event log and DuckDB.
"""

from __future__ import annotations

import gc
import random
import time
from collections.abc import Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from bench.synthetic import TextGen
from hmem.memory import Memory
from hmem.recall.subjects import query_as_embedded
from projections.entities import fact_entities
from projections.projector import index_counts
from projections.recall_index import NamespaceIndex
from projections.records import Fact, Row
from projections.string_columns import Strings
from projections.timeutil import to_us

__all__ = [
    "BASE", "DIMS", "MODEL", "NAMESPACE", "IndexOnly", "StubEmbedder", "build_index_only",
    "build_memory", "make_facts", "random_unit", "source_ref", "valid_from",
]

DIMS = 384
MODEL = "random-unit-384"
NAMESPACE = "default"
TURNS_PER_SESSION = 20
BASE = datetime(2024, 1, 1, tzinfo=timezone.utc)
_YEAR_S = 366 * 86_400


def random_unit(rng: np.random.Generator, n: int, dims: int = DIMS) -> np.ndarray:
    """``n`` random unit vectors (float32), generated in blocks to bound temporary memory."""
    out = np.empty((n, dims), dtype=np.float32)
    for start in range(0, n, 65_536):
        block = rng.standard_normal((min(65_536, n - start), dims), dtype=np.float32)
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        out[start : start + len(block)] = block
    return out


def make_facts(gen: TextGen, n: int) -> list[tuple[str, str]]:
    """``n`` (subject, text) pairs of varied length and vocabulary: 1 sentence (70%), 2 (20%)
    or 4 (10%) ``TextGen`` sentences, so 60-480 characters; a third also carry a rare token
    (an order number, a ticket id or a place), giving BM25 a long vocabulary tail."""
    rng = random.Random(gen.rng.random())
    out = []
    for _ in range(n):
        subject = gen.subject()
        k = rng.choices((1, 2, 4), weights=(70, 20, 10))[0]
        text = " ".join(gen.text(subject) for _ in range(k))
        if rng.random() < 0.33:
            text += rng.choice((f" Order #{rng.randrange(10**6)}.",
                                f" Ticket T-{rng.randrange(10**5)}.",
                                f" Code {rng.randrange(36**4):x}."))
        out.append((subject, text))
    return out


def valid_from(i: int, n: int) -> datetime:
    return BASE + timedelta(seconds=int(_YEAR_S * i / max(n, 1)))


def source_ref(i: int) -> str:
    return f"s{i // TURNS_PER_SESSION}:t{i % TURNS_PER_SESSION}"


class StubEmbedder:
    """Hands out precomputed vectors: the next rows of ``docs`` for fact batches, and the
    vector of a known query string for recall. Costs ~1 us, so timings exclude any model."""

    def __init__(self, docs: np.ndarray, queries: dict[str, np.ndarray]) -> None:
        self.model = MODEL
        self.dims = docs.shape[1]
        self._docs = docs
        self._next = 0
        self.queries = queries

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if len(texts) == 1 and texts[0] in self.queries:
            return self.queries[texts[0]][None, :]
        rows = self._docs[self._next : self._next + len(texts)]
        if len(rows) != len(texts):
            raise RuntimeError("StubEmbedder ran out of precomputed document vectors")
        self._next += len(texts)
        return rows


class _Facts(dict[int, Fact]):
    """The facts by id, read one at a time or together (as ``FactsView``)."""

    def many(self, fact_ids: list[int]) -> dict[int, Fact]:
        return {i: self[i] for i in fact_ids if i in self}


class _State:
    def __init__(self, facts: dict[int, Fact]) -> None:
        self.facts = _Facts(facts)
        self.labels = Strings()  # no fact carries a category (none is procedural)

    def term_counts(self, fact_ids: Sequence[int]) -> list[dict[str, int]]:
        """Each fact's BM25 document (what FactColumns reads from its recorded tokens)."""
        return [index_counts(self.facts[i].subject, self.facts[i].text) for i in fact_ids]


class IndexOnly:
    """What ``rank`` reads from a ``Projector``: indexes, space(namespace).state.facts,
    last_seq."""

    def __init__(self, index: NamespaceIndex, facts: dict[int, Fact], last_seq: int) -> None:
        self.indexes = {NAMESPACE: index}
        self.state = _State(facts)
        self.last_seq = last_seq

    def space(self, namespace: str) -> IndexOnly:
        """The one namespace's state (``rank`` reads ``.state`` of it)."""
        return self


# ---------------------------------------------------------------------------------- builds


def build_memory(
    root: Path, facts: list[tuple[str, str]], docs: np.ndarray, queries: dict[str, np.ndarray]
) -> tuple[Memory, dict[str, float]]:
    """A store built through ``Memory.remember_many`` (one FactRemembered + one
    EmbeddingRecorded per fact), fsync=never, DuckDB written only at close."""
    n = len(facts)
    subjects = {s for s, _ in facts}  # hmem leaves their names out of the query it embeds
    as_embedded = {query_as_embedded(q, subjects): v for q, v in queries.items()}
    stub = StubEmbedder(docs, {**as_embedded, **queries})
    clock_t = [BASE + timedelta(days=400)]

    def clock() -> datetime:
        clock_t[0] += timedelta(milliseconds=1)
        return clock_t[0]

    mem = Memory(root, fsync="never", flush_every=10**12, clock=clock, embedder=stub,
                 embed_mode="inline")
    batch = 5_000
    t0 = time.perf_counter()
    for start in range(0, n, batch):
        mem.remember_many(
            [{"subject": s, "text": t, "valid_from": valid_from(start + j, n),
              "source_ref": source_ref(start + j)}
             for j, (s, t) in enumerate(facts[start : start + batch])],
            dedup=False,  # exactly n facts, one per generated text
        )
    t_log = time.perf_counter() - t0
    t0 = time.perf_counter()
    _ = mem.store.projector.indexes  # the recall indexes are built on first use
    t_index = time.perf_counter() - t0
    return mem, {"append_s": t_log, "index_s": t_index}


def build_index_only(
    facts: list[tuple[str, str]], docs: np.ndarray
) -> tuple[IndexOnly, dict[str, float]]:
    """The recall index without log or DuckDB: the Fact structs and the NamespaceIndex calls
    the projector makes for FactRemembered + EmbeddingRecorded."""
    n = len(facts)
    index = NamespaceIndex()
    by_id: dict[int, Fact] = {}
    created = to_us(BASE + timedelta(days=400))
    t0 = time.perf_counter()
    gc_was = gc.isenabled()
    gc.disable()  # as replay does (Projector.apply_all(bulk=True))
    try:
        for i, (subject, text) in enumerate(facts):
            fid = i + 1
            vf = to_us(valid_from(i, n))
            counts = index_counts(subject, text)
            fact = Fact(
                id=fid, namespace=NAMESPACE, subject=subject, text=text, confidence=1.0,
                source_agent=None, source_ref=source_ref(i),
                entities=fact_entities(subject, text), created_at=created + fid,
                rows=[Row(valid_from=vf, valid_to=None, tx_from_seq=fid, tx_from=created + fid)],
                doc_len=sum(counts.values()),
            )
            by_id[fid] = fact
            index.add(fact, counts)
            index.set_vector(fid, MODEL, docs[i])
    finally:
        if gc_was:
            gc.enable()
    return IndexOnly(index, by_id, n), {"index_s": time.perf_counter() - t0}
