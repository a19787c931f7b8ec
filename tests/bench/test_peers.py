"""The peer benchmark's SQLite + FTS5 baseline and harness plumbing, on a tiny LoCoMo-format
sample with the hash embedder (no MiniLM, no Mem0)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from bench.locomo_data import load
from bench.peers import main
from bench.peers_corpus import VectorCache, select, text_key
from bench.peers_report import COLUMNS, ratios, summarize
from bench.peers_systems import mem0_missing, run_system
from bench.sqlite_baseline import SqliteStore, fts_query, rrf
from hmem.embedders import HashEmbedder

TURNS = {
    "conv-26": [  # a development conversation
        ("Maya", "I play the cello in a quartet every Sunday."),
        ("Leo", "Nice! I have been training for the Lisbon marathon."),
        ("Maya", "My sister Ines moved to Porto last spring."),
        ("Leo", "I adopted a grey cat called Pixel."),
    ],
    "conv-77": [  # a held-out one
        ("Ana", "We finally bought a sailboat named Gull."),
        ("Raj", "I started a pottery class on Tuesdays."),
        ("Ana", "The sailboat needs a new mast before summer."),
        ("Raj", "My pottery teacher is from Kyoto."),
    ],
}
QA = {
    "conv-26": [("What instrument does Maya play in a quartet?", ["D1:1"], 4),
                ("Where did Maya's sister Ines move?", ["D1:3"], 4),
                ("What is the name of Leo's cat?", ["D1:4"], 1)],
    "conv-77": [("What is the sailboat named?", ["D1:1"], 4),
                ("When is Raj's pottery class?", ["D1:2"], 2),
                ("Where is the pottery teacher from?", ["D1:4"], 4)],
}


def write_sample(path: Path) -> Path:
    data = []
    for sid, turns in TURNS.items():
        conversation = {
            "speaker_a": turns[0][0], "speaker_b": turns[1][0],
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": s, "dia_id": f"D1:{i}", "text": t}
                          for i, (s, t) in enumerate(turns, start=1)],
        }
        qa = [{"question": q, "evidence": ev, "category": c, "answer": "x"} for q, ev, c in QA[sid]]
        data.append({"sample_id": sid, "conversation": conversation, "qa": qa})
    path.write_text(json.dumps(data))
    return path


@pytest.fixture()
def corpus_and_cache(tmp_path: Path):
    data, questions, _ = load(write_sample(tmp_path / "locomo.json"))
    corpus = select(data, questions, None, None)
    return corpus, VectorCache.build(corpus.texts(), HashEmbedder(64))


def test_fts_query_drops_stopwords_and_quotes_every_word():
    assert fts_query("What does Maya play?") == '"maya" OR "play"'
    assert fts_query('AND OR NOT "(near*') == '"near"'  # FTS5 syntax stays plain terms
    assert fts_query("what is it?") is None


def test_rrf_sums_reciprocal_ranks():
    fused = dict(rrf([[1, 2, 3], [3, 1]], k=60))
    assert fused[1] == pytest.approx(1 / 61 + 1 / 62)
    assert fused[3] == pytest.approx(1 / 63 + 1 / 61)
    assert [i for i, _ in rrf([[1, 2, 3], [3, 1]], k=60)] == [1, 3, 2]


def test_baseline_finds_the_exact_turn_within_its_namespace(tmp_path: Path):
    emb = HashEmbedder(64)
    with SqliteStore(tmp_path / "m.db") as store:
        for ns, turns in TURNS.items():
            for i, (speaker, text) in enumerate(turns, start=1):
                full = f"{speaker}: {text}"
                store.add(ns, full, emb.embed([full])[0], ref=f"D1:{i}")
        store.add("other", "Maya: I play the cello in a quartet every Sunday.", ref="X")
        assert store.count() == 9
        query = "cello quartet"
        qv = emb.embed([query])[0]
        for mode in ("bm25", "hybrid", "dense"):
            hits = store.search("conv-26", query, vector=qv, limit=2,
                                mode=mode)  # type: ignore[arg-type]
            assert hits[0].ref == "D1:1", mode
            assert all(h.ref != "X" for h in hits)  # another namespace never leaks in
        assert store.search("conv-77", "cello quartet", limit=5, mode="bm25") == []
        # stemming: "sailboats" finds "sailboat"; the vector scan reads blobs back exactly
        assert {h.ref for h in store.search("conv-77", "sailboats", limit=5, mode="bm25")} == {
            "D1:1", "D1:3"}
        blob = store.db.execute("SELECT vector FROM memories WHERE ref = 'D1:2'").fetchone()[0]
        stored = emb.embed(["Leo: " + TURNS["conv-26"][1][1]])[0]
        assert np.array_equal(np.frombuffer(blob, "<f4"), stored)


def test_harness_runs_systems_and_scores_them_like_locomo(tmp_path: Path, corpus_and_cache):
    corpus, cache = corpus_and_cache
    results = {}
    for name in ("hmem", "sqlite-bm25"):
        raw = run_system(name, corpus, cache, tmp_path / name)
        assert raw["memories"] == 8 and len(raw["search_s"]) == 6 and raw["disk_bytes"] > 0
        results[name] = summarize(raw, corpus, {text_key(corpus.questions[0].text): 0.5}, 2**20)
    base = results["sqlite-bm25"]
    # every question names words of exactly its evidence turn: BM25 ranks it first
    assert base["all"]["R@5"] == 1.0 and base["all"]["n"] == 6
    assert base["held-out"]["n"] == 3  # conv-26 is development
    assert results["hmem"]["all"]["R@5"] == 1.0
    assert set(base["all"]["by_category"]) == {"single-hop", "multi-hop", "temporal"}
    # "+embed" adds the one timed question's embedding to its own search time only
    assert base["recall_embed_ms"]["n"] == 1
    assert base["recall_embed_ms"]["p50"] > 500
    assert base["peak_rss_bytes"] == 2**20
    rat = ratios(results)
    assert list(rat) == ["sqlite-bm25"]
    row = rat["sqlite-bm25"]
    assert len(row) == len(COLUMNS)
    assert row["all R@10"] == 1.0
    assert row["disk B/memory"] == pytest.approx(
        results["hmem"]["disk_bytes_per_memory"] / base["disk_bytes_per_memory"])
    assert row["add p50 ms"] == pytest.approx(
        results["hmem"]["add_ms"]["p50"] / base["add_ms"]["p50"])
    assert not any(math.isnan(v) for v in row.values())


def test_vector_cache_refuses_unknown_texts(corpus_and_cache):
    _, cache = corpus_and_cache
    assert cache.lookup("Maya: I play the cello in a quartet every Sunday.").shape == (64,)
    assert cache.lookup("Maya:  I play the cello in a\nquartet every Sunday. ").shape == (64,)
    with pytest.raises(KeyError, match="stale"):
        cache.lookup("never embedded")


@pytest.mark.skipif(not mem0_missing("mem0-faiss"), reason="Mem0 is installed here")
def test_mem0_is_skipped_with_the_install_line(tmp_path: Path, capsys):
    data = write_sample(tmp_path / "locomo.json")
    assert main(["--data", str(data), "--systems", "mem0-faiss,mem0-qdrant"]) == 1
    err = capsys.readouterr().err
    assert "skipped mem0-faiss" in err and "skipped mem0-qdrant" in err
    assert "pip install -e '.[local,peers]'" in err
