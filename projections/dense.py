"""Dense vectors of one namespace and one model, kept hot as a matrix.

Rows are aligned with the namespace's document numbers (see :mod:`projections.recall_index`); a
document
without a vector for this model has a zero row and ``has[doc] == False``. Rows are L2-normalised
on insert, so a matrix-vector product gives cosines.

``dtype="float32"`` (the default) keeps each row as float32 (4 bytes per dimension).
``dtype="int8"`` keeps it as int8 codes plus one float32 scale per row (symmetric, per-row
quantisation: ``code = round(x / s)`` with ``s = max|x| / 127``), a quarter of the memory. Its
cosine differs from the float32 one by at most ``sqrt(dims) * s / 2`` for a unit query (each
coordinate is off by at most ``s / 2``; Cauchy-Schwarz), see :meth:`DocVectors.error_bound`.
NumPy has no int8 matrix-vector kernel, so int8 scores are computed block by block: a block of
codes is converted to float32 in a small reused buffer (it stays in cache) and multiplied by
the query; the per-row scales are applied at the end.

Besides the rows, every vector keeps a *code*: the signs of its coordinates, one bit each (48
bytes for 384 dimensions). :meth:`DocVectors.candidates` ranks the documents by the Hamming
distance between their code and the query's, a pass over 1/32 of the float32 matrix's bytes,
and re-scores only the best ``rerank`` of them with the stored rows: the search recall uses on
large namespaces (``RecallConfig.dense_search``). ``python -m bench.dense_codes`` measures what
it loses against the exact scan on real MiniLM vectors.
"""

from __future__ import annotations

import numpy as np

__all__ = ["DocVectors", "VECTOR_DTYPES"]

VECTOR_DTYPES = ("float32", "int8")
_BLOCK = 1024  # int8 rows converted per step: 1024 x 384 x 4 B = 1.5 MiB, about L2-sized
_CODE_BLOCK = 65_536  # code rows compared per step: the distance temporaries stay in cache


class DocVectors:
    def __init__(self, model: str, dims: int, dtype: str = "float32") -> None:
        if dtype not in VECTOR_DTYPES:
            raise ValueError(f"vector dtype {dtype!r} is not one of {', '.join(VECTOR_DTYPES)}")
        self.model = model
        self.dims = dims
        self.dtype = dtype
        self._matrix = np.zeros((64, dims), dtype=np.dtype(dtype))
        self._scale = np.zeros(64 if dtype == "int8" else 0, dtype=np.float32)
        self._has = np.zeros(64, dtype=bool)
        self._words = -(-dims // 64)  # 64-bit words per code
        self._codes = np.zeros((self._words, 64), dtype=np.uint64)  # word-major: one row a word
        self.size = 0  # number of documents covered (highest doc with a vector + 1)
        self.count = 0  # documents that have a vector

    @property
    def nbytes(self) -> int:
        """Bytes held for the rows in use (rows, int8 scales and sign codes)."""
        scale = 4 if self.dtype == "int8" else 0
        return self.size * (self.dims * self._matrix.itemsize + scale + 8 * self._words)

    def fields(self) -> tuple[object, ...]:
        """Everything it holds, as comparable values (what ``verify`` compares)."""
        return (self.dims, self.size, self.count, self._matrix[: self.size].tolist(),
                self._has[: self.size].tolist())

    def set(self, doc: int, vector: np.ndarray) -> bool:
        """Store the vector of ``doc`` (a later vector of the same model replaces it). A vector
        of another length is left out (returns False): it cannot be compared with the rest."""
        if len(vector) != self.dims:
            return False
        if doc >= len(self._has):
            grow = max(doc + 1, 2 * len(self._has))
            self._matrix = _grown(self._matrix, grow)
            self._has = _grown(self._has, grow)
            if self.dtype == "int8":
                self._scale = _grown(self._scale, grow)
            codes = np.zeros((self._words, grow), dtype=np.uint64)
            codes[:, : self._codes.shape[1]] = self._codes
            self._codes = codes
        v = np.asarray(vector, dtype=np.float32)
        norm = float(np.linalg.norm(v))
        unit = v / norm if norm > 0 else np.zeros(self.dims, dtype=np.float32)
        if self.dtype == "int8":
            peak = float(np.max(np.abs(unit))) if self.dims else 0.0
            scale = peak / 127.0 if peak > 0 else 0.0
            self._scale[doc] = scale
            self._matrix[doc] = np.rint(unit / scale) if scale > 0 else 0
        else:
            self._matrix[doc] = unit
        self._codes[:, doc] = _code(unit, self._words)
        if not self._has[doc]:
            self._has[doc] = True
            self.count += 1
        self.size = max(self.size, doc + 1)
        return True

    def get(self, doc: int) -> np.ndarray | None:
        """The (normalised) vector of ``doc``, or None when it has none."""
        if 0 <= doc < self.size and self._has[doc]:
            row: np.ndarray = self._matrix[doc]
            if self.dtype == "int8":
                scaled: np.ndarray = row.astype(np.float32) * self._scale[doc]
                return scaled
            return row
        return None

    def scores(self, query: np.ndarray, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
        """(cosine of every document 0..n_docs-1, mask of documents that have a vector)."""
        q = np.asarray(query, dtype=np.float32)
        norm = float(np.linalg.norm(q))
        out = np.zeros(n_docs, dtype=np.float32)
        has = np.zeros(n_docs, dtype=bool)
        n = min(self.size, n_docs)
        if norm > 0 and n:
            if self.dtype == "int8":
                _int8_scores(self._matrix[:n], q / norm, out[:n])
                out[:n] *= self._scale[:n]
            else:
                out[:n] = self._matrix[:n] @ (q / norm)
            has[:n] = self._has[:n]
        return out, has

    def candidates(
        self, query: np.ndarray, n_docs: int, keep: np.ndarray, rerank: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(documents, their cosines): the ``rerank`` documents among ``keep`` (a mask over
        0..n_docs-1; documents without a vector never count) whose codes are nearest the
        query's, every tie at the cut included, scored with the stored rows. All of them when
        no more than ``rerank`` are kept: then the answer is the exact scan's."""
        q = np.asarray(query, dtype=np.float32)
        n = min(self.size, n_docs)
        norm = float(np.linalg.norm(q))
        if norm <= 0 or not n:
            return np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float32)
        kept = keep[:n] & self._has[:n]
        count = np.count_nonzero(kept)
        if count > rerank:
            distance = self._distances(q, n)
            if count < n:  # ~1 ms a 1M-document pass saved when every document counts
                np.putmask(distance, ~kept, 64 * self._words + 1)  # past any real distance
            cut = _nth_smallest(distance, rerank, 64 * self._words)
            docs = np.flatnonzero(distance <= cut)
        else:
            docs = np.flatnonzero(kept)
        rows = self._matrix[docs]
        if self.dtype == "int8":
            cosines = (rows.astype(np.float32) @ (q / norm)) * self._scale[docs]
        else:
            cosines = rows @ (q / norm)
        return docs, cosines.astype(np.float32, copy=False)

    def _distances(self, query: np.ndarray, n: int) -> np.ndarray:
        """Hamming distance between the query's code and each of the first ``n`` codes, a
        block of rows at a time (the temporaries stay in cache: 1.6x a pass per word)."""
        qcode = _code(query, self._words)
        distance = np.empty(n, dtype=np.uint16)
        block = max(1, min(n, _CODE_BLOCK))
        word = np.empty(block, dtype=np.uint64)
        bits = np.empty(block, dtype=np.uint8)
        for start in range(0, n, block):
            k = min(block, n - start)
            out = distance[start : start + k]
            for j in range(self._words):
                np.bitwise_xor(self._codes[j, start : start + k], qcode[j], out=word[:k])
                np.bitwise_count(word[:k], out=bits[:k])
                if j:
                    out += bits[:k]
                else:
                    out[:] = bits[:k]
        return distance

    def error_bound(self, n_docs: int) -> np.ndarray:
        """Per document, the largest possible |stored cosine - exact cosine| for a unit query:
        0 for float32 (up to rounding), ``sqrt(dims) * scale / 2`` for int8."""
        bound = np.zeros(n_docs, dtype=np.float32)
        if self.dtype == "int8":
            n = min(self.size, n_docs)
            bound[:n] = np.sqrt(self.dims) * self._scale[:n] / 2
        return bound


def _nth_smallest(values: np.ndarray, nth: int, top: int) -> int:
    """The ``nth`` smallest of ``values`` (integers, ``nth`` <= how many are at most ``top``),
    by bisecting on how many are at most a value: a compare pass each, no histogram of all."""
    lo, hi = 0, top
    while lo < hi:
        mid = (lo + hi) // 2
        if np.count_nonzero(values <= mid) >= nth:
            hi = mid
        else:
            lo = mid + 1
    return lo


def _int8_scores(codes: np.ndarray, q: np.ndarray, out: np.ndarray) -> None:
    """out[i] = codes[i] . q, converting ``_BLOCK`` rows at a time to float32."""
    buf = np.empty((min(_BLOCK, len(codes)), codes.shape[1]), dtype=np.float32)
    for start in range(0, len(codes), _BLOCK):
        block = codes[start : start + _BLOCK]
        k = len(block)
        np.copyto(buf[:k], block, casting="unsafe")
        np.matmul(buf[:k], q, out=out[start : start + k])


def _code(vector: np.ndarray, words: int) -> np.ndarray:
    """The sign bits of ``vector`` (1 where a coordinate is > 0) packed into ``words`` uint64."""
    bits = np.zeros(words * 64, dtype=bool)
    bits[: len(vector)] = vector > 0
    return np.packbits(bits).view(np.uint64)


def _grown(arr: np.ndarray, rows: int) -> np.ndarray:
    out = np.zeros((rows, *arr.shape[1:]), dtype=arr.dtype)
    out[: len(arr)] = arr
    return out
