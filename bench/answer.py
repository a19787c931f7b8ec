"""Answer benchmarks (LLM): ingest -> recall -> answer -> judge, one loop for every data set.

    python -m bench.answer locomo --dry-run            # calls and tokens a run would cost
    python -m bench.answer locomo                      # needs HMEM_BASE_URL, HMEM_API_KEY, HMEM_LLM
    python -m bench.answer longmemeval --data longmemeval_s.json --max-questions 50
    python -m bench.answer beam --data BEAM/chats/100K
    python -m bench.locomo --answer                    # the same as `bench.answer locomo`

1. Ingest: every conversation into its own namespace, session by session in time order.
   ``--ingest raw`` (default): one fact per turn (subject = speaker, valid_from = the
   session's date, source_ref = the turn's id). ``--ingest extract``: ``Memory.add`` stores
   each session's turns and one LLM call (the answer model, hmem's extraction prompt) turns
   them into facts; a session whose extraction fails is counted and skipped. The store's
   clock is fixed (2030-01-01, +1 us per reading), so reruns see the same log.
2. Recall: ``Memory.recall(question, limit=--k, max_tokens=--budget)`` with the question's date
   as reference time; the hits, newest first, each prefixed by its speaker, are the context.
3. Answer: the fixed prompt of ``bench.prompts`` (versioned) with the answer model
   (``HMEM_LLM`` or ``--model``), temperature 0.
4. Judge: the fixed judge prompt with the judge model (``--judge-model``, default
   ``$HMEM_JUDGE_LLM`` or gpt-4o-mini, the model the published LoCoMo numbers were judged
   with), same endpoint; a strict JSON verdict decoded by msgspec. J = share judged CORRECT.

Every LLM call goes through ``bench.llm_cache`` (``--cache``, default bench/out/llm-cache): a
rerun with the same data, settings, prompts and models makes no request and prints the same
report. Tokens are the server's counts; "context tokens" are the retrieved block's characters
/ 4, as hmem's token budget counts them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgspec

from bench.answer_record import Record, tokens
from bench.answer_report import dry_run_estimate, markdown, summarize
from bench.datasets import NAMES, default_data, load_dataset
from bench.ingest import CachedExtractor, FixedClock, ingest_extract, ingest_raw
from bench.llm_cache import CachedLLM
from bench.prompts import (
    ANSWER_MAX_TOKENS,
    JUDGE_MAX_TOKENS,
    Verdict,
    answer_messages,
    judge_messages,
)
from bench.qa import QA, Dataset
from hmem import Memory
from hmem.adapters.progress import track
from hmem.errors import HmemError, LLMResponseInvalid
from hmem.recall.request import RecallResult

__all__ = ["recall_context", "prepare", "ask_all", "main"]

DEFAULT_CACHE = Path(__file__).resolve().parent / "out" / "llm-cache"
DEFAULT_JUDGE = "gpt-4o-mini"


# ---------------------------------------------------------------------------- recall


def render_context(result: RecallResult) -> str:
    """The hits as the answerer sees them: newest first, ``- speaker: text (dates) [#id]``."""
    ordered = sorted(result.hits, key=lambda h: (h.valid_from, h.id), reverse=True)
    return "\n".join(f"- {h.subject}: {h.render()[2:]}" for h in ordered)


def recall_context(m: Memory, q: QA, *, k: int, budget: int) -> tuple[str, int, float]:
    """(context block, number of hits, recall milliseconds) for ``q``."""
    ns = m.in_namespace(q.conversation)
    t0 = time.perf_counter()
    result = ns.recall(q.question, limit=k, max_tokens=budget, reference_time=q.asked_at)
    ms = (time.perf_counter() - t0) * 1000.0
    return render_context(result), len(result.hits), ms


def prepare(
    dataset: Dataset, store: Path, *, k: int, budget: int, embedder: str | None,
    extractor: CachedExtractor | None = None, quiet: bool = False,
) -> tuple[list[Record], str]:
    """Ingest ``dataset`` into a fresh store at ``store`` (raw turns, or facts extracted by
    ``extractor``) and recall for every question. Returns one record per question (context
    filled in, no answer yet) and the embedder used."""
    with Memory(store, fsync="never", embedder=embedder, flush_every=10**6,
                clock=FixedClock()) as m:
        t0 = time.perf_counter()
        convs = track(dataset.conversations, "ingested", "conversations", quiet=quiet,
                      leave=False)
        if extractor is None:
            n, what = sum(ingest_raw(m, c) for c in convs), "turns"
        else:
            n, what = sum(ingest_extract(m, c, extractor) for c in convs), "extracted facts"
        model = m.embedder.model if m.embedder is not None else "none (BM25 only)"
        _say(f"ingested {n} {what} of {len(dataset.conversations)} conversations "
             f"(embedder {model}) in {time.perf_counter() - t0:.1f} s", quiet)
        records = []
        for q in track(dataset.questions, "recalled", "questions", quiet=quiet, leave=False):
            context, hits, ms = recall_context(m, q, k=k, budget=budget)
            records.append(Record(
                qid=q.qid, category=q.category, split=q.split, question=q.question,
                gold=q.answer, abstention=q.abstention, context_tokens=tokens(context),
                hits=hits, recall_ms=ms, context=context,
            ))
    return records, model


# ---------------------------------------------------------------------------- answer, judge


def ask_one(q: QA, rec: Record, answerer: Any, judge: Any) -> Record:
    """Answer ``q`` from ``rec.context`` and judge the answer; fills in ``rec``."""
    reply = answerer.chat(answer_messages(q, rec.context), max_tokens=ANSWER_MAX_TOKENS)
    rec.answer, rec.answer_usage, rec.answer_ms = reply.text.strip(), reply.usage, reply.latency_ms
    try:
        verdict, graded = judge.chat_json(judge_messages(q, rec.answer), Verdict,
                                          max_tokens=JUDGE_MAX_TOKENS)
    except LLMResponseInvalid as e:
        rec.label, rec.reason = "INVALID", str(e)[:300]
        return rec
    rec.label, rec.reason = verdict.label, verdict.reason
    rec.judge_usage, rec.judge_ms = graded.usage, graded.latency_ms
    return rec


def ask_all(
    dataset: Dataset, records: list[Record], answerer: Any, judge: Any, *, workers: int = 4,
    quiet: bool = False,
) -> list[Record]:
    """:func:`ask_one` for every question, ``workers`` at a time; records keep question order.
    An endpoint failure (after the client's retries) stops the run: what was answered is
    cached, so rerunning resumes where it stopped."""
    pairs = list(zip(dataset.questions, records, strict=True))

    def work(pair: tuple[QA, Record]) -> Record:
        return ask_one(pair[0], pair[1], answerer, judge)

    if workers <= 1:
        return [work(p) for p in track(pairs, "answered", "questions", quiet=quiet)]
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        return list(track(pool.map(work, pairs), "answered", "questions", total=len(pairs),
                          quiet=quiet))
    except BaseException:
        pool.shutdown(wait=True, cancel_futures=True)  # do not keep asking a failing endpoint
        raise
    finally:
        pool.shutdown(wait=True)


# ---------------------------------------------------------------------------- the command


@dataclass
class Options:
    data: Path
    ingest: str
    k: int
    budget: int
    embedder: str | None
    model: str | None
    judge_model: str
    cache: Path
    workers: int
    max_questions: int | None
    out: Path | None
    dry_run: bool
    price_in: float
    price_out: float
    quiet: bool


def parser(dataset: str | None = None) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog=f"python -m bench.{dataset}" if dataset else "python -m bench.answer",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    if dataset is None:
        p.add_argument("dataset", choices=NAMES)
    p.add_argument("--data", type=Path, help="the data set's file or directory "
                   "(defaults: $HMEM_LOCOMO or ../shared/data/locomo10.json, $HMEM_LONGMEMEVAL, "
                   "$HMEM_BEAM)")
    p.add_argument("--ingest", choices=("raw", "extract"), default="raw",
                   help="raw: one fact per turn (default); extract: LLM-extracted facts")
    p.add_argument("--k", type=int, default=25, help="recall limit (hits per question)")
    p.add_argument("--budget", type=int, default=2000, help="recall token budget per question")
    p.add_argument("--embedder", default="auto",
                   help="auto (local MiniLM when installed, else BM25 only), none, local, ...")
    p.add_argument("--model", help="answer model (default: $HMEM_LLM)")
    p.add_argument("--judge-model", default=os.environ.get("HMEM_JUDGE_LLM") or DEFAULT_JUDGE,
                   help="judge model on the same endpoint (default: $HMEM_JUDGE_LLM or "
                   f"{DEFAULT_JUDGE})")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="LLM cache directory")
    p.add_argument("--workers", type=int, default=4, help="questions answered concurrently")
    p.add_argument("--max-questions", type=int, help="only the first N questions")
    p.add_argument("--out", type=Path, help="write the report and every record as JSON here")
    p.add_argument("--dry-run", action="store_true",
                   help="ingest and recall, then print the calls and tokens a run would cost; "
                   "no LLM is called or needed")
    p.add_argument("--price-in", type=float, default=0.15,
                   help="USD per million prompt tokens, for the dry run's estimate "
                   "(default: gpt-4o-mini list price)")
    p.add_argument("--price-out", type=float, default=0.60,
                   help="USD per million completion tokens (default: gpt-4o-mini list price)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bars or notes")
    return p


def main(argv: list[str] | None = None, *, dataset: str | None = None) -> int:
    args = parser(dataset).parse_args(argv)
    name = dataset or args.dataset
    data = args.data or default_data(name)
    opts = Options(
        data=data, ingest=args.ingest, k=args.k, budget=args.budget,
        embedder=None if args.embedder.lower() in ("none", "bm25") else args.embedder,
        model=args.model, judge_model=args.judge_model, cache=args.cache, workers=args.workers,
        max_questions=args.max_questions, out=args.out, dry_run=args.dry_run,
        price_in=args.price_in, price_out=args.price_out, quiet=args.quiet,
    )
    try:
        return run(name, opts)
    except HmemError as e:  # LLMNotConfigured, LLMUnavailable, ...: the message says what to do
        print(f"error: {e}", file=sys.stderr)
        return 2


def run(name: str, opts: Options, *, make_client: Callable[..., Any] | None = None) -> int:
    """The whole benchmark; ``make_client(model)`` builds a chat client (default: hmem.llm)."""
    if opts.data is None or not opts.data.exists():
        print(f"error: no {name} data at {opts.data} (pass --data PATH)", file=sys.stderr)
        return 1
    answerer = judge = None
    if not opts.dry_run:  # fail on a missing endpoint before the (slow) ingest
        from hmem.llm import LLMClient, LLMConfig

        build = make_client or (lambda model: LLMClient(LLMConfig.from_env(model=model)))
        inner = build(opts.model)
        answerer = CachedLLM(inner, opts.cache)
        judge = CachedLLM(build(opts.judge_model), opts.cache)
    extractor = CachedExtractor(answerer) if answerer and opts.ingest == "extract" else None
    ds = load_dataset(name, opts.data).subset(opts.max_questions)
    for note in ds.notes:
        _say(f"note: {note}", opts.quiet)
    _say(f"{name}: {len(ds.questions)} questions over {len(ds.conversations)} conversations",
         opts.quiet)
    with tempfile.TemporaryDirectory(prefix=f"hmem-{name}-") as tmp:
        records, embedder = prepare(ds, Path(tmp) / "store", k=opts.k, budget=opts.budget,
                                    embedder=opts.embedder, extractor=extractor,
                                    quiet=opts.quiet)
    settings: dict[str, Any] = {
        "dataset": name, "data": str(opts.data), "questions": len(ds.questions),
        "ingest": opts.ingest, "k": opts.k, "budget": opts.budget, "embedder": embedder,
    }
    if extractor is not None:
        settings["extraction"] = {
            "prompt": extractor.prompt_version, "failed_sessions": extractor.failed,
            **{f: getattr(extractor.usage, f) for f in ("calls", "prompt_tokens",
                                                        "completion_tokens")},
        }
    if opts.dry_run:
        model = opts.model or os.environ.get("HMEM_LLM")
        cache = CachedLLM(None, opts.cache, model=model) if model else None
        print(dry_run_estimate(ds, records, settings, price_in=opts.price_in,
                               price_out=opts.price_out, cache=cache))
        return 0
    assert answerer is not None and judge is not None
    settings |= {"answer_model": answerer.model, "judge_model": judge.model}
    done = ask_all(ds, records, answerer, judge, workers=opts.workers, quiet=opts.quiet)
    report = summarize(ds, done, settings, answerer=answerer, judge=judge)
    print(markdown(report))
    if opts.out:
        opts.out.parent.mkdir(parents=True, exist_ok=True)
        opts.out.write_bytes(msgspec.json.format(
            msgspec.json.encode({"report": report, "records": done}), indent=1))
    return 0


def _say(text: str, quiet: bool) -> None:
    if not quiet:
        print(text, file=sys.stderr, flush=True)


if __name__ == "__main__":
    sys.exit(main())
