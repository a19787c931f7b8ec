"""Every recall default, on both development sets: what turning each one off does.

    python -m bench.recall_defaults                       # no embedder: ~2 min after ingest
    python -m bench.recall_defaults --embedder local --stores /tmp/hmem-dev-stores
    python -m bench.recall_defaults --bm25 1.2,0.75 --set next_weight=0.3   # the old defaults

A default must help, or not hurt, on LoCoMo's two development conversations and on BEAM-500K
both; this prints, for the defaults as they stand and for each knob turned off (or set to the
value given with ``--set``), R@10 on LoCoMo dev (the tuning split), LoCoMo held-out (reported,
never tuned on), BEAM-500K, and BEAM's R@10 within 1,000 tokens, each with its change against the
defaults. The stores (LoCoMo's ten conversations and BEAM's 35 chats, loaded as
``bench.locomo`` and ``bench.beam_recall`` load them) are built once under ``--stores`` and
reused: with the local embedder the first build takes most of an hour (38k BEAM turns).
``--bm25 K1,B`` sets BM25's parameters (projections/text.py) for the whole run.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from dataclasses import replace
from datetime import datetime
from pathlib import Path
from typing import Any

from bench import beam_recall, locomo
from bench.dev_stores import dev_store
from bench.locomo_data import DEFAULT_DATA, load
from hmem import Memory
from hmem.recall.request import RecallConfig
from projections import text

__all__ = ["ABLATIONS", "main"]

# each default knob, and the value that turns it off
ABLATIONS: dict[str, dict[str, Any]] = {
    "no feedback": {"feedback_weight": 0.0},
    "no neighbours": {"neighbor_weight": 0.0, "next_weight": 0.0},
    "no next turn": {"next_weight": 0.0},
    "no entity boost": {"entity_boost": 0.0},
    "no subject boost": {"subject_boost": 0.0},
    "names in the query vector": {"embed_subject_names": True},
    "first person names no one": {"asker_subject": ""},
    "no time boost": {"time_boost": 0.0},
    "no recency": {"recency_weight": 0.0},
}


def _row(lm: Memory, lrefs: dict[str, datetime], bm: Memory, brefs: dict[str, datetime],
         config: RecallConfig) -> dict[str, float]:
    data, questions, _ = load(DEFAULT_DATA)
    by, _ = locomo.evaluate(lm, data, questions, config, lrefs, quiet=True)
    ls = locomo.summarize(by, [0.0])
    chats = beam_recall.load(beam_recall.DEFAULT_DATA)
    bby, _ = beam_recall.evaluate(bm, chats, {c["id"]: brefs[str(c["id"])] for c in chats},
                                  config)
    bs = beam_recall.summarize(bby, [0.0])["abilities"]["overall"]
    return {"LoCoMo dev R@10": ls["dev"]["overall"]["R@10"],
            "LoCoMo held-out R@10": ls["held-out"]["overall"]["R@10"],
            "BEAM R@10": bs["R@10"], "BEAM R@10 in 1k tokens": bs["R@10 in 1k"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.recall_defaults", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--embedder", default=None, help="e.g. local (default: none, BM25)")
    parser.add_argument("--stores", type=Path, help="where the stores are built and reused")
    parser.add_argument("--bm25", help="K1,B for the whole run (default: projections/text.py's)")
    parser.add_argument("--set", action="append", default=[], metavar="KNOB=VALUE",
                        help="a RecallConfig field for the base row (repeatable)")
    args = parser.parse_args(argv)
    if args.bm25:
        k1, b = (float(x) for x in args.bm25.split(","))
        text.TextIndex.__init__.__defaults__ = (k1, b)
    base = RecallConfig(**{k: _value(v) for k, v in (s.split("=", 1) for s in args.set)})
    with tempfile.TemporaryDirectory() as tmp:
        root = args.stores or Path(tmp)
        root.mkdir(parents=True, exist_ok=True)
        lm, lrefs = dev_store(root, "locomo", args.embedder, locomo.ingest_all)
        bm, brefs = dev_store(root, "beam", args.embedder, beam_recall.ingest_all)
        try:
            rows = {"defaults": _row(lm, lrefs, bm, brefs, base)}
            for name, off in ABLATIONS.items():
                rows[name] = _row(lm, lrefs, bm, brefs, replace(base, **off))
        finally:
            lm.close()
            bm.close()
    k1, b = text.TextIndex.__init__.__defaults__ or (None, None)
    print(f"embedder {args.embedder or 'none'}, BM25 k1={k1} b={b}, base {args.set or 'defaults'}")
    cols = list(rows["defaults"])
    print("| config | " + " | ".join(cols) + " |")
    print("|---|" + "---|" * len(cols))
    for name, row in rows.items():
        cells = [f"{row[c]:.3f}" + ("" if name == "defaults" else
                                    f" ({100 * (row[c] - rows['defaults'][c]):+.1f})")
                 for c in cols]
        print(f"| {name} | " + " | ".join(cells) + " |")
    return 0


def _value(text: str) -> Any:
    """A knob's value from ``--set``: True / False, an integer, a number, or else the text."""
    if text in ("True", "False"):
        return text == "True"
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


if __name__ == "__main__":
    sys.exit(main())
