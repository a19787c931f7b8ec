"""Reports of the answer benchmarks: J and costs per category, and the dry run's estimate."""

from __future__ import annotations

import statistics
from typing import Any

from bench.answer_record import Record, tokens
from bench.prompts import (
    ANSWER_MAX_TOKENS,
    ANSWER_VERSION,
    JUDGE_MAX_TOKENS,
    JUDGE_VERSION,
    answer_messages,
    judge_messages,
)
from bench.qa import Dataset
from hmem.llm import Usage

__all__ = ["summarize", "markdown", "dry_run_estimate"]

# Assumed sizes for the dry run (a real run reports the server's counts).
EST_ANSWER_TOKENS = 40
EST_VERDICT_TOKENS = 35
EST_TURN_OVERHEAD = 20  # JSON keys and the timestamp of one turn in an extraction request
EST_SIMILAR_TOKENS = 300  # up to 10 similar facts shown to the extractor
EST_FACT_TOKENS_PER_TURN = 15  # extracted facts' JSON, per input turn


def _pct(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def _row(recs: list[Record]) -> dict[str, Any]:
    n = len(recs)
    return {
        "n": n,
        "J": 100.0 * sum(r.correct for r in recs) / n if n else 0.0,
        "invalid_verdicts": sum(r.label == "INVALID" for r in recs),
        "context_tokens": _mean([r.context_tokens for r in recs]),
        "answer_prompt_tokens": _mean([r.answer_usage.prompt_tokens for r in recs]),
        "answer_completion_tokens": _mean([r.answer_usage.completion_tokens for r in recs]),
        "judge_tokens": _mean([r.judge_usage.total_tokens for r in recs]),
        "recall_ms_p50": _pct([r.recall_ms for r in recs], 0.5),
        "answer_ms_p50": _pct([r.answer_ms for r in recs], 0.5),
        "answer_ms_p95": _pct([r.answer_ms for r in recs], 0.95),
    }


def summarize(
    ds: Dataset, records: list[Record], settings: dict[str, Any], *, answerer: Any, judge: Any
) -> dict[str, Any]:
    """Per category (in the data set's order), overall, and overall per split; token totals
    and how many calls the cache answered."""
    rows: dict[str, Any] = {}
    for cat in ds.categories:
        recs = [r for r in records if r.category == cat]
        if recs:
            rows[cat] = _row(recs)
    abstaining = [r for r in records if r.abstention]
    if abstaining and "abstention" not in rows:  # LongMemEval: _abs questions of every type
        rows["abstention"] = _row(abstaining)
    rows["overall"] = _row(records)
    splits = sorted({r.split for r in records if r.split})
    if len(splits) > 1:
        for split in splits:
            rows[f"overall ({split})"] = _row([r for r in records if r.split == split])
    both = [answerer] if answerer is judge else [answerer, judge]
    totals = {
        "answer": _usage(sum((r.answer_usage for r in records), Usage())),
        "judge": _usage(sum((r.judge_usage for r in records), Usage())),
        "cache_hits": sum(c.hits for c in both),
        "cache_misses": sum(c.misses for c in both),
    }
    return {
        "settings": {**settings, "answer_prompt": ANSWER_VERSION, "judge_prompt": JUDGE_VERSION},
        "rows": rows,
        "totals": totals,
        "references": [
            {"system": r.system, "J": r.j, "note": r.note} for r in ds.references
        ],
        "reference_note": ds.reference_note,
    }


def _usage(u: Usage) -> dict[str, int]:
    return {"calls": u.calls, "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens}


def markdown(report: dict[str, Any]) -> str:
    s = report["settings"]
    lines = [
        f"\n**{s['dataset']}**: {s['questions']} questions; ingest {s['ingest']}, recall "
        f"k={s['k']} budget={s['budget']} tokens, embedder {s['embedder']}; answer "
        f"{s.get('answer_model')} ({s['answer_prompt']}), judge {s.get('judge_model')} "
        f"({s['judge_prompt']})\n",
        "| category | n | J % | context tok | answer prompt tok | answer out tok | judge tok "
        "| recall p50 ms | answer p50 ms | answer p95 ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for cat, row in report["rows"].items():
        name = f"**{cat}**" if cat.startswith("overall") else cat
        lines.append(
            f"| {name} | {row['n']} | {row['J']:.1f} | {row['context_tokens']:.0f} | "
            f"{row['answer_prompt_tokens']:.0f} | {row['answer_completion_tokens']:.0f} | "
            f"{row['judge_tokens']:.0f} | {row['recall_ms_p50']:.1f} | "
            f"{row['answer_ms_p50']:.0f} | {row['answer_ms_p95']:.0f} |"
        )
    invalid = report["rows"]["overall"]["invalid_verdicts"]
    t = report["totals"]
    a, j = t["answer"], t["judge"]
    lines.append(
        f"\nLLM calls: answer {a['calls']} ({a['prompt_tokens']:,} prompt + "
        f"{a['completion_tokens']:,} completion tokens), judge {j['calls']} "
        f"({j['prompt_tokens']:,} + {j['completion_tokens']:,}); from the cache: "
        f"{t['cache_hits']}, new requests: {t['cache_misses']}."
        + (f" Judge gave no valid verdict {invalid} times (counted wrong)." if invalid else "")
    )
    if "extraction" in s:
        e = s["extraction"]
        lines.append(
            f"Extraction ({e['prompt']}): {e['calls']} calls, {e['prompt_tokens']:,} prompt + "
            f"{e['completion_tokens']:,} completion tokens; sessions whose extraction failed "
            f"(their turns left out): {e['failed_sessions']}."
        )
    if report["references"]:
        ours = report["rows"]["overall"]["J"]
        lines += [f"\n{report['reference_note']}\n", "| system | J % |", "|---|---|",
                  f"| **hmem (this run)** | **{ours:.1f}** |"]
        for ref in report["references"]:
            note = f" ({ref['note']})" if ref["note"] else ""
            lines.append(f"| {ref['system']}{note} | {ref['J']:.1f} |")
    return "\n".join(lines)


def _extraction_estimate(ds: Dataset) -> tuple[int, int, int]:
    """(calls, prompt tokens, completion tokens) of extracting every session once."""
    from hmem.llm.extractor import EXTRACTION_PROMPT

    base = tokens(EXTRACTION_PROMPT) + EST_SIMILAR_TOKENS
    calls = prompt = out = 0
    for conv in ds.conversations:
        previous: list[int] = []
        for session in conv.sessions:
            turns = [tokens(t.text) + EST_TURN_OVERHEAD for t in session.turns if t.text.strip()]
            if not turns:
                continue
            calls += 1
            prompt += base + sum(turns) + sum(previous[-6:])
            out += EST_FACT_TOKENS_PER_TURN * len(turns)
            previous += turns
    return calls, prompt, out


def dry_run_estimate(
    ds: Dataset, records: list[Record], settings: dict[str, Any], *, price_in: float,
    price_out: float, cache: Any = None,
) -> str:
    """What a run would cost: two calls per question (answer, judge; a judge re-ask for bad
    JSON adds one), prompt tokens from the real prompts (characters / 4) with the contexts
    this recall returned, completions at assumed typical sizes and at their caps."""
    n = len(records)
    ctx = [r.context_tokens for r in records]
    filler = "x" * (4 * EST_ANSWER_TOKENS)
    answer_in = judge_in = 0
    cached = 0
    for q, r in zip(ds.questions, records, strict=True):
        msgs = answer_messages(q, r.context)
        answer_in += sum(tokens(m["content"]) for m in msgs)
        judge_in += sum(tokens(m["content"]) for m in judge_messages(q, filler))
        if cache is not None and cache.cached(msgs, max_tokens=ANSWER_MAX_TOKENS):
            cached += 1
    out_typical = n * (EST_ANSWER_TOKENS + EST_VERDICT_TOKENS)
    out_cap = n * (ANSWER_MAX_TOKENS + JUDGE_MAX_TOKENS)
    total_in = answer_in + judge_in
    extract_calls = extract_in = extract_out = 0
    if settings["ingest"] == "extract":
        extract_calls, extract_in, extract_out = _extraction_estimate(ds)
        total_in += extract_in
        out_typical += extract_out
        out_cap += extract_out
    usd = total_in / 1e6 * price_in + out_typical / 1e6 * price_out
    usd_cap = total_in / 1e6 * price_in + out_cap / 1e6 * price_out
    s = settings
    lines = [
        f"dry run, {s['dataset']}: {n} questions, {len(ds.conversations)} conversations; "
        f"recall k={s['k']} budget={s['budget']}, embedder {s['embedder']}; no LLM called",
        f"  context tokens per question: mean {_mean(ctx):.0f}, p50 {_pct(ctx, 0.5):.0f}, "
        f"max {max(ctx, default=0)}  (x {n} questions = {sum(ctx):,})",
        f"  LLM calls: {2 * n + extract_calls} ({n} answer + {n} judge"
        + (f" + {extract_calls} extraction, one per session" if extract_calls else "")
        + f"; up to {n} more if the judge must be re-asked for valid JSON)",
        f"  prompt tokens: answer {answer_in:,} (mean {answer_in / max(n, 1):.0f}), judge "
        f"{judge_in:,} (mean {judge_in / max(n, 1):.0f})"
        + (f", extraction {extract_in:,}" if extract_calls else "") + f", total {total_in:,}",
        f"  completion tokens: ~{out_typical:,} assumed ({EST_ANSWER_TOKENS} per answer, "
        f"{EST_VERDICT_TOKENS} per verdict"
        + (f", {EST_FACT_TOKENS_PER_TURN} of facts per extracted turn" if extract_calls else "")
        + f"), at most {out_cap:,} (caps {ANSWER_MAX_TOKENS} and {JUDGE_MAX_TOKENS})",
        f"  cost at ${price_in}/M prompt, ${price_out}/M completion tokens: ~${usd:,.2f} "
        f"(at most ${usd_cap:,.2f})",
    ]
    if extract_calls:
        lines.insert(3, "  extraction prompts: hmem's prompt, each session's turns, 6 context "
                        "turns, ~10 similar facts; the context sizes above are from raw turns "
                        "(a dry run extracts nothing)")
    if cache is not None:
        lines.append(f"  answer calls already in the cache for {cache.model}: {cached} of {n}")
    return "\n".join(lines)
