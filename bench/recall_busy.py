"""Recall while the background embedder is busy, beside recall with it idle, in one run.

Usage::

    python -m bench.recall_busy                    # 2,000 settled facts, 600 written then asked
    python -m bench.recall_busy --settled 5000 --burst 1000

An agent writes a burst of turns and asks at once, as agents do: ``remember`` returns before
the vector exists and the store's worker embeds the burst behind it (the local MiniLM model, in
a child process, then, for comparison, on a thread of the asking process: ``--behind``).
A store of ``--settled`` LoCoMo-like facts, every vector in, is asked ``--queries`` recalls with
the worker idle; then ``--burst`` more facts are remembered one call each and the same queries
are asked while the worker's backlog is not empty. Printed: recall p50 / p95 in both phases,
their ratio to the mean of the idle p95 before and after the burst (the target: busy p95 within
1.5x of idle p95; the machine's speed drifts within minutes), how many recalls ran while the
worker was busy, and how long the burst took to embed. Prints numbers and never asserts.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.embed_speed import SEED, locomo_like
from bench.report import OtherLoad, fmt_ms, lat_summary, line, section
from bench.synthetic import make_queries
from hmem import Memory

__all__ = ["main", "run"]


def run(settled: int, burst: int, queries: int, behind: str = "process") -> dict[str, Any]:
    from hmem.embedders.local import LocalEmbedder

    rng = random.Random(SEED)
    texts = [locomo_like(rng, 5, 40) for _ in range(settled + burst)]
    asked = make_queries(texts, queries, random.Random(SEED + 1))
    embedder = LocalEmbedder(behind=behind)
    embedder.embed(["warm up the model"])
    out: dict[str, Any] = {"settled": settled, "burst": burst}
    with tempfile.TemporaryDirectory(prefix="hmem-busy-") as d:
        mem = Memory(Path(d) / "s", embedder=embedder, fsync="batch")
        try:
            mem.remember_many([{"subject": "user", "text": t} for t in texts[:settled]],
                              dedup=False)
            mem.flush()
            for q in asked[:20]:
                mem.recall(q)  # the index built, the code paths warm
            out["idle"] = lat_summary(_timed(mem, asked))
            busy: list[float] = []
            started = time.perf_counter()
            for t in texts[settled:]:
                mem.remember("user", t, dedup=False)
            written = time.perf_counter()
            i = 0
            while mem.stats().embedding_backlog and i < 10 * queries:
                t0 = time.perf_counter()
                mem.recall(asked[i % len(asked)], limit=10)
                busy.append(time.perf_counter() - t0)
                i += 1
            mem.flush()
            out["embedded_s"] = time.perf_counter() - started
            out["idle_after"] = lat_summary(_timed(mem, asked))  # the machine drifts
            out["write_s"] = written - started
            out["busy"] = lat_summary(busy) if busy else None
        finally:
            mem.close()
    return out


def _timed(mem: Memory, asked: list[str]) -> list[float]:
    times = []
    for q in asked:
        t0 = time.perf_counter()
        mem.recall(q, limit=10)
        times.append(time.perf_counter() - t0)
    return times


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.recall_busy",
                                description=__doc__.split("\n")[0])
    p.add_argument("--settled", type=int, default=2000)
    p.add_argument("--burst", type=int, default=600)
    p.add_argument("--queries", type=int, default=200)
    p.add_argument("--behind", nargs="+", choices=("process", "thread"),
                   default=["process", "thread"],
                   help="where the worker embeds (LocalEmbedder's behind): each in turn")
    args = p.parse_args(argv)
    for behind in args.behind:
        report(args, behind)
    return 0


def report(args: argparse.Namespace, behind: str) -> None:
    section(f"recall with the embedder idle and busy ({args.settled:,} settled facts, a burst "
            f"of {args.burst:,}, local MiniLM, the worker embedding in a {behind})")
    with OtherLoad() as load:
        out = run(args.settled, args.burst, args.queries, behind)
    idle, after, busy = out["idle"], out["idle_after"], out["busy"]
    for label, phase in (("recall, embedder idle (before)", idle),
                         ("recall, embedder idle (after)", after)):
        line(label, f"p50 {fmt_ms(phase['p50_ms'])} ms  p95 {fmt_ms(phase['p95_ms'])} ms  "
                    f"(n={phase['n']})")
    if busy is None:
        line("recall, embedder busy", "the burst was embedded before the first recall")
    else:
        line("recall, embedder busy", f"p50 {fmt_ms(busy['p50_ms'])} ms  p95 "
             f"{fmt_ms(busy['p95_ms'])} ms  (n={busy['n']})")
        ratio = busy["p95_ms"] / ((idle["p95_ms"] + after["p95_ms"]) / 2)
        line("busy p95 / idle p95, before and after (target <= 1.5)",
             f"{ratio:.2f}  {'ok' if ratio <= 1.5 else 'MISS'}")
    line(f"the burst: {args.burst:,} remembers, then embedded",
         f"written in {out['write_s']:.2f} s, embedded {out['embedded_s']:.1f} s after the first")
    line("CPU used by other processes (cores)", f"{load.cores:.2f}")


if __name__ == "__main__":
    raise SystemExit(main())
