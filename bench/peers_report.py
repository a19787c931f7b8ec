"""The report of ``bench.peers``: recall by split and category, latency, disk and RSS per
system (:func:`summarize`), hmem's ratio to each peer, the Markdown table and the machine."""

from __future__ import annotations

import os
import platform
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from bench.locomo import KS, Scores, score_hits
from bench.locomo_data import CATEGORIES, split_of
from bench.peers_corpus import Corpus, text_key

__all__ = ["COLUMNS", "SPLITS", "machine", "markdown", "pct", "ratios", "summarize"]

SPLITS = ("held-out", "all")


# ------------------------------------------------------------------------------------ report

def pct(values: Sequence[float], p: float) -> float:
    """The p-th percentile (nearest rank, as bench/locomo.py), in milliseconds."""
    if not values:
        return float("nan")
    s = sorted(values)
    return 1000 * s[min(len(s) - 1, int(p * len(s)))]


def summarize(result: dict[str, Any], corpus: Corpus, embed_s: dict[str, float],
              rss: int) -> dict[str, Any]:
    """Recall by split and latency / disk / RSS figures of one system's worker result."""
    asked = corpus.questions[: len(result["refs"])]
    scores = {split: Scores() for split in SPLITS}
    cats: dict[str, dict[int, Scores]] = {split: {} for split in SPLITS}
    for q, refs in zip(asked, result["refs"], strict=True):
        splits = ["all"] + (["held-out"] if split_of(q.sample) == "held-out" else [])
        for split in splits:
            score_hits(scores[split], q.evidence, refs)
            score_hits(cats[split].setdefault(q.category, Scores()), q.evidence, refs)
    with_embed = [s + embed_s[k] for q, s in zip(asked, result["search_s"], strict=True)
                  if (k := text_key(q.text)) in embed_s]
    out: dict[str, Any] = {
        split: {
            "n": len(scores[split].hits[KS[0]]),
            **{f"R@{k}": _mean(scores[split].hits[k]) for k in KS},
            "by_category": {CATEGORIES[c]: {"n": len(sc.hits[KS[0]]),
                                            **{f"R@{k}": _mean(sc.hits[k]) for k in KS}}
                            for c, sc in sorted(cats[split].items())},
        }
        for split in SPLITS
    }
    out.update({
        "memories": result["memories"],
        "conversations": sorted({q.sample for q in asked}),
        "ingest_s": result["ingest_s"],
        "add_ms": {"p50": pct(result["add_s"], 0.5), "p95": pct(result["add_s"], 0.95)},
        "recall_ms": {"p50": pct(result["search_s"], 0.5), "p95": pct(result["search_s"], 0.95)},
        "recall_embed_ms": {"p50": pct(with_embed, 0.5), "p95": pct(with_embed, 0.95),
                            "n": len(with_embed)},
        "disk_bytes": result["disk_bytes"],
        "disk_bytes_per_memory": result["disk_bytes"] / max(1, result["memories"]),
        "peak_rss_bytes": rss,
    })
    return out


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else float("nan")


# (label, getter, format); the ratio of a row is hmem's value over the peer's.
COLUMNS: list[tuple[str, Callable[[dict[str, Any]], float], str]] = [
    ("held-out R@5", lambda r: r["held-out"]["R@5"], ".3f"),
    ("R@10", lambda r: r["held-out"]["R@10"], ".3f"),
    ("R@25", lambda r: r["held-out"]["R@25"], ".3f"),
    ("all R@5", lambda r: r["all"]["R@5"], ".3f"),
    ("R@10", lambda r: r["all"]["R@10"], ".3f"),
    ("R@25", lambda r: r["all"]["R@25"], ".3f"),
    ("add p50 ms", lambda r: r["add_ms"]["p50"], ".2f"),
    ("add p95 ms", lambda r: r["add_ms"]["p95"], ".2f"),
    ("recall p50 ms", lambda r: r["recall_ms"]["p50"], ".2f"),
    ("recall p95 ms", lambda r: r["recall_ms"]["p95"], ".2f"),
    ("+embed p50 ms", lambda r: r["recall_embed_ms"]["p50"], ".1f"),
    ("+embed p95 ms", lambda r: r["recall_embed_ms"]["p95"], ".1f"),
    ("disk B/memory", lambda r: r["disk_bytes_per_memory"], ",.0f"),
    ("peak RSS MB", lambda r: r["peak_rss_bytes"] / 2**20, ",.0f"),
]


def ratios(results: dict[str, dict[str, Any]], base: str = "hmem") -> dict[str, dict[str, float]]:
    """hmem's value over each peer's, per column (recall: > 1 is better for hmem; latency,
    disk and RSS: < 1 is better for hmem)."""
    if base not in results:
        return {}
    out: dict[str, dict[str, float]] = {}
    for peer, res in results.items():
        if peer == base:
            continue
        row = {}
        for i, (label, get, _) in enumerate(COLUMNS):
            mine, theirs = get(results[base]), get(res)
            row[_key(i, label)] = mine / theirs if theirs else float("inf")
        out[peer] = row
    return out


def _key(i: int, label: str) -> str:
    """Unique column keys ('R@10' appears for both splits)."""
    if label.startswith("R@"):
        return ("held-out " if i < 3 else "all ") + label
    return label


def markdown(results: dict[str, dict[str, Any]], extra: dict[str, Any]) -> str:
    header = "| system | n q | memories | " + " | ".join(c[0] for c in COLUMNS) + " |"
    lines = [header, "|" + "---|" * (len(COLUMNS) + 3)]
    for name, res in results.items():
        cells = [format(get(res), fmt) for _, get, fmt in COLUMNS]
        lines.append(f"| {name} | {res['all']['n']} | {res['memories']} | "
                     + " | ".join(cells) + " |")
    if "floor" in extra:
        lines.append(f"| (floor: python + data + vectors) | | | {' | ' * (len(COLUMNS) - 1)}"
                     f"{extra['floor'] / 2**20:,.0f} |")
    rat = ratios(results)
    if rat:
        lines += ["", "hmem / peer (recall: > 1 favours hmem; latency, disk, RSS: < 1 favours "
                  "hmem)",
                  "", "| peer | " + " | ".join(c[0] for c in COLUMNS) + " |",
                  "|" + "---|" * (len(COLUMNS) + 1)]
        for peer, row in rat.items():
            lines.append(f"| {peer} | " + " | ".join(f"{v:.2f}" for v in row.values()) + " |")
    return "\n".join(lines)


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal"))
        ram = f"{mem / 2**20:.1f} GiB"
    except (OSError, StopIteration, ValueError):
        ram = "unknown RAM"
    return f"{os.cpu_count()} cores, {cpu}, {ram}, Python {platform.python_version()}"
