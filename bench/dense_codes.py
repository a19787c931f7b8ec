"""How much the binary-code dense search loses against the exact scan, on real MiniLM vectors.

``python -m bench.dense_codes [--cache DIR] [--limit N]``

Corpus: every turn of LoCoMo (../shared/data/locomo10.json) and the first ``--beam-turns`` turns
of BEAM's 500K-token chats (../shared/data/beam500k.json.gz), each cut to its first 300
characters (MiniLM's cost grows with length: all 38k BEAM turns whole take most of an hour
here); queries: their questions. Each text is embedded once with the
local all-MiniLM-L6-v2 (the vectors are cached in ``--cache``, default bench/out/dense-codes).
For each query the exact top 10 (float32 cosine over the whole corpus, the product's exact path)
is compared with the top 10 of :meth:`projections.dense.DocVectors.candidates` (sign-bit
codes, Hamming distance, the best ``rerank`` re-scored in float32): recall@10 = the share of
the exact top 10 found, for several ``rerank`` sizes, and the time of each path per query at
this corpus size. ``--limit 100`` asks the same of the top 100 (recall's dense list depth).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import time
from pathlib import Path

import numpy as np

from bench.locomo_data import DEFAULT_DATA as LOCOMO
from projections.dense import DocVectors

__all__ = ["main"]

BEAM = LOCOMO.parent / "beam500k.json.gz"
MAX_CHARS = 300  # about 70 word pieces
RERANKS = (100, 200, 500, 1000, 2000)


def corpus_and_queries(beam_turns: int) -> tuple[list[str], list[str]]:
    """(turn texts, question texts) of LoCoMo and of BEAM's first ``beam_turns`` turns."""
    docs: list[str] = []
    queries: list[str] = []
    locomo = json.loads(LOCOMO.read_text())
    for sample in locomo:
        conv = sample["conversation"]
        for key, turns in conv.items():
            if key.startswith("session_") and isinstance(turns, list):
                docs.extend(t["text"] for t in turns if t.get("text"))
        queries.extend(str(q["question"]) for q in sample["qa"])
    beam: list[str] = []
    with gzip.open(BEAM, "rt") as f:
        for chat in json.load(f):
            if len(beam) >= beam_turns:
                break
            beam.extend(t["content"] for t in chat["turns"] if t.get("content"))
            queries.extend(q["question"] for q in chat["questions"])
    docs.extend(beam[:beam_turns])
    return [d[:MAX_CHARS] for d in docs], queries


def embedded(texts: list[str], cache: Path, name: str) -> np.ndarray:
    """MiniLM vectors of ``texts``, read from ``cache`` when this exact list was embedded before."""
    digest = hashlib.sha256("\n".join(texts).encode()).hexdigest()[:16]
    path = cache / f"{name}-{digest}.npy"
    if path.exists():
        return np.load(path)
    from hmem.embedders.local import LocalEmbedder

    model = LocalEmbedder().load()
    t0 = time.perf_counter()
    parts = []
    for i in range(0, len(texts), 2048):
        parts.append(model.embed(texts[i : i + 2048]))
        print(f"  {name}: {i + len(parts[-1]):,} of {len(texts):,} embedded", flush=True)
    out = np.vstack(parts).astype(np.float32)
    print(f"  embedded {len(texts):,} {name} in {time.perf_counter() - t0:.0f} s")
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, out)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.dense_codes", description=__doc__)
    parser.add_argument("--cache", type=Path,
                        default=Path(__file__).resolve().parent / "out" / "dense-codes")
    parser.add_argument("--limit", type=int, default=10, help="k of recall@k")
    parser.add_argument("--beam-turns", type=int, default=12_000)
    args = parser.parse_args(argv)
    docs, queries = corpus_and_queries(args.beam_turns)
    print(f"corpus {len(docs):,} turns, {len(queries):,} questions (LoCoMo + BEAM)")
    doc_vecs = embedded(docs, args.cache, "docs")
    query_vecs = embedded(queries, args.cache, "queries")
    vectors = DocVectors("minilm", doc_vecs.shape[1])
    for doc, vec in enumerate(doc_vecs):
        vectors.set(doc, vec)
    n = len(docs)
    everyone = np.ones(n, dtype=bool)
    k = args.limit
    exact: list[np.ndarray] = []
    t0 = time.perf_counter()
    for q in query_vecs:
        cosines, _ = vectors.scores(q, n)
        top = np.argpartition(-cosines, k)[:k]
        exact.append(top)
    exact_ms = (time.perf_counter() - t0) / len(query_vecs) * 1e3
    print(f"exact float32 scan: {exact_ms:.2f} ms per query")
    print(f"| rerank | share of the corpus | recall@{k} vs exact | ms per query |")
    print("|---|---|---|---|")
    for rerank in RERANKS:
        found = 0
        t0 = time.perf_counter()
        for q, truth in zip(query_vecs, exact, strict=True):
            docs, cosines = vectors.candidates(q, n, everyone, rerank)
            found += len(np.intersect1d(docs[np.argsort(-cosines)[:k]], truth))
        ms = (time.perf_counter() - t0) / len(query_vecs) * 1e3
        print(f"| {rerank} | {rerank / n:.2%} | {found / (k * len(query_vecs)):.4f} | {ms:.2f} |")


if __name__ == "__main__":
    main()
