"""A small SQLite + FTS5 memory store: the baseline hmem is compared with (bench/peers.py).

The design both original prototypes used: one table of memories (namespace, ref, text, vector
as a float32 blob), an external-content FTS5 index over the text, and recall as FTS5 ``bm25()``
and/or a numpy cosine scan of the namespace's vector blobs, fused with reciprocal rank fusion.
Standard library ``sqlite3`` and numpy only; every ``add`` is its own committed transaction
(SQLite's defaults: rollback journal, synchronous=FULL).

    store = SqliteStore("mem.db")
    store.add("conv-26", "Caroline: I went to a support group", vector, ref="D1:3")
    store.search("conv-26", "support group", vector=qv, limit=10)   # hybrid (RRF)
    store.search("conv-26", "support group", limit=10, mode="bm25")
"""

from __future__ import annotations

import re
import sqlite3
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np

from bench.stopwords import ENGLISH

__all__ = ["Hit", "SqliteStore", "fts_query", "rrf"]

Mode = Literal["hybrid", "bm25", "dense"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS memories (
    id INTEGER PRIMARY KEY,
    namespace TEXT NOT NULL,
    ref TEXT,
    text TEXT NOT NULL,
    vector BLOB
);
CREATE INDEX IF NOT EXISTS memories_namespace ON memories(namespace);
CREATE VIRTUAL TABLE IF NOT EXISTS memories_fts USING fts5(
    text, content='memories', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
"""

_WORD = re.compile(r"\w+", re.UNICODE)


@dataclass(frozen=True)
class Hit:
    id: int
    ref: str | None
    text: str
    score: float


def fts_query(text: str) -> str | None:
    """An FTS5 MATCH expression: the query's words minus English stopwords, each quoted, OR-ed
    (None when no word is left). Quoting makes every word a plain term, never FTS5 syntax."""
    words = [w for w in _WORD.findall(text.lower()) if w not in ENGLISH]
    if not words:
        return None
    return " OR ".join(f'"{w}"' for w in dict.fromkeys(words))


def rrf(rankings: list[list[int]], k: int = 60) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: sum of 1 / (k + rank) over the rankings (rank from 1), best first;
    ties keep the order of first appearance."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, start=1):
            scores[item] = scores.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda kv: -kv[1])


class SqliteStore:
    """One SQLite file; ``pool`` candidates from each ranker go into the fusion."""

    def __init__(self, path: str | Path, *, pool: int = 100, rrf_k: int = 60) -> None:
        self.path = Path(path)
        self.pool = pool
        self.rrf_k = rrf_k
        self.db = sqlite3.connect(self.path)
        self.db.executescript(_SCHEMA)
        self.db.commit()

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> SqliteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def add(
        self, namespace: str, text: str, vector: np.ndarray | None = None, *, ref: str | None = None
    ) -> int:
        """Store one memory (one committed transaction); returns its id."""
        blob = None if vector is None else np.asarray(vector, dtype="<f4").tobytes()
        with self.db:
            cur = self.db.execute(
                "INSERT INTO memories(namespace, ref, text, vector) VALUES (?, ?, ?, ?)",
                (namespace, ref, text, blob),
            )
            rowid = cur.lastrowid
            assert rowid is not None
            self.db.execute("INSERT INTO memories_fts(rowid, text) VALUES (?, ?)", (rowid, text))
        return rowid

    def count(self) -> int:
        return self.db.execute("SELECT count(*) FROM memories").fetchone()[0]

    def search(
        self, namespace: str, query: str, *, vector: np.ndarray | None = None, limit: int = 10,
        mode: Mode = "hybrid",
    ) -> list[Hit]:
        """The ``limit`` best memories of ``namespace``: FTS5 BM25, cosine, or their RRF fusion
        (hybrid without a query vector is BM25 alone)."""
        rankings = []
        if mode in ("hybrid", "bm25"):
            rankings.append(self._bm25(namespace, query, self.pool if mode == "hybrid" else limit))
        if mode in ("hybrid", "dense") and vector is not None:
            n = self.pool if mode == "hybrid" else limit
            rankings.append(self._cosine(namespace, vector, n))
        if len(rankings) == 1:
            ranked = [(i, 1.0 / (self.rrf_k + r)) for r, i in enumerate(rankings[0], start=1)]
        else:
            ranked = rrf(rankings, self.rrf_k)
        top = ranked[:limit]
        if not top:
            return []
        ids = [i for i, _ in top]
        rows = {
            r[0]: r
            for r in self.db.execute(
                f"SELECT id, ref, text FROM memories WHERE id IN ({','.join('?' * len(ids))})", ids
            )
        }
        return [Hit(i, rows[i][1], rows[i][2], s) for i, s in top]

    def _bm25(self, namespace: str, query: str, n: int) -> list[int]:
        match = fts_query(query)
        if match is None:
            return []
        rows = self.db.execute(
            "SELECT m.id FROM memories_fts JOIN memories m ON m.id = memories_fts.rowid "
            "WHERE memories_fts MATCH ? AND m.namespace = ? "
            "ORDER BY bm25(memories_fts) LIMIT ?",
            (match, namespace, n),
        )
        return [r[0] for r in rows]

    def _cosine(self, namespace: str, vector: np.ndarray, n: int) -> list[int]:
        rows = self.db.execute(
            "SELECT id, vector FROM memories WHERE namespace = ? AND vector IS NOT NULL",
            (namespace,),
        ).fetchall()
        if not rows:
            return []
        q = np.asarray(vector, dtype=np.float32)
        mat = np.frombuffer(b"".join(r[1] for r in rows), dtype="<f4").reshape(len(rows), q.size)
        norms = np.linalg.norm(mat, axis=1) * (np.linalg.norm(q) or 1.0)
        sims = (mat @ q) / np.where(norms > 0, norms, 1.0)
        n = min(n, len(rows))
        best = np.argpartition(-sims, n - 1)[:n]
        best = best[np.argsort(-sims[best], kind="stable")]
        return [rows[i][0] for i in best]
