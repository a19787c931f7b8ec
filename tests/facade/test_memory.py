"""The Memory facade: the issue's scenario, both kinds of revise, bad input, readers, rebuilds."""

from __future__ import annotations

import os
import pickle
import shutil
from datetime import date, datetime, timedelta, timezone

import msgspec
import pytest

from hmem import Memory, errors
from hmem.errors import StoreNotFound
from hmem.storage.targets import default_root
from hmem.views import plain_int
from projections.checkpoint import CHECKPOINT_FILE
from projections.projector import Projector
from replay.verify import state_rows, verify_projection

UTC = timezone.utc


class Clock:
    def __init__(self, start=datetime(2026, 11, 1, 9, tzinfo=UTC)):
        self.now = start

    def __call__(self):
        self.now += timedelta(minutes=1)
        return self.now


@pytest.fixture
def mem(tmp_path):
    with Memory(tmp_path / "store", clock=Clock()) as m:
        yield m


def maya(m: Memory) -> tuple[int, int, int]:
    a = m.remember("maya", "Maya lives in London", valid_from="2025-01-01",
                   source_agent="chat", source_ref="s1:t3")
    before = m.last_seq
    b = m.revise(a, "Maya lives in Paris", valid_from="2026-03-01", source_ref="s9:t2")
    return a, b, before


def test_the_scenario_from_the_issue(mem):
    a, b, before = maya(mem)
    now = mem.recall("where does maya live")
    assert [h.id for h in now] == [b]
    assert now[0].history[0].text == "Maya lives in London"
    assert now[0].history[0].valid_to == datetime(2026, 3, 1, tzinfo=UTC)
    assert "replaced \"Maya lives in London\", 2025-01-01 to 2026-03-01" in now.format_block()

    then = mem.recall("where does maya live", as_of=before)
    assert [h.text for h in then] == ["Maya lives in London"]
    assert then[0].valid_to is None  # back then we believed it was still true
    assert [h.text for h in mem.recall("where does maya live", as_of=mem.tx_time(before))] == [
        "Maya lives in London"
    ]
    true_then = mem.recall("where does maya live", valid_at="2025-06-01")
    assert [h.text for h in true_then] == ["Maya lives in London"]
    assert true_then[0].superseded_by == b

    d = mem.diff(before, mem.last_seq)
    assert [(r.old.id, r.new.id, r.kind) for r in d.revised] == [(a, b, "world")]
    assert not d.added and not d.forgotten
    assert [f.id for f in mem.diff(0).added] == [a]

    why = mem.why(b)
    assert why.fact.source_agent == "chat" and why.fact.source_ref == "s9:t2"
    assert [f.id for f in why.chain] == [a, b]
    assert [e.seq for e in why.events] == [a, b]

    t = mem.forget(b, reason="user asked")
    assert mem.recall("where does maya live").hits == ()
    assert [h.id for h in mem.recall("maya", as_of=t - 1)] == [b]
    assert [f.id for f in mem.history("Maya")] == [a, b]
    assert mem.get(b).forget_reason == "user asked"
    assert [e.seq for e in mem.why(b).events] == [a, b, t]
    s = mem.stats()
    assert (s.facts, s.current, s.superseded, s.forgotten, s.log_events) == (2, 0, 1, 1, 3)


def test_a_correction_replaces_the_old_statement_for_its_whole_period(mem):
    a = mem.remember("maya", "Maya was born in Leeds", valid_from="1990-05-01")
    before = mem.last_seq
    b = mem.revise(a, "Maya was born in York", reason="misheard")
    assert [h.id for h in mem.recall("maya born")] == [b]
    assert [h.id for h in mem.recall("maya born", valid_at="2000-01-01")] == [b]
    assert mem.get(b).versions[0].valid_from == datetime(1990, 5, 1, tzinfo=UTC)
    assert mem.get(b).revision == "correction" and mem.get(b).reason == "misheard"
    # as_of before the correction still shows what we believed then
    assert [x.id for x in mem.as_of(before)] == [a]
    assert [x.id for x in mem.as_of(mem.last_seq)] == [b]
    hit = mem.recall("maya born")[0]
    assert 'corrected from "Maya was born in Leeds"' in hit.render()


def test_world_change_keeps_the_old_fact_true_for_its_period(mem):
    a, b, _ = maya(mem)
    rows = {x.id: x for x in mem.as_of(mem.last_seq)}
    assert rows[a].superseded and rows[a].valid_to == datetime(2026, 3, 1, tzinfo=UTC)
    assert not rows[b].superseded
    assert [x.id for x in mem.as_of(mem.last_seq, valid_at="2026-02-28T23:59:59Z")] == [a]
    assert [x.id for x in mem.as_of(mem.last_seq, valid_at="2026-03-01")] == [b]


def test_revising_a_superseded_fact_names_the_newest_version(mem):
    a, b, _ = maya(mem)
    with pytest.raises(errors.FactSuperseded, match=f"fact {b}"):
        mem.revise(a, "Maya lives in Rome")


def test_revising_or_reforgetting_a_forgotten_fact_is_refused(mem):
    a = mem.remember("maya", "Maya likes tea")
    mem.forget(a)
    n = mem.last_seq
    with pytest.raises(errors.FactForgotten):
        mem.revise(a, "Maya likes coffee")
    with pytest.raises(errors.FactForgotten):
        mem.forget(a)
    assert mem.last_seq == n


BAD = [
    ("empty text", lambda m, a: m.remember("maya", ""), errors.InvalidInput),
    ("blank text", lambda m, a: m.remember("maya", " \n\t"), errors.InvalidInput),
    ("empty subject", lambda m, a: m.remember(" ", "text"), errors.InvalidInput),
    ("confidence > 1", lambda m, a: m.remember("maya", "t", confidence=1.01), errors.InvalidInput),
    ("confidence < 0", lambda m, a: m.remember("maya", "t", confidence=-0.1), errors.InvalidInput),
    ("confidence nan", lambda m, a: m.remember("maya", "t", confidence=float("nan")),
     errors.InvalidInput),
    ("confidence inf", lambda m, a: m.remember("maya", "t", confidence=float("inf")),
     errors.InvalidInput),
    ("confidence str", lambda m, a: m.remember("maya", "t", confidence="high"),
     errors.InvalidInput),
    ("valid_to before valid_from",
     lambda m, a: m.remember("maya", "t", valid_from="2025-02-01", valid_to="2025-01-01"),
     errors.InvalidTime),
    ("valid_to equal valid_from",
     lambda m, a: m.remember("maya", "t", valid_from="2025-02-01", valid_to="2025-02-01"),
     errors.InvalidTime),
    ("naive datetime", lambda m, a: m.remember("maya", "t", valid_from=datetime(2025, 1, 1)),
     errors.InvalidTime),
    ("naive string", lambda m, a: m.remember("maya", "t", valid_from="2025-01-01T10:00"),
     errors.InvalidTime),
    ("unparseable", lambda m, a: m.remember("maya", "t", valid_from="whenever it rains"),
     errors.InvalidTime),
    ("lone surrogate", lambda m, a: m.remember("maya", "bad \udc80 text"), errors.InvalidInput),
    ("control chars in subject", lambda m, a: m.remember("ma\x00ya", "t"), errors.InvalidInput),
    ("huge text", lambda m, a: m.remember("maya", "x" * 200_000), errors.InvalidInput),
    ("unknown id", lambda m, a: m.revise(999, "t"), errors.FactNotFound),
    ("id of wrong type", lambda m, a: m.forget("forty-two"), errors.InvalidInput),
    ("foreign namespace id", lambda m, a: m.in_namespace("other").forget(a), errors.FactNotFound),
    ("world change before old valid_from",
     lambda m, a: m.revise(a, "t", valid_from="2024-01-01"), errors.InvalidTime),
    ("revise valid_to before inherited valid_from",
     lambda m, a: m.revise(a, "t", valid_to="2024-06-01"), errors.InvalidTime),
    ("bad embedding", lambda m, a: m.record_embedding(a, "m", [float("nan")]), errors.InvalidInput),
    ("empty query", lambda m, a: m.recall("  "), errors.InvalidInput),
    ("as_of seq beyond the log", lambda m, a: m.recall("maya", as_of=10**6), errors.InvalidInput),
    ("naive as_of", lambda m, a: m.as_of("2026-01-01T00:00"), errors.InvalidTime),
    ("diff backwards", lambda m, a: m.diff(1, 0), errors.InvalidTime),
]


@pytest.mark.parametrize("case,call,error", BAD, ids=[b[0] for b in BAD])
def test_bad_input_is_a_typed_error_and_changes_nothing(mem, case, call, error):
    a = mem.remember("maya", "Maya lives in London", valid_from="2025-01-01")
    before = mem.last_seq
    log_bytes = mem.store.log.size_bytes
    with pytest.raises(error) as info:
        call(mem, a)
    assert isinstance(info.value, errors.HmemError)
    assert len(str(info.value)) > 20  # says what was wrong
    assert mem.last_seq == before
    assert mem.store.log.size_bytes == log_bytes
    assert mem.verify().ok


def test_namespaces_are_walled(mem):
    other = mem.in_namespace("other")
    a = mem.remember("maya", "Maya lives in London")
    b = other.remember("maya", "Maya lives in Lisbon")
    assert [h.id for h in mem.recall("maya")] == [a]
    assert [h.id for h in other.recall("maya")] == [b]
    assert [f.id for f in other.history("maya")] == [b]
    with pytest.raises(errors.FactNotFound):
        other.why(a)
    with pytest.raises(errors.FactNotFound):
        other.get(a)
    assert other.stats().facts == 1
    assert {r[0] for r in other.snapshot().fetchall()} == {b}


def test_reader_beside_writer_sees_every_acknowledged_write(tmp_path):
    path = tmp_path / "store"
    with Memory(path) as writer:
        a = writer.remember("maya", "Maya lives in London")
        reader = Memory(path, read_only=True)
        assert [h.id for h in reader.recall("maya")] == [a]
        b = writer.revise(a, "Maya lives in Paris")
        assert [h.id for h in reader.recall("maya")] == [b]  # no reopen needed
        assert [f.id for f in reader.why(b).chain] == [a, b]
        with pytest.raises(errors.ReadOnlyStore):
            reader.remember("maya", "x")
        with pytest.raises(errors.StoreLocked, match="Readers still work"):
            Memory(path)
        reader.close()


def test_read_only_open_of_a_missing_store_is_a_clear_error(tmp_path):
    with pytest.raises(StoreNotFound, match="no hmem store"):
        Memory(tmp_path / "nothing", read_only=True)
    assert not (tmp_path / "nothing").exists()


def dump(m: Memory) -> dict[str, list[tuple[object, ...]]]:
    """Every table row of every namespace of the state that answers."""
    return state_rows(m.store.projector)


def test_deleting_the_checkpoint_rebuilds_the_state_identically(tmp_path):
    path = tmp_path / "store"
    with Memory(path, clock=Clock()) as m:
        a, b, _ = maya(m)
        m.forget(b)
        m.record_embedding(a, "hash", [1.0, 2.0])
        before = dump(m)
    os.remove(path / CHECKPOINT_FILE)
    with Memory(path, clock=Clock()) as m:
        assert dump(m) == before
        assert m.verify().ok


@pytest.mark.parametrize("shared", [False, True])
def test_a_rebuild_of_an_empty_store_replays_nothing(tmp_path, shared):
    path = tmp_path / "store"
    with Memory(path, shared=shared, embedder=None) as m:
        assert m.rebuild() == 0
        assert m.recall("anything").hits == () and m.verify().ok
    with Memory(path, read_only=True, embedder=None) as r:
        assert r.last_seq == 0 and r.notes == []


def test_verify_names_a_checkpoint_whose_kept_postings_are_not_its_tokens(tmp_path):
    """The postings a checkpoint part keeps answer the first recall of a reader: verify holds
    them to the index tokens of the facts saved beside them."""
    path = tmp_path / "store"
    with Memory(path, clock=Clock()) as m:
        maya(m)
    with Memory(path, clock=Clock()) as m:
        saved = m.store.checkpoints.examined(m.store.log)
        assert isinstance(saved, Projector)
        assert verify_projection(m.store.log, m.store.projector, checkpoint=saved).ok
        kept = saved.space("default").state.postings
        assert kept is not None
        kept.tfs[0] += 1
        report = verify_projection(m.store.log, m.store.projector, checkpoint=saved)
        assert list(report.tables) == ["checkpoint postings 'default'"]
        assert "index tokens" in report.examples[0]


def test_a_damaged_checkpoint_is_replaced_by_a_replay(tmp_path):
    path = tmp_path / "store"
    with Memory(path, clock=Clock()) as m:
        maya(m)
        before = dump(m)
    (path / CHECKPOINT_FILE).write_bytes(b"not a checkpoint at all" * 100)
    with Memory(path, clock=Clock()) as m:
        assert dump(m) == before
        assert any("checkpoint" in n and "replayed the log" in n for n in m.notes)
    with Memory(path, clock=Clock()) as m:  # the writer published a good one on close
        assert m.store.checkpoints.seq == m.last_seq and m.notes == []


def test_the_derived_files_of_an_earlier_hmem_are_removed_by_the_writer(tmp_path):
    path = tmp_path / "store"
    with Memory(path, clock=Clock()) as m:
        maya(m)
    for name in ("projection.duckdb", "projection.duckdb.wal", "checkpoint.duckdb"):
        (path / name).write_bytes(b"an old copy of every text")
    with Memory(path, read_only=True) as r:  # a reader leaves them (it never writes)
        assert r.get(1).text
    assert (path / "checkpoint.duckdb").exists()
    with Memory(path, clock=Clock()) as m:
        assert m.verify().ok
    assert not list(path.glob("*.duckdb*"))


def test_a_checkpoint_from_another_log_is_not_used(tmp_path):
    one, two = tmp_path / "one", tmp_path / "two"
    with Memory(one, clock=Clock()) as m:
        m.remember("maya", "Maya likes tea")
        m.remember("maya", "Maya likes jazz")
    with Memory(two, clock=Clock()) as m:
        m.remember("tom", "Tom likes rugby")
        m.remember("tom", "Tom likes chess")
    shutil.copy(one / CHECKPOINT_FILE, two / CHECKPOINT_FILE)
    with Memory(two) as m:
        assert [h.text for h in m.recall("likes", limit=5)] == [
            "Tom likes chess", "Tom likes rugby",
        ]
        assert m.verify().ok
        assert any("different log" in n for n in m.notes)


def test_token_budget_caps_the_output(mem):
    for i in range(30):
        mem.remember("maya", f"Maya visited museum number {i} in London with friends")
    full = mem.recall("maya museum london", limit=30, max_tokens=10**6)
    small = mem.recall("maya museum london", limit=30, max_tokens=60)
    assert len(full) == 30
    assert 0 < len(small) < 30 and small.tokens <= 60
    assert small.omitted == 30 - len(small)


def test_recency_and_confidence_rank_equal_matches(tmp_path):
    clock = Clock(datetime(2026, 1, 1, tzinfo=UTC))
    with Memory(tmp_path / "s", clock=clock) as m:
        old = m.remember("maya", "Maya plays chess", valid_from="2024-01-01")
        new = m.remember("maya", "Maya plays chess", valid_from="2025-12-01")
        unsure = m.remember("maya", "Maya plays chess", valid_from="2025-12-01", confidence=0.3,
                            dedup=False)  # a repeat, stored on purpose
        assert [h.id for h in m.recall("chess")] == [new, old, unsure]


def test_subject_filter_and_entities(mem):
    a = mem.remember("maya", "Maya met Tom in New York")
    mem.remember("tom", "Tom met Maya in New York")
    assert [h.id for h in mem.recall("new york", subject="MAYA")] == [a]
    assert mem.get(a).entities == ("maya", "tom", "new york")
    b = mem.remember("maya", "likes it", entities=["Acme Corp"])
    assert mem.get(b).entities == ("maya", "acme corp")


def test_default_path_follows_hmem_home_then_xdg(monkeypatch, tmp_path):
    monkeypatch.setenv("HMEM_HOME", str(tmp_path / "home"))
    assert default_root() == tmp_path / "home"
    monkeypatch.delenv("HMEM_HOME")
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_root() == tmp_path / "xdg" / "hmem"
    with Memory() as m:
        m.remember("maya", "hello")
    assert (tmp_path / "xdg" / "hmem" / "log").is_dir()


def test_dates_and_aware_datetimes_are_accepted(mem):
    a = mem.remember("maya", "x", valid_from=date(2025, 1, 1),
                     valid_to=datetime(2025, 6, 1, 2, tzinfo=timezone(timedelta(hours=2))))
    v = mem.get(a).versions[0]
    assert v.valid_from == datetime(2025, 1, 1, tzinfo=UTC)
    assert v.valid_to == datetime(2025, 6, 1, tzinfo=UTC)


def test_clock_going_backwards_never_reorders_transaction_time(tmp_path):
    times = iter([datetime(2026, 1, 2, tzinfo=UTC), datetime(2026, 1, 1, tzinfo=UTC)])
    with Memory(tmp_path / "s", clock=lambda: next(times)) as m:
        m.remember("maya", "one")
        m.remember("maya", "two")
        assert m.tx_time(2) == m.tx_time(1)


def test_closed_memory_refuses_use(tmp_path):
    m = Memory(tmp_path / "s")
    m.close()
    m.close()
    with pytest.raises(errors.StoreClosed):
        m.remember("maya", "x")


def test_snapshot_to_parquet(mem, tmp_path):
    a, b, before = maya(mem)
    out = tmp_path / "snap.parquet"
    rel = mem.snapshot(as_of=before, parquet=out)
    assert [r[3] for r in rel.fetchall()] == ["Maya lives in London"]
    import duckdb

    assert duckdb.sql(f"SELECT text FROM '{out}'").fetchall() == [("Maya lives in London",)]


def test_snapshot_at_a_world_time_holds_what_was_true_then(mem):
    """snapshot(valid_at=) keeps the facts valid at that time, as as_of(valid_at=) does."""
    old = mem.remember("tom", "Tom worked at Acme", valid_from="2020-01-01",
                       valid_to="2022-01-01")
    new = mem.remember("tom", "Tom works at Initech", valid_from="2022-01-01")
    for when, want in (("2021-06-01", [old]), ("2023-06-01", [new]), ("2019-01-01", [])):
        got = [r[0] for r in mem.snapshot(valid_at=when).order("id").fetchall()]
        assert got == want, when
        assert got == [b.id for b in mem.as_of(mem.last_seq, valid_at=when)], when
    assert [r[0] for r in mem.snapshot().order("id").fetchall()] == [old, new]


@pytest.mark.parametrize("kwargs", [
    {"flush_every": 0}, {"flush_every": -5}, {"flush_every": "10"}, {"flush_every": 2.5},
    {"flush_every": True},
])
def test_bad_store_settings_are_refused_before_anything_is_created(tmp_path, kwargs):
    with pytest.raises(errors.InvalidInput, match=next(iter(kwargs))):
        Memory(tmp_path / "s", embedder=None, **kwargs)
    assert not (tmp_path / "s").exists()


def test_a_write_says_whether_it_stored_something(tmp_path):
    """Each write returns its id as an int that also says what the write did: stored now, a
    repeat of a current fact (or of an earlier item of the batch), or a retried request."""
    with Memory(tmp_path / "s", clock=Clock(), embedder=None) as m:
        a = m.remember("maya", "Maya likes tea")
        assert (a, a.outcome, a.new) == (1, "new", True) and isinstance(a, int)
        again = m.remember("Maya", "maya likes tea!")
        assert (again, again.outcome, again.new) == (a, "repeat", False)
        b = m.remember("maya", "Maya likes jazz", request_id="r1")
        retry = m.remember("maya", "Maya likes jazz", request_id="r1")
        assert (retry, retry.outcome) == (b, "retry")
        batch = m.remember_many([{"subject": "tom", "text": "Tom runs"},
                                 {"subject": "tom", "text": "Tom runs"},
                                 {"subject": "maya", "text": "Maya likes tea"}])
        assert [w.outcome for w in batch] == ["new", "repeat", "repeat"]
        assert batch[1] == batch[0] and batch[2] == a
        c = m.revise(b, "Maya likes jazz and blues", request_id="r2")
        assert c.outcome == "new" and m.revise(
            b, "Maya likes jazz and blues", request_id="r2").outcome == "retry"
        gone = m.forget(c, request_id="r3")
        assert gone.outcome == "new" and m.forget(c, request_id="r3") == gone
        assert m.forget(c, request_id="r3").outcome == "retry"
        assert m.get(a).id == a and m.revise(a, "Maya likes green tea").new  # used as the id
        assert msgspec.json.encode({"id": a}, enc_hook=plain_int) == b'{"id":1}'
        assert pickle.loads(pickle.dumps(a)).outcome == "new"


def test_a_diff_dates_each_end_by_the_namespaces_last_change_at_or_before_it(tmp_path):
    with Memory(tmp_path / "store", clock=Clock(), embedder=None) as m:
        m.remember("maya", "Maya lives in London")  # seq 1
        m.in_namespace("work").remember("tom", "Tom likes tea")  # seq 2: not this namespace's
        m.remember("bo", "Bo plays drums")  # seq 3
        tx = {ev.seq: ev.tx_at for ev in m.store.log.read()}
        d = m.diff(1, 3)
        assert (d.since_tx, d.until_tx) == (tx[1], tx[3])
        early = m.diff(2, 2)
        assert (early.since_tx, early.until_tx, m.diff(0, 2).since_tx) == (tx[1], tx[1], None)


def test_as_of_in_a_namespace_never_written_is_empty_however_many_others_have(tmp_path):
    with Memory(tmp_path / "store", clock=Clock(), embedder=None) as m:
        for ns in ("a", "b", "c", "d"):  # string codes 0.. for these namespaces
            m.in_namespace(ns).remember("maya", f"Maya is in {ns}")
        empty = m.in_namespace("never-written")
        assert empty.as_of(m.last_seq) == []
        assert empty.snapshot(m.last_seq).fetchall() == []


def test_a_snapshot_says_which_beliefs_were_superseded_by_its_point(tmp_path):
    with Memory(tmp_path / "store", clock=Clock(), embedder=None) as m:
        a, b, before = maya(m)  # b: a world change, so a stays believed for its earlier period
        assert m.snapshot(before).project("id, superseded").fetchall() == [(a, False)]
        after = m.snapshot(m.last_seq).project("id, superseded").order("id").fetchall()
        assert after == [(a, True), (b, False)]
