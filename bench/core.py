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
import os
import platform
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import duckdb
import msgspec
import numpy as np

from eventlog.events import FactRemembered
from eventlog.log import EventLog
from hmem.memory import Memory
from hmem.progress import Progress, progress_bar, track
from projections.duck import DuckProjection
from replay.rebuild import rebuild_projection

SEED = 20240611
QUIET = False  # --quiet: no progress bars (they are drawn only when stderr is a terminal)
TARGETS = {
    "recall_p95_ms": 10.0,
    "replay_events_per_s": 100_000.0,
    "append_many_never_events_per_s": 100_000.0,
    "remember_fsync_p50_ms": 1.0,
}

# ---------------------------------------------------------------------------------- workload

_WORDS = """
coffee tea morning evening meeting project deadline report budget design review release
server database cluster backup migration upgrade deploy pipeline dashboard metric alert
customer contract invoice payment vendor supplier order shipment warehouse inventory
garden kitchen apartment office studio library museum gallery station airport harbor
bicycle car train flight ticket passport visa hotel booking dinner lunch breakfast recipe
allergy medicine doctor appointment dentist therapy exercise running swimming hiking yoga
guitar piano violin concert album playlist podcast novel chapter article newsletter blog
python rust golang kotlin typescript compiler library framework feature bug ticket sprint
roadmap quarter planning offsite workshop interview candidate hiring onboarding mentor
salary bonus promotion vacation holiday birthday anniversary wedding party gift present
daughter son sister brother mother father cousin friend neighbor colleague manager team
prefers likes dislikes avoids enjoys needs wants owns bought sold moved visited started
finished cancelled postponed scheduled approved rejected signed renewed migrated fixed
broke lost found borrowed returned shared forgot remembered learned taught wrote read
red blue green yellow black white quiet noisy early late weekly monthly daily annual remote
hybrid onsite urgent optional private public shared internal external new old large small
spicy sweet bitter vegetarian vegan gluten dairy peanut oat almond espresso latte cappuccino
matcha jasmine oolong sourdough pasta ramen sushi curry tacos salad soup sandwich pizza
window door balcony roof basement garage fence hedge tree flower tomato basil mint lemon
laptop monitor keyboard mouse headphones charger phone tablet camera printer router cable
password account subscription license renewal refund discount coupon receipt warranty
insurance mortgage rent lease deposit loan savings pension tax audit filing accountant
marathon triathlon league match tournament trophy coach practice training injury recovery
language spanish french german japanese mandarin course lesson exam certificate degree
thesis research paper conference keynote slides poster abstract citation dataset benchmark
latency throughput memory storage network bandwidth cache index query replica shard queue
""".split()
_STOP = "the a and with for of to on at by from every after before during about".split()
_VERBS = """prefers likes dislikes owns uses needs wants booked moved visited started finished
scheduled approved rejected signed renewed fixed lost found borrowed returned shared learned
wrote read bought sold cancelled postponed manages leads joined left recommended""".split()
_PLACES = """Berlin Paris Lisbon Tokyo Osaka Seoul Toronto Denver Austin Boston Chicago Dublin
London Madrid Milan Prague Vienna Zurich Oslo Helsinki Warsaw Athens Cairo Nairobi Lagos Lima
Bogota Santiago Sydney Melbourne Auckland Mumbai Delhi Singapore Jakarta Manila Hanoi""".split()
_FIRST = """Maya Liam Noah Emma Olivia Ava Sophia Lucas Mateo Elena Yuki Hana Ravi Priya Omar
Leila Jonas Freya Tomas Ines Chen Wei Aiko Kenji Sara David Anna Marco Lena Ivan Nadia Felix
Clara Hugo Alma Theo Rosa Pablo Vera Nils""".split()
_LAST = """Chen Garcia Muller Rossi Novak Kim Tanaka Silva Okafor Haddad Larsen Dubois Kowalski
Ivanova Patel Singh Nguyen Cohen Fischer Moreau Costa Berg Santos Yilmaz Sato Ali Brown Walsh
Lindqvist Horvat""".split()


class TextGen:
    """Deterministic synthetic facts: ``(subject, text)`` pairs, texts of 60-120 characters."""

    def __init__(self, seed: int = SEED, n_subjects: int = 300) -> None:
        self.rng = random.Random(seed)
        pairs = [f"{f} {last}" for f in _FIRST for last in _LAST]
        self.rng.shuffle(pairs)
        self.subjects = pairs[:n_subjects]
        # Zipf-like word weights: a few words are common, most are rare (like real text).
        self.words = list(_WORDS)
        self.rng.shuffle(self.words)
        self.weights = [1.0 / (rank + 8) for rank in range(len(self.words))]
        self._cum = list(np.cumsum(self.weights))

    def subject(self) -> str:
        return self.rng.choice(self.subjects)

    def _piece(self) -> str:
        r = self.rng.random()
        if r < 0.06:
            return f"in {self.rng.choice(_PLACES)}"
        if r < 0.22:
            return self.rng.choice(_STOP)
        return self.rng.choices(self.words, cum_weights=self._cum, k=1)[0]

    def text(self, subject: str) -> str:
        target = self.rng.randint(60, 118)
        text = f"{subject} {self.rng.choice(_VERBS)}"
        while len(text) < target:
            piece = self._piece()
            if len(text) + 1 + len(piece) > 119:
                if len(text) >= 60:
                    break
                continue
            text = f"{text} {piece}"
        return text + "."


# ---------------------------------------------------------------------------------- helpers


def ms(seconds: float) -> float:
    return seconds * 1000.0


def pct(samples: Sequence[float], *qs: float) -> list[float]:
    arr = np.asarray(samples, dtype=np.float64)
    return [float(np.percentile(arr, q)) for q in qs]


def lat_summary(samples_s: Sequence[float]) -> dict[str, float]:
    """Latency summary in milliseconds."""
    p50, p95, p99 = pct([ms(s) for s in samples_s], 50, 95, 99)
    return {
        "n": len(samples_s),
        "p50_ms": p50,
        "p95_ms": p95,
        "p99_ms": p99,
        "max_ms": ms(max(samples_s)),
        "mean_ms": ms(statistics.fmean(samples_s)),
    }


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def fmt_ms(x: float) -> str:
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    return f"{x:.3f}"


def size_label(n: int) -> str:
    if n >= 1000 and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def section(title: str) -> None:
    print(f"\n== {title}", flush=True)


def line(label: str, value: str) -> None:
    print(f"  {label:<58} {value}", flush=True)


class TmpDirs:
    """Temporary directories under /tmp, all removed by :meth:`cleanup`."""

    def __init__(self) -> None:
        base = "/tmp" if os.path.isdir("/tmp") else None
        self.root = Path(tempfile.mkdtemp(prefix="hmem-bench-", dir=base))
        self._n = 0

    def new(self, name: str) -> Path:
        self._n += 1
        path = self.root / f"{self._n:02d}-{name}"
        path.mkdir()
        return path

    def remove(self, path: Path) -> None:
        shutil.rmtree(path, ignore_errors=True)

    def cleanup(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def machine_info(tmp: Path) -> dict[str, Any]:
    cpu = "unknown"
    try:
        for raw in Path("/proc/cpuinfo").read_text().splitlines():
            if raw.lower().startswith("model name"):
                cpu = raw.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = None
    try:
        for raw in Path("/proc/meminfo").read_text().splitlines():
            if raw.startswith("MemTotal:"):
                mem_gib = round(int(raw.split()[1]) / 1024 / 1024, 1)
    except OSError:
        pass
    fs = "unknown"
    try:
        best = ""
        for raw in Path("/proc/mounts").read_text().splitlines():
            parts = raw.split()
            mnt, kind = parts[1], parts[2]
            if str(tmp).startswith(mnt) and len(mnt) > len(best):
                best, fs = mnt, f"{kind} ({mnt})"
    except OSError:
        pass
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "mem_gib": mem_gib,
        "tmp_fs": fs,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "duckdb": duckdb.__version__,
        "numpy": np.__version__,
        "msgspec": msgspec.__version__,
    }


# ---------------------------------------------------------------------------------- 1. append


def make_events(gen: TextGen, n: int) -> list[FactRemembered]:
    base = datetime(2024, 1, 1, tzinfo=timezone.utc)
    out = []
    for i in range(n):
        subject = gen.subject()
        out.append(
            FactRemembered(
                tx_at=base + timedelta(milliseconds=i), subject=subject, text=gen.text(subject)
            )
        )
    return out


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
    section("2. Memory.remember latency (validate + log append + projection; DuckDB every 256)")
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
                t0 = pc()
                mem.remember(s, t)
                samples.append(pc() - t0)
                flushed.append(store.projector.pending == 0)
        finally:
            mem.close()
        tmp.remove(d)
        summ = lat_summary(samples)
        plain = [x for x, f in zip(samples, flushed) if not f]
        flush = [x for x, f in zip(samples, flushed) if f]
        summ["p50_no_flush_ms"] = pct([ms(x) for x in plain], 50)[0] if plain else None
        summ["flush_calls"] = len(flush)
        summ["flush_mean_ms"] = ms(statistics.fmean(flush)) if flush else None
        out[policy] = summ
        line(f"remember fsync={policy}, n={n:,}",
             f"p50 {fmt_ms(summ['p50_ms'])} ms  p95 {fmt_ms(summ['p95_ms'])} ms  "
             f"p99 {fmt_ms(summ['p99_ms'])} ms  max {fmt_ms(summ['max_ms'])} ms")
        if flush:
            line(f"  of which calls that flushed to DuckDB ({len(flush)})",
                 f"mean {fmt_ms(summ['flush_mean_ms'])} ms; others p50 "
                 f"{fmt_ms(summ['p50_no_flush_ms'])} ms")
    return out


# ---------------------------------------------------------------------------------- store build


class SimClock:
    """A clock that advances a fixed step on every call (events spread over about a year)."""

    def __init__(self, start: datetime, step: timedelta) -> None:
        self.now = start
        self.step = step

    def __call__(self) -> datetime:
        self.now = self.now + self.step
        return self.now


def build_store(
    root: Path, gen: TextGen, n_facts: int, rng: random.Random, progress: Progress | None = None
) -> dict[str, Any]:
    """Build a store with ``n_facts`` facts (remember + revise) through Memory, fsync=never."""
    clock = SimClock(datetime(2024, 1, 1, tzinfo=timezone.utc), timedelta(minutes=5))
    mem = Memory(root, fsync="never", flush_every=10**9, clock=clock, embedder=None)
    heads: list[int] = []  # live chain heads (not superseded, not forgotten)
    texts: list[str] = []
    counts = {"remember": 0, "revise_world": 0, "revise_correction": 0, "forget": 0}
    subj_of: dict[int, str] = {}
    pc = time.perf_counter
    t_gen = 0.0  # time spent generating text, subtracted from the build time
    t0 = pc()
    facts = 0
    while facts < n_facts:
        if progress is not None and facts % 1000 == 0:
            progress(facts, n_facts)
        r = rng.random()
        if r < 0.10 and len(heads) > 20:
            i = rng.randrange(len(heads))
            old = heads[i]
            subject = subj_of.pop(old)
            g0 = pc()
            text = gen.text(subject)
            t_gen += pc() - g0
            if r < 0.05:
                vf = clock.now + timedelta(minutes=1)  # after old.valid_from, before next tx
                new = mem.revise(old, text, valid_from=vf, reason="changed")
                counts["revise_world"] += 1
            else:
                new = mem.revise(old, text)
                counts["revise_correction"] += 1
            heads[i] = new
            subj_of[new] = subject
            texts.append(text)
            facts += 1
        elif r < 0.13 and len(heads) > 20:
            i = rng.randrange(len(heads))
            old = heads[i]
            heads[i] = heads[-1]
            heads.pop()
            subj_of.pop(old)
            mem.forget(old, reason="no longer relevant")
            counts["forget"] += 1
        else:
            g0 = pc()
            subject = gen.subject()
            text = gen.text(subject)
            t_gen += pc() - g0
            fid = mem.remember(subject, text)
            heads.append(fid)
            subj_of[fid] = subject
            texts.append(text)
            counts["remember"] += 1
            facts += 1
    t_apply = pc() - t0 - t_gen
    events = mem.last_seq
    t1 = time.perf_counter()
    mem.close()  # writes the whole projection to DuckDB in one batch
    t_close = time.perf_counter() - t1
    return {"events": events, "facts": facts, "counts": counts, "apply_s": t_apply,
            "close_s": t_close, "texts": texts}


# ---------------------------------------------------------------------------------- 3. replay


def remove_projection(root: Path) -> None:
    for name in ("projection.duckdb", "projection.duckdb.wal"):
        (root / name).unlink(missing_ok=True)


def bench_replay(root: Path, events: int, quick: bool) -> dict[str, Any]:
    repeats = 3 if events <= 20_000 else 2
    out: dict[str, Any] = {"events": events}
    # (a) open the log (scan: CRC + blake2b chain check of every record) and decode it
    t0 = time.perf_counter()
    log = EventLog(root / "log", read_only=True)
    out["log_open_s"] = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        n = sum(1 for _ in log.read())
        out["log_decode_s"] = time.perf_counter() - t0
        assert n == events
        # (b) rebuild_projection into a fresh in-memory DuckDB
        runs = []
        for _ in range(repeats):
            db = DuckProjection(None)
            gc.collect()
            t0 = time.perf_counter()
            rebuild_projection(log, db)
            runs.append(time.perf_counter() - t0)
            db.close()
        out["rebuild_runs_s"] = runs
        out["rebuild_s"] = statistics.median(runs)
        out["rebuild_events_per_s"] = events / out["rebuild_s"]
    finally:
        log.close()
    # (c) full writer reopen after deleting projection.duckdb (replay + write the DuckDB file)
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
    line(f"rebuild_projection -> in-memory DuckDB (median of {repeats})",
         f"{out['rebuild_s']:.3f} s  ({fmt_rate(out['rebuild_events_per_s'])} events/s)")
    line("reopen writer after deleting projection.duckdb",
         f"{out['reopen_no_projection_s']:.3f} s  ({fmt_rate(out['reopen_events_per_s'])} "
         f"events/s), close {out['reopen_no_projection_close_s']:.3f} s")
    return out


# ---------------------------------------------------------------------------------- 4/5. open + recall


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
    runs = []
    for _ in range(2):
        gc.collect()
        t0 = time.perf_counter()
        mem = Memory(root, read_only=True, embedder=None)
        runs.append(time.perf_counter() - t0)
        mem.close()
    out["read_only_open_runs_s"] = runs
    out["read_only_open_s"] = statistics.median(runs)
    line("open writer, warm projection file (median of 3)", f"{out['writer_open_s']:.3f} s")
    line("open read-only (replays the log in memory, median of 2)",
         f"{out['read_only_open_s']:.3f} s  ({fmt_rate(events / out['read_only_open_s'])} "
         f"events/s)")
    return out


def make_queries(texts: list[str], n: int, rng: random.Random) -> list[str]:
    queries = []
    for _ in range(n):
        words = [w.strip(".,").lower() for w in rng.choice(texts).split()]
        k = rng.randint(2, min(4, len(words)))
        queries.append(" ".join(rng.sample(words, k)))
    return queries


def timed(fn: Callable[[], Any], samples: list[float]) -> Any:
    t0 = time.perf_counter()
    result = fn()
    samples.append(time.perf_counter() - t0)
    return result


def bench_recall(
    root: Path, texts: list[str], quick: bool, rng: random.Random, *, time_travel: bool
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
        for q in track(queries[50:], "recall", "queries", quiet=QUIET, leave=False):
            hits += len(timed(lambda: mem.recall(q), samples))
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
            timed(lambda: mem.recall(q, as_of=mid), samples)
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


def bench_size(tmp: TmpDirs, gen: TextGen, n_facts: int, quick: bool) -> dict[str, Any]:
    label = size_label(n_facts)
    section(f"3-5. Store with {n_facts:,} facts ({label})")
    root = tmp.new(f"store-{label}")
    rng = random.Random(SEED + n_facts)
    with progress_bar("building", "facts", quiet=QUIET, leave=False) as progress:
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
    out.update(bench_recall(root, texts, quick, rng, time_travel=True))
    tmp.remove(root)
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
        add("replay: reopen after deleting projection.duckdb (s)", lbl,
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
        add("open read-only, replays log (s)", lbl, f"{o['read_only_open_s']:.3f}")
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
    global QUIET
    QUIET = args.quiet
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
            bench_size(tmp, gen, n, args.quick) for n in sizes
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
