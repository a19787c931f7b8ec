"""The dense index: int8 ranks like float32 within the stated error bound; the sign-code search
returns the documents nearest by code, re-scored exactly, and the exact scan's answer whenever
it re-scores every kept document."""

from __future__ import annotations

import numpy as np
import pytest

from projections.dense import DocVectors
from projections.recall_index import NamespaceIndex

DIMS = 384


def _filled(dtype: str, rows: np.ndarray) -> DocVectors:
    vecs = DocVectors("m", rows.shape[1], dtype)
    for doc, row in enumerate(rows):
        vecs.set(doc, row)
    return vecs


@pytest.fixture(scope="module")
def data() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    docs = rng.standard_normal((3000, DIMS)).astype(np.float32) * rng.uniform(0.1, 5, (3000, 1))
    # queries near a document, so the top 10 is a real neighbourhood and not a random tie
    queries = docs[rng.choice(len(docs), 50)] + rng.standard_normal((50, DIMS)) * 2.0
    return docs, queries.astype(np.float32)


def test_int8_cosines_are_within_the_bound_and_rank_like_float32(data) -> None:
    docs, queries = data
    f32, i8 = _filled("float32", docs), _filled("int8", docs)
    exact = (docs / np.linalg.norm(docs, axis=1, keepdims=True)).astype(np.float64)
    codes = DIMS // 8  # one sign bit per dimension
    assert i8.nbytes == len(docs) * (DIMS + 4 + codes)
    assert f32.nbytes == len(docs) * (DIMS * 4 + codes)
    bound = i8.error_bound(len(docs)).astype(np.float64)
    assert bound.max() < 0.05  # sqrt(384) * max|x| / 254 with max|x| well below 1
    overlaps = []
    for q in queries:
        s32, has32 = f32.scores(q, len(docs))
        s8, has8 = i8.scores(q, len(docs))
        assert has32.all() and has8.all()
        want = exact @ (q / np.linalg.norm(q))
        assert np.all(np.abs(s32 - want) < 1e-5)
        assert np.all(np.abs(s8 - want) <= bound + 1e-5)
        top32 = set(np.argsort(-s32)[:10].tolist())
        top8 = set(np.argsort(-s8)[:10].tolist())
        overlaps.append(len(top32 & top8) / 10)
    assert np.mean(overlaps) >= 0.9


def test_int8_handles_gaps_and_zero_vectors() -> None:
    f32, i8 = DocVectors("m", 8), DocVectors("m", 8, "int8")
    for vecs in (f32, i8):
        vecs.set(0, np.arange(1, 9, dtype=np.float32))
        vecs.set(200, np.zeros(8, dtype=np.float32))  # grows past the initial 64 rows
        vecs.set(0, -np.arange(1, 9, dtype=np.float32))  # a later vector replaces the first
    # rows, a float32 scale per int8 row, a 64-bit word of sign bits per row
    assert (f32.nbytes, i8.nbytes) == (201 * (8 * 4 + 8), 201 * (8 + 4 + 8))
    s8, has8 = i8.scores(np.arange(1, 9, dtype=np.float32), 300)
    s32, has32 = f32.scores(np.arange(1, 9, dtype=np.float32), 300)
    assert has8.tolist() == has32.tolist() and has8.sum() == 2 and i8.count == 2
    assert s8[0] == pytest.approx(-1.0, abs=float(i8.error_bound(1)[0]) + 1e-6)
    assert s8[200] == 0.0 and s8[1:200].tolist() == [0.0] * 199


def test_namespace_index_passes_the_dtype_on_and_rejects_unknown_ones() -> None:
    assert NamespaceIndex().vector_dtype == "float32"
    with pytest.raises(ValueError, match="int8"):
        NamespaceIndex(vector_dtype="int4")
    with pytest.raises(ValueError, match="float32"):
        DocVectors("m", 4, "float16")


def _hamming(rows: np.ndarray, q: np.ndarray) -> np.ndarray:
    """Sign-bit distance computed independently: coordinates > 0 that differ."""
    return ((rows > 0) != (q > 0)).sum(axis=1)


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_codes_return_the_kept_documents_nearest_by_code_rescored(data, dtype) -> None:
    docs, queries = data
    vecs = _filled(dtype, docs)
    rng = np.random.default_rng(3)
    n = len(docs) + 5  # documents past the last vector have none
    keep = rng.random(n) < 0.7
    for q in queries[:10]:
        got, cosines = vecs.candidates(q, n, keep, 200)
        assert len(got) >= 200 and len(set(got.tolist())) == len(got)
        assert keep[got].all() and (got < len(docs)).all()
        full, _ = vecs.scores(q, n)
        assert np.allclose(cosines, full[got], atol=1e-5)  # re-scored with the stored rows
        distance = _hamming(docs, q)
        kept = np.flatnonzero(keep[: len(docs)])
        outside = np.setdiff1d(kept, got)
        assert distance[got].max() <= distance[outside].min()  # nearest by code, ties kept


@pytest.mark.parametrize("dtype", ["float32", "int8"])
def test_codes_rescoring_every_kept_document_is_the_exact_scan(data, dtype) -> None:
    docs, queries = data
    vecs = _filled(dtype, docs)
    keep = np.arange(len(docs)) % 3 != 0
    for q in queries[:5]:
        got, cosines = vecs.candidates(q, len(docs), keep, len(docs))
        full, has = vecs.scores(q, len(docs))
        assert got.tolist() == np.flatnonzero(keep & has).tolist()
        assert np.allclose(cosines, full[got], atol=1e-6)
    assert len(vecs.candidates(np.zeros(DIMS, np.float32), len(docs), keep, 5)[0]) == 0


def test_codes_are_compared_across_every_block_of_rows() -> None:
    """The code distances are made a block of rows at a time; the nearest documents are found
    wherever they sit, the rows past the first block included."""
    rng = np.random.default_rng(11)
    rows = rng.standard_normal((70_000, 72)).astype(np.float32)  # two code words, two blocks
    vecs = _filled("float32", rows)
    keep = np.ones(len(rows), dtype=bool)
    for q in rows[[3, 66_000, 69_999]] + rng.standard_normal((3, 72)).astype(np.float32) * 0.1:
        got, _ = vecs.candidates(q, len(rows), keep, 50)
        distance = _hamming(rows, q)
        assert distance[got].max() <= np.delete(distance, got).min()
        assert len(got) == np.count_nonzero(distance <= distance[got].max())
