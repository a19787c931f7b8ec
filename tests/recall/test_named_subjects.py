"""A query that names a subject: that subject's facts are favoured, and the query's vector is
made without the name (hmem.recall.subjects)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hmem import Memory
from hmem.embedders import HashEmbedder
from hmem.errors import InvalidInput
from hmem.recall.request import RecallConfig
from hmem.recall.subjects import named_subjects
from projections.recall_index import NamespaceIndex
from tests.conftest import examples

ALL: dict[str, Any] = dict(limit=100, max_tokens=10**9)
OFF = RecallConfig(subject_boost=0.0, embed_subject_names=True)


class Recording(HashEmbedder):
    """The hash embedder, keeping every text it was asked to embed."""

    def __init__(self) -> None:
        super().__init__(64)
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        self.texts.extend(texts)
        return super().embed(texts)


def _two_turns_then_small_talk(m: Memory, first: tuple[str, str],
                               second: tuple[str, str]) -> tuple[str, str]:
    """The ids of two (subject, text) turns, after which their subjects talk of the weather
    by turns, so that each subject has turns that match nothing."""
    ids = m.remember(*first), m.remember(*second)
    for i in range(20):
        m.remember(second[0] if i % 2 else first[0], f"we talked about the weather {i}")
    return ids


def _index(m: Memory) -> NamespaceIndex:
    return m._store.projector.indexes["default"]  # noqa: SLF001


def _conversation(m: Memory) -> tuple[str, str]:
    """Melanie's own turn about painting, and Caroline's turn that names her twice over."""
    return _two_turns_then_small_talk(
        m, ("Melanie", "I paint sunsets by the lake on quiet evenings with my kids"),
        ("Caroline", "Wow Melanie, your painting! Melanie, paint more, paint"))


def test_the_named_speakers_own_turn_outranks_a_turn_that_only_names_them(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        own, other = _conversation(m)
        assert [h.id for h in m.recall("what does Melanie paint?", **ALL)][0] == own
        off = m.in_namespace("default", recall_config=OFF)
        assert [h.id for h in off.recall("what does Melanie paint?", **ALL)][:2] == [other, own]


def test_a_question_about_two_speakers_favours_neither(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        _conversation(m)
        asked = "what do melanie and caroline paint"
        on = [(h.id, h.score) for h in m.recall(asked, **ALL)]
        off = m.in_namespace("default", recall_config=RecallConfig(subject_boost=0.0))
        plain = off.recall(asked, **ALL)
        assert [i for i, _ in on] == [h.id for h in plain]
        for (_, a), h in zip(on, plain, strict=True):
            # each fact is one of the two: x (1 + .75 / 2); scores are rounded to 6 digits
            assert a == pytest.approx(h.score * 1.375, rel=1e-5, abs=2e-6)


def _embedded(tmp_path: Path, query: str, **recall: Any) -> list[str]:
    """The texts a recall of ``query`` in the conversation embeds (``recall_config`` in
    ``recall``: the view's)."""
    embedder = Recording()
    with Memory(tmp_path / "s", embedder=embedder) as m:
        _conversation(m)
        m.flush()
        embedder.texts.clear()
        config = recall.pop("recall_config", RecallConfig())
        m.in_namespace("default", recall_config=config).recall(query, **recall)
        return embedder.texts


def test_the_query_vector_is_made_without_the_subjects_it_names(tmp_path):
    asked = "what does Melanie's sister paint?"
    assert _embedded(tmp_path / "on", asked) == ["what does sister paint?"]
    assert _embedded(tmp_path / "off", asked, recall_config=OFF) == [asked]


def test_a_recall_filtered_to_one_subject_embeds_the_other_names_it_asks_about(tmp_path):
    embedded = _embedded(tmp_path, "what did Caroline say to Melanie?", subject="melanie")
    assert embedded == ["what did Caroline say to ?"]


def test_names_are_found_as_subjects_are_compared(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        m.remember("Maya  Lee", "lives in Leeds")
        m.remember("maya", "another Maya, who lives in Hull")
        m.remember("Bo", "lives in York")
        m.remember("the", "a subject that is a stopword")
        index = _index(m)
        found = named_subjects(index, "Where do MAYA LEE's and bo's friends live, the pair?")
        assert found.keys == ("maya lee", "bo")  # the longest name: not "maya"
        assert found.without() == "Where do and friends live, the pair?"
        assert named_subjects(index, "Maya Lee?").without() == "Maya Lee?"  # nothing else left
        assert named_subjects(index, "and what about bo?").without() == "and what about bo?"
        assert named_subjects(index, "where is maya").keys == ("maya",)
        assert named_subjects(index, "where is maya leeward").keys == ("maya",)
        assert named_subjects(None, "maya lee").keys == ()


def _chat(m: Memory) -> tuple[str, str]:
    """What the user said about their resume, and the assistant's longer reply that says the
    query's words more often."""
    return _two_turns_then_small_talk(
        m, ("user", "my resume analyzer tags skills with spacy"),
        ("assistant", "your resume analyzer: spacy tags the skills, spacy ranks the resume, and "
                      "the analyzer prints the skills"))


def test_the_first_person_of_a_query_names_the_user(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        said, reply = _chat(m)
        asked = "what did I say about the resume analyzer skills?"
        assert [h.id for h in m.recall(asked, **ALL)][:2] == [said, reply]
        nobody = m.in_namespace("default", recall_config=RecallConfig(asker_subject=""))
        assert [h.id for h in nobody.recall(asked, **ALL)][:2] == [reply, said]
        # no first person, no asker: the reply leads as it did
        assert [h.id for h in m.recall("resume analyzer skills", **ALL)][:2] == [reply, said]


@pytest.mark.parametrize("asked", ["what did I say", "I'm asking about", "tell me about",
                                   "what’s my plan", "I’m here", "talk to myself", "Maya and I.",
                                   "MY PLAN"])
def test_every_form_of_the_first_person_names_the_asker(tmp_path, asked):
    with Memory(tmp_path / "s", embedder=None) as m:
        _chat(m)
        index = _index(m)
        assert named_subjects(index, asked, "  User ").keys == ("user",)  # as subjects compare
        assert named_subjects(index, asked, "").keys == ()
        assert named_subjects(index, asked, "maya").keys == ()  # no such subject here
        assert named_subjects(index, "what did we say, you and us?", "user").keys == ()
        assert named_subjects(index, asked, "user").without() == asked  # embedded as asked


@pytest.mark.parametrize("asked", ["i.e. the plan", "I/O errors", "my_var value", "ME/CFS",
                                   "a gold mine", "my-app config", "myth and items"])
def test_abbreviations_and_names_that_contain_the_first_person_name_no_one(tmp_path, asked):
    with Memory(tmp_path / "s", embedder=None) as m:
        _chat(m)
        index = _index(m)
        assert named_subjects(index, asked, "user").keys == ()


def test_a_first_person_recall_replays_as_it_was_served(tmp_path):
    with Memory(tmp_path / "s", embedder=None, log_recalls=True) as m:
        said, _ = _chat(m)
        served = m.recall("what did I say about the resume analyzer skills?", limit=5)
        assert served.hits[0].id == said
        replay = m.replay_recall(m.last_seq)
        assert replay.same and [h.id for h in replay.replayed] == [h.id for h in served.hits]


def test_a_query_naming_someone_and_itself_shares_the_boost(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        _chat(m)
        m.remember("Maya", "Maya reviewed my resume skills")
        index = _index(m)
        found = named_subjects(index, "what did Maya and I say about my resume?", "user")
        assert found.keys == ("maya", "user")
        assert found.without() == "what did and I say about my resume?"
        # the user named by name as well as by "I" counts once: a share of a half each
        assert named_subjects(index, "what did user, Maya and I say?", "user").keys == (
            "user", "maya")


def test_subject_boost_and_embed_subject_names_are_checked():
    with pytest.raises(InvalidInput, match="subject_boost"):
        RecallConfig(subject_boost=-1.0)
    with pytest.raises(InvalidInput, match="embed_subject_names"):
        RecallConfig(embed_subject_names=1)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="asker_subject"):
        RecallConfig(asker_subject=None)  # type: ignore[arg-type]


_NAMES = st.sampled_from(["ann", "bo", "cy", "user"])
_WORDS = st.sampled_from(["tea", "rain", "boat", "ann", "bo", "cy", "maps", "I", "my", "user"])


@settings(max_examples=examples(dev=30, ci=100), deadline=None)
@given(
    facts=st.lists(st.tuples(_NAMES, st.lists(_WORDS, min_size=1, max_size=5)), min_size=1,
                   max_size=12),
    query=st.lists(_WORDS, min_size=1, max_size=4),
    boost=st.sampled_from([0.25, 0.75, 2.0]),
)
def test_the_boost_only_multiplies_the_named_subjects_facts(tmp_path_factory, facts, query,
                                                             boost):
    """Each hit's subject factor is 1 + boost * share, where share is 1 / (subjects named) for a
    fact of a named subject and 0 for any other; its score is its score without the boost times
    that (unless a loan's cap holds it below a fact it borrows from: hmem.recall.loans). "I" and
    "my" name the subject "user"."""
    path = tmp_path_factory.mktemp("s")
    with Memory(path, embedder=None) as m:
        m.remember_many([{"subject": s, "text": " ".join(w)} for s, w in facts], dedup=False)
        asked = " ".join(query)
        subjects = {s for s, _ in facts}
        named = [n for n in dict.fromkeys(query) if n in subjects]
        if {"I", "my"} & set(query) and "user" in subjects and "user" not in named:
            named.append("user")
        on = m.in_namespace("default", recall_config=RecallConfig(subject_boost=boost))
        off = m.in_namespace("default", recall_config=RecallConfig(subject_boost=0.0))
        plain = {h.id: h for h in off.recall(asked, explain=True, **ALL)}
        for hit in on.recall(asked, explain=True, **ALL):
            was = plain[hit.id]
            share = (was.subject in named) / len(named) if named else 0.0
            assert hit.explain is not None and was.explain is not None
            assert hit.explain["subject"] == pytest.approx(1 + boost * share, rel=1e-5)
            if "below" not in hit.explain and "below" not in was.explain:
                expected = was.score * (1 + boost * share)
                assert hit.score == pytest.approx(expected, rel=1e-5, abs=2e-6)
