"""Replayable retrieval: logged recalls, listed, shown by why, and re-run against the log prefix
they saw with the same answer."""

from __future__ import annotations

import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.events import RecallServed
from hmem import Memory, errors
from hmem.adapters.demo import StepClock
from hmem.recall.logged import logged_config
from hmem.recall.ranking import RecallConfig
from tests.conftest import examples

WORLD = datetime(2030, 1, 1, tzinfo=timezone.utc)



# The stores' clock: a step forward each time it is read.
START, STEP = datetime(2025, 1, 1, tzinfo=timezone.utc), timedelta(hours=7)


def open_memory(path: Path, **kw: object) -> Memory:
    kw.setdefault("clock", StepClock(START, STEP))
    kw.setdefault("embedder", "hash")
    kw.setdefault("embed_mode", "inline")
    kw.setdefault("log_recalls", True)
    return Memory(path, **kw)  # type: ignore[arg-type]


WORDS = ["maya", "lives", "london", "paris", "tea", "coffee", "the", "office", "moved", "1"]
texts = st.lists(st.sampled_from(WORDS), min_size=1, max_size=6).map(" ".join)
write = st.tuples(st.sampled_from(["remember", "correct", "world", "forget"]),
                  st.sampled_from(["a", "b"]), st.integers(0, 99), texts)
ask = st.tuples(
    st.just("recall"), st.sampled_from(["a", "b"]), texts,
    st.fixed_dictionaries({}, optional={
        "limit": st.integers(1, 5),
        "max_tokens": st.integers(5, 60),
        "as_of": st.integers(0, 30),
        "valid_at": st.sampled_from([WORLD - timedelta(days=400), WORLD + timedelta(days=3)]),
        "subject": st.sampled_from(["maya", "tom"]),
        "reference_time": st.sampled_from([WORLD]),
    }),
)
histories = st.lists(st.one_of(write, ask), min_size=1, max_size=20)
configs = st.sampled_from([
    RecallConfig(),
    RecallConfig(fusion="weighted", feedback_weight=0.0, recency_weight=0.5, half_life_days=1.0),
    RecallConfig(context_turns=1, dense_neighbors=True, time_boost=2.0),
    RecallConfig(dense_search="codes", dense_rerank=3),
])


def play(m: Memory, history: list[tuple[object, ...]]) -> list[tuple[int, list[object]]]:
    """Run the history; returns (seq of each logged recall, the hits the caller got)."""
    heads: dict[str, list[int]] = {"a": [], "b": []}
    served = []
    for op in history:
        ns = str(op[1])
        mem = m.in_namespace(ns)
        if op[0] == "recall":
            _, _, query, params = op
            params = dict(params)  # type: ignore[call-overload]
            if "as_of" in params:
                params["as_of"] = min(params["as_of"], m.last_seq)
            got = mem.recall(str(query), source_ref=f"s1:t{len(served)}", **params)
            served.append((m.last_seq, [(h.id, h.score) for h in got]))
            continue
        kind, pick, text = op[0], int(op[2]), str(op[3])  # type: ignore[call-overload]
        live = heads[ns]
        if kind == "remember" or not live:
            live.append(mem.remember("maya" if pick % 2 else "tom", text, source_ref=f"t{pick}",
                                     dedup=False))  # each a fact the ops may change
            continue
        old = live.pop(pick % len(live))
        if kind == "forget":
            mem.forget(old)
        else:
            when = WORLD + timedelta(minutes=m.last_seq) if kind == "world" else None
            live.append(mem.revise(old, text, valid_from=when))
    return served


@settings(max_examples=examples(dev=25, ci=200))
@given(history=histories, config=configs)
def test_a_logged_recall_replays_to_the_same_hits(history, config):
    with tempfile.TemporaryDirectory() as tmp:
        with open_memory(Path(tmp) / "s", recall_config=config) as m:
            served = play(m, history)
            for seq, hits in served:
                ev = m.store.log.get(seq)
                assert isinstance(ev, RecallServed)
                replay = m.in_namespace(ev.namespace).replay_recall(seq)
                assert [(h.id, h.score) for h in replay.recall.hits] == hits  # logged as served
                assert [(h.id, h.score) for h in replay.replayed] == hits, replay.differences
                assert replay.same and replay.differences == ""
            assert m.verify().ok  # recall events change no fact, and the projection agrees


def test_recall_logging_is_off_unless_asked(tmp_path, monkeypatch):
    monkeypatch.delenv("HMEM_LOG_RECALLS", raising=False)
    with open_memory(tmp_path / "s", log_recalls=None) as m:
        m.remember("maya", "Maya lives in London")
        m.recall("maya")
        assert m.recalls() == [] and m.last_seq == 2  # the fact and its vector only
    monkeypatch.setenv("HMEM_LOG_RECALLS", "1")
    with open_memory(tmp_path / "s", log_recalls=None) as m:
        m.recall("maya", source_ref="s9:t1")
        assert [r.source_ref for r in m.recalls()] == ["s9:t1"]
        with Memory(tmp_path / "s", read_only=True) as reader:  # a reader cannot log: not asked
            reader.recall("maya")
            assert len(reader.recalls()) == 1


def test_a_reader_asked_to_log_recalls_is_a_clear_error(tmp_path):
    with open_memory(tmp_path / "s") as m:
        m.remember("maya", "Maya lives in London")
    with pytest.raises(errors.InvalidInput, match="needs the store's writer"):
        Memory(tmp_path / "s", read_only=True, log_recalls=True)
    with pytest.raises(errors.InvalidInput, match="True or False"):
        Memory(tmp_path / "s", log_recalls="yes")  # type: ignore[arg-type]
    with open_memory(tmp_path / "s") as m:  # the failed opens left no lock behind
        assert m.stats().facts == 1


def test_why_shows_the_recalls_that_served_any_version(tmp_path):
    with open_memory(tmp_path / "s", source_agent="agent-7") as m:
        a = m.remember("maya", "Maya lives in London")
        m.recall("where does maya live", source_ref="s4:t7")
        b = m.revise(a, "Maya lives in Paris", valid_from=WORLD)
        m.recall("where does maya live", source_ref="s4:t9")
        seen = m.why(b).seen_by
        assert [(s.source_ref, s.fact_id, s.rank) for s in seen] == [
            ("s4:t7", a, 1), ("s4:t9", b, 1),
        ]
        assert {s.source_agent for s in seen} == {"agent-7"}
        assert [r.query for r in m.recalls(source_ref="s4:t9")] == ["where does maya live"]
        assert [r.seq for r in m.recalls(since=seen[0].seq)] == [seen[1].seq]
        table = m.sql("SELECT fact_id, rank FROM recall_hits ORDER BY seq").fetchall()
        assert table == [(a, 1), (b, 1)]
        assert [t for (t,) in m.events(types=["recall"]).project("text").fetchall()] == [
            "where does maya live"] * 2


def test_the_namespace_wall_holds_for_recalls(tmp_path):
    with open_memory(tmp_path / "s") as m:
        secret = m.in_namespace("secret")
        sid = secret.remember("code", "the vault code is 1234")
        secret.recall("vault code", source_ref="x:1")
        logged = secret.recalls()[0].seq
        assert m.recalls() == []
        with pytest.raises(errors.InvalidInput, match="not a recall logged in namespace"):
            m.replay_recall(logged)
        assert m.sql("SELECT count(*) FROM recalls").fetchall() == [(0,)]
        assert m.sql("SELECT count(*) FROM recall_hits").fetchall() == [(0,)]
        assert secret.why(sid).seen_by[0].seq == logged


@pytest.mark.parametrize("seq", [0, 1, 99, -1, True, "2"])
def test_replaying_what_is_not_a_logged_recall_is_a_clear_error(tmp_path, seq):
    with open_memory(tmp_path / "s") as m:
        m.remember("maya", "Maya lives in London")
        m.recall("maya")
        with pytest.raises(errors.InvalidInput):
            m.replay_recall(seq)


def test_a_replay_that_ranks_differently_says_how(tmp_path, monkeypatch):
    with open_memory(tmp_path / "s") as m:
        m.remember("maya", "Maya lives in London")
        m.remember("maya", "Maya likes tea in London")
        m.recall("maya london")
        seq = m.last_seq
        import hmem.recall.logged as recall_log

        real = recall_log.rank
        monkeypatch.setattr(recall_log, "rank", lambda *a: list(reversed(real(*a))))
        replay = m.replay_recall(seq)
        assert not replay.same
        assert "another order" in replay.differences
        assert [h.id for h in replay.replayed] == [h.id for h in reversed(replay.recall.hits)]


def test_recall_events_survive_reopen_rebuild_and_checkpoint(tmp_path):
    path = tmp_path / "s"
    with open_memory(path) as m:
        m.remember("maya", "Maya lives in London")
        m.recall("maya", source_ref="a")
        before = m.recalls()
    with open_memory(path) as m:
        assert m.recalls() == before
        m.rebuild()
        assert m.recalls() == before and m.verify().ok
        assert m.replay_recall(before[0].seq).same
    with Memory(path, read_only=True) as r:
        assert r.recalls() == before


def test_a_malformed_recall_event_is_refused(tmp_path):
    with open_memory(tmp_path / "s") as m:
        for bad in (
            RecallServed(query="q", limit=1, max_tokens=10, hits=(1,), scores=()),
            RecallServed(query="", limit=1, max_tokens=10),
            RecallServed(query="q", limit=0, max_tokens=10),
            RecallServed(query="q", limit=1, max_tokens=10, query_vector=b"abc", model="m"),
        ):
            with pytest.raises(errors.InvalidInput), m.transaction() as txn:
                txn.append(bad)
        assert m.last_seq == 0


def test_a_logged_recall_waits_for_no_fsync_and_sync_makes_it_durable(tmp_path):
    from eventlog.fileio import FileIO
    from hmem.storage.store import Store

    class Counting(FileIO):
        syncs = 0

        def fdatasync(self, fd: int) -> None:
            Counting.syncs += 1
            super().fdatasync(fd)

    store = Store(tmp_path / "s", fsync="always", io=Counting())
    m = Memory(store=store, clock=StepClock(START, STEP), embedder=None, log_recalls=True)
    m.remember("maya", "Maya lives in London")
    before = Counting.syncs
    m.recall("maya")
    m.recall("london")
    assert Counting.syncs == before  # written, not fsynced: no disk wait in recall
    m.sync()
    assert Counting.syncs == before + 1
    m.sync()
    assert Counting.syncs == before + 1  # nothing left to sync
    m.close()
    store.close()
    with Memory(tmp_path / "s", read_only=True) as r:
        assert len(r.recalls()) == 2
        r.sync()  # a reader has nothing to sync


def test_a_recall_logged_before_code_search_existed_replays_with_the_exact_scan():
    old = msgspec.json.encode({"limit": 5, "fusion": "rrf"}).decode()  # no dense_search field
    assert logged_config(old) == RecallConfig(limit=5, dense_search="exact",
                                              require_evidence=False, subject_boost=0.0,
                                              embed_subject_names=True, asker_subject="")
    new = msgspec.json.encode(RecallConfig(dense_search="codes")).decode()
    assert logged_config(new).dense_search == "codes"


def test_a_recall_logged_before_the_evidence_rule_replays_returning_any_candidate():
    fields = msgspec.to_builtins(RecallConfig())
    del fields["require_evidence"], fields["min_cosine"]  # as an older hmem logged it
    assert logged_config(msgspec.json.encode(fields).decode()).require_evidence is False
    new = msgspec.json.encode(RecallConfig(min_cosine=0.5)).decode()
    assert logged_config(new) == RecallConfig(min_cosine=0.5)


def test_a_recall_logged_before_subjects_were_favoured_replays_without_the_boost():
    fields = msgspec.to_builtins(RecallConfig())
    del fields["subject_boost"], fields["embed_subject_names"]  # as an older hmem logged it
    config = logged_config(msgspec.json.encode(fields).decode())
    assert (config.subject_boost, config.embed_subject_names) == (0.0, True)
    assert logged_config(msgspec.json.encode(RecallConfig()).decode()) == RecallConfig()


def test_a_recall_logged_before_the_first_person_named_the_user_replays_naming_no_one():
    fields = msgspec.to_builtins(RecallConfig())
    del fields["asker_subject"]  # as an older hmem logged it
    assert logged_config(msgspec.json.encode(fields).decode()).asker_subject == ""
    assert logged_config(msgspec.json.encode(RecallConfig()).decode()).asker_subject == "user"
