"""The systems ``bench.peers`` compares, behind one interface (``add``, ``search``,
``close``), and the run of one system over a corpus: ingest turn by turn, ask every question,
time each call, measure the disk."""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.locomo import KS
from bench.peers_corpus import CachedEmbedder, Corpus, VectorCache
from projections.projector import index_text

__all__ = ["SYSTEMS", "disk_bytes", "make_system", "mem0_missing", "run_system"]

SYSTEMS = ("hmem", "sqlite", "sqlite-bm25", "mem0-faiss", "mem0-qdrant")


# ------------------------------------------------------------------------------------ systems

class HmemSystem:
    """hmem's default configuration (fsync per write, default recall), vectors from the cache."""

    def __init__(self, root: Path, cache: VectorCache) -> None:
        from hmem import Memory

        # Inline: each add records its vector before it returns, as the other systems' do.
        self.memory = Memory(root, embedder=CachedEmbedder(cache), embed_mode="inline")
        self.views: dict[str, Any] = {}

    def _view(self, namespace: str) -> Any:
        if namespace not in self.views:
            self.views[namespace] = self.memory.in_namespace(namespace)
        return self.views[namespace]

    def add(self, namespace: str, fact: dict[str, Any], vector: np.ndarray) -> None:
        self._view(namespace).remember(**fact, dedup=False)  # one fact per turn, as the peers

    def search(self, namespace: str, query: str, vector: np.ndarray, reference: datetime,
               limit: int) -> list[str | None]:
        result = self._view(namespace).recall(query, limit=limit, max_tokens=10**9,
                                              reference_time=reference)
        return [h.source_ref for h in result.hits]

    def close(self) -> None:
        self.memory.close()


class SqliteSystem:
    def __init__(self, root: Path, mode: str) -> None:
        from bench.sqlite_baseline import SqliteStore

        root.mkdir(parents=True, exist_ok=True)
        self.store = SqliteStore(root / "memories.db")
        self.mode = mode

    def add(self, namespace: str, fact: dict[str, Any], vector: np.ndarray) -> None:
        self.store.add(namespace, index_text(fact["subject"], fact["text"]), vector,
                       ref=fact["source_ref"])

    def search(self, namespace: str, query: str, vector: np.ndarray, reference: datetime,
               limit: int) -> list[str | None]:
        hits = self.store.search(namespace, query, vector=vector, limit=limit,
                                 mode=self.mode)  # type: ignore[arg-type]
        return [h.ref for h in hits]

    def close(self) -> None:
        self.store.close()


class Mem0System:
    def __init__(self, root: Path, backend: str, cache: VectorCache) -> None:
        from bench.peers_mem0 import Mem0Store

        self.store = Mem0Store(root, backend, cache.lookup,  # type: ignore[arg-type]
                               cache.model, cache.dims)

    def add(self, namespace: str, fact: dict[str, Any], vector: np.ndarray) -> None:
        self.store.add(namespace, index_text(fact["subject"], fact["text"]), fact["source_ref"])

    def search(self, namespace: str, query: str, vector: np.ndarray, reference: datetime,
               limit: int) -> list[str | None]:
        return self.store.search(namespace, query, limit)

    def close(self) -> None:
        self.store.close()


def make_system(name: str, root: Path, cache: VectorCache) -> Any:
    if name == "hmem":
        return HmemSystem(root, cache)
    if name in ("sqlite", "sqlite-bm25"):
        return SqliteSystem(root, "hybrid" if name == "sqlite" else "bm25")
    if name in ("mem0-faiss", "mem0-qdrant"):
        return Mem0System(root, name.split("-", 1)[1], cache)
    raise ValueError(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)}")


def mem0_missing(name: str) -> list[str]:
    """Modules a Mem0 system needs that are not installed ([] for other systems)."""
    if not name.startswith("mem0-"):
        return []
    from bench.peers_mem0 import missing

    return missing(name.split("-", 1)[1])  # type: ignore[arg-type]


def run_system(name: str, corpus: Corpus, cache: VectorCache, root: Path,
               log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Ingest turn by turn, ask every question, close; per-call latencies, top refs, disk."""
    system = make_system(name, root, cache)
    add_s: list[float] = []
    t_ingest = time.perf_counter()
    references = {}
    for sample in corpus.samples:
        ns = sample["sample_id"]
        for fact in corpus.facts(sample):
            vector = cache.lookup(index_text(fact["subject"], fact["text"]))
            t0 = time.perf_counter()
            system.add(ns, fact, vector)
            add_s.append(time.perf_counter() - t0)
        references[ns] = corpus.reference(sample)
        log(f"{name}: ingested {ns} ({len(add_s)} memories)")
    ingest_s = time.perf_counter() - t_ingest
    search_s: list[float] = []
    refs: list[list[str | None]] = []
    for i, q in enumerate(corpus.questions):
        vector = cache.lookup(q.text)
        t0 = time.perf_counter()
        found = system.search(q.sample, q.text, vector, references[q.sample], max(KS))
        search_s.append(time.perf_counter() - t0)
        refs.append(found)
        if (i + 1) % 250 == 0:
            log(f"{name}: asked {i + 1}/{len(corpus.questions)}")
    system.close()
    return {"system": name, "memories": len(add_s), "ingest_s": ingest_s, "add_s": add_s,
            "search_s": search_s, "refs": refs, "disk_bytes": disk_bytes(root)}


def disk_bytes(root: Path) -> int:
    """Apparent size of every file under ``root``."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())
