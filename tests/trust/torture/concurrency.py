"""Concurrency under load: one writer process and several reader processes on one store.

    python -m tests.trust.torture.concurrency --seconds 60 --readers 4     # the full run
    python -m tests.trust.torture.concurrency --seconds 3 --readers 2      # what CI runs

The writer remembers and revises facts as fast as it can (``fsync="always"``) and after each
acknowledged call publishes the seq it got (written to a file, renamed into place). Readers in
other processes loop: read the published seq A, then recall / stats / why through a read-only
Memory, and check that

* they never get a lock error (they never take the writer lock);
* they see at least seq A: a write is visible once the writer acknowledged it;
* what they see is whole: seqs never go backwards, every revision's predecessor exists, and
  the count of current facts equals facts minus superseded minus forgotten ones.

A second writer opened meanwhile must get ``StoreLocked``. Prints reads/s and writes/s.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def _publish(path: Path, seq: int) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(str(seq))
    os.replace(tmp, path)


def writer(store: Path, ack: Path, seconds: float) -> None:
    from hmem import Memory

    rng = random.Random(1)
    stop = time.monotonic() + seconds
    writes = 0
    with Memory(store, fsync="always", embedder="none") as m:
        live: list[int] = []
        while time.monotonic() < stop:
            if live and rng.random() < 0.3:
                old = live.pop(rng.randrange(len(live)))
                live.append(m.revise(old, f"fact {writes} revised"))
            else:
                live.append(m.remember(f"subject {writes % 17}", f"fact {writes} about things"))
            writes += 1
            _publish(ack, m.last_seq)
    print(json.dumps({"writes": writes}))


def reader(store: Path, ack: Path, seconds: float) -> None:
    from hmem import Memory, errors

    problems: list[str] = []
    reads = 0
    last_seen = 0
    stop = time.monotonic() + seconds
    while not store.joinpath("log").exists():
        time.sleep(0.01)
    with Memory(store, read_only=True, embedder="none") as m:
        while time.monotonic() < stop:
            try:
                acked = int(ack.read_text()) if ack.exists() else 0
            except ValueError:
                acked = 0
            try:
                stats = m.stats()
                hits = m.recall("fact about things", limit=5)
                for hit in hits:
                    for past in m.why(hit.id).chain[:-1]:
                        assert past.superseded_by is not None
            except errors.StoreLocked as e:
                problems.append(f"reader got a lock error: {e}")
                break
            reads += 3
            if stats.log_events < acked:
                problems.append(f"saw seq {stats.log_events} after the writer acknowledged {acked}")
            if stats.log_events < last_seen:
                problems.append(f"seq went backwards: {last_seen} -> {stats.log_events}")
            if stats.current != stats.facts - stats.superseded - stats.forgotten:
                problems.append(f"torn counts: {stats}")
            last_seen = stats.log_events
    print(json.dumps({"reads": reads, "problems": problems[:5]}))


def run(seconds: float, readers: int) -> dict:
    with tempfile.TemporaryDirectory(prefix="hmem-concurrency-") as tmp:
        store, ack = Path(tmp) / "store", Path(tmp) / "acked"
        env = {**os.environ, "HMEM_EMBEDDER": "none"}

        def spawn(role: str) -> subprocess.Popen:
            return subprocess.Popen(
                [sys.executable, "-m", "tests.trust.torture.concurrency", "--role", role,
                 "--store", str(store), "--ack", str(ack), "--seconds", str(seconds)],
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env=env,
            )

        procs = [spawn("writer")] + [spawn("reader") for _ in range(readers)]
        while not (store / "log").exists():
            time.sleep(0.01)
        time.sleep(min(1.0, seconds / 3))
        second_writer = _second_writer_is_refused(store)
        outs = [p.communicate(timeout=seconds + 120) for p in procs]
    results = []
    for (out, err), p in zip(outs, procs, strict=True):
        if p.returncode != 0:
            raise RuntimeError(f"a process failed ({p.returncode}): {err.decode()[-2000:]}")
        results.append(json.loads(out.decode().strip().splitlines()[-1]))
    writes = results[0]["writes"]
    reads = sum(r["reads"] for r in results[1:])
    return {
        "seconds": seconds, "readers": readers, "writes": writes, "reads": reads,
        "writes_per_s": writes / seconds, "reads_per_s": reads / seconds,
        "second_writer_refused": second_writer,
        "problems": [p for r in results[1:] for p in r["problems"]],
    }


def _second_writer_is_refused(store: Path) -> bool:
    from hmem import Memory, errors

    try:
        Memory(store, embedder="none").close()
    except errors.StoreLocked:
        return True
    return False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--readers", type=int, default=3)
    parser.add_argument("--role", choices=["writer", "reader"], help=argparse.SUPPRESS)
    parser.add_argument("--store", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--ack", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.role == "writer":
        writer(args.store, args.ack, args.seconds)
        return 0
    if args.role == "reader":
        reader(args.store, args.ack, args.seconds)
        return 0
    report = run(args.seconds, args.readers)
    print(json.dumps(report, indent=2))
    return 1 if report["problems"] or not report["second_writer_refused"] else 0


if __name__ == "__main__":
    sys.exit(main())
