"""LoCoMo retrieval benchmark (no LLM): evidence recall@k of hmem's recall.

    python -m bench.locomo                       # hybrid with the local embedder (if installed)
    python -m bench.locomo --configs bm25,dense,hybrid,best --out bench/out/locomo.json
    python -m bench.locomo --configs hybrid --at-once  # also asked right after writing
    python -m bench.locomo --answer [--dry-run]  # answer + LLM-judge J instead (bench.answer)

Each conversation goes into its own namespace, one fact per turn: subject = speaker,
valid_from = the session's date, source_ref = dia_id, the image caption appended when present.
Each question (categories 1-4; 5 is adversarial and excluded) is asked with the conversation's
last session date as the reference time. Metric: |evidence ∩ dia_ids of the top-k hits| /
|evidence|, for k = 5, 10, 25, by category and overall, for the development split (conv-26,
conv-30: the only conversations any knob was tuned on) and the eight held-out conversations,
reported separately. Beside it, P@10: the share of the top ten hits returned that are evidence
(of as many as came back when fewer than ten did; 0 when none did), and recall within token
budgets of 500 to 8,000: the evidence recall of what ``recall(limit=10, max_tokens=B)``
returns, asked once per budget (what the MCP tool's default budget is chosen from).

Categories follow LoCoMo's own code: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop
(Mem0's paper labels the same numbers differently).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from functools import partial
from pathlib import Path
from typing import Any

from bench.dev_stores import dev_store
from bench.locomo_data import CATEGORIES, DEFAULT_DATA, Question, load, session_facts, split_of
from hmem import Memory
from hmem.adapters.progress import track
from hmem.recall.request import RecallConfig

# The data file (conversations, questions, evidence ids, splits) is read by bench.locomo_data;
# this module scores hmem's recall on it.
KS = (5, 10, 25)
# tokens: "R@10 in 1k" is recall(limit=10, max_tokens=1000)'s evidence recall, and so on
BUDGETS = (500, 1000, 2000, 4000, 8000)

# name -> (embedder spec, RecallConfig); "best" is the configuration chosen on the dev split.
# "plain" is BM25 alone (no feedback, neighbouring turns, entity, time or recency weight), and
# "no-feedback" / "no-neighbors" the default without one lexical loan: the baselines the
# defaults must beat on every data set (bench.beam_recall runs the same names on BEAM).
_PLAIN = RecallConfig(feedback_weight=0.0, neighbor_weight=0.0, next_weight=0.0,
                      entity_boost=0.0, subject_boost=0.0, time_boost=0.0, recency_weight=0.0)
CONFIGS: dict[str, tuple[str | None, RecallConfig]] = {
    "bm25": (None, RecallConfig()),
    "dense": ("local", RecallConfig(bm25_weight=0.0)),
    "hybrid": ("local", RecallConfig()),
    "plain": (None, _PLAIN),
    "no-feedback": (None, RecallConfig(feedback_weight=0.0)),
    "no-neighbors": (None, RecallConfig(neighbor_weight=0.0, next_weight=0.0)),
    # the defaults returning any candidate, hits without evidence of their own included
    "bm25-any-hit": (None, RecallConfig(require_evidence=False)),
    "hybrid-any-hit": ("local", RecallConfig(require_evidence=False)),
}


@dataclass
class Scores:
    hits: dict[int, list[float]] = field(default_factory=lambda: {k: [] for k in KS})
    tokens: dict[int, list[int]] = field(default_factory=lambda: {k: [] for k in KS})
    precision: list[float] = field(default_factory=list)  # P@10
    within: dict[int, list[float]] = field(  # R@10 within each of BUDGETS tokens
        default_factory=lambda: {b: [] for b in BUDGETS})

    def extend(self, other: Scores) -> None:
        """Add ``other``'s questions to these."""
        for k in KS:
            self.hits[k] += other.hits[k]
            self.tokens[k] += other.tokens[k]
        self.precision += other.precision
        for b in BUDGETS:
            self.within[b] += other.within[b]


def ingest(m: Memory, sample: dict[str, Any], *, flush: bool = True) -> datetime:
    """Store every turn of a conversation in its namespace; returns the last session's date.
    ``flush``: wait until every turn's vector is recorded (else the questions come at once)."""
    ns = m.in_namespace(sample["sample_id"])
    last = None
    for date, facts in session_facts(sample):
        ns.remember_many(facts, dedup=False)  # each turn is its own evidence
        last = date
    assert last is not None
    if flush:
        ns.flush()  # every turn's vector recorded before any question is asked
    return last


def ingest_all(m: Memory) -> dict[str, str]:
    """Every conversation of the default data ingested; each one's reference time (ISO) by its
    sample id."""
    return {s["sample_id"]: ingest(m, s).isoformat() for s in load(DEFAULT_DATA)[0]}


def asked_at_once(
    m: Memory, data: list[dict[str, Any]], questions: list[Question], config: RecallConfig,
) -> tuple[dict[str, dict[int, Scores]], list[float]]:
    """:func:`evaluate` as an agent asks: each conversation written (its vectors left to the
    background worker) and its questions asked right after, before the next is written."""
    by: dict[str, dict[int, Scores]] = {"dev": {}, "held-out": {}}
    latencies: list[float] = []
    for sample in data:
        reference = {sample["sample_id"]: ingest(m, sample, flush=False)}
        mine = [q for q in questions if q.sample == sample["sample_id"]]
        got, lat = evaluate(m, [sample], mine, config, reference, quiet=True)
        for split, cats in got.items():
            for cat, scores in cats.items():
                by[split].setdefault(cat, Scores()).extend(scores)
        latencies += lat
    m.flush()
    return by, latencies


def score_hits(
    scores: Scores, evidence: frozenset[str], refs: Sequence[str | None],
    tokens: Sequence[int] | None = None,
) -> None:
    """Add one question's evidence recall at every k (|evidence ∩ refs[:k]| / |evidence|), the
    tokens of its top-k hits (0 when not given) and its P@10 (the share of its top ten hits, or
    of as many as were returned, that are evidence; 0 for none returned)."""
    for k in KS:
        found = {r for r in refs[:k] if r is not None} & evidence
        scores.hits[k].append(len(found) / len(evidence))
        scores.tokens[k].append(sum(tokens[:k]) if tokens is not None else 0)
    top = refs[:10]
    scores.precision.append(sum(r in evidence for r in top) / len(top) if top else 0.0)


def score_budgets(
    scores: Scores, evidence: frozenset[str], ask: Callable[[int], Sequence[str | None]],
) -> None:
    """Add one question's evidence recall within each of :data:`BUDGETS`: ``ask(budget)`` is
    the source refs of what ``recall(limit=10, max_tokens=budget)`` returned."""
    for budget in BUDGETS:
        kept = {r for r in ask(budget) if r is not None}
        scores.within[budget].append(len(kept & evidence) / len(evidence))


def evaluate(
    m: Memory, data: list[dict[str, Any]], questions: list[Question], config: RecallConfig,
    reference: dict[str, datetime], *, quiet: bool = False,
) -> tuple[dict[str, dict[int, Scores]], list[float]]:
    """Scores by split and category, and recall latencies in seconds."""
    by: dict[str, dict[int, Scores]] = {"dev": {}, "held-out": {}}
    latencies = []
    views = {s["sample_id"]: m.in_namespace(s["sample_id"]) for s in data}
    for q in track(questions, "asked", "questions", quiet=quiet, leave=False):
        mem = views[q.sample]
        mem.recall_config = config
        t0 = time.perf_counter()
        result = mem.recall(q.text, limit=max(KS), max_tokens=10**9,
                            reference_time=reference[q.sample])
        latencies.append(time.perf_counter() - t0)
        scores = by[split_of(q.sample)].setdefault(q.category, Scores())
        score_hits(scores, q.evidence, [h.source_ref for h in result.hits],
                   [math.ceil(len(h.render()) / 4) for h in result.hits])
        score_budgets(scores, q.evidence, partial(budgeted, mem, q.text, reference[q.sample]))
    return by, latencies


def budgeted(mem: Memory, query: str, reference: datetime, budget: int) -> list[str | None]:
    """The source refs of ``recall(limit=10, max_tokens=budget)``."""
    result = mem.recall(query, limit=10, max_tokens=budget, reference_time=reference)
    return [h.source_ref for h in result.hits]


def summarize(by: dict[str, dict[int, Scores]], latencies: list[float]) -> dict[str, Any]:
    out: dict[str, Any] = {
        split: score_rows({CATEGORIES[cat]: sc for cat, sc in sorted(cats.items())})
        for split, cats in by.items()
    }
    out["latency_ms"] = latency_ms(latencies)
    return out


def score_rows(groups: dict[str, Scores]) -> dict[str, Any]:
    """A row per group (in the given order), then "overall" over all their questions."""
    rows: dict[str, Any] = {}
    every = Scores()
    for name, sc in groups.items():
        rows[name] = score_row(sc)
        every.extend(sc)
    rows["overall"] = score_row(every)
    return rows


def latency_ms(latencies: list[float]) -> dict[str, float]:
    """p50 and p95 of latencies given in seconds, in milliseconds."""
    lat = sorted(latencies)
    return {
        "p50": 1000 * lat[len(lat) // 2],
        "p95": 1000 * lat[min(len(lat) - 1, int(0.95 * len(lat)))],
    }


def budget_name(budget: int) -> str:
    """``R@10 in 1k`` for 1,000 tokens, ``R@10 in 0.5k`` for 500."""
    return f"R@10 in {budget / 1000:g}k"


def score_row(sc: Scores) -> dict[str, Any]:
    """R@k, tokens@k, P@10 and R@10 within each budget, averaged over the questions of a row."""
    n = len(sc.hits[KS[0]])

    def mean(values: list[float] | list[int]) -> float:
        return statistics.fmean(values) if values else 0.0

    return {
        "n": n,
        **{f"R@{k}": mean(sc.hits[k]) for k in KS},
        **{f"tokens@{k}": mean(sc.tokens[k]) for k in KS},
        "P@10": mean(sc.precision),
        **{budget_name(b): mean(sc.within[b]) for b in BUDGETS},
    }


def budget_cells(row: dict[str, Any]) -> str:
    """A row's R@10 within each budget, as table cells."""
    return " | ".join(f"{row[budget_name(b)]:.3f}" for b in BUDGETS)


BUDGET_HEADS = " | ".join(f"in {b / 1000:g}k" for b in BUDGETS)


def markdown(results: dict[str, dict[str, Any]]) -> str:
    lines = []
    for split in ("held-out", "dev"):
        which = "eight conversations" if split == "held-out" else "conv-26, conv-30"
        lines.append(f"\n**{split}** ({which})\n")
        lines.append(f"| config | category | n | R@5 | R@10 | R@25 | P@10 | tokens@10 | "
                     f"{BUDGET_HEADS} |")
        lines.append("|---|---|---|---|---|---|---|---|" + "---|" * len(BUDGETS))
        for name, res in results.items():
            for cat, row in res[split].items():
                lines.append(
                    f"| {name} | {cat} | {row['n']} | {row['R@5']:.3f} | {row['R@10']:.3f} | "
                    f"{row['R@25']:.3f} | {row['P@10']:.3f} | {row['tokens@10']:.0f} | "
                    f"{budget_cells(row)} |"
                )
    lines.append("\n| config | recall p50 ms | p95 ms |")
    lines.append("|---|---|---|")
    for name, res in results.items():
        lat = res["latency_ms"]
        lines.append(f"| {name} | {lat['p50']:.2f} | {lat['p95']:.2f} |")
    return "\n".join(lines)


def _server() -> Any:
    from bench.pg_server import PgServer

    return PgServer()


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--answer" in argv:  # the LLM answer benchmark: bench.answer's options apply
        from bench.answer import main as answer_main

        return answer_main([a for a in argv if a != "--answer"], dataset="locomo")
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path,
                        default=Path(os.environ.get("HMEM_LOCOMO", DEFAULT_DATA)))
    parser.add_argument("--configs", default="bm25,dense,hybrid",
                        help=f"comma-separated, of {', '.join(CONFIGS)}")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("--embedder", help="override the embedder of dense/hybrid configs")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars")
    parser.add_argument("--at-once", action="store_true",
                        help="also ask each conversation's questions right after writing it, "
                             "its vectors still being embedded (configs with an embedder), "
                             "reported as NAME@once beside the settled figure")
    parser.add_argument("--stores", type=Path,
                        help="build each embedder's store under this directory once and reuse "
                             "it after (bench.dev_stores)")
    parser.add_argument("--server", action="store_true",
                        help="build the stores on a throwaway PostgreSQL server (one schema "
                             "per embedder) instead of directories")
    args = parser.parse_args(argv)
    if args.stores is not None and (args.server or args.data != DEFAULT_DATA):
        parser.error("--stores holds the default data in directories: drop --server / --data")
    if not args.data.exists():
        print(f"error: no LoCoMo data at {args.data} (set --data or HMEM_LOCOMO)", file=sys.stderr)
        return 1
    data, questions, skipped = load(args.data)
    print(f"{len(questions)} questions (categories 1-4; {skipped} without evidence skipped)",
          file=sys.stderr)
    results: dict[str, dict[str, Any]] = {}
    stores: dict[str | None, tuple[Memory, dict[str, datetime]]] = {}
    server = _server() if args.server else None
    with tempfile.TemporaryDirectory(prefix="hmem-locomo-") as tmp:
        try:
            for name in args.configs.split(","):
                spec, config = CONFIGS[name]
                if spec is not None and args.embedder:
                    spec = args.embedder
                if args.at_once and spec is not None:
                    where = Path(tmp) / f"{name}-at-once"
                    with Memory(where, fsync="never", embedder=spec) as fresh:
                        by, lat = asked_at_once(fresh, data, questions, config)
                    results[f"{name}@once"] = summarize(by, lat)
                    ho = results[f"{name}@once"]["held-out"]["overall"]
                    print(f"{name}@once: held-out R@10 {ho['R@10']:.3f} P@10 {ho['P@10']:.3f}",
                          file=sys.stderr)
                if spec not in stores and args.stores is not None:
                    args.stores.mkdir(parents=True, exist_ok=True)
                    stores[spec] = dev_store(args.stores, "locomo", spec, ingest_all)
                if spec not in stores:
                    t0 = time.perf_counter()
                    where = (Path(tmp) / (spec or "none") if server is None
                             else server.new_store(f"locomo_{spec or 'none'}"))
                    m = Memory(where, fsync="never", embedder=spec, flush_every=10**6)
                    reference = {
                        s["sample_id"]: ingest(m, s)
                        for s in track(data, "ingested", "conversations", quiet=args.quiet,
                                       leave=False)
                    }
                    print(f"ingested {m.last_seq} events with embedder {spec} in "
                          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
                    stores[spec] = (m, reference)
                m, reference = stores[spec]
                by, lat = evaluate(m, data, questions, config, reference, quiet=args.quiet)
                results[name] = summarize(by, lat)
                ho = results[name]["held-out"]["overall"]
                print(f"{name}: held-out R@5 {ho['R@5']:.3f} R@10 {ho['R@10']:.3f} "
                      f"R@25 {ho['R@25']:.3f} P@10 {ho['P@10']:.3f}", file=sys.stderr)
        finally:
            for m, _ in stores.values():
                m.close()
            if server is not None:
                server.stop()
    print(markdown(results))
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
