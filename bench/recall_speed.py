"""Recall latency at 10k, 100k and 1M facts in one namespace: BM25-only and hybrid (BM25 + dense).

Usage::

    python -m bench.recall_speed                   # 10k, 100k (via Memory) and 1M (index layer)
    python -m bench.recall_speed --quick           # 10k only, fewer queries (< 30 s)
    python -m bench.recall_speed --sizes 10k,100k --queries 300 --out recall.json

Prints numbers and never asserts. Targets at 100k facts: hybrid recall p95 <= 10 ms and
BM25-only recall p95 <= 5 ms, both *without* the query embedding, which is timed separately
(all-MiniLM-L6-v2 single-query latency, when the local model is installed).

What is timed, per size (same queries for every row):

* ``rank`` BM25-only: ``hmem.recall.ranking.rank`` with no query vector.
* ``rank`` hybrid: the same with a precomputed query vector (``RecallQuery(vector=, model=)``):
  BM25 + dense cosine over every document, RRF fusion, recency / entity / time factors, hits.
* ``Memory.recall`` (stores built through ``Memory`` only): the public call, with an embedder
  stub that returns the precomputed query vector from a dict (~1 us), so it measures everything
  but the model; BM25-only through a view of the same store with ``embedder=None``.
* Components: the query words' BM25 scores alone (``own_words``, recall's first step) and
  ``DocVectors.scores`` (the dense matrix-vector product) alone, to show where the time goes.

Workload: ``bench.recall_workload`` (synthetic texts, random unit vectors of 384 dims, the two
builds); queries are 2-4 words of stored texts (``bench.synthetic.make_queries``) with random
unit vectors.

Sizes above ``--memory-max`` (default 100k) are built at the index layer only: the same
``Fact`` structs, ``NamespaceIndex.add`` and ``NamespaceIndex.set_vector`` calls the projector
makes, without the event log and DuckDB (building 1M facts through ``Memory`` is mostly log
append, fold and a 1.5 GB DuckDB vector write, none of which recall touches). ``rank``
runs against that index unchanged; ``Memory.recall`` is not timed there.

Why 1M is slow: the dense scan reads the whole float32 matrix per query, 1M x 384 x 4 B =
1.5 GB; at this machine class's ~10-15 GB/s memory bandwidth that alone is >= 100 ms.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench.embed_speed import bench_embed
from bench.recall_workload import (
    BASE,
    DIMS,
    MODEL,
    NAMESPACE,
    build_index_only,
    build_memory,
    make_facts,
    random_unit,
)
from bench.report import (
    OtherLoad,
    fmt_ms,
    lat_summary,
    line,
    machine_info,
    parse_size,
    rss_mib,
    section,
    size_label,
    store_bytes,
    time_calls,
)
from bench.synthetic import SEED, TextGen, TmpDirs, make_queries
from hmem.recall.loans import own_words
from hmem.recall.ranking import CODES_FROM, rank
from hmem.recall.request import NO_BUDGET, RecallConfig, RecallQuery
from projections.dense import DocVectors
from projections.recall_index import NamespaceIndex
from projections.text import tokenize
from projections.timeutil import to_us

TARGETS = {"hybrid_p95_ms_100k": 10.0, "bm25_p95_ms_100k": 5.0, "hybrid_p95_ms_1M": 25.0,
           "as_of_p95_ms_1M": 20.0}


# ---------------------------------------------------------------------------------- timing


def recall_fn(projector: Any, cfg: RecallConfig, qvecs: dict[str, np.ndarray] | None,
              now_us: int, as_of_seq: int | None = None) -> Callable[[str], Any]:
    def call(q: str) -> Any:
        return rank(projector, NAMESPACE, cfg, RecallQuery(
            text=q, limit=cfg.limit,
            max_tokens=NO_BUDGET if cfg.max_tokens is None else cfg.max_tokens, as_of_seq=as_of_seq,
            valid_at_us=None, reference_us=now_us, subject=None,
            vector=None if qvecs is None else qvecs[q], model=None if qvecs is None else MODEL,
        ))
    return call


def bench_size(tmp: TmpDirs, n: int, args: argparse.Namespace) -> dict[str, Any]:
    label = size_label(n) if n < 1_000_000 else f"{n / 1e6:g}M"
    via_memory = n <= args.memory_max
    section(f"{label} facts ({'built through Memory' if via_memory else 'index layer only'})")
    gen = TextGen(seed=SEED + n)
    rng = np.random.default_rng(SEED + n)
    t0 = time.perf_counter()
    facts = make_facts(gen, n)
    docs = random_unit(rng, n)
    t_gen = time.perf_counter() - t0
    n_q = args.queries
    warm = min(20, max(5, n_q // 10))
    qrng = random.Random(SEED + 1 + n)
    queries = make_queries([t for _, t in facts], n_q + warm, qrng)
    qvecs = dict(zip(queries, random_unit(rng, len(queries)), strict=True))
    line("generate texts + random unit vectors (not part of any build time)", f"{t_gen:.1f} s")

    out: dict[str, Any] = {"facts": n, "label": label, "via": "Memory" if via_memory else "index"}
    cfg = RecallConfig()
    now_us = to_us(BASE + timedelta(days=400))
    mem = None
    root = None
    try:
        if via_memory:
            root = tmp.new(f"recall-{label}")
            mem, build = build_memory(root, facts, docs, qvecs)
            projector = mem.store.projector
            line("Memory.remember_many (fact + EmbeddingRecorded per fact, fsync=never)",
                 f"{build['append_s']:.1f} s ({n / build['append_s']:,.0f} facts/s)")
            line("recall index build on first use (text + vectors)", f"{build['index_s']:.1f} s")
        else:
            projector, build = build_index_only(facts, docs)
            line("index layer build (Fact + NamespaceIndex.add + set_vector)",
                 f"{build['index_s']:.1f} s ({n / build['index_s']:,.0f} facts/s)")
        out["build"] = build
        del docs, facts
        gc.collect()
        index = projector.indexes[NAMESPACE]
        vectors = index.vectors[MODEL]
        out["matrix_mib"] = vectors.size * vectors.dims * 4 / 2**20

        rows: dict[str, dict[str, float]] = {}

        def record(key: str, label_: str, samples: list[float]) -> None:
            s = lat_summary(samples)
            rows[key] = s
            line(label_, f"p50 {fmt_ms(s['p50_ms'])} ms  p95 {fmt_ms(s['p95_ms'])} ms  "
                         f"p99 {fmt_ms(s['p99_ms'])} ms  max {fmt_ms(s['max_ms'])} ms")

        tokens = {q: tokenize(q) or tokenize(q, keep_stopwords=True) for q in queries}
        load = OtherLoad()
        load.__enter__()
        record("bm25_score", "component: the query words' BM25 scores alone (own_words)",
               time_calls(lambda q: own_words(index, tokens[q]), queries, warm))
        record("dense_scan",
               f"component: DocVectors.scores alone ({out['matrix_mib']:,.0f} MiB f32)",
               time_calls(lambda q: vectors.scores(qvecs[q], len(index)), queries, warm))
        record("bm25", "rank, BM25-only",
               time_calls(recall_fn(projector, cfg, None, now_us), queries, warm))
        everyone = np.ones(len(index), dtype=bool)
        record("dense_codes",
               f"component: DocVectors.candidates alone (sign codes, {cfg.dense_rerank} re-scored)",
               time_calls(lambda q: vectors.candidates(qvecs[q], len(index), everyone,
                                                       cfg.dense_rerank), queries, warm))
        record("hybrid", f"rank, hybrid (BM25 + dense, precomputed query vector; dense_search="
                         f"{cfg.dense_search!r}: codes from {CODES_FROM:,} vectors)",
               time_calls(recall_fn(projector, cfg, qvecs, now_us), queries, warm))
        exact = replace(cfg, dense_search="exact")
        record("hybrid_exact", "rank, hybrid, exact dense scan (dense_search='exact')",
               time_calls(recall_fn(projector, exact, qvecs, now_us), queries, warm))
        mid = max(1, projector.last_seq // 2)
        record("bm25_as_of", f"rank, BM25-only, as_of seq {mid:,} (mid-history)",
               time_calls(recall_fn(projector, cfg, None, now_us, mid), queries, warm))
        record("hybrid_as_of", f"rank, hybrid, as_of seq {mid:,}",
               time_calls(recall_fn(projector, cfg, qvecs, now_us, mid), queries, warm))
        f32_hits = [recall_fn(projector, cfg, qvecs, now_us)(q) for q in queries[warm:]]
        out["mean_hits"] = statistics.fmean(len(h) for h in f32_hits)
        out["codes_hit_overlap"] = statistics.fmean(  # the default's top hits against exact
            _overlap(a, recall_fn(projector, exact, qvecs, now_us)(q))
            for a, q in zip(f32_hits, queries[warm:], strict=True)
        )
        line("hybrid hits shared by the default and the exact scan (random vectors: the worst "
             "case for codes)", f"{out['codes_hit_overlap']:.3f}")
        out["int8"] = bench_int8(index, vectors, queries, qvecs, warm, record)
        index.vectors[MODEL] = out["int8"].pop("vectors")
        record("hybrid_int8", "rank, hybrid, int8 vectors",
               time_calls(recall_fn(projector, cfg, qvecs, now_us), queries, warm))
        record("hybrid_as_of_int8", f"rank, hybrid, int8 vectors, as_of seq {mid:,}",
               time_calls(recall_fn(projector, cfg, qvecs, now_us, mid), queries, warm))
        out["int8"]["hit_overlap"] = statistics.fmean(
            _overlap(a, recall_fn(projector, cfg, qvecs, now_us)(q))
            for a, q in zip(f32_hits, queries[warm:], strict=True)
        )
        line("hybrid recall hits shared by float32 and int8 (mean share)",
             f"{out['int8']['hit_overlap']:.3f}")
        if mem is not None:
            record("memory_hybrid_int8", "Memory.recall, stub embedder, int8 vectors",
                   time_calls(lambda q: mem.recall(q), queries, warm))
        index.vectors[MODEL] = vectors
        if mem is not None:
            plain = mem.in_namespace(NAMESPACE, embedder=None)  # BM25 only: no query vector
            record("memory_bm25", "Memory.recall, no embedder (BM25-only)",
                   time_calls(lambda q: plain.recall(q), queries, warm))
            record("memory_hybrid", "Memory.recall, stub embedder (hybrid, model time excluded)",
                   time_calls(lambda q: mem.recall(q), queries, warm))
        load.__exit__()
        out["latency"] = rows
        out["rss_mib"] = rss_mib()
        line("process RSS with this index (and, via Memory, the store) open",
             f"{out['rss_mib']:,.0f} MiB")
        out["other_load_cores"] = load.cores
        line("CPU used by other processes while timing (cores of "
             f"{os.cpu_count()})", f"{load.cores:.2f}")
    finally:
        if mem is not None:
            t0 = time.perf_counter()
            mem.close()
            line("Memory.close (writes the DuckDB projection; not a recall cost)",
                 f"{time.perf_counter() - t0:.1f} s")
            out["bytes_per_fact"] = store_bytes(root, n)
            b = out["bytes_per_fact"]
            line(f"bytes per fact with a {DIMS}-d float32 vector: log / projection",
                 f"{b['log']:,.0f} / {b['projection']:,.0f}")
        if root is not None:
            tmp.remove(root)
    return out


def bench_int8(index: NamespaceIndex, vectors: DocVectors, queries: list[str],
               qvecs: dict[str, np.ndarray], warm: int,
               record: Callable[[str, str, list[float]], None]) -> dict[str, Any]:
    """An int8 copy of ``vectors`` (returned under "vectors"), its build time and the dense
    scan with it; float16 blocks are timed too, as the other way to halve the memory read."""
    n = len(index)
    t0 = time.perf_counter()
    i8 = DocVectors(MODEL, vectors.dims, "int8")
    for doc in range(vectors.size):
        row = vectors.get(doc)  # the float32 row itself (a view), None where a doc has none
        if row is not None:
            i8.set(doc, row)
    build_s = time.perf_counter() - t0
    line(f"int8 copy of the vectors ({i8.nbytes / 2**20:,.0f} MiB), DocVectors.set per row",
         f"{build_s:.1f} s")
    record("dense_scan_int8", "component: DocVectors.scores alone, int8 blocks -> float32",
           time_calls(lambda q: i8.scores(qvecs[q], n), queries, warm))
    scan = F16Scan(vectors)
    record("dense_scan_f16", "component: float16 blocks -> float32 (not in hmem, for scale)",
           time_calls(lambda q: scan(qvecs[q]), queries[: warm + 50], min(warm, 5)))
    return {"vectors": i8, "build_s": build_s, "mib": i8.nbytes / 2**20}


class F16Scan:
    """The dense scan over a float16 copy of ``vectors``, converted to float32 1024 rows at a
    time (not in hmem: timed to show what halving the matrix this way would cost)."""

    def __init__(self, vectors: DocVectors) -> None:
        self.f16 = np.zeros((vectors.size, vectors.dims), dtype=np.float16)
        for doc in range(vectors.size):
            row = vectors.get(doc)
            if row is not None:
                self.f16[doc] = row
        self.buf = np.empty((1024, vectors.dims), dtype=np.float32)
        self.out = np.empty(len(self.f16), dtype=np.float32)

    def __call__(self, query: np.ndarray) -> None:
        f16, buf, out = self.f16, self.buf, self.out
        for start in range(0, len(f16), 1024):
            block = f16[start : start + 1024]
            np.copyto(buf[: len(block)], block)
            np.matmul(buf[: len(block)], query, out=out[start : start + len(block)])


def _overlap(a: Any, b: Any) -> float:
    ids_a, ids_b = {h.id for h in a}, {h.id for h in b}
    return len(ids_a & ids_b) / max(len(ids_a), 1)


# ---------------------------------------------------------------------------------- report


def markdown(res: dict[str, Any]) -> str:
    m = res["machine"]

    def pair(r: dict[str, float] | None) -> str:
        return "-" if r is None else f"{fmt_ms(r['p50_ms'])} / {fmt_ms(r['p95_ms'])}"

    def verdict(r: dict[str, float], target: float) -> str:
        return f"{'ok' if r['p95_ms'] <= target else 'MISS'} (p95 <= {target:g})"

    loads = ", ".join(f"{s['label']} {s['other_load_cores']:.2f}" for s in res["sizes"])
    head = (
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['mem_gib']} GiB; Python {m['python']}, "
        f"NumPy {m['numpy']}, BLAS threads {res['blas_threads'] or 'default'}. "
        f"Command: `{res['command']}`. {res['queries']} queries per row, 2-4 words. "
        f"Dense: random unit vectors, {DIMS} dims, float32. Times in ms, p50 / p95; "
        "query embedding excluded (separate row). Cores used by other processes while timing: "
        f"{loads}.\n\n"
    )
    table = [
        "| facts | built via | f32 / int8 matrix | rank BM25-only | hybrid f32 | hybrid f32 exact "
        "| hybrid int8 "
        "| hybrid f32, as_of | BM25, as_of | dense scan f32 | dense scan int8 | dense scan f16 "
        "| Memory.recall hybrid f32 | RSS | targets |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for s in res["sizes"]:
        lat = s["latency"]
        target = ""
        if s["facts"] == 100_000:
            target = (f"BM25 {verdict(lat['bm25'], TARGETS['bm25_p95_ms_100k'])}; hybrid "
                      f"{verdict(lat['hybrid'], TARGETS['hybrid_p95_ms_100k'])}")
        elif s["facts"] == 1_000_000:
            target = (f"hybrid {verdict(lat['hybrid'], TARGETS['hybrid_p95_ms_1M'])}; as_of "
                      f"{verdict(lat['hybrid_as_of'], TARGETS['as_of_p95_ms_1M'])}")
        table.append(
            f"| {s['label']} | {s['via']} | {s['matrix_mib']:,.0f} / {s['int8']['mib']:,.0f} MiB "
            f"| {pair(lat['bm25'])} | {pair(lat['hybrid'])} | {pair(lat.get('hybrid_exact'))} "
            f"| {pair(lat['hybrid_int8'])} "
            f"| {pair(lat['hybrid_as_of'])} | {pair(lat['bm25_as_of'])} "
            f"| {pair(lat['dense_scan'])} | {pair(lat['dense_scan_int8'])} "
            f"| {pair(lat['dense_scan_f16'])} | {pair(lat.get('memory_hybrid'))} "
            f"| {s['rss_mib']:,.0f} MiB | {target} |"
        )
    emb = res.get("embed")
    if emb is not None:
        table.append(f"\nQuery embedding (local all-MiniLM-L6-v2, one query), added to "
                     f"hybrid recall by Memory.recall with a real model: {pair(emb)} ms.")
    return head + "\n".join(table)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.recall_speed",
                                description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="10k facts, 100 queries (< 30 s)")
    p.add_argument("--sizes", default=None, help="comma-separated sizes (default 10k,100k,1M)")
    p.add_argument("--queries", type=int, default=None, help="timed queries per row (default 300)")
    p.add_argument("--memory-max", default="100k",
                   help="largest size built through Memory; larger ones use the index layer")
    p.add_argument("--blas-threads", type=int, default=None,
                   help="limit numpy's BLAS to this many threads (threadpoolctl) for the run")
    p.add_argument("--no-embed", action="store_true", help="skip timing the MiniLM query embedding")
    p.add_argument("--out", default=None, help="also write all results as JSON to this file")
    args = p.parse_args(argv)
    args.memory_max = parse_size(args.memory_max)
    if args.sizes:
        sizes = sorted({parse_size(x) for x in args.sizes.split(",") if x.strip()})
    else:
        sizes = [10_000] if args.quick else [10_000, 100_000, 1_000_000]
    if args.queries is None:
        args.queries = 100 if args.quick else 300

    if args.blas_threads is not None:
        from threadpoolctl import threadpool_limits  # the [local] extra installs it

        threadpool_limits(args.blas_threads)
    started = time.perf_counter()
    tmp = TmpDirs()
    given = sys.argv[1:] if argv is None else argv
    res: dict[str, Any] = {
        "command": "python -m bench.recall_speed " + " ".join(given),
        "queries": args.queries, "targets": TARGETS, "dims": DIMS,
        "blas_threads": args.blas_threads,
    }
    try:
        res["machine"] = machine_info(tmp.root)
        section("Machine")
        for k, v in res["machine"].items():
            line(k, str(v))
        res["sizes"] = []
        for n in sizes:
            res["sizes"].append(bench_size(tmp, n, args))
            gc.collect()
        if not args.no_embed:
            section("Query embedding (added to hybrid recall by Memory.recall with a real model)")
            texts = [t for _, t in make_facts(TextGen(seed=SEED), 500)]
            qs = make_queries(texts, (50 if args.quick else 200) + 10, random.Random(SEED))
            res["embed"] = bench_embed(qs)
    finally:
        tmp.cleanup()
    res["total_s"] = time.perf_counter() - started
    section(f"Summary (total {res['total_s']:.1f} s)")
    print()
    print(markdown(res))
    for s in res["sizes"]:
        if s["facts"] >= 1_000_000:
            gb = s["matrix_mib"] * 2**20 / 1e9
            scan = s["latency"]["dense_scan"]["p50_ms"]
            print(f"\n{s['label']}: the dense scan reads the whole {gb:.2f} GB float32 matrix per "
                  f"query ({scan:.0f} ms p50 = {gb / (scan / 1000):.1f} GB/s): memory bandwidth, "
                  "not arithmetic, sets the cost of exact float32 search at this size.")
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2, default=str))
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
