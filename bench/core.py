"""Core benchmarks for hmem: append, remember, replay, recall, time travel and open.

Usage::

    python -m bench.core                          # full run: 10k and 100k facts (a few minutes)
    python -m bench.core --quick                  # smoke run: 2k facts, well under a minute
    python -m bench.core --facts 10000,50000 --out results.json

The script prints numbers and never asserts. Each section says what it measures; the final
Markdown table (paste it into a README) compares the headline numbers with the targets:

* recall p95 < 10 ms at 100k facts
* replay >= 100,000 events/s
* batched append (``append_many``, 1000 per batch) >= 100,000 events/s with fsync=never
* one ``Memory.remember`` with fsync=always: p50 < 1 ms

Workload: deterministic synthetic sentences (60-120 characters) about a few hundred subjects,
words drawn with Zipf-like weights from a fixed word list (seeded RNG). Stores are built through
``Memory`` with fsync=never: ~87% remember, ~10% revise (half with ``valid_from``, half
corrections, always of a live chain head) and ~3% forget, with a simulated clock advancing
5 minutes per event. Everything lives in temporary directories under /tmp, removed at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from bench.report import (
    fmt_ms,
    fmt_rate,
    lat_summary,
    line,
    machine_info,
    ms,
    pct,
    section,
    size_label,
)
from bench.store_speed import bench_size
from bench.synthetic import TextGen, TmpDirs, make_events
from eventlog.log import EventLog
from hmem.memory import Memory

# Where the parts live: the workload (TextGen, build_store, TmpDirs) in bench.synthetic, parts
# 3-5 (a store of N facts: replay, open, recall) in bench.store_speed, the shared measuring and
# printing helpers in bench.report; parts 1-2, the summary table and the command are here.

TARGETS = {
    "recall_p95_ms": 10.0,
    "replay_events_per_s": 100_000.0,
    "append_many_never_events_per_s": 100_000.0,
    "remember_fsync_p50_ms": 1.0,
}

# ---------------------------------------------------------------------------------- 1. append


def bench_append(tmp: TmpDirs, gen: TextGen, quick: bool) -> list[dict[str, Any]]:
    section("1. EventLog append throughput (FactRemembered, ~60-120 char texts)")
    n_single = {"always": 300 if quick else 2_000, "batch": 5_000 if quick else 50_000,
                "never": 5_000 if quick else 50_000}
    n_many = {"always": 10_000 if quick else 100_000, "batch": 20_000 if quick else 200_000,
              "never": 20_000 if quick else 200_000}
    warm = 200
    events = make_events(gen, max(max(n_single.values()), max(n_many.values())) + warm)
    sizes = [len(msgspec.msgpack.encode(e)) for e in events[:1000]]
    line("mean encoded event size (bytes, before framing)", f"{statistics.fmean(sizes):.0f}")
    results = []
    for mode in ("single", "many"):
        for policy in ("always", "batch", "never"):
            n = (n_single if mode == "single" else n_many)[policy]
            d = tmp.new(f"append-{mode}-{policy}")
            log = EventLog(d / "log", fsync=policy)  # type: ignore[arg-type]
            try:
                # warm-up: first segment created, code paths hot (not timed)
                log.append_many(events[:warm])
                evs = events[warm : warm + n]
                if mode == "single":
                    append = log.append
                    t0 = time.perf_counter()
                    for ev in evs:
                        append(ev)
                    elapsed = time.perf_counter() - t0
                else:
                    batches = [evs[i : i + 1000] for i in range(0, n, 1000)]
                    append_many = log.append_many
                    t0 = time.perf_counter()
                    for b in batches:
                        append_many(b)
                    elapsed = time.perf_counter() - t0
                size = log.size_bytes
            finally:
                log.close()
            tmp.remove(d)
            rate = n / elapsed
            label = "append (1 per call)" if mode == "single" else "append_many (1000 per call)"
            line(f"{label}, fsync={policy}, n={n:,}",
                 f"{fmt_rate(rate)} events/s  ({elapsed * 1e6 / n:.1f} us/event, "
                 f"{size / (warm + n):.0f} B/record)")
            results.append({"mode": mode, "fsync": policy, "n": n, "seconds": elapsed,
                            "events_per_s": rate})
    return results


# ---------------------------------------------------------------------------------- 2. remember


def bench_remember(tmp: TmpDirs, gen: TextGen, quick: bool) -> dict[str, Any]:
    section("2. Memory.remember latency (check + log append + fold; a checkpoint at 1,000 or 1%)")
    n = 500 if quick else 2_000
    warm = 100 if quick else 200
    out: dict[str, Any] = {}
    for policy in ("always", "never"):
        d = tmp.new(f"remember-{policy}")
        mem = Memory(d, fsync=policy, embedder=None)  # type: ignore[arg-type]
        try:
            items = []
            for _ in range(n + warm):
                s = gen.subject()
                items.append((s, gen.text(s)))
            for s, t in items[:warm]:
                mem.remember(s, t)
            store = mem.store
            samples, flushed = [], []
            pc = time.perf_counter
            for s, t in items[warm:]:
                before = store.checkpoints.seq
                t0 = pc()
                mem.remember(s, t)
                samples.append(pc() - t0)
                flushed.append(store.checkpoints.seq != before)  # published a checkpoint
        finally:
            mem.close()
        tmp.remove(d)
        summ = lat_summary(samples)
        plain = [x for x, f in zip(samples, flushed, strict=True) if not f]
        flush = [x for x, f in zip(samples, flushed, strict=True) if f]
        summ["p50_no_flush_ms"] = pct([ms(x) for x in plain], 50)[0] if plain else None
        summ["flush_calls"] = len(flush)
        summ["flush_mean_ms"] = ms(statistics.fmean(flush)) if flush else None
        out[policy] = summ
        line(f"remember fsync={policy}, n={n:,}",
             f"p50 {fmt_ms(summ['p50_ms'])} ms  p95 {fmt_ms(summ['p95_ms'])} ms  "
             f"p99 {fmt_ms(summ['p99_ms'])} ms  max {fmt_ms(summ['max_ms'])} ms")
        if flush:
            line(f"  of which calls that published a checkpoint ({len(flush)})",
                 f"mean {fmt_ms(summ['flush_mean_ms'])} ms; others p50 "
                 f"{fmt_ms(summ['p50_no_flush_ms'])} ms")
    return out
# ---------------------------------------------------------------------------------- report


def markdown(res: dict[str, Any]) -> str:
    m = res["machine"]
    rows: list[tuple[str, str, str, str, str]] = []

    def add(metric: str, size: str, value: str, target: str = "", ratio: str = "") -> None:
        rows.append((metric, size, value, target, ratio))

    def thr(value: float, target: float) -> str:  # throughput: achieved / required
        r = value / target
        return f"{r:.2f}x {'ok' if r >= 1 else 'MISS'}"

    def lat(value: float, target: float) -> str:  # latency: budget / achieved
        r = target / value
        return f"{r:.2f}x {'ok' if r >= 1 else 'MISS'}"

    for a in res["append"]:
        name = "append, 1 per call" if a["mode"] == "single" else "append_many, 1000 per call"
        target = ratio = ""
        if a["mode"] == "many" and a["fsync"] == "never":
            t = TARGETS["append_many_never_events_per_s"]
            target, ratio = f">= {fmt_rate(t)}", thr(a["events_per_s"], t)
        add(f"{name}, fsync={a['fsync']} (events/s)", f"{a['n']:,} ev",
            fmt_rate(a["events_per_s"]), target, ratio)
    for policy, r in res["remember"].items():
        target = ratio = ""
        if policy == "always":
            t = TARGETS["remember_fsync_p50_ms"]
            target, ratio = f"p50 < {t:g} ms", lat(r["p50_ms"], t)
        add(f"Memory.remember, fsync={policy} p50 / p95 / p99 (ms)", f"{r['n']:,} calls",
            f"{fmt_ms(r['p50_ms'])} / {fmt_ms(r['p95_ms'])} / {fmt_ms(r['p99_ms'])}",
            target, ratio)
    for s in res["sizes"]:
        lbl = f"{size_label(s['facts'])} facts"
        rp = s["replay"]
        t = TARGETS["replay_events_per_s"]
        add("replay: rebuild_projection, in-memory DuckDB (events/s)",
            f"{lbl} ({rp['events']:,} ev)", fmt_rate(rp["rebuild_events_per_s"]),
            f">= {fmt_rate(t)}", thr(rp["rebuild_events_per_s"], t))
        add("replay: reopen after deleting the checkpoint (s)", lbl,
            f"{rp['reopen_no_projection_s']:.2f} ({fmt_rate(rp['reopen_events_per_s'])} ev/s)",
            f">= {fmt_rate(t)} ev/s", thr(rp["reopen_events_per_s"], t))
        add("log open: scan + verify checksums/chain (events/s)", lbl,
            fmt_rate(rp["events"] / rp["log_open_s"]))
        add("log read + decode (events/s)", lbl, fmt_rate(rp["events"] / rp["log_decode_s"]))
        r = s["recall"]
        target = ratio = ""
        if s["facts"] >= 100_000:
            t = TARGETS["recall_p95_ms"]
            target, ratio = f"p95 < {t:g} ms", lat(r["p95_ms"], t)
        add("recall (default) p50 / p95 (ms)", lbl,
            f"{fmt_ms(r['p50_ms'])} / {fmt_ms(r['p95_ms'])}", target, ratio)
        if "recall_as_of" in s:
            r = s["recall_as_of"]
            add("recall(as_of=mid seq) p50 / p95 (ms)", lbl,
                f"{fmt_ms(r['p50_ms'])} / {fmt_ms(r['p95_ms'])}")
        if "memory_as_of" in s:
            r = s["memory_as_of"]
            add(f"Memory.as_of(mid seq) p50 / p95 (ms), {r['rows']:,} rows", lbl,
                f"{fmt_ms(r['p50_ms'])} / {fmt_ms(r['p95_ms'])}")
        o = s["open"]
        add("open writer, warm projection (s)", lbl, f"{o['writer_open_s']:.3f}")
        add("open read-only, from the checkpoint (s)", lbl, f"{o['read_only_open_s']:.3f}")
        if "read_only_replay_s" in o:
            add("open read-only, no checkpoint: replays log (s)", lbl,
                f"{o['read_only_replay_s']:.3f}")
    head = (
        f"Machine: {m['cpu']}, {m['cores']} cores, {m['mem_gib']} GiB, {m['tmp_fs']}; "
        f"Python {m['python']}, DuckDB {m['duckdb']}, NumPy {m['numpy']}, "
        f"msgspec {m['msgspec']}. Command: `{res['command']}`.\n"
        "Ratio = achieved/required for throughput, budget/achieved for latency "
        "(>= 1 meets the target).\n\n"
    )
    table = ["| Metric | Size | Result | Target | Ratio |", "|---|---|---|---|---|"]
    table += [f"| {a} | {b} | {c} | {d} | {e} |" for a, b, c, d, e in rows]
    return head + "\n".join(table)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.core", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small sizes (2k facts), < ~30 s")
    p.add_argument("--facts", default=None,
                   help="comma-separated store sizes in facts (default 10000,100000)")
    p.add_argument("--out", default=None, help="also write all results as JSON to this file")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    args = p.parse_args(argv)
    if args.facts:
        sizes = [int(x.replace("_", "").replace("k", "000")) for x in args.facts.split(",") if x]
    else:
        sizes = [2_000] if args.quick else [10_000, 100_000]
    sizes = sorted(set(sizes))

    started = time.perf_counter()
    tmp = TmpDirs()
    res: dict[str, Any] = {"command": "python -m bench.core " + " ".join(argv or sys.argv[1:]),
                           "quick": args.quick, "sizes_requested": sizes, "targets": TARGETS}
    try:
        res["machine"] = machine_info(tmp.root)
        section("Machine")
        for k, v in res["machine"].items():
            line(k, str(v))
        line("gc", f"enabled={gc.isenabled()} thresholds={gc.get_threshold()}")
        gen = TextGen()
        res["append"] = bench_append(tmp, gen, args.quick)
        res["remember"] = bench_remember(tmp, gen, args.quick)
        res["sizes"] = [
            bench_size(tmp, gen, n, args.quick, quiet=args.quiet) for n in sizes
        ]
    finally:
        tmp.cleanup()
    res["total_s"] = time.perf_counter() - started
    section(f"Summary (total {res['total_s']:.1f} s)")
    print()
    print(markdown(res))
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2, default=str))
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
