"""A new host serving one namespace of a PostgreSQL store: what it pays as the store grows.

    python -m bench.pg_namespace_reader                  # 10k and 100k facts
    python -m bench.pg_namespace_reader --sizes 10k,100k,1M

Per size, bench.scale's workload (half the facts in one namespace, the rest in namespaces of
200) is written into an embedded store (``remember_many``), copied onto a throwaway PostgreSQL
server (bench/pg_server.py) with ``hmem copy``, and a writer's close shares its checkpoint
there. Then, three times, a fresh process with an empty cache directory (a new host, timed
after its imports) opens the store read-only in one 200-fact namespace and recalls once: open
+ first recall and peak RSS. The cost should follow the namespace, not the store. Prints
numbers; never asserts.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from bench.pg_server import PgServer
from bench.report import child_json, line, parse_size
from bench.scale_batch import SMALL, bench_bulk
from bench.synthetic import TmpDirs
from hmem.memory import Memory
from hmem.storage.copy import copy_store

__all__ = ["main"]

_READER = """
import json, sys, time
from bench.report import peak_rss_mib
from hmem.memory import Memory
t0 = time.perf_counter()
m = Memory(sys.argv[1], namespace=sys.argv[2], read_only=True, embedder=None)
hits = m.recall(sys.argv[3])
done = time.perf_counter()
print("READER " + json.dumps({"open_recall_s": done - t0, "peak_rss_mib": peak_rss_mib(),
                              "hits": len(hits)}))
m.close()
"""


def bench_size(server: PgServer, tmp: TmpDirs, n: int) -> None:
    _, root = bench_bulk(tmp, n, dedup=True)
    with Memory(root, namespace=SMALL, read_only=True, embedder=None) as m:
        query = " ".join(m.beliefs()[0].text.split()[:4])
    url = server.new_store(f"s{n}")
    report = copy_store(root, url)
    line(f"hmem copy onto the server, {report.events:,} events",
         f"{report.events / report.seconds:,.0f} events/s")
    tmp.remove(root)
    with tempfile.TemporaryDirectory() as cache:
        os.environ["HMEM_CACHE"] = cache
        Memory(url, embedder=None).close()  # a writer's close shares its checkpoint
    for _ in range(3):
        with tempfile.TemporaryDirectory() as cache:
            os.environ["HMEM_CACHE"] = cache
            out = child_json(_READER, [url, SMALL, query], "READER")
        line(f"new host, one {SMALL} namespace of 200 in {n:,}: open + first recall",
             f"{1000 * out['open_recall_s']:.0f} ms, peak RSS {out['peak_rss_mib']:,.0f} MiB, "
             f"{out['hits']} hits")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.pg_namespace_reader",
                                description=__doc__.split("\n")[0])
    p.add_argument("--sizes", default="10k,100k", help="comma-separated sizes")
    args = p.parse_args(sys.argv[1:] if argv is None else argv)
    server = PgServer()
    tmp = TmpDirs()
    try:
        for n in sorted({parse_size(x) for x in args.sizes.split(",") if x.strip()}):
            bench_size(server, tmp, n)
    finally:
        tmp.cleanup()
        server.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
