"""What recall needs, in memory: per namespace, a BM25 index plus per-document arrays.

Rebuilt from the fold state on open and updated per event; never persisted (the DuckDB
``postings`` table is the durable text index).
"""

from __future__ import annotations

from array import array

import numpy as np

from projections.state import Fact
from projections.text import TextIndex

__all__ = ["NamespaceIndex"]


class NamespaceIndex:
    """Documents are facts of one namespace, numbered in creation order."""

    def __init__(self) -> None:
        self.text = TextIndex()
        self.fact_ids = array("q")
        self.doc_of: dict[int, int] = {}
        self.current = bytearray()  # 1 while the fact is a believed, unsuperseded head
        self.recency = array("q")  # valid_from of the fact's first row, microseconds
        self.confidence = array("f")
        self.subject_keys: list[str] = []

    def __len__(self) -> int:
        return len(self.fact_ids)

    def add(self, fact: Fact, tokens: list[str]) -> None:
        doc = self.text.add(tokens)
        self.fact_ids.append(fact.id)
        self.doc_of[fact.id] = doc
        self.current.append(_is_current(fact))
        self.recency.append(fact.rows[0].valid_from)
        self.confidence.append(fact.confidence)
        self.subject_keys.append(fact.subject_key)

    def update(self, fact: Fact) -> None:
        self.current[self.doc_of[fact.id]] = _is_current(fact)

    def arrays(self, docs: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(fact ids, current flags, recency, confidence) of the given documents."""
        return (
            np.frombuffer(self.fact_ids, dtype=np.int64)[docs],
            np.frombuffer(self.current, dtype=np.uint8)[docs],
            np.frombuffer(self.recency, dtype=np.int64)[docs],
            np.frombuffer(self.confidence, dtype=np.float32)[docs],
        )


def _is_current(fact: Fact) -> int:
    return int(fact.superseded_by is None and fact.forgotten_seq is None)
