"""The corpus and vectors of ``bench.peers``: the LoCoMo conversations and questions of a run,
and every text's MiniLM vector, embedded once and cached on disk so every system sees the same
vectors."""

from __future__ import annotations

import json
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.locomo_data import Question, session_facts
from hmem.recall.subjects import query_as_embedded
from projections.projector import index_text

__all__ = ["CachedEmbedder", "Corpus", "VectorCache", "embed_corpus", "select", "text_key"]


# ------------------------------------------------------------------------------------ corpus

@dataclass
class Corpus:
    """The conversations and questions of one run."""

    samples: list[dict[str, Any]]
    questions: list[Question]

    def facts(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        return [f for _, facts in session_facts(sample) for f in facts]

    def reference(self, sample: dict[str, Any]) -> datetime:
        return session_facts(sample)[-1][0]

    def turn_texts(self) -> list[str]:
        """Every turn as stored (and embedded)."""
        return list(dict.fromkeys(
            index_text(f["subject"], f["text"]) for s in self.samples for f in self.facts(s)))

    def texts(self) -> list[str]:
        """Every text any system embeds: the turns, then the questions, and each question as
        hmem embeds it (without its conversation's speakers' names: hmem.recall.subjects)."""
        speakers = {s["sample_id"]: {f["subject"] for f in self.facts(s)} for s in self.samples}
        asked = [q.text for q in self.questions]
        hmem = [query_as_embedded(q.text, speakers[q.sample]) for q in self.questions]
        return list(dict.fromkeys(self.turn_texts() + asked + hmem))


def select(
    data: list[dict[str, Any]], questions: list[Question], conversations: Sequence[str] | None,
    per_conversation: int | None,
) -> Corpus:
    """The named conversations (all when None) and up to ``per_conversation`` questions each."""
    samples = [s for s in data if conversations is None or s["sample_id"] in conversations]
    keep = {s["sample_id"] for s in samples}
    chosen: list[Question] = []
    count: dict[str, int] = {}
    for q in questions:
        if q.sample in keep and count.get(q.sample, 0) < (per_conversation or len(questions)):
            chosen.append(q)
            count[q.sample] = count.get(q.sample, 0) + 1
    return Corpus(samples, chosen)


def text_key(text: str) -> str:
    """Cache key: whitespace collapsed (Mem0 replaces newlines and trims before embedding)."""
    return " ".join(text.split())


# ------------------------------------------------------------------------------------ vectors

class VectorCache:
    """Precomputed vectors by text; a miss is an error, so every system sees the same vectors."""

    def __init__(self, keys: list[str], vectors: np.ndarray, model: str, meta: dict[str, Any]):
        self.rows = {k: i for i, k in enumerate(keys)}
        self.vectors = vectors
        self.model = model
        self.dims = int(vectors.shape[1])
        self.meta = meta

    def lookup(self, text: str) -> np.ndarray:
        row = self.rows.get(text_key(text))
        if row is None:
            raise KeyError(f"no precomputed vector for {text[:60]!r}; the vector cache is stale")
        return self.vectors[row]

    @classmethod
    def build(cls, texts: Sequence[str], embedder: Any) -> VectorCache:
        """Embed ``texts`` in one batch call (any hmem embedder)."""
        vectors = np.ascontiguousarray(embedder.embed(list(texts)), dtype=np.float32)
        return cls([text_key(t) for t in texts], vectors, embedder.model, {})

    @classmethod
    def load(cls, path: Path) -> VectorCache:
        meta = json.loads(path.with_suffix(".json").read_text())
        return cls(meta.pop("keys"), np.load(path.with_suffix(".npy")), meta["model"], meta)


class CachedEmbedder:
    """hmem's embedder protocol over a :class:`VectorCache`."""

    def __init__(self, cache: VectorCache) -> None:
        self.cache, self.model, self.dims = cache, cache.model, cache.dims

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), np.float32)
        return np.stack([self.cache.lookup(t) for t in texts])


def embed_corpus(corpus: Corpus, path: Path, sample: int, seed: int = 7) -> None:
    """Embed every text with the local MiniLM (batched) and time one-text calls on a sample of
    questions and turns; writes ``path``.npy (vectors) and ``path``.json (keys, timings)."""
    from hmem.embedders.local import LocalEmbedder

    embedder = LocalEmbedder().load()
    texts = corpus.texts()
    t0 = time.perf_counter()
    cache = VectorCache.build(texts, embedder)
    batch_s = time.perf_counter() - t0
    rng = random.Random(seed)
    queries = list(dict.fromkeys(q.text for q in corpus.questions))
    turns = corpus.turn_texts()
    timed: dict[str, dict[str, float]] = {"query": {}, "turn": {}}
    for kind, pool in (("query", queries), ("turn", turns)):
        for text in rng.sample(pool, min(sample, len(pool))):
            t0 = time.perf_counter()
            embedder.embed([text])
            timed[kind][text_key(text)] = time.perf_counter() - t0
    np.save(path.with_suffix(".npy"), cache.vectors)
    path.with_suffix(".json").write_text(json.dumps({
        "model": cache.model, "keys": [text_key(t) for t in texts], "batch_s": batch_s,
        "embed_s": timed,
    }))
