"""``bench.scale``'s batch paths and what a process pays for one namespace (issue 32's targets).

Per size ``N``, the workload of ``bench.scale`` (N text-only facts: half in one namespace, the
rest in namespaces of 200), written through the public API:

- **bulk remember**: ``Memory.remember_many`` into a new (sealed) store, each namespace's facts
  1,000 a call (a small namespace's 200 in one), with ``dedup=False`` and with the default
  ``dedup=True`` (fsync ``batch``); the rows below use the second store;
- **copy**: ``hmem copy`` (``copy_store``) of the store into a new directory;
- **one small namespace**: a fresh process (timed after its imports) that opens the store
  read-only in one namespace of 200 facts and recalls once: open + first recall and peak RSS,
  the median of :data:`SMALL_RUNS` such processes (one is a few tens of ms: a scheduler's time
  slice moves it by a tenth). That the cost follows the namespace, not the store, shows as the
  ratio to the same reader of a 10k store: above 10k, a 10k store is built in the size's own
  run and its readers alternate with this store's (the sizes run minutes apart, and the
  machine drifts by more than the ratio's margin in between);
- **erase** of that 200-fact namespace (``Memory.erase(namespace=...)``, the writer open);
- **one namespace of N facts** (``bench.one_namespace``): the N facts all in one namespace,
  written with ``remember_many`` (5,000 a call, dedup off) and closed; then
  :data:`BIG_RUNS` fresh read-only processes, each timed after its imports, open it and recall
  once: the median open + first recall and peak RSS (issue 32's "one namespace of 1M facts").

Prints numbers and never asserts.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

from bench import one_namespace
from bench.report import child_json, fmt_rate, line
from bench.scale_workload import workload
from bench.synthetic import TmpDirs
from hmem.memory import Memory
from hmem.storage.copy import copy_store

__all__ = ["bench_batch"]

SMALL = "u00000"  # a namespace of 200 facts in every size's store
SMALL_RUNS = 7  # fresh processes per small-reader figure (its median)
BIG_RUNS = 3  # fresh processes per one-namespace figure (its median: each takes ~1 s at 1M)
REFERENCE = 10_000  # the store size a larger size's small readers are compared with

_SMALL_READER = """
import json, sys, time
from bench.report import peak_rss_mib
from hmem.memory import Memory
driver_s = 0.0
if "://" in sys.argv[1]:  # a server's driver, which hmem imports when it first opens a URL
    t = time.perf_counter()
    import psycopg
    driver_s = time.perf_counter() - t
t0 = time.perf_counter()
m = Memory(sys.argv[1], namespace=sys.argv[2], read_only=True, embedder=None)
hits = m.recall(sys.argv[3])
done = time.perf_counter()
print("SMALL " + json.dumps({"open_recall_s": done - t0, "peak_rss_mib": peak_rss_mib(),
                             "hits": len(hits), "driver_import_s": driver_s}))
m.close()
"""


def bench_bulk(tmp: TmpDirs, n: int, dedup: bool) -> tuple[dict[str, Any], Path]:
    """remember_many of the workload's facts into a new store, each namespace's in batches of
    up to 1,000 (the 200-fact namespaces in one batch each); returns the results and the
    store's root."""
    root = tmp.new(f"bulk-{dedup}")
    elapsed = write_workload(root, n, dedup)
    line(f"remember_many (1,000 a call; 200 in a small namespace), dedup={dedup}, {n:,} facts",
         f"{fmt_rate(n / elapsed)} facts/s")
    return {"seconds": elapsed, "facts_per_s": n / elapsed}, root


def write_workload(root: Path, n: int, dedup: bool = True) -> float:
    """Write the workload's ``n`` facts into a new store at ``root`` with remember_many, each
    namespace's in batches of up to 1,000; returns the seconds the writes took (not the
    workload's making, nor the close)."""
    by_namespace: dict[str, list[dict[str, str]]] = {}
    for e in workload(n):
        by_namespace.setdefault(e.namespace, []).append({"subject": e.subject, "text": e.text})
    mem = Memory(root, fsync="batch", embedder=None)
    try:
        t0 = time.perf_counter()
        for namespace, items in by_namespace.items():
            view = mem.in_namespace(namespace)
            for start in range(0, len(items), 1000):
                view.remember_many(items[start:start + 1000], dedup=dedup)
        return time.perf_counter() - t0
    finally:
        mem.close()


def bench_copy(tmp: TmpDirs, root: Path) -> dict[str, Any]:
    dest = tmp.new("copy") / "s"
    report = copy_store(root, dest)
    tmp.remove(dest.parent)
    line(f"hmem copy into a new directory, {report.events:,} events",
         f"{fmt_rate(report.events / report.seconds)} events/s")
    return {"events": report.events, "seconds": report.seconds,
            "events_per_s": report.events / report.seconds}


def bench_small_reader(root: Path | str, query: str, runs: int = SMALL_RUNS,
                       reference: Path | None = None) -> dict[str, Any]:
    """Fresh processes opening the store at ``root`` (a directory or a URL) read-only in the
    small namespace and recalling ``query`` once: the median time and peak RSS of ``runs``.
    With ``reference`` (the 10k store, built in this run), as many readers of it alternate
    with them, and ``vs_reference`` is the ratio of the medians (time, RSS): the machine's
    drift between sizes (run many minutes apart) stays out of it."""
    each: list[dict[str, Any]] = []
    ref: list[dict[str, Any]] = []
    for run in range(runs):  # in pairs, each going first every other time
        pair = [(each, root), (ref, reference)] if reference is not None else [(each, root)]
        for into, store in pair[::-1] if run % 2 else pair:
            into.append(child_json(_SMALL_READER, [str(store), SMALL, query], "SMALL"))
    out = _readers(each)
    driver = out["driver_import_s"]
    line(f"fresh process, one {SMALL} namespace of 200: open + first recall (median of {runs})",
         f"{1000 * out['open_recall_s']:.0f} ms, peak RSS {out['peak_rss_mib']:,.0f} MiB"
         + (f" (psycopg's import before it: {1000 * driver:.0f} ms)" if driver else ""))
    if ref:
        base = out["reference"] = _readers(ref)
        out["vs_reference"] = {key: out[key] / base[key]
                               for key in ("open_recall_s", "peak_rss_mib")}
        line("... the same in a 10k store, alternating with them: this store over it",
             f"{1000 * base['open_recall_s']:.0f} ms, {base['peak_rss_mib']:,.0f} MiB: "
             f"{out['vs_reference']['open_recall_s']:.2f}x / "
             f"{out['vs_reference']['peak_rss_mib']:.2f}x")
    return out


def _readers(each: list[dict[str, Any]]) -> dict[str, Any]:
    """The medians of fresh small readers' figures."""
    return {
        "open_recall_s": statistics.median(r["open_recall_s"] for r in each),
        "peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in each),
        "hits": each[0]["hits"], "runs_s": [r["open_recall_s"] for r in each],
        "driver_import_s": statistics.median(r["driver_import_s"] for r in each),
    }


def reference_store(tmp: TmpDirs) -> Path:
    """The 10k store of the workload (what each larger size's small readers are compared
    with in its own run), written as :func:`bench_bulk` writes it, untimed."""
    root = tmp.new("reference-10k")
    write_workload(root, REFERENCE)
    return root


def bench_erase(root: Path) -> dict[str, Any]:
    mem = Memory(root, namespace=SMALL, embedder=None)
    try:
        t0 = time.perf_counter()
        receipt = mem.erase(namespace=SMALL, reason="bench")
        elapsed = time.perf_counter() - t0
    finally:
        mem.close()
    facts = len(receipt.fact_ids)
    line(f"erase one namespace ({facts:,} facts) in this store", f"{elapsed:.2f} s")
    return {"seconds": elapsed, "facts": facts}


def bench_one_namespace(tmp: TmpDirs, n: int) -> dict[str, Any]:
    """A store of ``n`` facts in one namespace, built here; fresh readers of it."""
    root = tmp.new("one-namespace") / "s"
    built = one_namespace.build(root, n)
    out = {"build_facts_per_s": built, **one_namespace.readers(root, BIG_RUNS)}
    tmp.remove(root.parent)
    line(f"one namespace of {n:,} facts (remember_many 5,000 a call, dedup off)",
         f"{fmt_rate(built)} facts/s")
    line(f"... fresh process: open + first recall (median of {BIG_RUNS})",
         f"{out['open_recall_s']:.2f} s, peak RSS {out['peak_rss_mib']:,.0f} MiB")
    return out


def bench_batch(tmp: TmpDirs, n: int, query: str) -> dict[str, Any]:
    """Every row above, on stores of their own (removed at the end)."""
    out: dict[str, Any] = {}
    out["bulk_no_dedup"], root = bench_bulk(tmp, n, dedup=False)
    tmp.remove(root)
    out["bulk"], root = bench_bulk(tmp, n, dedup=True)
    out["copy"] = bench_copy(tmp, root)
    reference = reference_store(tmp) if n > REFERENCE else None
    try:
        out["small_reader"] = bench_small_reader(root, query, reference=reference)
    finally:
        if reference is not None:
            tmp.remove(reference)
    out["erase"] = bench_erase(root)
    tmp.remove(root)
    out["one_namespace"] = bench_one_namespace(tmp, n)
    return out
