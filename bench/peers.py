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
import platform
import random
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from bench.locomo import (
    CATEGORIES, DEFAULT_DATA, KS, Question, Scores, load, score_hits, session_facts, split_of,
)
from projections.projector import index_text

SYSTEMS = ("hmem", "sqlite", "sqlite-bm25", "mem0-faiss", "mem0-qdrant")
QUICK_CONVERSATIONS = ("conv-26", "conv-41")
SPLITS = ("held-out", "all")


# ------------------------------------------------------------------------------------ corpus

@dataclass
class Corpus:
    """The conversations and questions of one run."""

    samples: list[dict[str, Any]]
    questions: list[Question]

    def facts(self, sample: dict[str, Any]) -> list[dict[str, Any]]:
        return [f for _, facts in session_facts(sample) for f in facts]

    def reference(self, sample: dict[str, Any]) -> datetime:
        return session_facts(sample)[-1][0]

    def texts(self) -> list[str]:
        """Every text any system embeds: turns as stored, then the questions."""
        turns = [index_text(f["subject"], f["text"]) for s in self.samples for f in self.facts(s)]
        return list(dict.fromkeys(turns + [q.text for q in self.questions]))


def select(
    data: list[dict[str, Any]], questions: list[Question], conversations: Sequence[str] | None,
    per_conversation: int | None,
) -> Corpus:
    """The named conversations (all when None) and up to ``per_conversation`` questions each."""
    samples = [s for s in data if conversations is None or s["sample_id"] in conversations]
    keep = {s["sample_id"] for s in samples}
    chosen: list[Question] = []
    count: dict[str, int] = {}
    for q in questions:
        if q.sample in keep and count.get(q.sample, 0) < (per_conversation or len(questions)):
            chosen.append(q)
            count[q.sample] = count.get(q.sample, 0) + 1
    return Corpus(samples, chosen)


def text_key(text: str) -> str:
    """Cache key: whitespace collapsed (Mem0 replaces newlines and trims before embedding)."""
    return " ".join(text.split())


# ------------------------------------------------------------------------------------ vectors

class VectorCache:
    """Precomputed vectors by text; a miss is an error, so every system sees the same vectors."""

    def __init__(self, keys: list[str], vectors: np.ndarray, model: str, meta: dict[str, Any]):
        self.rows = {k: i for i, k in enumerate(keys)}
        self.vectors = vectors
        self.model = model
        self.dims = int(vectors.shape[1])
        self.meta = meta

    def lookup(self, text: str) -> np.ndarray:
        row = self.rows.get(text_key(text))
        if row is None:
            raise KeyError(f"no precomputed vector for {text[:60]!r}; the vector cache is stale")
        return self.vectors[row]

    @classmethod
    def build(cls, texts: Sequence[str], embedder: Any) -> VectorCache:
        """Embed ``texts`` in one batch call (any hmem embedder)."""
        vectors = np.ascontiguousarray(embedder.embed(list(texts)), dtype=np.float32)
        return cls([text_key(t) for t in texts], vectors, embedder.model, {})

    @classmethod
    def load(cls, path: Path) -> VectorCache:
        meta = json.loads(path.with_suffix(".json").read_text())
        return cls(meta.pop("keys"), np.load(path.with_suffix(".npy")), meta["model"], meta)


class CachedEmbedder:
    """hmem's embedder protocol over a :class:`VectorCache`."""

    def __init__(self, cache: VectorCache) -> None:
        self.cache, self.model, self.dims = cache, cache.model, cache.dims

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dims), np.float32)
        return np.stack([self.cache.lookup(t) for t in texts])


def embed_corpus(corpus: Corpus, path: Path, sample: int, seed: int = 7) -> None:
    """Embed every text with the local MiniLM (batched) and time one-text calls on a sample of
    questions and turns; writes ``path``.npy (vectors) and ``path``.json (keys, timings)."""
    from hmem.embedders.local import LocalEmbedder

    embedder = LocalEmbedder().load()
    texts = corpus.texts()
    t0 = time.perf_counter()
    cache = VectorCache.build(texts, embedder)
    batch_s = time.perf_counter() - t0
    rng = random.Random(seed)
    queries = list(dict.fromkeys(q.text for q in corpus.questions))
    turns = texts[: len(texts) - len(queries)]
    timed: dict[str, dict[str, float]] = {"query": {}, "turn": {}}
    for kind, pool in (("query", queries), ("turn", turns)):
        for text in rng.sample(pool, min(sample, len(pool))):
            t0 = time.perf_counter()
            embedder.embed([text])
            timed[kind][text_key(text)] = time.perf_counter() - t0
    np.save(path.with_suffix(".npy"), cache.vectors)
    path.with_suffix(".json").write_text(json.dumps({
        "model": cache.model, "keys": [text_key(t) for t in texts], "batch_s": batch_s,
        "embed_s": timed,
    }))


# ------------------------------------------------------------------------------------ systems

class HmemSystem:
    """hmem's default configuration (fsync per write, default recall), vectors from the cache."""

    def __init__(self, root: Path, cache: VectorCache) -> None:
        from hmem import Memory

        self.memory = Memory(root, embedder=CachedEmbedder(cache))
        self.views: dict[str, Any] = {}

    def _view(self, namespace: str) -> Any:
        if namespace not in self.views:
            self.views[namespace] = self.memory.in_namespace(namespace)
        return self.views[namespace]

    def add(self, namespace: str, fact: dict[str, Any], vector: np.ndarray) -> None:
        self._view(namespace).remember(**fact)

    def search(self, namespace: str, query: str, vector: np.ndarray, reference: datetime,
               limit: int) -> list[str | None]:
        result = self._view(namespace).recall(query, limit=limit, max_tokens=10**9,
                                              reference_time=reference)
        return [h.source_ref for h in result.hits]

    def close(self) -> None:
        self.memory.close()


class SqliteSystem:
    def __init__(self, root: Path, mode: str) -> None:
        from bench.sqlite_baseline import SqliteStore

        root.mkdir(parents=True, exist_ok=True)
        self.store = SqliteStore(root / "memories.db")
        self.mode = mode

    def add(self, namespace: str, fact: dict[str, Any], vector: np.ndarray) -> None:
        self.store.add(namespace, index_text(fact["subject"], fact["text"]), vector,
                       ref=fact["source_ref"])

    def search(self, namespace: str, query: str, vector: np.ndarray, reference: datetime,
               limit: int) -> list[str | None]:
        hits = self.store.search(namespace, query, vector=vector, limit=limit,
                                 mode=self.mode)  # type: ignore[arg-type]
        return [h.ref for h in hits]

    def close(self) -> None:
        self.store.close()


class Mem0System:
    def __init__(self, root: Path, backend: str, cache: VectorCache) -> None:
        from bench.peers_mem0 import Mem0Store

        self.store = Mem0Store(root, backend, cache.lookup,  # type: ignore[arg-type]
                               cache.model, cache.dims)

    def add(self, namespace: str, fact: dict[str, Any], vector: np.ndarray) -> None:
        self.store.add(namespace, index_text(fact["subject"], fact["text"]), fact["source_ref"])

    def search(self, namespace: str, query: str, vector: np.ndarray, reference: datetime,
               limit: int) -> list[str | None]:
        return self.store.search(namespace, query, limit)

    def close(self) -> None:
        self.store.close()


def make_system(name: str, root: Path, cache: VectorCache) -> Any:
    if name == "hmem":
        return HmemSystem(root, cache)
    if name in ("sqlite", "sqlite-bm25"):
        return SqliteSystem(root, "hybrid" if name == "sqlite" else "bm25")
    if name in ("mem0-faiss", "mem0-qdrant"):
        return Mem0System(root, name.split("-", 1)[1], cache)
    raise ValueError(f"unknown system {name!r}; choose from {', '.join(SYSTEMS)}")


def mem0_missing(name: str) -> list[str]:
    """Modules a Mem0 system needs that are not installed ([] for other systems)."""
    if not name.startswith("mem0-"):
        return []
    from bench.peers_mem0 import missing

    return missing(name.split("-", 1)[1])  # type: ignore[arg-type]


def run_system(name: str, corpus: Corpus, cache: VectorCache, root: Path,
               log: Callable[[str], None] = lambda s: None) -> dict[str, Any]:
    """Ingest turn by turn, ask every question, close; per-call latencies, top refs, disk."""
    system = make_system(name, root, cache)
    add_s: list[float] = []
    t_ingest = time.perf_counter()
    references = {}
    for sample in corpus.samples:
        ns = sample["sample_id"]
        for fact in corpus.facts(sample):
            vector = cache.lookup(index_text(fact["subject"], fact["text"]))
            t0 = time.perf_counter()
            system.add(ns, fact, vector)
            add_s.append(time.perf_counter() - t0)
        references[ns] = corpus.reference(sample)
        log(f"{name}: ingested {ns} ({len(add_s)} memories)")
    ingest_s = time.perf_counter() - t_ingest
    search_s: list[float] = []
    refs: list[list[str | None]] = []
    for i, q in enumerate(corpus.questions):
        vector = cache.lookup(q.text)
        t0 = time.perf_counter()
        found = system.search(q.sample, q.text, vector, references[q.sample], max(KS))
        search_s.append(time.perf_counter() - t0)
        refs.append(found)
        if (i + 1) % 250 == 0:
            log(f"{name}: asked {i + 1}/{len(corpus.questions)}")
    system.close()
    return {"system": name, "memories": len(add_s), "ingest_s": ingest_s, "add_s": add_s,
            "search_s": search_s, "refs": refs, "disk_bytes": disk_bytes(root)}


def disk_bytes(root: Path) -> int:
    """Apparent size of every file under ``root``."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


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
    for q, refs in zip(asked, result["refs"]):
        splits = ["all"] + (["held-out"] if split_of(q.sample) == "held-out" else [])
        for split in splits:
            score_hits(scores[split], q.evidence, refs)
            score_hits(cats[split].setdefault(q.category, Scores()), q.evidence, refs)
    with_embed = [s + embed_s[k] for q, s in zip(asked, result["search_s"])
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
