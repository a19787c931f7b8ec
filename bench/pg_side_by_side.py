"""The same store embedded and on PostgreSQL, side by side in one run.

    python -m bench.pg_side_by_side                 # writers 1 and 8, recall at 100k, 1M events
    python -m bench.pg_side_by_side --quick         # small sizes, to try it (< 1 min)
    python -m bench.pg_side_by_side --sizes --rounds 3 --remembers 400   # the writers only

Prints a table per part and never asserts. The server is a throwaway one started here
(bench/pg_server.py: the machine's Debian PostgreSQL 15, fsync on, synchronous_commit on).

1. **Writers**: 1 and 8 processes, each ``Memory.remember`` one fact per call (a whole write:
   log, projection, and on the server the tables in the same transaction), into one store:
   an embedded store opened ``shared=True`` (every write takes the file lock and fsyncs) and a
   store on the server. Remembers per second over all writers; p50 / p95 of one call.
2. **Stores of N events** (``--recall-facts`` and ``--events``; the workload of
   ``bench.scale``: half the facts in namespace ``big``, the rest in namespaces of 200): the
   embedded store is written through its log (no key file), then copied onto the server with
   ``hmem copy`` (timed: replay, the chain read back, the projection and the tables built).
   Then, each in a fresh process: open read-only and answer a first ``as_of`` **cold** (no
   checkpoint anywhere: the embedded store replays its log; the server store reads every row),
   **warm** (from the checkpoint a writer published: the embedded store's directory, the server
   store's cache on this host) and, on the server, from a **new host** (an empty cache: the
   checkpoint the writer shared on the server is fetched); then ``as_of`` of one 200-fact
   namespace at seq N/2 and ``recall`` (current, and ``as_of`` N/2) in ``big``: p50 / p95 over
   the queries, and the process's peak RSS. On the server also the same ``as_of`` in SQL on its
   own tables (``tx @> T``), and the bytes its tables take per fact.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.pg_server import PgServer
from bench.pg_writers import pct, run_writers
from bench.report import peak_rss_mib
from bench.scale_workload import PER_USER, label_of, workload

__all__ = ["main"]

ROOT = Path(__file__).resolve().parents[1]


def _new_store(server: PgServer, name: str) -> str:
    import psycopg

    with psycopg.connect(server.url, autocommit=True) as con:
        con.execute(f"CREATE DATABASE {name}")
    return server.url.replace("/postgres?", f"/{name}?")


def part_writers(server: PgServer, tmp: Path, counts: list[int], remembers: int,
                 rounds: int = 1) -> None:
    print("== 1. writer processes, one remember per call, into one store")
    print("| store | writers | remembers/s (all) | remember p50 / p95 ms | x one writer |")
    print("|---|---|---|---|---|")
    for r in range(rounds):
        one: dict[str, float] = {}
        for n in counts:
            for kind in ("file", "pg"):
                where = (str(tmp / f"w{n}-{r}") if kind == "file"
                         else _new_store(server, f"w{n}_{r}"))
                from hmem import Memory

                Memory(where, embedder=None, shared=kind == "file").close()  # made, not timed
                rate, times = run_writers("memory", where, n, remembers)
                one.setdefault(kind, rate)
                label = "PostgreSQL" if kind == "pg" else "embedded, shared=True"
                print(f"| {label} | {n} | {rate:,.0f} | {pct(times, 0.5):.2f} / "
                      f"{pct(times, 0.95):.2f} | {rate / one[kind]:.2f} |", flush=True)
    print("target (issue 35): PostgreSQL, eight writers >= 2x one writer's rate, p95 < 10 ms")


def _build_file_store(root: Path, n: int) -> float:
    from eventlog.log import EventLog

    events = workload(n)
    t0 = time.perf_counter()
    with EventLog(root / "log", fsync="never") as log:
        for i in range(0, n, 1000):
            log.append_many(events[i:i + 1000])
    return time.perf_counter() - t0


def _child(args: list[str], cache: Path) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HMEM_CACHE": str(cache)}
    done = subprocess.run([sys.executable, "-m", "bench.pg_side_by_side", "--child", *args],
                          env=env, capture_output=True, text=True, timeout=3600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr)
    return json.loads(done.stdout.splitlines()[-1])  # type: ignore[no-any-return]


def part_store(server: PgServer, tmp: Path, n: int, queries: int) -> None:
    from hmem import Memory
    from hmem.storage.copy import copy_store

    label = label_of(n)
    root = tmp / f"s{label}"
    build_s = _build_file_store(root, n)
    url = _new_store(server, f"s{label.lower()}")
    warm_cache, cold_cache = tmp / f"cache-{label}", tmp / f"cold-{label}"
    os.environ["HMEM_CACHE"] = str(warm_cache)
    t0 = time.perf_counter()
    copy_store(root, url)
    copy_s = time.perf_counter() - t0
    rows: list[tuple[str, dict[str, Any]]] = []
    rows.append(("embedded, cold", _child([str(root), str(n), str(queries)], cold_cache)))
    t0 = time.perf_counter()
    Memory(root, embedder=None).close()  # the writer builds its projection and a checkpoint
    writer_open_s = time.perf_counter() - t0
    rows.append(("embedded, warm", _child([str(root), str(n), str(queries)], cold_cache)))
    shutil.rmtree(cold_cache, ignore_errors=True)
    rows.append(("PostgreSQL, warm", _child([url, str(n), str(queries)], warm_cache)))
    rows.append(("PostgreSQL, new host", _child([url, str(n), str(queries)], tmp / "new-host")))
    import psycopg

    with psycopg.connect(url, autocommit=True) as con:  # no checkpoint anywhere
        con.execute("DELETE FROM hmem_checkpoint_parts")
    rows.append(("PostgreSQL, cold", _child([url, str(n), str(queries)], cold_cache)))
    print(f"\n== 2. a store of {label} events ({n // 2:,} in namespace big, the rest in "
          f"namespaces of {PER_USER})")
    print(f"embedded log written in {build_s:.1f} s; its writer's first open (replay, "
          f"projection file, checkpoint) {writer_open_s:.1f} s; hmem copy onto the server "
          f"{copy_s:.1f} s ({n / copy_s:,.0f} events/s)")
    print("| store | open + first as_of s | as_of 200-fact ns p50 / p95 ms | recall p50 / p95 "
          "ms | recall as_of p50 / p95 ms | SQL as_of on the server p50 / p95 ms | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for name, r in rows:
        sql = r.get("sql_as_of")
        print(f"| {name} | {r['first_s']:.2f} | {_ms(r['as_of'])} | {_ms(r['recall'])} | "
              f"{_ms(r['recall_as_of'])} | {_ms(sql) if sql else '-'} | {r['rss_mb']:,.0f} |",
              flush=True)
    _server_bytes(url, n, root)


def _ms(times: list[float]) -> str:
    return f"{pct(times, 0.5):.2f} / {pct(times, 0.95):.2f}"


def _server_bytes(url: str, n: int, root: Path) -> None:
    import psycopg

    with psycopg.connect(url) as con:
        sizes = {t: int(con.execute("SELECT pg_total_relation_size(%s)", (t,)).fetchone()[0])
                 for t in ("hmem_log", "hmem_facts", "hmem_fact_versions")}
    log_bytes = sum(p.stat().st_size for p in (root / "log").glob("*.hlog"))
    parts = ", ".join(f"{t} {b / n:,.0f}" for t, b in sizes.items())
    print(f"bytes per fact on the server (rows, indexes, TOAST): {parts}; all "
          f"{sum(sizes.values()) / n:,.0f} (the embedded log: {log_bytes / n:,.0f})")


def child(target: str, n: int, queries: int) -> None:
    """One fresh process: open read-only, answer, measure; prints one JSON line."""
    from bench.synthetic import make_queries
    from hmem import Memory

    t0 = time.perf_counter()
    m = Memory(target, read_only=True, embedder=None)
    seq = n // 2
    small = m.in_namespace("u00000")
    small.as_of(seq)
    out: dict[str, Any] = {"first_s": time.perf_counter() - t0}
    big = m.in_namespace("big")
    rng = random.Random(7)
    texts = [f.text for f in small.as_of(n)]
    words = make_queries(texts, queries, rng)
    spaces = [m.in_namespace(f"u{rng.randrange(max(1, n // 2 // PER_USER)):05d}")
              for _ in range(queries)]
    out["as_of"] = _timed(lambda i: spaces[i].as_of(seq), queries)
    out["recall"] = _timed(lambda i: big.recall(words[i]), queries)
    out["recall_as_of"] = _timed(lambda i: big.recall(words[i], as_of=seq), queries)
    if target.startswith("postgresql"):
        out["sql_as_of"] = _sql_as_of(m, spaces, seq, queries)
    out["rss_mb"] = peak_rss_mib()  # not ru_maxrss: it carries the parent's peak over exec
    m.close()
    print(json.dumps(out))


def _timed(call: Any, n: int) -> list[float]:
    for i in range(min(5, n)):
        call(i)  # warm
    times = []
    for i in range(n):
        t0 = time.perf_counter()
        call(i)
        times.append(time.perf_counter() - t0)
    return times


def _sql_as_of(m: Any, spaces: list[Any], seq: int, n: int) -> list[float]:
    """The same point in time asked of the server's own tables."""
    con = m.store.log.con
    at = m.store.log.get(seq).tx_at
    query = ("SELECT f.id, f.text FROM hmem_fact_versions v JOIN hmem_facts f ON f.id = v.fact_id "
             "WHERE v.namespace = %s AND v.tx @> %s::timestamptz AND v.valid @> now()")
    # prepare=False: a custom plan per query (psycopg would prepare it after five runs, and the
    # generic plan of a prepared statement scans the exclusion index: 5.6 ms instead of 0.6)
    return _timed(
        lambda i: con.execute(query, (spaces[i].namespace, at), prepare=False).fetchall(), n
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pg_side_by_side", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--remembers", type=int, default=200, help="per writer")
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000],
                        help="events per store (default: 100k and 1M; none: writers only)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="times the writers part runs (one writer, then the others)")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--quick", action="store_true", help="sizes 10k, 50 remembers")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child[0], int(args.child[1]), int(args.child[2]))
        return 0
    if args.quick:
        args.sizes, args.remembers, args.queries = [10_000], 50, 50
    server = PgServer()
    tmp = Path(tempfile.mkdtemp(prefix="hmem-side-"))
    try:
        part_writers(server, tmp, args.writers, args.remembers, args.rounds)
        for n in args.sizes:
            part_store(server, tmp, n, args.queries)
    finally:
        server.stop()
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
