"""Hybrid recall with an embedder: vectors as events, fusion, explain, reembed, mismatches."""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
import pytest

from eventlog.events import EmbeddingRecorded
from hmem import Memory, errors
from hmem.embedders import HashEmbedder
from hmem.recall.request import RecallConfig

UTC = timezone.utc


@pytest.fixture
def mem(tmp_path):
    """Inline embedding: each fact's vector is the event right after it (exact ids and seqs)."""
    with Memory(tmp_path / "s", embedder="hash-64", embed_mode="inline") as m:
        yield m


def test_each_fact_is_logged_with_its_vector_in_one_write(mem):
    a = mem.remember("maya", "Maya lives in London")
    b = mem.revise(a, "Maya lives in Paris", valid_from="2030-01-01")
    events = list(mem.store.log.read())
    assert [type(e).__name__ for e in events] == [
        "FactRemembered", "EmbeddingRecorded", "FactRevised", "EmbeddingRecorded"
    ]
    assert [e.fact_id for e in events if isinstance(e, EmbeddingRecorded)] == [a, b]
    assert mem.stats().vectors == 2
    assert any(isinstance(e, EmbeddingRecorded) for e in mem.why(b).events)
    assert mem.verify().ok


def test_dense_finds_what_bm25_cannot(mem):
    target = mem.remember("tom", "Tom studies astronomy")
    mem.remember("tom", "Tom owns a bicycle")
    # "astronomer" and "astronomy" stem differently: BM25 has no match, the trigram vectors do.
    hits = mem.recall("astronomer", explain=True)
    assert hits[0].id == target
    assert hits[0].explain["dense"] > 0 and hits[0].explain.get("bm25", 0) == 0


def test_explain_shows_every_signal(mem):
    mem.remember("maya", "Maya lives in London", valid_from="2025-01-01")
    hit = mem.recall("where does Maya live", explain=True)[0]
    assert set(hit.explain) >= {"bm25", "dense", "recency", "confidence", "entity", "time"}
    assert hit.explain["entity"] > 1.0  # the query names Maya


def test_weighted_fusion_is_selectable(tmp_path):
    cfg = RecallConfig(fusion="weighted", dense_weight=0.0)
    with Memory(tmp_path / "s", embedder="hash-64", recall_config=cfg) as m:
        a = m.remember("maya", "Maya likes tea")
        m.remember("maya", "Maya likes coffee")
        m.flush()
        hit = m.recall("tea", explain=True)[0]
        assert hit.id == a and hit.explain["dense"] == 0.0


TEXTS = [f"{who} {what} {where}" for who in ("Maya", "Tom", "Ana") for what in
         ("likes tea", "owns a bicycle", "studies astronomy", "moved house")
         for where in ("in London", "in Paris", "at home")]


@pytest.mark.parametrize("query", ["astronomer in Paris", "bicycle", "Ana tea at home"])
def test_code_search_that_rescores_everything_answers_as_the_exact_scan(tmp_path, query):
    with Memory(tmp_path / "s", embedder="hash-64", embed_mode="inline") as m:
        for i, text in enumerate(TEXTS):
            m.remember(text.split()[0].lower(), text, source_ref=f"t{i}")
        gone = m.remember("tom", "Tom studies astronomy in Paris")
        m.forget(gone)  # an invisible fact must stay out of the code search too
        now = "2031-01-01"  # one reference time: scores comparable across the calls
        exact = m.recall(query, explain=True, reference_time=now)  # few vectors: "auto" = exact
        answers = {}
        for search, rerank in (("exact", 1), ("codes", len(TEXTS) + 1), ("codes", 2)):
            cfg = RecallConfig(dense_search=search, dense_rerank=rerank)
            with m.in_namespace("default", recall_config=cfg) as view:
                answers[search, rerank] = view.recall(query, explain=True, reference_time=now)
    assert [(h.id, h.score) for h in answers["exact", 1]] == [(h.id, h.score) for h in exact]
    assert [(h.id, h.score) for h in answers["codes", len(TEXTS) + 1]] == [
        (h.id, h.score) for h in exact
    ]
    few = answers["codes", 2]
    assert gone not in [h.id for h in few] and len(few) > 0


@pytest.mark.parametrize("bad", [{"dense_search": "ann"}, {"dense_rerank": 0},
                                 {"dense_rerank": True}])
def test_dense_search_knobs_are_checked(bad):
    with pytest.raises(errors.InvalidInput, match="dense_"):
        RecallConfig(**bad)


def test_remember_many_is_all_or_nothing(mem):
    ids = mem.remember_many([
        {"subject": "maya", "text": "Maya likes tea", "source_ref": "s1:t1"},
        {"subject": "maya", "text": "Maya likes jazz", "valid_from": "2025-01-01"},
    ])
    assert ids == [1, 3]  # each fact followed by its vector
    before = mem.last_seq
    with pytest.raises(errors.InvalidInput):
        mem.remember_many([{"subject": "maya", "text": "fine"}, {"subject": "maya", "text": ""}])
    with pytest.raises(errors.InvalidInput):
        mem.remember_many([{"subject": "maya", "text": "x", "colour": "red"}])
    assert mem.last_seq == before
    assert [h.id for h in mem.recall("maya likes", limit=5)] == [1, 3]  # 3 is older (valid_from)


def test_reembed_fills_missing_vectors_once(tmp_path):
    path = tmp_path / "s"
    with Memory(path, embedder=None) as m:
        a = m.remember("maya", "Maya likes tea")
        m.revise(a, "Maya likes green tea")
        m.in_namespace("other").remember("tom", "Tom likes rugby")
    with Memory(path, embedder="hash-64") as m:
        assert m.recall("tea", explain=True)[0].explain.get("dense") is None
        assert m.reembed() == 2  # history included; the other namespace untouched
        assert m.reembed() == 0
        assert m.stats().vectors == 2
        assert m.recall("tea", explain=True)[0].explain["dense"] > 0
        assert m.in_namespace("other").reembed() == 1
        assert m.verify().ok


def test_reembed_without_an_embedder_is_a_clear_error(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        with pytest.raises(errors.EmbedderUnavailable, match="hmem\\[local\\]"):
            m.reembed()


def test_dims_mismatch_is_an_error_not_a_wrong_answer(tmp_path):
    path = tmp_path / "s"
    with Memory(path, embedder=HashEmbedder(64, model="shared-name")) as m:
        m.remember("maya", "Maya likes tea")
    with Memory(path, embedder=HashEmbedder(32, model="shared-name")) as m:
        with pytest.raises(errors.EmbedderError, match="64 dims"):
            m.recall("tea")


def test_vectors_of_another_model_are_not_used(tmp_path):
    path = tmp_path / "s"
    with Memory(path, embedder=HashEmbedder(64, model="model-a")) as m:
        m.remember("maya", "Maya likes tea")
    with Memory(path, embedder=HashEmbedder(64, model="model-b")) as m:
        hit = m.recall("tea", explain=True)[0]
        assert "dense" not in hit.explain  # BM25 only until model-b vectors exist


def test_bad_embedder_output_is_rejected_before_anything_is_written(tmp_path):
    class Broken:
        model, dims = "broken", 4

        def embed(self, texts):
            return np.full((len(texts), 4), np.nan, dtype=np.float32)

    with Memory(tmp_path / "s", embedder=Broken(), embed_mode="inline") as m:
        with pytest.raises(errors.EmbedderError, match="NaN"):
            m.remember("maya", "x")
        assert m.last_seq == 0


def test_time_expression_in_the_query_favours_facts_valid_then(tmp_path):
    clock = lambda: datetime(2026, 6, 15, tzinfo=UTC)  # noqa: E731
    with Memory(tmp_path / "s", embedder=None, clock=clock) as m:
        old = m.remember("maya", "Maya went hiking", valid_from="2025-07-10",
                         valid_to="2025-07-11")
        new = m.remember("maya", "Maya went hiking", valid_from="2026-06-01",
                         valid_to="2026-06-02")
        assert m.recall("hiking")[0].id == new  # recency wins without a time phrase
        hit = m.recall("hiking last summer", explain=True)[0]
        assert hit.id == old and hit.explain["time"] > 1.0
        hit = m.recall("hiking last summer", reference_time=datetime(2027, 3, 1, tzinfo=UTC))[0]
        assert hit.id == new  # relative to 2027, last summer is 2026


def test_context_turns_attach_neighbours_within_the_budget(tmp_path):
    cfg = RecallConfig(context_turns=1, feedback_docs=0)  # only the hits that name pottery
    with Memory(tmp_path / "s", embedder=None, recall_config=cfg) as m:
        ids = m.remember_many([
            {"subject": "mel", "text": "How was the weekend?", "source_ref": "D1:1"},
            {"subject": "caroline", "text": "I went to the pottery class", "source_ref": "D1:2"},
            {"subject": "mel", "text": "Sounds fun, what did you make?", "source_ref": "D1:3"},
            {"subject": "caroline", "text": "A bowl", "source_ref": "D2:1"},
        ])
        hit = m.recall("pottery")[0]
        assert hit.id == ids[1]
        assert [(c.id, c.position) for c in hit.context] == [(ids[0], -1), (ids[2], 1)]
        assert "before: mel: How was the weekend?" in hit.render()
        m.forget(ids[2])
        assert [c.id for c in m.recall("pottery")[0].context] == [ids[0]]  # forgotten: not shown
        small = m.recall("pottery", max_tokens=12)
        assert small.hits == ()  # the hit with its context does not fit


def test_a_turn_scores_with_the_turn_before_it(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        q, a, other = m.remember_many([
            {"subject": "mel", "text": "Where did you adopt the puppy?", "source_ref": "D1:1"},
            {"subject": "caroline", "text": "From the shelter downtown", "source_ref": "D1:2"},
            {"subject": "caroline", "text": "The shelter needs volunteers", "source_ref": "D3:9"},
        ])
        ranked = [h.id for h in m.recall("where was the puppy adopted from, which shelter")]
        assert ranked.index(a) < ranked.index(other)
        flat = RecallConfig(neighbor_weight=0.0, next_weight=0.0)
        m.recall_config = flat
        ranked = [h.id for h in m.recall("which shelter")]
        assert set(ranked) >= {a, other}


def test_an_old_but_relevant_fact_beats_new_asides(tmp_path):
    """Recency only breaks ties: a long-true answer outranks newer facts that merely share a
    word with the question (seen in the audit notebook)."""
    clock = lambda: datetime(2026, 11, 1, tzinfo=UTC)  # noqa: E731
    with Memory(tmp_path / "s", embedder="hash-64", clock=clock) as m:
        home = m.remember("maya", "Maya lives in London", valid_from="2025-01-01")
        m.remember("maya", "Maya books the train tickets", valid_from="2026-10-30")
        m.remember("maya", "Maya is vegetarian", valid_from="2026-10-31")
        m.flush()
        assert m.recall("where does maya live")[0].id == home
