"""What logging a recall costs: the same recalls with recall logging off and on, interleaved.

Usage::

    python -m bench.recall_log_cost                    # 10k facts, 400 queries, fsync=always
    python -m bench.recall_log_cost --facts 2000 --queries 200 --embedder hash

A store of synthetic facts (bench.synthetic) is built once; then each query is recalled twice
in turn, through a Memory that does not log and one that does (same store, same namespace, so
each pair sees the same index), and both are timed. The extra time of a logged recall is the
event's encoding and append (written at once, fsynced with the next write) plus its projection
rows. Also times ``replay_recall`` of a few logged recalls (a replay of the log before each).
Prints numbers and never asserts. Target: <= ~0.2 ms added at p50.
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any, cast

from bench.report import OtherLoad, fmt_ms, lat_summary, line, section
from bench.synthetic import SEED, TextGen, TmpDirs, build_store, make_queries
from eventlog.log import FsyncPolicy
from hmem import Memory


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--facts", type=int, default=10_000)
    ap.add_argument("--queries", type=int, default=400)
    ap.add_argument("--fsync", default="always", choices=["always", "batch", "never"])
    ap.add_argument("--embedder", default="none", help="none (BM25 only) or hash (dense too)")
    ap.add_argument("--replays", type=int, default=3)
    args = ap.parse_args(argv)
    rng = random.Random(SEED)
    gen = TextGen(SEED)
    out: dict[str, Any] = {}
    tmp = TmpDirs()
    try:
        root = tmp.new("recall-log")
        build_store(root, gen, args.facts, rng)
        embedder = None if args.embedder == "none" else args.embedder
        with OtherLoad() as load, Memory(
            root, fsync=cast(FsyncPolicy, args.fsync), embedder=embedder, embed_mode="inline"
        ) as plain:
            if embedder is not None:
                plain.reembed()
            logging = plain.in_namespace(plain.namespace, log_recalls=True)
            texts = [f.text for f in plain.as_of(plain.last_seq)][:5000]
            queries = make_queries(texts, args.queries, rng)
            plain.recall(queries[0])  # build the indexes outside the timing
            off: list[float] = []
            on: list[float] = []
            pc = time.perf_counter
            for q in queries:
                t0 = pc()
                plain.recall(q)
                t1 = pc()
                logging.recall(q, source_ref="bench:t1")
                t2 = pc()
                off.append(t1 - t0)
                on.append(t2 - t1)
            out["off"], out["on"] = lat_summary(off), lat_summary(on)
            logged = logging.recalls()
            replays = []
            for r in logged[-args.replays:]:
                t0 = pc()
                same = logging.replay_recall(r.seq).same
                replays.append(pc() - t0)
                out.setdefault("replays_same", []).append(same)
            out["replay"] = lat_summary(replays) if replays else None
            events = logging.last_seq
    finally:
        tmp.cleanup()
    section(f"recall logging cost: {args.facts:,} facts, {args.queries} queries, "
            f"fsync={args.fsync}, embedder={args.embedder}")
    for key, label in (("off", "recall, logging off"), ("on", "recall, logging on")):
        s = out[key]
        line(f"{label}: p50 / p95", f"{fmt_ms(s['p50_ms'])} / {fmt_ms(s['p95_ms'])} ms")
    line("added by logging at p50 / p95",
         f"{fmt_ms(out['on']['p50_ms'] - out['off']['p50_ms'])} / "
         f"{fmt_ms(out['on']['p95_ms'] - out['off']['p95_ms'])} ms")
    if out["replay"]:
        line(f"replay_recall (replays ~{events:,} events), median",
             f"{out['replay']['p50_ms'] / 1000:.2f} s, same: {out['replays_same']}")
    line("other processes' CPU meanwhile", f"{load.cores:.2f} cores")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
