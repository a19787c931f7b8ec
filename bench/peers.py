"""hmem side by side with Mem0 and a SQLite + FTS5 store on LoCoMo, in one run.

    python -m bench.peers --out bench/out/peers.json                  # all systems, all data
    python -m bench.peers --quick                                     # 2 conversations, 30 q each
    python -m bench.peers --systems hmem,sqlite,sqlite-bm25,mem0-faiss,mem0-qdrant
    python -m bench.peers --cap mem0-qdrant=4     # that system on the first 4 conversations only

Systems: ``hmem`` (default config: ``Memory(path)``, fsync per write, hybrid recall; the local
MiniLM embedder's vectors), ``sqlite`` / ``sqlite-bm25`` (bench/sqlite_baseline.py: FTS5 BM25 +
numpy cosine fused with RRF, or BM25 alone), ``mem0-faiss`` / ``mem0-qdrant`` (Mem0 2.2.1
offline, ``infer=False``: dense only on faiss, Mem0's BM25 hybrid on qdrant; see
bench/peers_mem0.py). Mem0 is optional: without it those systems are skipped with the install
line.

Same data and scoring as bench/locomo.py: one namespace per conversation, one memory per turn
(the text every system stores and embeds is hmem's index text, "speaker: turn"), evidence
recall@k over categories 1-4, held-out = the eight conversations other than conv-26 and conv-30.

Same vectors: a first subprocess embeds every turn and question once with hmem's local MiniLM
(cached on disk under --cache-dir), and every system gets its vectors from that cache, so
"add" and "recall" latencies exclude embedding. The embedding cost is timed apart (one text per
call, on a sample of questions and turns) and added per question for "recall + embed".
Each system runs in its own subprocess: peak RSS is that child's ru_maxrss (the "floor" row is
a child that only loads the data and the vectors). Disk is every byte the system wrote.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.locomo_data import DEFAULT_DATA, load
from bench.peers_corpus import VectorCache, embed_corpus, select
from bench.peers_report import machine, markdown, pct, ratios, summarize
from bench.peers_systems import SYSTEMS, mem0_missing, run_system

# The corpus and its vectors are bench.peers_corpus, the systems and one system's run
# bench.peers_systems, the report bench.peers_report; the processes and the command are here.

QUICK_CONVERSATIONS = ("conv-26", "conv-41")


# ------------------------------------------------------------------------------------ workers

def _worker(job: dict[str, Any]) -> dict[str, Any]:
    """Runs in a child process: 'embed', 'floor' (load only) or a system name."""
    data, questions, _ = load(Path(job["data"]))
    corpus = select(data, questions, job["conversations"], job["per_conversation"])
    cache_path = Path(job["cache"])
    if job["what"] == "embed":
        embed_corpus(corpus, cache_path, job["embed_sample"])
        return {}
    cache = VectorCache.load(cache_path)
    if job["what"] == "floor":
        return {"memories": len(cache.rows)}
    log = (lambda s: print(s, file=sys.stderr, flush=True)) if job["verbose"] else (lambda s: None)
    return run_system(job["what"], corpus, cache, Path(job["root"]), log)


def spawn(job: dict[str, Any], tmp: Path) -> tuple[dict[str, Any], int]:
    """Run ``_worker(job)`` in a fresh interpreter; its result and peak RSS in bytes."""
    name = job["what"]
    job_path, out_path = tmp / f"{name}.job.json", tmp / f"{name}.out.json"
    job_path.write_text(json.dumps({**job, "out": str(out_path)}))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(Path(__file__).resolve().parents[1]), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.Popen([sys.executable, "-m", "bench.peers", "--worker", str(job_path)],
                            stdout=sys.stderr, env=env)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise RuntimeError(f"the {name} worker failed (exit {proc.returncode}); see stderr")
    return json.loads(out_path.read_text()), int(usage.ru_maxrss) * 1024


# ------------------------------------------------------------------------------------ main

def parse_caps(text: str) -> dict[str, int]:
    caps = {}
    for item in filter(None, text.split(",")):
        name, _, n = item.partition("=")
        caps[name.strip()] = int(n)
    return caps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", type=Path,
                        default=Path(os.environ.get("HMEM_LOCOMO", DEFAULT_DATA)))
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated names")
    parser.add_argument("--quick", action="store_true",
                        help=f"{' and '.join(QUICK_CONVERSATIONS)}, 30 questions each")
    parser.add_argument("--conversations", help="comma-separated sample ids (default: all)")
    parser.add_argument("--questions", type=int, help="at most this many per conversation")
    parser.add_argument("--cap", default="", help="SYSTEM=N: run SYSTEM on the first N "
                        "conversations only (e.g. mem0-qdrant=4)")
    parser.add_argument("--embed-sample", type=int, default=300,
                        help="questions (and turns) whose one-text embedding is timed")
    parser.add_argument("--cache-dir", type=Path,
                        default=Path(__file__).resolve().parent / "out" / "peers-cache")
    parser.add_argument("--out", type=Path, help="write the results as JSON here")
    parser.add_argument("-q", "--quiet", action="store_true", help="no per-step log on stderr")
    parser.add_argument("--worker", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        job = json.loads(args.worker.read_text())
        Path(job["out"]).write_text(json.dumps(_worker(job), default=str))
        return 0
    if not args.data.exists():
        print(f"error: no LoCoMo data at {args.data} (set --data or HMEM_LOCOMO)", file=sys.stderr)
        return 1
    conversations = (list(QUICK_CONVERSATIONS) if args.quick
                     else args.conversations.split(",") if args.conversations else None)
    per_conversation = args.questions or (30 if args.quick else None)
    names = [s.strip() for s in args.systems.split(",") if s.strip()]
    unknown = [n for n in names if n not in SYSTEMS]
    if unknown:
        parser.error(f"unknown systems {unknown}; choose from {', '.join(SYSTEMS)}")
    runnable = []
    for name in names:
        lacking = mem0_missing(name)
        if lacking:
            print(f"skipped {name}: {', '.join(lacking)} not installed. Install the peers with:\n"
                  f"  {_install_line()}", file=sys.stderr)
        else:
            runnable.append(name)
    if not runnable:
        print("nothing to run", file=sys.stderr)
        return 1
    caps = parse_caps(args.cap)
    data, questions, _ = load(args.data)
    corpus = select(data, questions, conversations, per_conversation)
    print(f"{len(corpus.samples)} conversations, {len(corpus.questions)} questions; "
          f"systems: {', '.join(runnable)}", file=sys.stderr)
    digest = hashlib.sha256("\n".join(["minilm-local", *corpus.texts()]).encode()).hexdigest()[:16]
    args.cache_dir.mkdir(parents=True, exist_ok=True)
    cache = args.cache_dir / f"vectors-{digest}-{args.embed_sample}"
    base_job = {"data": str(args.data), "conversations": conversations,
                "per_conversation": per_conversation, "cache": str(cache),
                "embed_sample": args.embed_sample, "verbose": not args.quiet}
    results: dict[str, dict[str, Any]] = {}
    extra: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="hmem-peers-") as tmp_name:
        tmp = Path(tmp_name)
        if not cache.with_suffix(".json").exists():
            t0 = time.perf_counter()
            _, extra["embedder_rss"] = spawn({**base_job, "what": "embed"}, tmp)
            print(f"embedded {len(corpus.texts())} texts in {time.perf_counter() - t0:.0f} s "
                  f"(cached in {cache.parent})", file=sys.stderr)
        meta = json.loads(cache.with_suffix(".json").read_text())
        embed_s = {**meta["embed_s"]["query"]}
        _, extra["floor"] = spawn({**base_job, "what": "floor"}, tmp)
        for name in runnable:
            job = {**base_job, "what": name, "root": str(tmp / name)}
            if name in caps:
                ids = [s["sample_id"] for s in corpus.samples][: caps[name]]
                job["conversations"] = ids
            t0 = time.perf_counter()
            result, rss = spawn(job, tmp)
            sub = select(data, questions, job["conversations"], per_conversation)
            results[name] = summarize(result, sub, embed_s, rss)
            r = results[name]
            print(f"{name}: held-out R@10 {r['held-out']['R@10']:.3f}, recall p50 "
                  f"{r['recall_ms']['p50']:.2f} ms ({time.perf_counter() - t0:.0f} s)",
                  file=sys.stderr)
    q_embed = list(meta["embed_s"]["query"].values())
    t_embed = list(meta["embed_s"]["turn"].values())
    extra.update({
        "machine": machine(),
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "command": "python -m bench.peers " + " ".join(sys.argv[1:] if argv is None else argv),
        "embed_query_ms": {"p50": pct(q_embed, 0.5), "p95": pct(q_embed, 0.95), "n": len(q_embed)},
        "embed_turn_ms": {"p50": pct(t_embed, 0.5), "p95": pct(t_embed, 0.95), "n": len(t_embed)},
        "embed_batch_s": meta["batch_s"], "texts": len(meta["keys"]),
    })
    print(markdown(results, extra))
    print(f"\nMiniLM (numpy), one text per call: query p50/p95 "
          f"{extra['embed_query_ms']['p50']:.1f}/{extra['embed_query_ms']['p95']:.1f} ms, "
          f"turn {extra['embed_turn_ms']['p50']:.1f}/{extra['embed_turn_ms']['p95']:.1f} ms "
          f"(samples of {len(q_embed)} and {len(t_embed)}); {extra['texts']} texts batched in "
          f"{extra['embed_batch_s']:.0f} s. {extra['machine']}.")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps({"results": results, "ratios": ratios(results), **extra},
                                       indent=2))
    return 0


def _install_line() -> str:
    from bench.peers_mem0 import INSTALL

    return INSTALL


if __name__ == "__main__":
    sys.exit(main())
