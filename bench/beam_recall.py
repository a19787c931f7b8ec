"""BEAM-500K retrieval benchmark (no LLM): evidence recall@k of hmem's recall, per ability.

    python -m bench.beam_recall                          # BM25 configurations, no embedder
    python -m bench.beam_recall --configs bm25,plain,no-feedback --chats 10
    python -m bench.beam_recall --configs hybrid     # the local embedder (slow: ~38k turns)

The second development set beside LoCoMo: ../shared/data/beam500k.json.gz, the BEAM
benchmark's 500K-token chats flattened (35 chats, 38,058 turns, 616 probing questions with the
ids of the turns that hold the answer; format in ../shared/README.md). Each chat goes into its
own namespace through the public API, one fact per turn (cut to hmem's 100,000-character
limit: one turn is longer): subject = the role, source_ref = ``c<chat>:<turn id>`` (the
``session:turn`` form that links neighbouring turns, as LoCoMo's ``D1:3``), valid_from = the
turn's date (``time_anchor``, carried forward). Each question is asked with the chat's last
date as the reference time, ``limit`` = the largest k and no token budget
(so k hits come back); ``tokens@10`` says what the top 10 would cost in a prompt. Metric:
|evidence ∩ ids of the top-k hits| / |evidence|, for k = 5, 10, 25, per ability and overall,
with P@10 and recall within budgets of 500 to 8,000 tokens beside it (as ``bench.locomo``).

Configurations, named as in ``bench.locomo``: ``bm25`` (the default ``RecallConfig()``, no
embedder), ``plain`` (BM25 alone: no feedback, no neighbouring turns, no entity, time or recency
weight: the baseline reported beside it), ``no-feedback`` and ``no-neighbors`` (the
default without one of its lexical loans), ``hybrid`` (the default with the local embedder),
``bm25-any-hit`` / ``hybrid-any-hit`` (the defaults returning hits without evidence of their
own too: ``RecallConfig(require_evidence=False)``).
"""

from __future__ import annotations

import argparse
import contextlib
import gzip
import json
import math
import sys
import tempfile
import time
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from typing import Any

from bench.dev_stores import dev_store
from bench.locomo import (
    BUDGET_HEADS,
    BUDGETS,
    KS,
    Scores,
    budget_cells,
    budget_name,
    budgeted,
    latency_ms,
    score_budgets,
    score_hits,
    score_rows,
)
from bench.locomo import CONFIGS as LOCOMO_CONFIGS
from bench.locomo_data import DEFAULT_DATA as LOCOMO
from hmem import Memory
from hmem.adapters.progress import track
from hmem.recall.request import RecallConfig
from projections.checks import MAX_TEXT_CHARS

__all__ = ["CONFIGS", "DEFAULT_DATA", "load", "main"]

DEFAULT_DATA = LOCOMO.parent / "beam500k.json.gz"
CONFIGS = {name: LOCOMO_CONFIGS[name] for name in
           ("bm25", "plain", "no-feedback", "no-neighbors", "hybrid", "bm25-any-hit",
            "hybrid-any-hit")}


def parse_anchor(text: str | None) -> datetime | None:
    """``"January-05-2024"`` as midnight UTC (None stays None)."""
    if not text:
        return None
    return datetime.strptime(text, "%B-%d-%Y").replace(tzinfo=timezone.utc)


def load(path: Path, chats: int | None = None) -> list[dict[str, Any]]:
    """The flattened chats, the first ``chats`` of them if given."""
    with gzip.open(path, "rt") as f:
        data: list[dict[str, Any]] = json.load(f)
    return data[:chats] if chats else data


def namespace_of(chat: dict[str, Any]) -> str:
    return f"beam-{chat['id']}"


def turn_ref(chat: dict[str, Any], turn_id: int) -> str:
    """A turn's source_ref, ``chat:turn``: hmem links each turn to the turns beside it."""
    return f"c{chat['id']}:{turn_id}"


def ingest(m: Memory, chat: dict[str, Any]) -> datetime:
    """One fact per turn in the chat's namespace; returns the chat's last date (the reference)."""
    ns = m.in_namespace(namespace_of(chat))
    when = None
    facts = []
    for turn in chat["turns"]:
        when = parse_anchor(turn.get("time_anchor")) or when
        text = (turn.get("content") or "").strip()[:MAX_TEXT_CHARS]  # 1 turn of 38k is longer
        if not text:
            continue
        fact: dict[str, Any] = {"subject": turn["role"], "text": text,
                                "source_ref": turn_ref(chat, turn["id"])}
        if when is not None:
            fact["valid_from"] = when
        facts.append(fact)
    for start in range(0, len(facts), 1000):
        ns.remember_many(facts[start : start + 1000], dedup=False)  # a turn each
    ns.flush()
    return when or datetime(2024, 1, 1, tzinfo=timezone.utc)


def ingest_all(m: Memory) -> dict[str, str]:
    """Every chat of the default data ingested; each chat's reference time (ISO) by its id."""
    return {str(c["id"]): ingest(m, c).isoformat() for c in load(DEFAULT_DATA)}


def evaluate(
    m: Memory, data: list[dict[str, Any]], reference: dict[str, datetime], config: RecallConfig,
) -> tuple[dict[str, Scores], list[float]]:
    by: dict[str, Scores] = {}
    latencies = []
    views = {c["id"]: m.in_namespace(namespace_of(c), recall_config=config) for c in data}
    questions = [(chat, q) for chat in data for q in chat["questions"]]
    for chat, q in track(questions, "asked", "questions", leave=False):
        mem = views[chat["id"]]
        t0 = time.perf_counter()
        result = mem.recall(q["question"], limit=max(KS), max_tokens=10**9,
                            reference_time=reference[chat["id"]])
        latencies.append(time.perf_counter() - t0)
        evidence = frozenset(turn_ref(chat, e) for e in q["evidence"])
        scores = by.setdefault(q["ability"], Scores())
        score_hits(scores, evidence, [h.source_ref for h in result.hits],
                   [math.ceil(len(h.render()) / 4) for h in result.hits])
        score_budgets(scores, evidence,
                      partial(budgeted, mem, q["question"], reference[chat["id"]]))
    return by, latencies


def summarize(by: dict[str, Scores], latencies: list[float]) -> dict[str, Any]:
    return {"abilities": score_rows(dict(sorted(by.items()))), "latency_ms": latency_ms(latencies)}


def markdown(results: dict[str, dict[str, Any]]) -> str:
    names = list(results)
    abilities = list(next(iter(results.values()))["abilities"])
    lines = ["| ability | n | " + " | ".join(f"{n} R@10 / in 1k" for n in names) + " |",
             "|---|---|" + "---|" * len(names)]
    for ability in abilities:
        n = results[names[0]]["abilities"][ability]["n"]
        cells = " | ".join(f"{results[c]['abilities'][ability]['R@10']:.3f} / "
                           f"{results[c]['abilities'][ability][budget_name(1000)]:.3f}"
                           for c in names)
        lines.append(f"| {ability} | {n} | {cells} |")
    lines += ["", f"| config | R@5 | R@10 | R@25 | P@10 | tokens@10 | {BUDGET_HEADS} | "
                  f"recall p50 / p95 ms |",
              "|---|---|---|---|---|---|" + "---|" * len(BUDGETS) + "---|"]
    for name, res in results.items():
        row, lat = res["abilities"]["overall"], res["latency_ms"]
        lines.append(f"| {name} | {row['R@5']:.3f} | {row['R@10']:.3f} | {row['R@25']:.3f} | "
                     f"{row['P@10']:.3f} | {row['tokens@10']:.0f} | {budget_cells(row)} | "
                     f"{lat['p50']:.1f} / {lat['p95']:.1f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.beam_recall", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--configs", default="bm25,plain,no-feedback,no-neighbors",
                        help=f"comma-separated, of {', '.join(CONFIGS)}")
    parser.add_argument("--chats", type=int, default=None, help="only the first N chats")
    parser.add_argument("--out", type=Path, help="also write the results as JSON")
    parser.add_argument("--stores", type=Path,
                        help="build each embedder's store (all chats) under this directory "
                             "once and reuse it after (bench.dev_stores)")
    args = parser.parse_args(argv)
    if args.stores is not None and (args.chats is not None or args.data != DEFAULT_DATA):
        parser.error("--stores holds every chat of the default data: drop --chats / --data")
    names = args.configs.split(",")
    unknown = [n for n in names if n not in CONFIGS]
    if unknown:
        parser.error(f"unknown config {unknown}; use {', '.join(CONFIGS)}")
    data = load(args.data, args.chats)
    print(f"BEAM-500K: {len(data)} chats, {sum(len(c['turns']) for c in data):,} turns, "
          f"{sum(len(c['questions']) for c in data)} questions")
    results: dict[str, dict[str, Any]] = {}
    by_embedder: dict[str | None, list[str]] = {}
    for name in names:
        by_embedder.setdefault(CONFIGS[name][0], []).append(name)
    for embedder, group in by_embedder.items():
        with contextlib.ExitStack() as stack:
            if args.stores is not None:
                args.stores.mkdir(parents=True, exist_ok=True)
                m, refs = dev_store(args.stores, "beam", embedder, ingest_all)
                stack.callback(m.close)
                reference = {c["id"]: refs[str(c["id"])] for c in data}
            else:
                tmp = stack.enter_context(tempfile.TemporaryDirectory())
                m = stack.enter_context(Memory(Path(tmp) / "beam", embedder=embedder,
                                               fsync="never"))
                t0 = time.perf_counter()
                reference = {c["id"]: ingest(m, c) for c in track(data, "ingested", "chats")}
                print(f"ingest ({embedder or 'no embedder'}): {time.perf_counter() - t0:.0f} s")
            for name in group:
                by, latencies = evaluate(m, data, reference, CONFIGS[name][1])
                results[name] = summarize(by, latencies)
    print(markdown(results))
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
