"""Dense vectors of one namespace and one model, kept hot as a float32 matrix.

Rows are aligned with the namespace's document numbers (see :mod:`projections.hot`); a document
without a vector for this model has a zero row and ``has[doc] == False``. Rows are L2-normalised
on insert, so a matrix-vector product gives cosines.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DocVectors"]


class DocVectors:
    def __init__(self, model: str, dims: int) -> None:
        self.model = model
        self.dims = dims
        self._matrix = np.zeros((64, dims), dtype=np.float32)
        self._has = np.zeros(64, dtype=bool)
        self.size = 0  # number of documents covered (highest doc with a vector + 1)
        self.count = 0  # documents that have a vector

    def set(self, doc: int, vector: np.ndarray) -> None:
        """Store the vector of ``doc`` (a later vector of the same model replaces it)."""
        if len(vector) != self.dims:
            raise ValueError(f"{self.model}: vector has {len(vector)} dims, expected {self.dims}")
        if doc >= len(self._has):
            grow = max(doc + 1, 2 * len(self._has))
            matrix = np.zeros((grow, self.dims), dtype=np.float32)
            matrix[: len(self._matrix)] = self._matrix
            has = np.zeros(grow, dtype=bool)
            has[: len(self._has)] = self._has
            self._matrix, self._has = matrix, has
        norm = float(np.linalg.norm(vector))
        self._matrix[doc] = vector / norm if norm > 0 else 0.0
        if not self._has[doc]:
            self._has[doc] = True
            self.count += 1
        self.size = max(self.size, doc + 1)

    def get(self, doc: int) -> np.ndarray | None:
        """The (normalised) vector of ``doc``, or None when it has none."""
        if 0 <= doc < self.size and self._has[doc]:
            return self._matrix[doc]
        return None

    def scores(self, query: np.ndarray, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
        """(cosine of every document 0..n_docs-1, mask of documents that have a vector)."""
        q = np.asarray(query, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        out = np.zeros(n_docs, dtype=np.float32)
        has = np.zeros(n_docs, dtype=bool)
        n = min(self.size, n_docs)
        if norm > 0 and n:
            out[:n] = self._matrix[:n] @ (q / norm)
            has[:n] = self._has[:n]
        return out, has
