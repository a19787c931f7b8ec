"""Many writer processes on one log: PostgreSQL (eventlog/pg_log.py) beside the embedded shared
file log (shared=True), in one run.

    python -m bench.pg_writers                    # 1 and 8 writers, 300 appends each
    python -m bench.pg_writers --writers 1 4 8 --appends 500

Each writer process appends one event per transaction (as a ``remember`` does: one durable
write each) and the run reports appended events per second over all writers, and the p50 / p95
of one append. The PostgreSQL server is a throwaway one started here (bench/pg_server.py, the
machine's Debian binaries, fsync on, synchronous_commit on); the file log fsyncs every append.
Payloads are in the clear on both (no key file). Prints numbers; never asserts.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.pg_server import PgServer

__all__ = ["main", "pct", "run_writers"]

WRITER = """
import sys, time
from datetime import datetime, timezone
from eventlog.events import FactRemembered
kind, where, name, n = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if kind == "memory":  # a whole remember: log, projection (and a server's tables)
    from hmem import Memory
    m = Memory(where, embedder=None, shared=not where.startswith("postgresql"))
    write = lambda i: m.remember(name, f"{name} note {i}", dedup=False)
else:
    if kind == "pg":
        from eventlog.pg_log import PgLog
        log = PgLog(where)
    else:
        from eventlog.log import EventLog
        log = EventLog(where, shared=True, lock_wait=60)
    write = lambda i: log.append_many([FactRemembered(
        subject=name, text=f"{name} note {i}", tx_at=datetime.now(timezone.utc))])
sys.stdin.readline()  # start together
times = []
for i in range(n):
    t0 = time.perf_counter()
    write(i)
    times.append(time.perf_counter() - t0)
print(" ".join(f"{t:.6f}" for t in times))
"""


def run_writers(kind: str, where: str, writers: int, appends: int) -> tuple[float, list[float]]:
    """(writes/s over all writers, every write's seconds) for ``writers`` processes: ``kind``
    "pg" or "file" appends to a bare log at ``where``, "memory" remembers in the store there."""
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    procs = [subprocess.Popen([sys.executable, "-c", WRITER, kind, where, f"w{i}", str(appends)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=env)
             for i in range(writers)]
    time.sleep(1.0)  # let every writer open its log (not timed)
    t0 = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    times: list[float] = []
    for p in procs:
        out, _ = p.communicate(timeout=600)
        times += [float(t) for t in out.split()]
    return writers * appends / (time.perf_counter() - t0), times


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pg_writers", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writers", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--appends", type=int, default=300, help="per writer")
    args = parser.parse_args(argv)
    server = PgServer()
    print("== many writer processes, one event per append: PostgreSQL vs the embedded log")
    print("| log | writers | events/s (all) | append p50 / p95 ms |")
    print("|---|---|---|---|")
    try:
        for n in args.writers:
            for kind in ("file", "pg"):
                with tempfile.TemporaryDirectory() as tmp:
                    if kind == "pg":
                        import psycopg

                        name = f"bench{n}"
                        with psycopg.connect(server.url, autocommit=True) as con:
                            con.execute(f"CREATE DATABASE {name}")
                        where = server.url.replace("/postgres?", f"/{name}?")
                    else:
                        where = str(Path(tmp) / "log")
                    rate, times = run_writers(kind, where, n, args.appends)
                label = "PostgreSQL" if kind == "pg" else "embedded (shared file log)"
                print(f"| {label} | {n} | {rate:,.0f} | {pct(times, 0.5):.2f} / "
                      f"{pct(times, 0.95):.2f} |", flush=True)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
