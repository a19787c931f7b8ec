"""Every figure of recall's quality in one run: LoCoMo by category (settled, and asked right
after writing), BEAM-500K by ability, and recall while the embedder is busy.

Usage::

    python -m bench.recall_quality --stores DIR      # the stores built once under DIR, reused
    python -m bench.recall_quality --stores DIR --configs hybrid --no-busy

It runs, one after the other, ``bench.locomo --at-once``, ``bench.beam_recall`` (the same
``--configs``; plain BM25, hmem without an embedder and the hybrid default unless told) and
``bench.recall_busy``: R@5 / R@10 / R@25, P@10, tokens@10 and R@10 within 500-8,000 tokens per
category and ability beside plain BM25; the at-once figure beside the settled one; busy
against idle recall p95. Without ``--stores`` the stores are built in a temporary directory
(BEAM's 38k turns take most of an hour to embed on 2 cores).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from bench import beam_recall, locomo, recall_busy

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.recall_quality", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stores", type=Path, help="build the stores here once, reuse them")
    parser.add_argument("--configs", default="plain,bm25,hybrid",
                        help="comma-separated configs of both sets (default: %(default)s)")
    parser.add_argument("--no-busy", action="store_true", help="skip bench.recall_busy")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="hmem-recall-quality-") as tmp:
        stores = str(args.stores or Path(tmp))
        print("## LoCoMo", flush=True)
        failed = locomo.main(["--stores", stores, "--configs", args.configs, "--at-once", "-q"])
        print("\n## BEAM-500K", flush=True)
        failed |= beam_recall.main(["--stores", stores, "--configs", args.configs])
    if not args.no_busy:
        print("\n## Recall while the embedder is busy", flush=True)
        failed |= recall_busy.main([])
    return failed


if __name__ == "__main__":
    sys.exit(main())
