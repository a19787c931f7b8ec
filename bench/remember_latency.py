"""Latency of ``Memory.remember`` with an embedder: background embedding against inline.

Usage::

    python -m bench.remember_latency                       # 500 remembers, local MiniLM
    python -m bench.remember_latency --remember 2000 --fsync always
    python -m bench.remember_latency --embedder hash       # no model: the write path alone

For each mode a fresh store gets N ``remember`` calls of LoCoMo-like chat lines (one call per
line, as an agent remembers each turn), each timed; then ``flush()`` is timed (background: the
embeddings still queued when the last remember returned). "until embedded" is the wall time
from the first remember to the last vector recorded, and its rate the facts embedded per
second. Prints numbers and never asserts. Target: remember p50 <= 1 ms and p95 <= 5
ms with the local embedder. The CPU time other processes used meanwhile is printed too: numbers
from a busy machine say so.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path
from typing import Any, cast

from bench.embed_speed import SEED, locomo_like
from bench.report import OtherLoad, fmt_ms, fmt_rate, lat_summary, line, section
from eventlog.log import FsyncPolicy
from hmem import Memory
from hmem.embedders import Embedder, resolve_embedder
from hmem.handle import EMBED_MODES, EmbedMode


def run_mode(
    mode: EmbedMode, embedder: Embedder, texts: list[str], fsync: FsyncPolicy, root: Path
) -> dict[str, Any]:
    """Remember every text into a fresh store at ``root``; the latencies and the flush."""
    samples: list[float] = []
    pc = time.perf_counter
    with OtherLoad() as load, Memory(root, embedder=embedder, embed_mode=mode,
                                     fsync=fsync) as m:
        start = pc()
        for i, text in enumerate(texts):
            t0 = pc()
            m.remember(f"speaker{i % 7}", text)
            samples.append(pc() - t0)
        wrote = pc()
        worker = m.embedding_worker()
        backlog = 0 if worker is None else worker.backlog
        m.flush()
        done = pc()
        vectors = m.stats().vectors
    return {
        "mode": mode, **lat_summary(samples), "write_s": wrote - start, "flush_s": done - wrote,
        "until_embedded_s": done - start, "backlog_at_last_write": backlog, "vectors": vectors,
        "other_cores": load.cores,
    }


def report(r: dict[str, Any], n: int) -> None:
    section(f"{r['mode']}: {n} remembers")
    line("remember latency", f"p50 {fmt_ms(r['p50_ms'])} ms  p95 {fmt_ms(r['p95_ms'])} ms  "
         f"p99 {fmt_ms(r['p99_ms'])} ms  max {fmt_ms(r['max_ms'])} ms")
    line("all remembers (wall)", f"{r['write_s']:.2f} s")
    line("queued when the last remember returned", f"{r['backlog_at_last_write']} facts")
    line("flush()", f"{r['flush_s']:.2f} s")
    line("first remember to last vector recorded",
         f"{r['until_embedded_s']:.2f} s ({fmt_rate(n / r['until_embedded_s'])} facts/s)")
    line("vectors recorded", str(r["vectors"]))
    line("other processes' CPU meanwhile", f"{r['other_cores']:.2f} cores")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.remember_latency", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--remember", type=int, default=500, metavar="N", help="remembers per mode")
    p.add_argument("--embedder", default="local", help="local (default), hash, openai, ...")
    p.add_argument("--fsync", default="never", choices=("always", "batch", "never"),
                   help="the log's fsync policy (default never: the embedder's cost alone)")
    p.add_argument("--modes", default=",".join(EMBED_MODES),
                   help="background,inline (default both)")
    args = p.parse_args(argv)
    embedder = resolve_embedder(args.embedder)
    if embedder is None:
        p.error("choose an embedder: this benchmark compares how writes wait for one")
    rng = random.Random(SEED)
    texts = [locomo_like(rng, 5, 40) for _ in range(args.remember)]
    embedder.embed(["warm up the model", *texts[:8]])  # load weights outside the timings
    line("embedder", f"{embedder.model} ({embedder.dims} dims), fsync {args.fsync}")
    modes = args.modes.split(",")
    if not set(modes) <= set(EMBED_MODES):
        p.error(f"--modes takes {','.join(EMBED_MODES)}")
    for mode in modes:
        with tempfile.TemporaryDirectory(prefix="hmem-remember-") as tmp:
            result = run_mode(cast(EmbedMode, mode), embedder, texts,
                              cast(FsyncPolicy, args.fsync), Path(tmp) / "s")
            report(result, args.remember)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
