"""Memory.add and Memory.extract when the model answers: turns stored first, then facts extracted
through the real openai client against the fake server on 127.0.0.1 (no network, no sleeps), with
lineage, dedup, supersedes, re-extraction and the previous schema. Failures and hostile answers:
tests/llm/test_extract_failures.py."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import msgspec
import pytest

from eventlog.events import FactRemembered, decode
from hmem import Memory
from hmem.adapters.cli_format import why_lines
from hmem.embedders import HashEmbedder
from hmem.llm.extraction import AddResult, Replacement
from hmem.llm.extractor import PROMPT_VERSION
from tests.llm.extract_support import (  # noqa: F401  (fixtures, used by name)
    T0,
    Clock,
    extractor_fixture,
    fact,
    facts,
    mem_fixture,
    say,
    server_fixture,
)
from tests.support.fake_llm import CHAT, chat_reply

pytest.importorskip("openai")


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


# re-extraction, the default extractor ---------------------------------------------------------


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


def test_a_checkpoint_of_an_earlier_layout_is_rebuilt(tmp_path, server, extractor):
    path = tmp_path / "store"
    with Memory(path, clock=Clock(), embedder=None) as m:
        m.remember("maya", "Maya lives in London")
        say(server, facts(fact("Maya likes tea")))
        m.add([{"role": "user", "content": "tea"}], session_id="s", extractor=extractor)
    ck = path / "checkpoint.columns"
    data = bytearray(ck.read_bytes())
    data[8:12] = (2).to_bytes(4, "little")  # the layout before episodes were in it
    ck.write_bytes(bytes(data))
    with Memory(path, clock=Clock(), embedder=None) as m:
        assert any("another layout" in n for n in m.notes)
        assert [e.text for e in m.episodes("s")] == ["tea"]
        assert m.get(3).derived_from == (2,)
        assert m.verify().ok
