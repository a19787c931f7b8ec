"""Memory.add when extraction fails or the model answers anything at all: all or nothing (the
turns stay, no fact is stored), input rejected before anything is stored, turns of another
namespace refused, and a property test that any answer keeps the store sound."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog.events import FactRemembered
from hmem import Memory
from hmem.embedders import HashEmbedder
from hmem.errors import (
    ExtractionFailed,
    InvalidInput,
    LLMNotConfigured,
    LLMResponseInvalid,
    LLMUnavailable,
)
from hmem.llm import LLMClient, LLMConfig
from hmem.llm.extraction import normalise
from hmem.llm.extractor import LLMExtractor
from tests.conftest import examples
from tests.llm.extract_support import (  # noqa: F401  (fixtures, used by name)
    Clock,
    extractor_fixture,
    fact,
    fact_events,
    facts,
    mem_fixture,
    say,
    server_fixture,
)
from tests.support.fake_llm import CHAT, chat_reply
from tests.support.fake_openai import FakeOpenAI, Reply

pytest.importorskip("openai")


# all or nothing ---------------------------------------------------------------------------------


def test_failed_extraction_keeps_turns_and_stores_no_fact(mem, server, extractor):
    server.route(CHAT, lambda request: Reply.error(500, "model crashed"))
    mem.remember("maya", "Maya lives in London")
    before = fact_events(mem)
    match = r"episode seqs 2, 3.*Memory.extract\(\[2, 3\]\)"
    with pytest.raises(ExtractionFailed, match=match) as info:
        mem.add([{"role": "user", "content": "a"}, {"role": "user", "content": "b"}],
                session_id="s", extractor=extractor)
    assert info.value.episode_seqs == (2, 3)
    assert isinstance(info.value.__cause__, LLMUnavailable)
    assert len(server.requests_to(CHAT)) == 3  # max_retries=2
    assert fact_events(mem) == before and mem.last_seq == 3
    assert [e.text for e in mem.episodes("s")] == ["a", "b"]
    assert mem.verify().ok

    # retry only the extraction: facts derived from the stored turns, no new turns
    server.route(CHAT, lambda request: chat_reply(facts(fact("Maya said a and b"))))
    result = mem.extract(info.value.episode_seqs, extractor=extractor)
    assert result.episode_seqs == (2, 3) and mem.get(result.added[0]).derived_from == (2, 3)
    assert len(mem.episodes("s")) == 2


def test_invalid_json_is_reasked_then_fails_cleanly(mem, server, extractor):
    server.route(CHAT, lambda request: chat_reply('{"facts": [{"subject": "no text"}]}'))
    with pytest.raises(ExtractionFailed) as info:
        mem.add([{"role": "user", "content": "hi"}], session_id="s", extractor=extractor)
    assert isinstance(info.value.__cause__, LLMResponseInvalid)
    assert len(server.requests_to(CHAT)) == 2  # asked, re-asked
    assert fact_events(mem) == [] and [e.seq for e in mem.episodes()] == [1]

    say(server, "not json at all", facts(fact("Maya says hi")))  # the re-ask fixes it
    result = mem.add([{"role": "user", "content": "hi again"}], session_id="s",
                     extractor=extractor)
    assert len(result.added) == 1 and result.usage.calls == 2


def test_not_configured_raises_before_anything_is_stored(mem, monkeypatch):
    for name in ("HMEM_BASE_URL", "HMEM_API_KEY", "HMEM_LLM"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(LLMNotConfigured, match="HMEM_LLM"):
        mem.add([{"role": "user", "content": "hi"}], session_id="s")
    assert mem.last_seq == 0


@pytest.mark.parametrize("messages", [
    [], "hello", None, 5, [{"role": "user"}], [{"role": "user", "content": "  "}],
    [{"role": 3, "content": "x"}],
    [{"role": "user", "content": "x", "observed_at": "2026-01-01T10:00"}],
])
def test_bad_messages_are_rejected_before_anything_is_stored(mem, extractor, messages):
    with pytest.raises(InvalidInput):
        mem.add(messages, session_id="s", extractor=extractor)
    assert mem.last_seq == 0


def test_a_crashing_plug_in_extractor_keeps_the_turns_and_their_seqs(mem, extractor):
    class Crashing:
        prompt_version = "test"

        def extract(self, request):  # type: ignore[no-untyped-def]
            raise RuntimeError("connection reset")

    with pytest.raises(ExtractionFailed, match="RuntimeError") as failed:
        mem.add([{"role": "user", "content": "I moved to Paris"}], session_id="s",
                extractor=Crashing())
    assert failed.value.episode_seqs == (1,) and mem.stats().facts == 0
    with pytest.raises(InvalidInput, match="episode_seqs"):
        mem.extract(5, extractor=extractor)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="not a recorded turn"):
        mem.extract([True], extractor=extractor)


def test_extract_refuses_turns_of_another_namespace(mem, server, extractor):
    say(server, facts())
    seqs = mem.in_namespace("other").add(
        [{"role": "user", "content": "x"}], session_id="s", extractor=extractor
    ).episode_seqs
    with pytest.raises(InvalidInput, match="not a recorded turn"):
        mem.extract(seqs, extractor=extractor)


def test_derived_from_must_name_episodes_of_the_namespace(mem):
    fid = mem.remember("maya", "x")
    with pytest.raises(InvalidInput, match="not a recorded episode"):
        mem.store.append(
            FactRemembered(namespace="default", subject="m", text="t", derived_from=(fid,))
        )


# property: whatever the model answers, the store stays sound -------------------------------------

_ids = st.one_of(
    st.sampled_from(["current", "gone", "old", "foreign"]),  # resolved to real ids below
    st.integers(-2, 60), st.sampled_from(["#1", "abc", "7", ""]),
)
_candidate = st.fixed_dictionaries(
    {"text": st.sampled_from(["Maya likes tea", "maya likes TEA!", "Tom runs", "Tom runs.",
                              "Maya swims", "", "  ", "tea"])},
    optional={
        "subject": st.sampled_from(["Maya", "", "Tom\x00", "x" * 600]),
        "supersedes": st.lists(_ids, max_size=3),
        "importance": st.one_of(st.integers(-5, 20), st.floats(-1, 20), st.none()),
        "valid_from": st.sampled_from(["2020-01-01", "2030-05-05", "garbage", "2026-01-01T10:00",
                                       None]),
        "category": st.sampled_from(["semantic", "episodic", "whatever", None]),
        "entities": st.lists(st.sampled_from(["Berlin", "", "a\x01b"]), max_size=2),
        "extra": st.just(1),
    },
)
_answer = st.one_of(
    st.lists(_candidate, max_size=4).map(lambda fs: {"facts": fs}),
    st.sampled_from(["not json", '{"facts": 3}', "[]", '```json\n{"facts": []}\n```',
                     '{"facts": [{"text": 5}]}', ""]),
    st.text(max_size=20),
)


@pytest.fixture(scope="module")
def shared_server():
    with FakeOpenAI() as srv:
        srv.route(CHAT, lambda request: chat_reply(facts()))
        yield srv


def _outside(m: Memory) -> tuple:
    """Everything of m's namespace: its logged events, facts and episodes."""
    logged = [ev for ev in m.store.log.read(1) if ev.namespace == m.namespace]
    return logged, m.history("maya"), m.episodes()


@settings(max_examples=examples(dev=10, ci=20), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(answers=st.lists(_answer, min_size=1, max_size=2), embed=st.booleans())
def test_any_extractor_answer_keeps_the_store_sound(tmp_path_factory, shared_server, answers,
                                                    embed):
    server = shared_server
    path = tmp_path_factory.mktemp("prop")
    client = LLMClient(LLMConfig("fake", server.base_url, "k", max_retries=0))
    embedder = HashEmbedder(32) if embed else None
    with Memory(path, clock=Clock(), embedder=embedder, fsync="never") as m:
        other = m.in_namespace("other")
        ids = {"foreign": other.remember("maya", "Maya likes tea")}
        ids["current"] = m.remember("maya", "Maya likes tea")
        ids["gone"] = m.remember("maya", "Maya runs")
        m.forget(ids["gone"])
        ids["old"] = m.remember("tom", "Tom runs")
        m.revise(ids["old"], "Tom walks")
        other.flush()
        m.flush()  # every embedding recorded: the seqs below are the extraction's own
        before = _outside(other)
        current_before = {f.id for f in m.history("maya") + m.history("tom") if f.current}

        def resolve(answer):
            if isinstance(answer, dict):
                for cand in answer["facts"]:
                    cand["supersedes"] = [ids.get(i, i) for i in cand.get("supersedes", [])]
                return json.dumps(answer)
            return answer

        server.unscript(CHAT)  # whatever an earlier example left queued
        server.script(CHAT, *(chat_reply(resolve(a)) for a in answers))
        last = m.last_seq
        try:
            result = m.add([{"role": "user", "content": "Maya likes tea and Tom runs"}],
                           session_id="s", extractor=LLMExtractor(client))
        except ExtractionFailed as e:
            assert e.episode_seqs == (last + 1,)
            assert m.last_seq == last + 1  # the turn, and no fact
        else:
            assert result.episode_seqs == (last + 1,)
            new = result.fact_ids
            assert len(new) == len(set(new))
            for fid in new:
                f = m.get(fid)
                assert f.derived_from == (last + 1,) and f.namespace == "default"
            for r in result.revised:
                assert r.old_id in current_before and not m.get(r.old_id).current
            texts = [normalise(m.get(i).text) for i in current_before | set(new)
                     if m.get(i).current]
            assert len(texts) == len(set(texts))  # no exact duplicate among current facts
        assert [e.seq for e in m.episodes("s")] == [last + 1]
        assert _outside(other) == before
        assert other.get(ids["foreign"]).current and m.get(ids["gone"]).forgotten
        assert m.verify().ok
    client.close()
