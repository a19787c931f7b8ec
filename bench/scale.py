"""The cost curve of hmem from 10k to 1M facts: append, replay, time travel, bytes, RSS, recall.

Usage::

    python -m bench.scale                        # 10k, 100k, 1M (tens of minutes on 2 cores)
    python -m bench.scale --quick                # 10k, fewer queries (< 60 s)
    python -m bench.scale --sizes 10k,100k --out scale.json

Prints numbers and never asserts. Each size runs in its own child process, so the RSS figures
of one size do not include the leftovers of another. Per size ``N``:

1. **Log** (``EventLog.append_many``, 1000 events per call, one run per fsync policy
   ``always``, ``batch``, ``never``): ``N`` ``FactRemembered`` events over many namespaces and
   one large one: every other fact goes to namespace ``big`` (N/2 facts), the rest to
   namespaces of 200 facts each (``u00000``, ``u00001``, ...: one user with 200 memories, as in
   the seed's scale story). Texts are ``bench.recall_speed.make_facts``: 1, 2 or 4 synthetic
   sentences (60-480 characters), a third with a rare token (an order number, a ticket id).
   Log bytes per fact are the segment files' size over ``N``.
2. **Replay** of the ``never`` log through the public path, ``bench.core.bench_replay``: log
   open (scan + checksum chain), decode, ``rebuild_projection`` into an in-memory DuckDB, and a
   writer reopen after deleting ``projection.duckdb`` (replay + write the file). Projection
   bytes per fact are the DuckDB file size over ``N`` after that reopen.
3. **Time travel** on that store at seq N/2: ``Memory.as_of`` of the large namespace (every
   row believed then: N/4 rows), ``Memory.as_of`` of a 200-fact namespace (a point query: one
   user's beliefs), and ``Memory.recall(q, as_of=seq)`` in the large namespace (BM25, the
   vectorised visibility masks). RSS with the store open.
4. **Recall** in one namespace of ``N`` facts with a 384-d vector each: ``bench.recall_speed``
   (BM25-only and hybrid, float32 and int8 vectors, current and ``as_of``; built through
   ``Memory`` up to ``--memory-max``, at the index layer above it; see its docstring).

The stores of parts 1-3 hold text only; bytes per fact *with* a float32 vector come from
part 4's ``Memory``-built stores. Everything lives under /tmp and is removed at the end.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import msgspec

from bench import recall_speed
from bench.core import (
    SEED,
    TextGen,
    TmpDirs,
    bench_replay,
    fmt_ms,
    fmt_rate,
    lat_summary,
    line,
    machine_info,
    make_queries,
    section,
    timed,
)
from bench.embed_speed import OtherLoad
from eventlog.events import FactRemembered
from eventlog.log import EventLog
from hmem.memory import Memory

BIG = "big"
PER_USER = 200  # facts per small namespace
POLICIES = ("always", "batch", "never")
TARGETS = {"hybrid_p95_ms_100k": 10.0, "hybrid_p95_ms_1M": 25.0,
           "replay_events_per_s": 200_000.0, "as_of_p95_ms_1M": 20.0}
_BASE = datetime(2024, 1, 1, tzinfo=timezone.utc)


def namespace_of(i: int) -> str:
    return BIG if i % 2 == 0 else f"u{(i // 2) // PER_USER:05d}"


def workload(n: int) -> list[FactRemembered]:
    facts = recall_speed.make_facts(TextGen(seed=SEED + 7 * n), n)
    return [
        FactRemembered(
            tx_at=_BASE + timedelta(days=400, milliseconds=i), namespace=namespace_of(i),
            subject=subject, text=text, valid_from=recall_speed.valid_from(i, n),
            source_ref=recall_speed.source_ref(i // 2),
        )
        for i, (subject, text) in enumerate(facts)
    ]


# ---------------------------------------------------------------------------------- parts 1-3


def bench_log(tmp: TmpDirs, events: list[FactRemembered]) -> tuple[dict[str, Any], Path]:
    """Append throughput per fsync policy; returns the results and the root of the ``never``
    store (kept for replay)."""
    n = len(events)
    enc = msgspec.msgpack.Encoder()
    sample = events[:2000]
    out: dict[str, Any] = {"encoded_bytes": statistics.fmean(len(enc.encode(e)) for e in sample)}
    keep = Path()
    for policy in POLICIES:
        root = tmp.new(f"log-{policy}")
        log = EventLog(root / "log", fsync=policy)  # type: ignore[arg-type]
        try:
            t0 = time.perf_counter()
            for start in range(0, n, 1000):
                log.append_many(events[start : start + 1000])
            elapsed = time.perf_counter() - t0
            size = log.size_bytes
        finally:
            log.close()
        out[policy] = {"seconds": elapsed, "events_per_s": n / elapsed}
        out["log_bytes_per_fact"] = size / n
        line(f"append_many x1000, fsync={policy}, {n:,} facts",
             f"{fmt_rate(n / elapsed)} events/s  ({size / n:.0f} B/fact on disk)")
        if policy == "never":
            keep = root
        else:
            tmp.remove(root)
    return out, keep


def bench_time_travel(root: Path, n: int, queries: list[str], quick: bool) -> dict[str, Any]:
    out: dict[str, Any] = {}
    t0 = time.perf_counter()
    mem = Memory(root, namespace=BIG, embedder=None)
    try:
        mem.recall("warm up")  # opens the store and builds the recall indexes
        out["open_s"] = time.perf_counter() - t0
        out["rss_mib"] = recall_speed.rss_mib()
        line("open writer with warm projection + build recall indexes",
             f"{out['open_s']:.1f} s, RSS {out['rss_mib']:,.0f} MiB")
        mid = mem.last_seq // 2
        out["as_of_seq"] = mid
        budget = 3.0 if quick else 20.0

        def repeat(fn: Any, most: int) -> list[float]:
            fn()  # warm-up
            samples: list[float] = []
            end = time.perf_counter() + budget
            while len(samples) < most and (len(samples) < 5 or time.perf_counter() < end):
                timed(fn, samples)
            return samples

        rows = len(mem.as_of(mid))
        out["as_of_big"] = lat_summary(repeat(lambda: mem.as_of(mid), 30)) | {"rows": rows}
        users = max(1, (mid // 2) // PER_USER)  # namespaces complete by seq mid
        rng = random.Random(SEED)
        views = [mem.in_namespace(f"u{rng.randrange(users):05d}") for _ in range(100)]
        it = iter(views * 10)
        small_rows = len(views[0].as_of(mid))
        out["as_of_user"] = lat_summary(repeat(lambda: next(it).as_of(mid), 100)) | {
            "rows": small_rows}
        qs = iter(queries * 10)
        out["recall_as_of"] = lat_summary(repeat(lambda: mem.recall(next(qs), as_of=mid), 200))
    finally:
        mem.close()
    for key, label in (("as_of_big", f"Memory.as_of(seq {mid:,}), namespace {BIG}"),
                       ("as_of_user", f"Memory.as_of(seq {mid:,}), one {PER_USER}-fact namespace"),
                       ("recall_as_of", f"Memory.recall(q, as_of={mid:,}), {BIG}, BM25")):
        r = out[key]
        rows_note = f", {r['rows']:,} rows" if "rows" in r else ""
        line(f"{label}{rows_note}, n={r['n']}",
             f"p50 {fmt_ms(r['p50_ms'])} ms  p95 {fmt_ms(r['p95_ms'])} ms")
    return out


class CpuWall:
    """Wall and CPU seconds of this process (all threads) over a block: on a shared machine
    a CPU/wall share well below 1 means the process waited for a core, not for hmem."""

    def __init__(self, out: dict[str, Any], key: str) -> None:
        self.out, self.key = out, key

    def __enter__(self) -> CpuWall:
        self.t0, self.c0 = time.perf_counter(), _cpu()
        return self

    def __exit__(self, *exc: object) -> None:
        wall, cpu = time.perf_counter() - self.t0, _cpu() - self.c0
        self.out[self.key] = {"wall_s": wall, "cpu_s": cpu, "share": cpu / wall if wall else 0}
        line(f"  ({self.key}: wall {wall:.1f} s, CPU {cpu:.1f} s of this process)",
             f"CPU/wall {cpu / wall if wall else 0:.2f}")


def _cpu() -> float:
    t = os.times()
    return t.user + t.system


def run_size(n: int, args: argparse.Namespace) -> dict[str, Any]:
    """Everything for one size (runs in a child process)."""
    tmp = TmpDirs()
    out: dict[str, Any] = {"facts": n, "label": label_of(n)}
    cpu: dict[str, Any] = {}
    out["cpu"] = cpu
    try:
        section(f"{out['label']} facts: log, replay, time travel ({BIG} = N/2, "
                f"{max(1, n // 2 // PER_USER):,} namespaces of {PER_USER})")
        t0 = time.perf_counter()
        events = workload(n)
        texts = [e.text for e in events if e.namespace == BIG]
        line("generate workload (not timed below)", f"{time.perf_counter() - t0:.1f} s, mean "
             f"{statistics.fmean(len(e.text) for e in events):.0f} chars/text")
        with CpuWall(cpu, "log"):
            out["log"], root = bench_log(tmp, events)
        del events
        gc.collect()
        with CpuWall(cpu, "replay"):
            out["replay"] = bench_replay(root, n, args.quick)
        out["projection_bytes_per_fact"] = (root / "projection.duckdb").stat().st_size / n
        line("projection.duckdb bytes per fact (text only)",
             f"{out['projection_bytes_per_fact']:,.0f}")
        queries = make_queries(texts, 300, random.Random(SEED + n))
        with CpuWall(cpu, "time_travel"):
            out["time_travel"] = bench_time_travel(root, n, queries, args.quick)
        tmp.remove(root)
        gc.collect()
        with CpuWall(cpu, "recall"):
            out["recall"] = recall_speed.bench_size(tmp, n, args)
    finally:
        tmp.cleanup()
    return out


def label_of(n: int) -> str:
    return f"{n / 1e6:g}M" if n >= 1_000_000 else f"{n / 1e3:g}k" if n >= 1000 else str(n)


# ---------------------------------------------------------------------------------- report


def metrics(s: dict[str, Any]) -> list[tuple[str, float | None, str]]:
    """(name, value, kind) per metric of one size; kind is "rate", "ms", "bytes" or "mib"."""
    lg, rp, tt, rc = s["log"], s["replay"], s["time_travel"], s["recall"]
    lat = rc["latency"]
    rows: list[tuple[str, float | None, str]] = [
        (f"append_many, fsync={p} (events/s)", lg[p]["events_per_s"], "rate") for p in POLICIES
    ]
    rows += [
        ("log bytes per fact, text only", lg["log_bytes_per_fact"], "bytes"),
        ("projection bytes per fact, text only", s["projection_bytes_per_fact"], "bytes"),
        ("log bytes per fact, with 384-d f32 vector", rc.get("bytes_per_fact", {}).get("log"),
         "bytes"),
        ("projection bytes per fact, with vector",
         rc.get("bytes_per_fact", {}).get("projection"), "bytes"),
        ("log open: scan + verify (events/s)", rp["events"] / rp["log_open_s"], "rate"),
        ("log read + decode (events/s)", rp["events"] / rp["log_decode_s"], "rate"),
        ("replay: rebuild_projection, in-memory DuckDB (events/s)",
         rp["rebuild_events_per_s"], "rate"),
        ("replay: reopen without projection.duckdb (events/s)", rp["reopen_events_per_s"],
         "rate"),
        ("RSS, store open + recall indexes (text only)", tt["rss_mib"], "mib"),
    ]
    for key, name in (("as_of_big", f"Memory.as_of, namespace {BIG}"),
                      ("as_of_user", f"Memory.as_of, one {PER_USER}-fact namespace"),
                      ("recall_as_of", f"Memory.recall(as_of), {BIG}, BM25")):
        rows += [(f"{name} p50 (ms)", tt[key]["p50_ms"], "ms"),
                 (f"{name} p95 (ms)", tt[key]["p95_ms"], "ms")]
    via = "Memory" if rc["via"] == "Memory" else "index layer"
    for key, name in (("bm25", "BM25-only"), ("hybrid", "hybrid f32"),
                      ("hybrid_int8", "hybrid int8"), ("hybrid_as_of", "hybrid f32, as_of"),
                      ("hybrid_as_of_int8", "hybrid int8, as_of"),
                      ("dense_scan", "dense scan alone, f32"),
                      ("dense_scan_int8", "dense scan alone, int8"),
                      ("dense_scan_f16", "dense scan alone, f16 blocks")):
        rows += [(f"recall 1 ns: {name} p50 (ms)", lat[key]["p50_ms"], "ms"),
                 (f"recall 1 ns: {name} p95 (ms)", lat[key]["p95_ms"], "ms")]
    rows += [(f"recall 1 ns: RSS, index ({via})", rc["rss_mib"], "mib"),
             ("recall 1 ns: hits shared f32 / int8", rc["int8"]["hit_overlap"], "ratio")]
    return rows


def fmt_value(v: float | None, kind: str) -> str:
    if v is None:
        return "-"
    if kind == "rate":
        return fmt_rate(v)
    if kind == "ms":
        return fmt_ms(v)
    if kind == "ratio":
        return f"{v:.3f}"
    return f"{v:,.0f}"


def markdown(res: dict[str, Any]) -> str:
    sizes = res["sizes"]
    m = res["machine"]
    head = (
        f"{res['date']}. Machine: {m['cpu']}, {m['cores']} cores, {m['mem_gib']} GiB, "
        f"{m['tmp_fs']}; Python {m['python']}, DuckDB {m['duckdb']}, NumPy {m['numpy']}, "
        f"BLAS threads {res.get('blas_threads') or 'default'}. "
        f"Command: `{res['command']}`. Growth = value at this size / value at the previous "
        "size (10x the facts). Recall rows: one namespace of N facts, built via "
        + ", ".join(f"{s['label']} {s['recall']['via']}" for s in sizes)
        + "; CPU used by other processes while timing recall (cores): "
        + ", ".join(f"{s['label']} {s['recall']['other_load_cores']:.2f}" for s in sizes)
        + "; during the whole size: "
        + ", ".join(f"{s['label']} {s.get('other_load_cores_all', 0):.2f}" for s in sizes)
        + ". CPU/wall of the benchmark process (1.0 = it never waited for a core; DuckDB "
        "threads can push it above 1): "
        + "; ".join(f"{s['label']} " + ", ".join(f"{k} {v['share']:.2f}"
                                                  for k, v in s.get("cpu", {}).items())
                    for s in sizes)
        + ".\n\n"
    )
    cols = []
    for i, s in enumerate(sizes):
        cols.append(s["label"])
        if i:
            cols.append("growth")
    table = ["| metric | " + " | ".join(cols) + " |", "|---" * (len(cols) + 1) + "|"]
    per_size = [metrics(s) for s in sizes]
    for r, (name, _, kind) in enumerate(per_size[0]):
        cells = []
        for i, rows in enumerate(per_size):
            v = rows[r][1]
            cells.append(fmt_value(v, kind))
            if i:
                prev = per_size[i - 1][r][1]
                cells.append(f"{v / prev:.2f}x" if v and prev else "-")
        table.append(f"| {name} | " + " | ".join(cells) + " |")
    return head + "\n".join(table)


def verdicts(res: dict[str, Any]) -> list[str]:
    out = []

    def check(what: str, value: float, target: float, higher: bool, unit: str) -> None:
        ok = value >= target if higher else value < target
        out.append(f"{what}: {value:,.1f} {unit} vs {'>=' if higher else '<'} {target:,.0f} "
                   f"{unit}: {'ok' if ok else 'MISS'}")

    for s in res["sizes"]:
        lat, label = s["recall"]["latency"], s["label"]
        if s["facts"] in (100_000, 1_000_000):
            key = "hybrid_p95_ms_100k" if s["facts"] == 100_000 else "hybrid_p95_ms_1M"
            for k, name in (("hybrid", "f32"), ("hybrid_int8", "int8")):
                check(f"hybrid recall p95 ({name}, {s['recall']['via']}) at {label}",
                      lat[k]["p95_ms"], TARGETS[key], False, "ms")
        rp = s["replay"]
        check(f"replay (rebuild_projection) at {label}", rp["rebuild_events_per_s"],
              TARGETS["replay_events_per_s"], True, "events/s")
        if s["facts"] >= 1_000_000:
            check(f"recall as_of p95 (hybrid f32, index layer) at {label}",
                  lat["hybrid_as_of"]["p95_ms"], TARGETS["as_of_p95_ms_1M"], False, "ms")
            tt = s["time_travel"]
            check(f"Memory.recall(as_of) p95 (BM25, {BIG} = N/2) at {label}",
                  tt["recall_as_of"]["p95_ms"], TARGETS["as_of_p95_ms_1M"], False, "ms")
            check(f"Memory.as_of p95, one {PER_USER}-fact namespace, at {label}",
                  tt["as_of_user"]["p95_ms"], TARGETS["as_of_p95_ms_1M"], False, "ms")
    return out


# ---------------------------------------------------------------------------------- cost story

USERS, PER_USER_FACTS = 1_000_000, 200  # the seed's scale story: 200M facts
VECTOR_BYTES = {"float32": 384 * 4, "int8": 384 + 4, "3.5-bit": 168}  # RAM per vector
MACHINE_RAM_GB = 64  # one commodity box; half of it for hmem's hot state (the rest: OS, cache)


def cost_story(res: dict[str, Any]) -> list[str]:
    """The 200M-fact arithmetic from the measured bytes per fact (largest sizes measured)."""
    by_size = sorted(res["sizes"], key=lambda s: s["facts"])
    big = by_size[-1]
    with_vec = [s for s in by_size if s["recall"].get("bytes_per_fact")]
    if not with_vec or len(by_size) < 2:
        return ["(needs two sizes and a Memory-built recall store)"]
    vec = with_vec[-1]["recall"]["bytes_per_fact"]
    log_text = big["log"]["log_bytes_per_fact"]
    proj_text = big["projection_bytes_per_fact"]
    a, b = by_size[-2], by_size[-1]
    ram_fact = (b["time_travel"]["rss_mib"] - a["time_travel"]["rss_mib"]) * 2**20 / (
        b["facts"] - a["facts"])
    rate = big["replay"]["rebuild_events_per_s"]
    n = USERS * PER_USER_FACTS
    events = 2 * n  # a FactRemembered and an EmbeddingRecorded per fact
    gb = 1e9
    disk = n * (vec["log"] + vec["projection"]) / gb
    out = [
        f"Inputs (measured): log {log_text:,.0f} B/fact text only, {vec['log']:,.0f} B/fact "
        f"with a 384-d float32 vector ({with_vec[-1]['label']}); projection {proj_text:,.0f} / "
        f"{vec['projection']:,.0f} B/fact; RAM per fact without vector (RSS slope "
        f"{a['label']} -> {b['label']}, store open) {ram_fact:,.0f} B; replay "
        f"{rate:,.0f} events/s ({big['label']}).",
        f"Facts: {USERS:,} users x {PER_USER_FACTS} = {n / 1e6:,.0f}M; events "
        f"{events / 1e6:,.0f}M.",
        f"Disk (log + projection, vectors stored float32 in both): {n / 1e6:,.0f}M x "
        f"({vec['log']:,.0f} + {vec['projection']:,.0f}) B = {disk:,.0f} GB.",
        f"Replay of everything: {events / 1e6:,.0f}M / {rate:,.0f} per s = "
        f"{events / rate / 3600:,.1f} h (at the 200,000/s target: "
        f"{events / 200_000 / 60:,.0f} min).",
        "",
        "| vectors in RAM | B/vector | RAM, one machine (state + vectors) "
        f"| {MACHINE_RAM_GB} GB machines (half for hmem) | per shard: facts, RAM, replay |",
        "|---|---|---|---|---|",
    ]
    for name, vb in VECTOR_BYTES.items():
        ram = n * (ram_fact + vb) / gb
        machines = max(1, -(-ram // (MACHINE_RAM_GB / 2)))
        per = n / machines
        out.append(
            f"| {name} | {vb} | {n / 1e6:,.0f}M x ({ram_fact:,.0f} + {vb}) B = {ram:,.0f} GB "
            f"| {machines:,.0f} | {per / 1e6:,.1f}M facts, {per * (ram_fact + vb) / gb:,.1f} GB, "
            f"{2 * per / rate / 60:,.0f} min |"
        )
    return out


# ---------------------------------------------------------------------------------- main


def child(args: argparse.Namespace) -> int:
    with OtherLoad() as load:
        res = run_size(args.child, args)
    res["other_load_cores_all"] = load.cores
    line("CPU used by other processes during this size (cores)", f"{load.cores:.2f}")
    Path(args.child_out).write_text(json.dumps(res, default=str))
    return 0


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.scale", description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="10k facts, fewer queries (< 60 s)")
    p.add_argument("--sizes", default=None, help="comma-separated sizes (default 10k,100k,1M)")
    p.add_argument("--queries", type=int, default=None,
                   help="timed recall queries per row (default 300, 100 at 1M and above)")
    p.add_argument("--blas-threads", type=int, default=1,
                   help="OPENBLAS/OMP/MKL threads of each size's process (default 1; 0 leaves "
                   "the library default): see docs/scale.md for why 1")
    p.add_argument("--report", default=None,
                   help="print the summary of a JSON file written by --out, and exit")
    p.add_argument("--memory-max", default="100k",
                   help="recall part: largest size built through Memory; larger ones use the "
                   "index layer")
    p.add_argument("--no-embed", action="store_true", help="skip timing the query embedding")
    p.add_argument("--out", default=None, help="also write all results as JSON to this file")
    p.add_argument("--child", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-out", default=None, help=argparse.SUPPRESS)
    raw = sys.argv[1:] if argv is None else argv
    args = p.parse_args(raw)
    args.memory_max = recall_speed.parse_size(str(args.memory_max))
    if args.report:
        report(json.loads(Path(args.report).read_text()))
        return 0
    if args.child is not None:
        if args.queries is None:
            args.queries = 100 if args.quick or args.child >= 1_000_000 else 300
        return child(args)
    if args.sizes:
        sizes = sorted({recall_speed.parse_size(x) for x in args.sizes.split(",") if x.strip()})
    else:
        sizes = [10_000] if args.quick else [10_000, 100_000, 1_000_000]

    started = time.perf_counter()
    res: dict[str, Any] = {
        "command": "python -m bench.scale " + " ".join(raw),
        "date": datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
        "targets": TARGETS, "sizes": [], "blas_threads": args.blas_threads,
    }
    env = dict(os.environ)
    if args.blas_threads:
        for var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
            env[var] = str(args.blas_threads)
    with tempfile.TemporaryDirectory(prefix="hmem-scale-") as d:
        res["machine"] = machine_info(Path(d))
        section("Machine")
        for k, v in res["machine"].items():
            line(k, str(v))
        for n in sizes:
            out = Path(d) / f"{n}.json"
            cmd = [sys.executable, "-m", "bench.scale", "--child", str(n), "--child-out",
                   str(out), "--memory-max", str(args.memory_max), "--no-embed"]
            cmd += ["--queries", str(args.queries)] if args.queries else []
            cmd += ["--quick"] if args.quick else []
            subprocess.run(cmd, check=True, env=env)
            res["sizes"].append(json.loads(out.read_text()))
            if args.out:  # after every size, so a long run keeps what it measured
                Path(args.out).write_text(json.dumps(res, indent=2, default=str))
    if not args.no_embed:
        section("Query embedding (added to hybrid recall by Memory.recall with a real model)")
        texts = [t for _, t in recall_speed.make_facts(TextGen(seed=SEED), 500)]
        qs = make_queries(texts, (20 if args.quick else 200) + 10, random.Random(SEED))
        res["embed"] = recall_speed.bench_embed(qs)
    res["total_s"] = time.perf_counter() - started
    report(res)
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2, default=str))
        print(f"\nwrote {args.out}")
    return 0


def report(res: dict[str, Any]) -> None:
    section(f"Summary (total {res.get('total_s', 0):.0f} s)")
    print()
    print(markdown(res))
    print()
    for v in verdicts(res):
        print(f"- {v}")
    print()
    for row in cost_story(res):
        print(row)
    emb = res.get("embed")
    if emb:
        print(f"- query embedding (local MiniLM, not included above): p50 "
              f"{fmt_ms(emb['p50_ms'])} ms, p95 {fmt_ms(emb['p95_ms'])} ms")


if __name__ == "__main__":
    raise SystemExit(main())
