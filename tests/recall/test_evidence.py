"""Issue 33, item 3: no hit without its own evidence.

A hit is returned only when it holds one of the words of the query as asked (tokenized and
stemmed as the index is: feedback terms do not count), or its vector's cosine with the query's
is at least ``RecallConfig.min_cosine``, or it is a neighbouring turn of a fact that holds a
query word (the loan of ``neighbor_weight`` / ``next_weight``). However large ``limit`` and
``max_tokens``, a store of unrelated facts returns none of them.
"""

from __future__ import annotations

import string
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hmem import Memory
from hmem.embedders import HashEmbedder
from hmem.errors import InvalidInput
from hmem.recall.request import RecallConfig
from tests.conftest import examples

ALL: dict[str, Any] = dict(limit=1000, max_tokens=10**9)
NUMBERED = [{"subject": "test", "text": f"kill fact {i}"} for i in range(300)]
INSPECTOR = "the inspector fact arrived at noon"


@pytest.mark.parametrize("embedder", [None, "hash"])
def test_a_word_found_once_returns_its_fact_and_not_every_fact_the_feedback_matches(
    tmp_path, embedder
):
    with Memory(tmp_path / "s", embedder=embedder and HashEmbedder(64)) as m:
        m.remember_many(NUMBERED, dedup=False)
        inspector = m.remember("test", INSPECTOR)
        m.flush()
        result = m.recall("inspector", **ALL)
        assert [h.id for h in result] == [inspector]
        assert result.omitted == 0  # nothing without evidence is counted as left out
        assert "more left out" not in str(result)
        off = m.in_namespace("default", recall_config=RecallConfig(require_evidence=False))
        assert len(off.recall("inspector", **ALL)) > 100  # the feedback word "fact" matches


def test_the_turns_beside_a_hit_are_returned_as_its_evidence_and_no_other_turn(tmp_path):
    turns = [{**f, "source_ref": f"s1:{i}"} for i, f in enumerate(NUMBERED)]
    turns[150] = {"subject": "test", "text": INSPECTOR, "source_ref": "s1:150"}
    with Memory(tmp_path / "s", embedder=None) as m:
        ids = m.remember_many(turns, dedup=False)
        hits = [h.id for h in m.recall("inspector", **ALL)]
        assert hits[0] == ids[150]
        assert set(hits) == {ids[149], ids[150], ids[151]}  # the turns it lends its match to


def test_a_fact_without_the_query_words_is_returned_when_its_vector_is_close(tmp_path):
    with Memory(tmp_path / "s", embedder=HashEmbedder(256)) as m:
        inspector = m.remember("visit", "the inspector arrived")
        m.remember_many(NUMBERED, dedup=False)
        m.flush()
        hits = m.recall("inspection", explain=True, **ALL)  # stems differ, trigrams shared
        assert [h.id for h in hits] == [inspector]
        assert hits[0].explain is not None and hits[0].explain["dense"] > 0
        assert "bm25" not in hits[0].explain or hits[0].explain["bm25"] == 0
        far = m.in_namespace("default", recall_config=RecallConfig(min_cosine=0.99))
        assert len(far.recall("inspection", **ALL)) == 0


def test_min_cosine_and_require_evidence_are_checked():
    with pytest.raises(InvalidInput, match="min_cosine"):
        RecallConfig(min_cosine=1.5)
    with pytest.raises(InvalidInput, match="require_evidence"):
        RecallConfig(require_evidence=1)  # type: ignore[arg-type]


# Two vocabularies that share no word, no stem and no character: the facts' words are made of
# the letters a-m, the query's of n-x (no "y", which the stemmer turns into "i"). The hash
# embedder has 4,096 dims here: it hashes words and character trigrams into the vector, so at
# its 64 default dims two unrelated short texts collide into a cosine of 0.3 or more about once
# in a hundred pairs; with 4,096 it would take four collisions at once.
def _words(letters: str) -> st.SearchStrategy[str]:
    return st.text(alphabet=letters, min_size=6, max_size=10)


FACT_WORDS = _words(string.ascii_lowercase[:13])
QUERY_WORDS = _words("nopqrstuvwx")


@settings(max_examples=examples(dev=30, ci=300))
@given(
    facts=st.lists(st.tuples(FACT_WORDS, st.lists(FACT_WORDS, min_size=2, max_size=6)),
                   min_size=1, max_size=30),
    query=st.lists(QUERY_WORDS, min_size=2, max_size=4),
    embedder=st.sampled_from([None, "hash"]),
    turns=st.booleans(),
    limit=st.integers(1, 5000),
    max_tokens=st.one_of(st.none(), st.integers(1, 10**9)),
)
def test_a_query_from_another_vocabulary_returns_no_fact(
    facts, query, embedder, turns, limit, max_tokens
):
    rows = [{"subject": subject, "text": " ".join(words),
             **({"source_ref": f"s:{i}"} if turns else {})}
            for i, (subject, words) in enumerate(facts)]
    with tempfile.TemporaryDirectory() as tmp, Memory(
        Path(tmp) / "s", fsync="never", embedder=embedder and HashEmbedder(4096)
    ) as m:
        m.remember_many(rows, dedup=False)
        m.flush()
        result = m.recall(" ".join(query), limit=limit, max_tokens=max_tokens)
        assert list(result) == [] and result.omitted == 0
