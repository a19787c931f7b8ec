"""One large namespace served by a fresh process: open, first recall, peak RSS.

    python -m bench.one_namespace --facts 1M                  # builds a store in a temp dir
    python -m bench.one_namespace --facts 1M --root DIR       # builds DIR once, reuses it
    python -m bench.one_namespace --root DIR --tail 1         # one fact logged after the part

Issue 32's row "one namespace of 1M facts: open + first recall <= 1 s, RSS <= 600 MB". The
store holds ``--facts`` text facts of bench.scale's workload, every one in namespace ``big``
with the workload's source refs (``s<session>:t<turn>``: the first recall links neighbouring
turns) and valid times, written with ``remember_many`` in batches of 5,000 (dedup off, no
embedder) and closed (so its checkpoint part is published). Then ``--rounds`` times a fresh
read-only process, timed after its imports, opens the store and recalls once: the open, the
first recall (it loads the namespace's part, folds the log after it, builds the recall index)
and the peak RSS (VmHWM).

``--tail N``: before the readers, a writer process logs N more facts in the namespace and ends
without closing, so no part is published for them: each reader folds them after the part, as a
reader opened beside a working writer does. (With a reused ``--root`` such facts add up: a store
built for the plain rows should be a copy.)
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.report import child_json, parse_size
from bench.scale_workload import workload
from hmem.memory import Memory

__all__ = ["NAMESPACE", "build", "readers"]

NAMESPACE = "big"
QUERY = "order ticket garden"
_BATCH = 5_000
_READER = """
import json, sys, time
from hmem.memory import Memory
from bench.report import peak_rss_mib
t0 = time.perf_counter()
m = Memory(sys.argv[1], namespace=sys.argv[2], read_only=True, embedder=None)
opened = time.perf_counter()
hits = m.recall(sys.argv[3])
done = time.perf_counter()
print("READER " + json.dumps({"open_s": opened - t0, "first_recall_s": done - opened,
                              "peak_rss_mib": peak_rss_mib(), "hits": len(hits)}))
m.close()
"""
_TAIL_WRITER = """
import json, os, sys
from hmem.memory import Memory
m = Memory(sys.argv[1], namespace=sys.argv[2], embedder=None)
for i in range(int(sys.argv[3])):
    m.remember("maya", f"maya ordered garden hose {i}, ticket {77000 + i}", dedup=False)
print("TAIL " + json.dumps({"facts": int(sys.argv[3])}), flush=True)
os._exit(0)  # no close: the part is not published, the facts stay after it
"""


def build(root: Path, n: int) -> float:
    """Write the store (every fact in one namespace); returns facts per second."""
    items = [{"subject": e.subject, "text": e.text, "source_ref": e.source_ref,
              "valid_from": e.valid_from} for e in workload(n)]
    t = time.perf_counter()
    with Memory(root, fsync="never", embedder=None) as mem:
        view = mem.in_namespace(NAMESPACE)
        for i in range(0, n, _BATCH):
            view.remember_many(items[i:i + _BATCH], dedup=False)
    return n / (time.perf_counter() - t)


def readers(root: Path, rounds: int) -> dict[str, Any]:
    """``rounds`` fresh read-only processes of the store at ``root``, each timed after its
    imports: every round's figures and the medians of open + first recall and peak RSS."""
    each = [child_json(_READER, [str(root), NAMESPACE, QUERY], "READER") for _ in range(rounds)]
    return {"rounds": each,
            "open_recall_s": statistics.median(r["open_s"] + r["first_recall_s"] for r in each),
            "peak_rss_mib": statistics.median(r["peak_rss_mib"] for r in each)}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--facts", default="1M", help="facts in the namespace (default 1M)")
    p.add_argument("--root", type=Path, default=None, help="the store (built if missing)")
    p.add_argument("--rounds", type=int, default=3, help="fresh processes (default 3)")
    p.add_argument("--tail", type=int, default=0,
                   help="facts a writer logs after the part first, left unpublished (default 0)")
    args = p.parse_args(argv)
    n = parse_size(args.facts)
    with tempfile.TemporaryDirectory(prefix="hmem-one-namespace-") as tmp:
        root = args.root or Path(tmp) / "store"
        if not (root / "log").exists():
            print(f"building {n:,} facts in one namespace: {build(root, n):,.0f} facts/s")
        if args.tail:
            tail = child_json(_TAIL_WRITER, [str(root), NAMESPACE, str(args.tail)], "TAIL")
            print(f"logged {tail['facts']:,} facts after the part, unpublished")
        out = readers(root, args.rounds)
    for r in out["rounds"]:
        print(f"open {r['open_s']:.2f} s, first recall {r['first_recall_s']:.2f} s, "
              f"peak RSS {r['peak_rss_mib']:,.0f} MiB, {r['hits']} hits")
    print(f"median of {args.rounds}: open + first recall {out['open_recall_s']:.2f} s (target "
          f"1 s), peak RSS {out['peak_rss_mib']:,.0f} MiB (target 600)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
