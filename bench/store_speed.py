"""Parts 3-5 of ``bench.core``: a store of N synthetic facts built through ``Memory``, then
replayed (log open, decode, ``rebuild_projection``, writer reopen without the projection file),
opened (writer, read-only) and recalled (default, ``as_of``, ``Memory.as_of``).

``bench.scale`` reuses :func:`bench_replay` on its own stores.
"""

from __future__ import annotations

import gc
import os
import random
import statistics
import time
from functools import partial
from pathlib import Path
from typing import Any

from bench.report import fmt_ms, fmt_rate, lat_summary, line, section, size_label, timed
from bench.synthetic import SEED, TextGen, TmpDirs, build_store, make_queries
from eventlog.log import EventLog
from hmem.adapters.progress import progress_bar, track
from hmem.memory import Memory
from hmem.storage.keys import DirectoryBinding, key_path, open_sealer
from projections.checkpoint import CHECKPOINT_FILE
from replay.rebuild import rebuild_projection

__all__ = ["bench_open", "bench_recall", "bench_replay", "bench_size", "remove_projection"]

# ---------------------------------------------------------------------------------- 3. replay


def remove_projection(root: Path) -> None:
    """Delete the store's derived state on disk (its checkpoint): the next open replays."""
    (root / CHECKPOINT_FILE).unlink(missing_ok=True)


def bench_replay(root: Path, events: int, quick: bool) -> dict[str, Any]:
    repeats = 3 if events <= 20_000 else 2
    out: dict[str, Any] = {"events": events}
    # (a) open the log (scan: CRC + blake2b chain check of every record) and decode it
    t0 = time.perf_counter()
    log = EventLog(root / "log", read_only=True)
    log.sealer = open_sealer(log, key_path(root, None), DirectoryBinding(root),
                             seal=False)  # a sealed log's keys
    out["log_open_s"] = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        n = sum(1 for _ in log.read())
        out["log_decode_s"] = time.perf_counter() - t0
        assert n == events
        # (b) rebuild_projection: every event folded into a new state
        runs = []
        for _ in range(repeats):
            gc.collect()
            t0 = time.perf_counter()
            rebuild_projection(log)
            runs.append(time.perf_counter() - t0)
        out["rebuild_runs_s"] = runs
        out["rebuild_s"] = statistics.median(runs)
        out["rebuild_events_per_s"] = events / out["rebuild_s"]
    finally:
        log.close()
        if log.sealer is not None:
            log.sealer.keys.close()
    # (c) full writer reopen after deleting the checkpoint (replay + publish a new one)
    remove_projection(root)
    gc.collect()
    t0 = time.perf_counter()
    mem = Memory(root, embedder=None)
    out["reopen_no_projection_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    mem.close()
    out["reopen_no_projection_close_s"] = time.perf_counter() - t0
    out["reopen_events_per_s"] = events / out["reopen_no_projection_s"]
    line(f"log open (scan + verify chain), {events:,} events",
         f"{out['log_open_s']:.3f} s  ({fmt_rate(events / out['log_open_s'])} events/s)")
    line("log.read() decode only",
         f"{out['log_decode_s']:.3f} s  ({fmt_rate(events / out['log_decode_s'])} events/s)")
    line(f"rebuild_projection (median of {repeats})",
         f"{out['rebuild_s']:.3f} s  ({fmt_rate(out['rebuild_events_per_s'])} events/s)")
    line("reopen writer after deleting the checkpoint",
         f"{out['reopen_no_projection_s']:.3f} s  ({fmt_rate(out['reopen_events_per_s'])} "
         f"events/s), close {out['reopen_no_projection_close_s']:.3f} s")
    return out


# ---------------------------------------------------------------------------------- 4. open


def bench_open(root: Path, events: int, quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    runs = []
    for _ in range(3):
        gc.collect()
        t0 = time.perf_counter()
        mem = Memory(root, embedder=None)
        runs.append(time.perf_counter() - t0)
        mem.close()
    out["writer_open_runs_s"] = runs
    out["writer_open_s"] = statistics.median(runs)
    out["read_only_open_runs_s"] = _reader_opens(root)
    out["read_only_open_s"] = statistics.median(out["read_only_open_runs_s"])
    checkpoint = root / CHECKPOINT_FILE
    aside = root / "checkpoint.aside"
    os.replace(checkpoint, aside)  # what a reader did before checkpoints: replay the whole log
    try:
        out["read_only_replay_runs_s"] = _reader_opens(root)
    finally:
        os.replace(aside, checkpoint)
    out["read_only_replay_s"] = statistics.median(out["read_only_replay_runs_s"])
    line("open writer from its checkpoint (median of 3)", f"{out['writer_open_s']:.3f} s")
    line("open read-only from the writer's checkpoint (median of 2)",
         f"{out['read_only_open_s']:.3f} s")
    line("open read-only without a checkpoint (replays the log, median of 2)",
         f"{out['read_only_replay_s']:.3f} s  ({fmt_rate(events / out['read_only_replay_s'])} "
         f"events/s)")
    return out


def _reader_opens(root: Path) -> list[float]:
    runs = []
    for _ in range(2):
        gc.collect()
        t0 = time.perf_counter()
        mem = Memory(root, read_only=True, embedder=None)
        runs.append(time.perf_counter() - t0)
        assert mem.store.checkpoints.seq in (0, mem.last_seq)
        mem.close()
    return runs


# ---------------------------------------------------------------------------------- 5. recall


def bench_recall(
    root: Path, texts: list[str], quick: bool, rng: random.Random, *, time_travel: bool,
    quiet: bool = False,
) -> dict[str, Any]:
    n_q = 200 if quick else 500
    queries = make_queries(texts, n_q + 50, rng)
    out: dict[str, Any] = {}
    mem = Memory(root, embedder=None)
    try:
        for q in queries[:50]:  # warm-up
            mem.recall(q)
        samples: list[float] = []
        hits = 0
        for q in track(queries[50:], "recall", "queries", quiet=quiet, leave=False):
            hits += len(timed(partial(mem.recall, q), samples))
        out["recall"] = lat_summary(samples)
        out["recall"]["mean_hits"] = hits / n_q
        r = out["recall"]
        line(f"recall (default), {n_q} queries of 2-4 words",
             f"p50 {fmt_ms(r['p50_ms'])} ms  p95 {fmt_ms(r['p95_ms'])} ms  "
             f"p99 {fmt_ms(r['p99_ms'])} ms  ({r['mean_hits']:.1f} hits)")
        if not time_travel:
            return out
        mid = mem.last_seq // 2
        out["as_of_seq"] = mid
        for q in queries[:20]:
            mem.recall(q, as_of=mid)
        samples = []
        for q in queries[50:]:
            timed(partial(mem.recall, q, as_of=mid), samples)
        out["recall_as_of"] = lat_summary(samples)
        r = out["recall_as_of"]
        line(f"recall(as_of=seq {mid:,}), {n_q} queries",
             f"p50 {fmt_ms(r['p50_ms'])} ms  p95 {fmt_ms(r['p95_ms'])} ms  "
             f"p99 {fmt_ms(r['p99_ms'])} ms")
        # Memory.as_of returns every row believed at that seq: many rows, so few repetitions.
        rows = len(mem.as_of(mid))  # warm-up
        samples = []
        budget = 5.0 if quick else 30.0
        t_end = time.perf_counter() + budget
        while len(samples) < 50 and (len(samples) < 5 or time.perf_counter() < t_end):
            timed(lambda: mem.as_of(mid), samples)
        out["memory_as_of"] = lat_summary(samples)
        out["memory_as_of"]["rows"] = rows
        r = out["memory_as_of"]
        line(f"Memory.as_of(seq {mid:,}) -> {rows:,} rows, n={r['n']}",
             f"p50 {fmt_ms(r['p50_ms'])} ms  p95 {fmt_ms(r['p95_ms'])} ms  "
             f"({r['p50_ms'] * 1000 / max(rows, 1):.2f} us/row)")
    finally:
        mem.close()
    return out


def bench_size(
    tmp: TmpDirs, gen: TextGen, n_facts: int, quick: bool, *, quiet: bool = False
) -> dict[str, Any]:
    label = size_label(n_facts)
    section(f"3-5. Store with {n_facts:,} facts ({label})")
    root = tmp.new(f"store-{label}")
    rng = random.Random(SEED + n_facts)
    with progress_bar("building", "facts", quiet=quiet, leave=False) as progress:
        built = build_store(root, gen, n_facts, rng, progress)
    texts = built.pop("texts")
    events = built["events"]
    line("built via Memory (fsync=never, one DuckDB flush at close)",
         f"{events:,} events {built['counts']}")
    line("  build: Memory calls (text generation excluded) / close (DuckDB write)",
         f"{built['apply_s']:.2f} s ({fmt_rate(events / built['apply_s'])} events/s) / "
         f"{built['close_s']:.2f} s")
    out: dict[str, Any] = {"facts": n_facts, "build": built}
    out["replay"] = bench_replay(root, events, quick)
    out["open"] = bench_open(root, events, quick)
    out.update(bench_recall(root, texts, quick, rng, time_travel=True, quiet=quiet))
    tmp.remove(root)
    return out
