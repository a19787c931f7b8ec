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
   the seed's scale story). Texts are ``bench.recall_workload.make_facts``: 1, 2 or 4 synthetic
   sentences (60-480 characters), a third with a rare token (an order number, a ticket id).
   Log bytes per fact are the segment files' size over ``N``.
2. **Replay** of the ``never`` log through the public path, ``bench.store_speed.bench_replay``: log
   open (scan + checksum chain), decode, ``rebuild_projection`` into a new state, and a
   writer reopen after deleting its checkpoint (replay + publish a new one). Derived bytes per
   fact are the checkpoint's size over ``N`` after that reopen.
3. **Time travel** on that store at seq N/2: ``Memory.as_of`` of the large namespace (every
   row believed then: N/4 rows), ``Memory.as_of`` of a 200-fact namespace (a point query: one
   user's beliefs), and ``Memory.recall(q, as_of=seq)`` in the large namespace (BM25, the
   vectorised visibility masks). RSS with the store open.
4. **Batch paths and one small namespace** (``bench.scale_batch``): bulk ``remember_many``,
   ``hmem copy``, a fresh process serving one 200-fact namespace, the erasure of it.
5. **Recall** in one namespace of ``N`` facts with a 384-d vector each: ``bench.recall_speed``
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
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec

from bench import recall_speed
from bench.embed_speed import bench_embed, locomo_like
from bench.recall_workload import make_facts
from bench.remember_latency import run_mode
from bench.report import (
    OtherLoad,
    child_json,
    cpu_seconds,
    fmt_ms,
    fmt_rate,
    lat_summary,
    line,
    machine_info,
    parse_size,
    rss_mib,
    section,
    timed,
)
from bench.scale_batch import bench_batch
from bench.scale_report import TARGETS, report
from bench.scale_workload import BIG, PER_USER, POLICIES, label_of, workload
from bench.store_speed import bench_replay
from bench.synthetic import SEED, TextGen, TmpDirs, make_queries
from eventlog.events import FactRemembered
from eventlog.log import EventLog
from hmem.embedders.local import LocalEmbedder
from hmem.memory import Memory

# The workload is bench.scale_workload, the summary (table, verdicts, cost story)
# bench.scale_report; measuring each size and the command are here.

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
        out["rss_mib"] = rss_mib()
        line("open writer from its checkpoint + build recall indexes",
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


_READER = """
import json, sys, time
t0 = time.perf_counter()
from hmem.embedders.local import LocalEmbedder
from hmem.memory import Memory
from bench.report import rss_mib
m = Memory(sys.argv[1], namespace=sys.argv[2], read_only=sys.argv[4] == "reader", embedder=None)
opened = time.perf_counter()
m.recall(sys.argv[3])
done = time.perf_counter()
print("READER " + json.dumps({"checkpoint_seq": m.store.checkpoints.seq, "last_seq": m.last_seq,
                  "open_s": opened - t0, "first_recall_s": done - opened,
                  "rss_mib": rss_mib()}))
m.close()
"""


def bench_remember(n: int) -> dict[str, Any] | None:
    """``bench.remember_latency``'s background mode: n remembers of chat lines into a fresh
    store with the local embedder (its latency is the write path's; the model runs behind)."""
    try:
        embedder = LocalEmbedder()
    except Exception as e:  # noqa: BLE001 - optional extra; say why and go on
        line("remember, local MiniLM", f"not available: {e}")
        return None
    rng = random.Random(SEED)
    texts = [locomo_like(rng, 5, 40) for _ in range(n)]
    embedder.embed(["warm up the model", *texts[:8]])
    with tempfile.TemporaryDirectory(prefix="hmem-remember-") as d:
        out = run_mode("background", embedder, texts, "always", Path(d) / "s")
    line(f"remember latency, {n} remembers", f"p50 {fmt_ms(out['p50_ms'])} ms  "
         f"p95 {fmt_ms(out['p95_ms'])} ms")
    return out


def bench_reader(root: Path, query: str, role: str = "reader") -> dict[str, Any]:
    """A reader (or, ``role="writer"``, the writer) in a fresh process (imports included, the
    page cache warm): the time to open (a reader from the writer's checkpoint, the writer from
    its checkpoint), the first recall (it builds the namespace's indexes)
    and the process's RSS."""
    out = child_json(_READER, [str(root), BIG, query, role], "READER")
    what = (f"read-only open (checkpoint seq {out['checkpoint_seq']:,} of {out['last_seq']:,})"
            if role == "reader" else "writer open (from its checkpoint)")
    line(f"{what}, fresh process", f"{out['open_s']:.2f} s, first recall "
         f"{out['first_recall_s']:.2f} s, RSS {out['rss_mib']:,.0f} MiB")
    return out


class CpuWall:
    """Wall and CPU seconds of this process (all threads) over a block: on a shared machine
    a CPU/wall share well below 1 means the process waited for a core, not for hmem."""

    def __init__(self, out: dict[str, Any], key: str) -> None:
        self.out, self.key = out, key

    def __enter__(self) -> CpuWall:
        self.t0, self.c0 = time.perf_counter(), cpu_seconds()
        return self

    def __exit__(self, *exc: object) -> None:
        wall, cpu = time.perf_counter() - self.t0, cpu_seconds() - self.c0
        self.out[self.key] = {"wall_s": wall, "cpu_s": cpu, "share": cpu / wall if wall else 0}
        line(f"  ({self.key}: wall {wall:.1f} s, CPU {cpu:.1f} s of this process)",
             f"CPU/wall {cpu / wall if wall else 0:.2f}")


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
        out["projection_bytes_per_fact"] = sum(  # the manifest and every namespace's part
            f.stat().st_size for f in root.glob("checkpoint.columns*")) / n
        line("checkpoint bytes per fact (text only)",
             f"{out['projection_bytes_per_fact']:,.0f}")
        queries = make_queries(texts, 300, random.Random(SEED + n))
        with CpuWall(cpu, "time_travel"):
            out["time_travel"] = bench_time_travel(root, n, queries, args.quick)
        out["reader"] = bench_reader(root, queries[0])
        out["writer"] = bench_reader(root, queries[0], "writer")
        tmp.remove(root)
        gc.collect()
        with CpuWall(cpu, "batch"):
            out["batch"] = bench_batch(tmp, n, queries[0])
        with CpuWall(cpu, "recall"):
            out["recall"] = recall_speed.bench_size(tmp, n, args)
    finally:
        tmp.cleanup()
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
    args.memory_max = parse_size(str(args.memory_max))
    if args.report:
        report(json.loads(Path(args.report).read_text()))
        return 0
    if args.child is not None:
        if args.queries is None:
            args.queries = 100 if args.quick or args.child >= 1_000_000 else 300
        return child(args)
    if args.sizes:
        sizes = sorted({parse_size(x) for x in args.sizes.split(",") if x.strip()})
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
        texts = [t for _, t in make_facts(TextGen(seed=SEED), 500)]
        qs = make_queries(texts, (20 if args.quick else 200) + 10, random.Random(SEED))
        res["embed"] = bench_embed(qs)
        section("remember with the local embedder (background embedding, fsync always)")
        res["remember"] = bench_remember(200 if args.quick else 500)
    res["total_s"] = time.perf_counter() - started
    report(res)
    if args.out:
        Path(args.out).write_text(json.dumps(res, indent=2, default=str))
        print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
