"""A new host serving one namespace of a PostgreSQL store: what it pays as the store grows.

    python -m bench.pg_namespace_reader                  # 10k and 100k facts
    python -m bench.pg_namespace_reader --sizes 10k,100k,1M

Per size, bench.scale's workload (half the facts in one namespace, the rest in namespaces of
200) is written into an embedded store (``remember_many``), copied onto a throwaway PostgreSQL
server (bench/pg_server.py) with ``hmem copy``, and a writer's close shares its checkpoint
there. Then, three times, a fresh process with an empty cache directory (a new host, timed
after its imports, psycopg's among them: hmem imports it when it first opens a URL, and its
import, ~0.1-0.15 s here, is printed apart) opens the store read-only in one 200-fact namespace
and recalls once: open + first recall and peak RSS. The cost should follow the namespace, not
the store. Prints numbers; never asserts.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile

from bench.pg_server import PgServer
from bench.report import line, parse_size
from bench.scale_batch import SMALL, bench_bulk, bench_small_reader
from bench.synthetic import TmpDirs
from hmem.memory import Memory
from hmem.storage.copy import copy_store

__all__ = ["main"]

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
            os.environ["HMEM_CACHE"] = cache  # a new host: nothing cached
            bench_small_reader(url, query, runs=1)


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
