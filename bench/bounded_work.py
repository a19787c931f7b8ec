"""Bounded work from one input: the time finder on a long recall query, and consolidate on the
longest facts (issue "bounded work from one input").

``python -m bench.bounded_work [--query-chars 30000] [--fact-chars 100000]``

Prints, for each family of query (repeated time phrases, prose, punctuation runs), the time the
finder takes on a query of ``--query-chars`` characters and on one twice as long (linear work
doubles), and for consolidate the time and tracemalloc peak on two facts of ``--fact-chars``
characters (distinct words, one changed) and on 80 facts of 4,000 characters. Before the fix: a
30 KB query took 12 s; one 100,000-character fact ran out of memory at 5.3 GB, 80 facts of
4,000 characters peaked at 1.4 GB.
"""

from __future__ import annotations

import argparse
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Any

from hmem import Memory
from hmem.time.expressions import find_time_expressions

__all__ = ["main"]

REF = datetime(2024, 6, 15, tzinfo=timezone.utc)
FAMILIES = {"in May": "in May ", "8 May": "8 May ", "yesterday": "yesterday ",
            "last week": "last week and ", "3 days ago": "3 days ago ",
            "prose": "what did maya say about the trip ", "punctuation": ". ",
            "when-runs": ". . . when "}


def _timed(fn: Callable[[], Any]) -> tuple[float, int]:
    tracemalloc.start()
    t = time.perf_counter()
    try:
        fn()
        return time.perf_counter() - t, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def _finder(chars: int) -> None:
    print(f"time finder: seconds for a query of {chars:,} / {2 * chars:,} characters")
    for name, unit in FAMILIES.items():
        small, large = ((unit * (2 * chars // len(unit) + 1))[:n] for n in (chars, 2 * chars))
        t1 = time.perf_counter()
        find_time_expressions(small, REF)
        t2 = time.perf_counter()
        find_time_expressions(large, REF)
        t3 = time.perf_counter()
        print(f"  {name:12} {t2 - t1:8.3f} {t3 - t2:8.3f}")


def _words(n: int, seed: str) -> str:
    return " ".join(f"{seed}{i}q" for i in range(n))


def _consolidate(chars: int) -> None:
    text = _words(chars // 5, "w")[:chars].rsplit(" ", 1)[0]
    with tempfile.TemporaryDirectory() as d, Memory(d, embedder=None) as m:
        m.remember("maya", text, valid_from="2025-01-01")
        m.remember("maya", text.rsplit(" ", 1)[0] + " zzq", valid_from="2025-02-01")
        secs, peak = _timed(m.consolidate)
    print(f"consolidate, two facts of {len(text):,} characters: {secs:.3f} s, "
          f"peak {peak / 2**20:.1f} MiB")
    with tempfile.TemporaryDirectory() as d, Memory(d, embedder=None) as m:
        m.remember_many([{"subject": "maya", "text": _words(1_000, f"f{k}x")[:4_000]}
                         for k in range(80)])
        secs, peak = _timed(m.consolidate)
    print(f"consolidate, 80 facts of 4,000 characters: {secs:.3f} s, peak {peak / 2**20:.1f} MiB")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--query-chars", type=int, default=30_000)
    ap.add_argument("--fact-chars", type=int, default=100_000)
    args = ap.parse_args(argv)
    _finder(args.query_chars)
    _consolidate(args.fact_chars)


if __name__ == "__main__":
    main()
