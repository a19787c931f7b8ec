"""Memory.add: turns stored first, facts extracted through the real openai client against the
fake server on 127.0.0.1 (no network, no sleeps), with lineage, dedup, supersedes, and
all-or-nothing failure."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import duckdb
import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog.events import FactRemembered, decode
from hmem import Memory
from hmem.cli_format import why_lines
from hmem.embedders import HashEmbedder
from hmem.errors import (
    ExtractionFailed,
    InvalidInput,
    LLMNotConfigured,
    LLMResponseInvalid,
    LLMUnavailable,
)
from hmem.extract import AddResult, Replacement, normalise
from hmem.llm import LLMClient, LLMConfig
from hmem.llm.extractor import PROMPT_VERSION, LLMExtractor
from tests.fake_llm import CHAT, chat_reply
from tests.conftest import examples
from tests.fake_openai import FakeOpenAI, Reply

pytest.importorskip("openai")

T0 = datetime(2026, 3, 1, 12, tzinfo=timezone.utc)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


def facts(*items: dict) -> str:
    return json.dumps({"facts": list(items)})


def fact(text: str, subject: str = "Maya", **extra) -> dict:
    return {"text": text, "subject": subject, **extra}


@pytest.fixture
def server():
    with FakeOpenAI() as srv:
        srv.route(CHAT, lambda request: chat_reply(facts(), model="fake-extractor"))
        yield srv


@pytest.fixture
def extractor(server):
    client = LLMClient(
        LLMConfig("fake-extractor", server.base_url, "sk-test", timeout_s=10, max_retries=2),
        sleep=lambda s: None,
    )
    yield LLMExtractor(client)
    client.close()


@pytest.fixture
def mem(tmp_path):
    with Memory(tmp_path / "store", clock=Clock(), embedder=None, fsync="never") as m:
        yield m


def say(server: FakeOpenAI, *texts: str) -> None:
    """Script the next extractor answers."""
    server.script(CHAT, *(chat_reply(t, model="fake-extractor") for t in texts))


def fact_events(m: Memory) -> list[tuple]:
    return m.sql(
        "SELECT seq, type FROM events WHERE type IN ('remembered', 'revised', 'forgotten') "
        "ORDER BY seq"
    ).fetchall()


# happy path, lineage -------------------------------------------------------------------------


def test_add_stores_turns_then_facts_with_lineage(mem, server, extractor):
    say(server, facts(fact("Maya moved to Berlin in March 2026", category="episodic",
                           importance=8, valid_from="2026-03-01", entities=["Berlin"])))
    messages = [
        {"role": "user", "content": "I moved to Berlin last week!", "name": "Maya"},
        {"role": "assistant", "content": "Congratulations on the move."},
    ]
    result = mem.add(messages, session_id="chat-1", extractor=extractor,
                     observed_at="2026-03-08")
    assert isinstance(result, AddResult)
    assert result.episode_seqs == (1, 2) and result.added == (3,) and result.revised == ()
    assert result.model == "fake-extractor" and result.prompt_version == PROMPT_VERSION
    assert result.usage.calls == 1 and result.usage.prompt_tokens == 11

    # the request: system prompt + JSON with the new turns
    body = server.requests_to(CHAT)[0].json
    assert body["response_format"] == {"type": "json_object"} and body["temperature"] == 0
    sent = json.loads(body["messages"][1]["content"])
    assert [t["text"] for t in sent["new_turns"]] == [m["content"] for m in messages]
    assert sent["new_turns"][0]["speaker"] == "Maya"
    assert sent["new_turns"][0]["said_at"].startswith("2026-03-08")

    episodes = mem.episodes("chat-1")
    assert [(e.seq, e.turn, e.role, e.speaker) for e in episodes] == [
        (1, 0, "user", "Maya"), (2, 1, "assistant", None)]
    assert episodes[0].observed_at == datetime(2026, 3, 8, tzinfo=timezone.utc)

    why = mem.why(3)
    f = why.fact
    assert f.derived_from == (1, 2) and f.extractor == "fake-extractor"
    assert f.prompt_version == PROMPT_VERSION and f.category == "episodic" and f.importance == 8
    assert f.versions[0].valid_from == datetime(2026, 3, 1, tzinfo=timezone.utc)
    assert "berlin" in f.entities
    assert [e.seq for e in why.episodes] == [1, 2]
    text = "\n".join(why_lines(why))
    assert "extracted by fake-extractor (prompt extract-v1) from turns seq 1, seq 2" in text
    assert "session chat-1 turn 0" in text and "I moved to Berlin last week!" in text
    assert mem.verify().ok


def test_episodes_are_not_facts_and_stay_in_their_namespace(mem, server, extractor):
    say(server, facts())
    mem.add([{"role": "user", "content": "zebra crossing chat"}], session_id="s",
            extractor=extractor)
    assert mem.recall("zebra").hits == ()
    assert mem.stats().facts == 0
    other = mem.in_namespace("other")
    assert other.episodes() == [] and other.episodes("s") == []
    say(server, facts())
    other.add([{"role": "user", "content": "hello"}], session_id="s", extractor=extractor)
    assert [e.turn for e in other.episodes("s")] == [0]
    say(server, facts())
    mem.add([{"role": "user", "content": "next"}], session_id="s", extractor=extractor)
    assert [e.turn for e in mem.episodes("s")] == [0, 1]  # turn numbers continue per session
    assert [e.text for e in mem.episodes()] == ["zebra crossing chat", "next"]
    assert mem.events(types=["episode"]).fetchall()[0][8] == "zebra crossing chat"
    say(server, facts())
    mem.add([{"role": "user", "content": "third"}], session_id="s", namespace="third",
            extractor=extractor)
    assert [e.text for e in mem.in_namespace("third").episodes()] == ["third"]
    assert mem.sql("SELECT text FROM episodes ORDER BY seq").fetchall() == [
        ("zebra crossing chat",), ("next",)]
    assert other.sql("SELECT text FROM episodes").fetchall() == [("hello",)]


def test_context_turns_and_similar_facts_are_sent(mem, server, extractor):
    old = mem.remember("maya", "Maya lives in London")
    for i in range(3):
        say(server, facts())
        mem.add([{"role": "user", "content": f"turn {i}"}], session_id="s", extractor=extractor)
    say(server, facts())
    mem.add([{"role": "user", "content": "Maya left London"}], session_id="s",
            extractor=extractor, context_turns=2)
    sent = json.loads(server.requests_to(CHAT)[-1].json["messages"][1]["content"])
    assert [t["text"] for t in sent["context_turns"]] == ["turn 1", "turn 2"]
    assert [f["id"] for f in sent["existing_facts"]] == [old]


# dedup -------------------------------------------------------------------------------------------


def test_exact_duplicates_are_skipped(mem, server, extractor):
    existing = mem.remember("maya", "Maya likes green tea.")
    say(server, facts(fact("maya likes  GREEN tea"), fact("Maya plays chess"),
                      fact("Maya plays chess!"), fact("   ")))
    result = mem.add([{"role": "user", "content": "tea and chess"}], session_id="s",
                     extractor=extractor)
    assert len(result.added) == 1
    assert [(s.reason, s.duplicate_of) for s in result.skipped] == [
        ("duplicate", existing), ("duplicate", None), ("empty", None)]
    assert [mem.get(i).text for i in result.added] == ["Maya plays chess"]


def test_near_duplicates_by_cosine_are_skipped_with_an_embedder(tmp_path, server, extractor):
    with Memory(tmp_path / "s", clock=Clock(), embedder=HashEmbedder(64)) as m:
        existing = m.remember("maya", "Maya works at Acme in Berlin")
        say(server, facts(fact("In Berlin, Maya works at Acme"), fact("Maya owns a red bike")))
        result = m.add([{"role": "user", "content": "Maya works at Acme"}], session_id="s",
                       extractor=extractor)
        assert [(s.reason, s.duplicate_of) for s in result.skipped] == [("duplicate", existing)]
        assert [m.get(i).text for i in result.added] == ["Maya owns a red bike"]
        assert m.stats().vectors == 2  # the new fact's vector was appended with it
        assert m.verify().ok


# supersedes ---------------------------------------------------------------------------------------


def test_supersedes_become_revises(mem, server, extractor):
    clock = mem.clock
    london = mem.remember("Maya", "Maya lives in London", valid_from="2024-01-01")
    cat = mem.remember("Maya", "Maya has no pets")
    clock.now = datetime(2026, 6, 1, tzinfo=timezone.utc)
    say(server, facts(
        fact("Maya lives in Berlin", valid_from="2026-05-01", supersedes=[london]),
        fact("Maya adopted a cat", supersedes=[f"#{cat}"], valid_from="2020-01-01"),
    ))
    result = mem.add([{"role": "user", "content": "news"}], session_id="s", extractor=extractor)
    assert result.added == ()
    assert result.revised == (Replacement(london, 4), Replacement(cat, 5))
    berlin, adopted = mem.get(4), mem.get(5)
    assert berlin.supersedes == london and berlin.revision == "world"
    assert berlin.versions[0].valid_from == datetime(2026, 5, 1, tzinfo=timezone.utc)
    # a date before the old fact's start cannot be a change in the world: a correction
    assert adopted.supersedes == cat and adopted.revision == "correction"
    assert adopted.derived_from == (3,) and adopted.extractor == "fake-extractor"
    # London stays believed for its earlier period
    assert [b.id for b in mem.as_of(mem.last_seq, valid_at="2025-01-01")] == [london]
    assert {h.id for h in mem.recall("Maya", limit=50).hits} == {4, 5}
    assert mem.verify().ok


def test_bad_supersede_ids_are_ignored_and_reported(mem, server, extractor):
    other = mem.in_namespace("other")
    foreign = other.remember("maya", "Maya is in the other namespace")
    gone = mem.remember("maya", "Maya is at home")
    mem.forget(gone)
    old = mem.remember("maya", "Maya drinks coffee")
    newer = mem.revise(old, "Maya drinks tea")
    target = mem.remember("maya", "Maya runs")
    before_other = (other.stats().facts, other.why(foreign), other.events().fetchall())
    say(server, facts(
        fact("Maya swims", supersedes=[foreign, 10**9, "abc", "\u00b2", gone, old, target, newer]),
        fact("Maya cycles", supersedes=[target]),
    ))
    result = mem.add([{"role": "user", "content": "sports"}], session_id="s",
                     extractor=extractor)
    assert [(i.fact_id, i.reason) for i in result.ignored_supersedes] == [
        (foreign, "not a fact in this namespace"),
        (10**9, "not a fact in this namespace"),
        ("abc", "not a fact in this namespace"),
        ("\u00b2", "not a fact in this namespace"),  # isdigit() but not an int
        (gone, "forgotten"),
        (old, "already superseded"),
        (newer, "a fact can supersede only one fact"),
        (target, "already revised by this extraction"),
    ]
    swims = result.revised[0].new_id
    assert result.revised == (Replacement(target, swims),) and len(result.added) == 1
    assert mem.get(newer).current and other.get(foreign).current and not mem.get(target).current
    assert (other.stats().facts, other.why(foreign), other.events().fetchall()) == before_other
    assert mem.verify().ok


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


def test_reextraction_with_another_model_appends_new_events(mem, server, extractor):
    say(server, facts(fact("Maya likes jazz")))
    first = mem.add([{"role": "user", "content": "I like jazz"}], session_id="s",
                    extractor=extractor)
    server.script(CHAT, chat_reply(facts(fact("Maya enjoys jazz music")), model="other-model"))
    again = mem.extract(first.episode_seqs, extractor=extractor)
    assert again.model == "other-model" and again.added[0] > first.added[0]
    assert mem.get(first.added[0]).extractor == "fake-extractor"
    assert mem.get(again.added[0]).extractor == "other-model"
    assert len(mem.episodes()) == 1


def test_not_configured_raises_before_anything_is_stored(mem, monkeypatch):
    for name in ("HMEM_BASE_URL", "HMEM_API_KEY", "HMEM_LLM"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(LLMNotConfigured, match="HMEM_LLM"):
        mem.add([{"role": "user", "content": "hi"}], session_id="s")
    assert mem.last_seq == 0


def test_default_extractor_comes_from_the_environment(mem, server, monkeypatch):
    monkeypatch.setenv("HMEM_BASE_URL", server.base_url)
    monkeypatch.setenv("HMEM_API_KEY", "sk-env")
    monkeypatch.setenv("HMEM_LLM", "env-model")
    say(server, facts(fact("Maya is configured")))
    result = mem.add([{"role": "user", "content": "hi"}], session_id="s")
    assert len(result.added) == 1
    request = server.requests_to(CHAT)[0]
    assert request.json["model"] == "env-model"
    assert request.headers["authorization"] == "Bearer sk-env"


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


# schema evolution ------------------------------------------------------------------------------


class OldRemembered(msgspec.Struct, frozen=True, kw_only=True, tag_field="type",
                    tag="remembered"):
    """FactRemembered as the previous release wrote it (no lineage fields)."""

    seq: int = 0
    tx_at: datetime = datetime(1970, 1, 1, tzinfo=timezone.utc)
    namespace: str = "default"
    source_agent: str | None = None
    source_ref: str | None = None
    subject: str
    text: str
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    confidence: float = 1.0
    entities: tuple[str, ...] = ()


def test_old_events_decode_with_empty_lineage():
    old = msgspec.msgpack.encode(OldRemembered(seq=4, tx_at=T0, subject="maya", text="x"))
    ev = decode(old)
    assert isinstance(ev, FactRemembered) and ev.seq == 4
    assert ev.derived_from == () and ev.extractor is None and ev.importance is None


def test_a_projection_of_the_previous_schema_is_rebuilt(tmp_path, server, extractor):
    path = tmp_path / "store"
    with Memory(path, clock=Clock(), embedder=None) as m:
        m.remember("maya", "Maya lives in London")
        say(server, facts(fact("Maya likes tea")))
        m.add([{"role": "user", "content": "tea"}], session_id="s", extractor=extractor)
    con = duckdb.connect(str(path / "projection.duckdb"))
    con.execute("UPDATE meta SET value = '2' WHERE key = 'schema_version'")
    con.execute("DROP TABLE episodes")
    con.close()
    with Memory(path, clock=Clock(), embedder=None) as m:
        assert any("schema 2 differs" in n for n in m.notes)
        assert [e.text for e in m.episodes("s")] == ["tea"]
        assert m.get(3).derived_from == (2,)
        assert m.verify().ok


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
        before = _outside(other)
        current_before = {f.id for f in m.history("maya") + m.history("tom") if f.current}

        def resolve(answer):
            if isinstance(answer, dict):
                for cand in answer["facts"]:
                    cand["supersedes"] = [ids.get(i, i) for i in cand.get("supersedes", [])]
                return json.dumps(answer)
            return answer

        server._scripts[CHAT].clear()
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
