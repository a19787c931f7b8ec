"""What sealing (per-event AES-GCM data keys, the ground of erasure) costs: remember latency,
replay rate and recall latency of a sealed store against one in the clear, in the same process.

Usage::

    python -m bench.sealing_cost                 # 20,000 facts, 1,000 timed remembers
    python -m bench.sealing_cost --facts 100000 --remember 3000

Both stores get the same synthetic facts (bench.synthetic) in batches of 1,000; remembers are
timed one call each with ``fsync="always"``, alternating between the stores in blocks of 100 so
that drift of the machine hits both alike; replay is ``rebuild_projection`` into a new
DuckDB (median of 3, the log read through its sealer); recall is the default recall of 300
queries (median of the per-query times). Prints numbers and ratios; never asserts.
"""

from __future__ import annotations

import argparse
import gc
import random
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.report import fmt_rate, lat_summary, line, section
from bench.synthetic import SEED, TextGen, make_queries
from hmem.memory import Memory
from hmem.storage.store import Store
from replay.rebuild import rebuild_projection

KINDS = ("clear", "sealed")


def open_memory(root: Path, kind: str, **kwargs: Any) -> Memory:
    store = Store(root, seal=kind == "sealed", fsync=kwargs.pop("fsync", "always"))
    return Memory(store=store, embedder=None, **kwargs)


def fill(m: Memory, pairs: list[tuple[str, str]]) -> None:
    for i in range(0, len(pairs), 1000):
        m.remember_many([{"subject": s, "text": t} for s, t in pairs[i:i + 1000]], dedup=False)


def remember_latencies(mems: dict[str, Memory], texts: list[tuple[str, str]]) -> dict[str, list]:
    samples: dict[str, list[float]] = {k: [] for k in mems}
    pc = time.perf_counter
    for start in range(0, len(texts), 100):
        for kind, m in mems.items():
            for subject, text in texts[start:start + 100]:
                t0 = pc()
                m.remember(subject, text, dedup=False)
                samples[kind].append(pc() - t0)
    return samples


def replay_seconds(m: Memory) -> float:
    runs = []
    for _ in range(3):
        gc.collect()
        t0 = time.perf_counter()
        rebuild_projection(m.store.log)
        runs.append(time.perf_counter() - t0)
    return statistics.median(runs)


def recall_median(m: Memory, queries: list[str]) -> float:
    m.recall(queries[0])  # builds the index
    times = []
    for q in queries:
        t0 = time.perf_counter()
        m.recall(q)
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--facts", type=int, default=20_000)
    ap.add_argument("--remember", type=int, default=1_000)
    args = ap.parse_args()
    gen = TextGen(SEED)
    rng = random.Random(SEED)
    pairs = []
    for _ in range(args.facts + args.remember):
        subject = rng.choice(gen.subjects)
        pairs.append((subject, gen.text(subject)))
    queries = make_queries([t for _, t in pairs], 300, random.Random(SEED))
    out: dict[str, dict[str, Any]] = {k: {} for k in KINDS}
    with tempfile.TemporaryDirectory() as tmp:
        mems = {k: open_memory(Path(tmp) / k, k) for k in KINDS}
        try:
            for kind, m in mems.items():
                t0 = time.perf_counter()
                fill(m, pairs[: args.facts])
                out[kind]["bulk_s"] = time.perf_counter() - t0
            lat = remember_latencies(mems, pairs[args.facts:])
            for kind, m in mems.items():
                out[kind]["remember"] = lat_summary(lat[kind])
                out[kind]["replay_s"] = replay_seconds(m)
                out[kind]["recall_s"] = recall_median(m, queries)
                out[kind]["log_bytes"] = m.store.log.size_bytes
        finally:
            for m in mems.values():
                store = m.store
                m.close()
                store.close()
    events = args.facts + args.remember
    section(f"Sealing cost: {args.facts:,} facts in batches of 1,000, then {args.remember:,} "
            f"timed remembers (fsync always), replay of {events:,} events, 300 recalls")
    for kind in KINDS:
        o = out[kind]
        r = o["remember"]
        line(f"{kind:<7} bulk remember_many", f"{o['bulk_s']:.2f} s "
             f"({fmt_rate(args.facts / o['bulk_s'])} facts/s)")
        line(f"{kind:<7} remember p50 / p95", f"{r['p50_ms']:.3f} / {r['p95_ms']:.3f} ms")
        line(f"{kind:<7} replay (median of 3)", f"{o['replay_s']:.2f} s "
             f"({fmt_rate(events / o['replay_s'])} events/s)")
        line(f"{kind:<7} recall median", f"{o['recall_s'] * 1000:.2f} ms")
        line(f"{kind:<7} log size", f"{o['log_bytes'] / 1e6:.1f} MB")
    c, s = out["clear"], out["sealed"]
    line("sealed / clear: bulk, remember p50, replay, recall, log size",
         f"{s['bulk_s'] / c['bulk_s']:.2f}x, "
         f"{s['remember']['p50_ms'] / c['remember']['p50_ms']:.2f}x, "
         f"{s['replay_s'] / c['replay_s']:.2f}x, {s['recall_s'] / c['recall_s']:.2f}x, "
         f"{s['log_bytes'] / c['log_bytes']:.2f}x")


if __name__ == "__main__":
    main()
