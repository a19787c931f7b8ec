"""Erasure on a store on PostgreSQL: its texts sealed with a key file kept off the database, and
an erasure that reaches every host: the tables, the checkpoint shared on the server, the cache
of a host that held the namespace loaded, and the cache of a host that was offline. Each search
first finds the words it looks for, so that it can fail."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from eventlog.events import EpisodeRecorded, FactRemembered
from hmem import Memory
from hmem.errors import KeyFileDamaged, KeyFileMissing
from hmem.storage import shredding
from hmem.storage.copy import copy_store
from hmem.storage.server_keys import keys_home
from hmem.storage.targets import verify_log_at
from projections import checkpoint
from projections.server_tables import store_id
from tests.storage.test_erasure import files_holding
from tests.support.pg_support import drop_store, fresh_store_url, psycopg

SECRET = "Alice's locker code is 4815162342"
MOVED = "Alice moved to Reykjavik-Nordurmyri"
KEPT = "Bob drinks oolong every morning"


def clock() -> Any:
    t = [datetime(2026, 1, 1, tzinfo=timezone.utc)]

    def now() -> datetime:
        t[0] += timedelta(seconds=1)
        return t[0]

    return now


def rows_holding(url: str, needle: str) -> list[str]:
    """``table: row`` for every row of every table of the store's schema whose values hold
    ``needle`` (case-insensitively; bytea searched as bytes)."""
    want, found = needle.lower(), []
    with psycopg.connect(url) as con:
        tables = [r[0] for r in con.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        for table in tables:
            for row in con.execute(f"SELECT * FROM {table}"):
                for value in row:
                    raw = bytes(value) if isinstance(value, (bytes, memoryview)) else (
                        str(value).encode())
                    if want.encode() in raw.lower():
                        found.append(f"{table}: {row[:3]}")
                        break
    return found


def at_host(monkeypatch: pytest.MonkeyPatch, cache: Path) -> Path:
    monkeypatch.setenv("HMEM_CACHE", str(cache))
    return cache


def test_a_server_store_seals_its_texts_with_a_key_file_kept_off_the_database(url: str) -> None:
    with Memory(url, embedder="hash", clock=clock()) as m:
        m.remember("alice", SECRET)
        assert m.recall("locker code").hits[0].text == SECRET
    with psycopg.connect(url) as con:
        sid = store_id(con)
        bound = con.execute("SELECT value FROM hmem_meta WHERE key = 'keys_id'").fetchone()[0]
        payloads = [bytes(r[0]) for r in con.execute("SELECT payload FROM hmem_log")]
    key_file = keys_home() / f"{sid}.hmk"
    assert key_file.exists() and key_file.read_bytes()[28:44].hex() == bound
    assert payloads and not any(b"4815162342" in p or b"locker" in p for p in payloads)
    assert verify_log_at(url).ok


def test_a_host_without_the_store_key_file_is_refused_never_served_in_the_clear(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(url, embedder=None) as m:
        m.remember("alice", SECRET)
    monkeypatch.setenv("HMEM_KEYS", str(tmp_path / "another-host-keys"))
    for read_only in (True, False):
        with pytest.raises(KeyFileMissing, match="HMEM_KEY_FILE"):
            Memory(url, embedder=None, read_only=read_only)
    other = fresh_store_url()
    try:
        with Memory(other, embedder=None) as m:  # another store's key file
            m.remember("bob", KEPT)
        with psycopg.connect(other) as con:
            foreign = tmp_path / "another-host-keys" / f"{store_id(con)}.hmk"
        with pytest.raises(KeyFileDamaged, match="not this store's"):
            Memory(url, embedder=None, key_file=foreign)
    finally:
        drop_store(other)


def test_an_erasure_reaches_every_table_the_shared_checkpoint_and_every_host(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Host A writes and erases; host B holds the namespace loaded as a writer throughout and
    writes after the erasure; host C read it before and was offline during the erasure."""
    hosts = [tmp_path / name for name in ("host-a", "host-b", "host-c")]
    at_host(monkeypatch, hosts[0])
    with Memory(url, embedder="hash", clock=clock(), log_recalls=True) as a:
        first = a.remember("alice", SECRET)
        a.revise(first, MOVED)
        a.remember("bob", KEPT)
        a.in_namespace("other").remember("carol", "Carol keeps bees")
        assert a.recall("alice locker", subject="alice").hits
        a.flush()
    at_host(monkeypatch, hosts[2])
    with Memory(url, embedder="hash", read_only=True) as c:  # host C caches the part, leaves
        assert {h.text for h in c.recall("Reykjavik oolong").hits} == {MOVED, KEPT}
    at_host(monkeypatch, hosts[1])
    b = Memory(url, embedder="hash", clock=clock())
    try:
        assert MOVED in {h.text for h in b.recall("Reykjavik").hits}
        for needle in ("4815162342", "Reykjavik", "alice"):  # the searches find the words
            assert rows_holding(url, needle), needle
            assert all(files_holding([h], needle.encode()) for h in hosts), needle
        at_host(monkeypatch, hosts[0])
        with Memory(url, embedder="hash", clock=clock()) as a:
            receipt = a.erase(subject="Alice", reason="subject request", by="dpo")
            assert len(receipt.fact_ids) == 2 and len(receipt.recall_ids) == 1
            assert a.verify().ok
            # at once, not at A's close: the tables and the checkpoint other hosts fetch
            assert rows_holding(url, "4815162342") == []
        at_host(monkeypatch, hosts[1])  # B learns of it from the receipt, and writes after
        assert [h.text for h in b.recall("locker code Reykjavik oolong").hits] == [KEPT]
        assert b.get(first).text == ""
        b.remember("dave", "Dave fixes bikes")
        assert b.verify().ok
    finally:
        b.close()
    at_host(monkeypatch, hosts[2])  # C comes back
    with Memory(url, embedder="hash", read_only=True) as c:
        assert [h.text for h in c.recall("locker code Reykjavik oolong").hits] == [KEPT]
        assert "[erased]" in str(c.why(first))
    for needle in (SECRET, MOVED, "4815162342", "Reykjavik", "locker", "alice"):
        assert rows_holding(url, needle) == [], needle
        assert files_holding(hosts, needle.encode()) == [], needle
    assert rows_holding(url, "oolong") and rows_holding(url, "bees")
    with psycopg.connect(url) as con:
        assert con.execute("SELECT count(*) FROM hmem_vectors WHERE fact_id = ANY(%s)",
                           (list(receipt.fact_ids),)).fetchone()[0] == 0
    assert verify_log_at(url).ok


def test_erasing_a_namespace_on_the_server_takes_its_episodes_and_leaves_the_others(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_host(monkeypatch, tmp_path / "host")
    with Memory(url, embedder=None, namespace="gone", clock=clock(), log_recalls=True) as m:
        with m.transaction() as txn:
            txn.append(EpisodeRecorded(session_id="s1", turn=0, role="user",
                                       text="my passport number is X9 4471"))
        m.remember("passport", "The passport number is X9 4471")
        m.recall("passport number")
        m.in_namespace("stays").remember("bob", KEPT)
        assert rows_holding(url, "X9 4471")
        receipt = m.erase(namespace="gone")
        assert (len(receipt.fact_ids), len(receipt.episode_ids), len(receipt.recall_ids)) == (
            1, 1, 1)
        assert m.episodes() == [] or all(e.text == "" for e in m.episodes())
    assert rows_holding(url, "X9 4471") == [] and rows_holding(url, "passport") == []
    assert files_holding([tmp_path / "host"], b"X9 4471") == []
    assert rows_holding(url, "oolong")


def test_a_receipt_read_before_its_keys_are_destroyed_erases_for_every_host(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Hosts learn of an erasure from its receipt, which is logged before the keys are
    destroyed: what a receipt names is folded as erased whatever its key's state, by a host
    holding the namespace loaded and by one that loads it after (here the keys are never
    destroyed, as when the erasing writer dies between the two steps)."""
    monkeypatch.setattr(shredding, "shred", lambda *_: None)
    at_host(monkeypatch, tmp_path / "host-a")
    with Memory(url, embedder=None, clock=clock()) as a:
        first = a.remember("alice", SECRET)
        a.remember("bob", KEPT)
        a.in_namespace("other").remember("carol", "Carol keeps bees")
    at_host(monkeypatch, tmp_path / "host-b")
    loaded = Memory(url, embedder=None, read_only=True)
    deferred = Memory(url, embedder=None, read_only=True, namespace="other")
    try:
        assert loaded.get(first).text == SECRET
        assert deferred.recall("bees").hits  # its "default" stays unloaded
        at_host(monkeypatch, tmp_path / "host-a")
        with Memory(url, embedder=None, clock=clock()) as a:
            a.erase(subject="alice")
            assert a.get(first).text == ""
        for m in (loaded, deferred.in_namespace("default")):
            assert [h.text for h in m.recall("locker code oolong").hits] == [KEPT]
            assert m.get(first).text == ""
    finally:
        loaded.close()
        deferred.close()


def test_an_erasure_cut_short_after_its_receipt_leaks_nothing_and_is_finished_by_a_writer(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The erasing writer fails after logging the receipt, before destroying a key: it
    publishes no checkpoint while the erasure is under way; a new host loads the namespace
    from the server's older checkpoint and folds the receipt as erasing what it names; the next
    writer to open finishes the erasure."""
    at_host(monkeypatch, tmp_path / "host-a")
    with Memory(url, embedder=None, clock=clock()) as a:
        first = a.remember("alice", SECRET)
        a.remember("bob", KEPT)

    def dies(*_: object) -> None:
        raise OSError("the key file's disk went away")

    monkeypatch.setattr(shredding, "shred", dies)
    with Memory(url, embedder=None, clock=clock()) as a:
        with pytest.raises(OSError):
            a.erase(subject="alice")
    monkeypatch.undo()
    at_host(monkeypatch, tmp_path / "new-host")
    with Memory(url, embedder=None, read_only=True) as r:
        assert [h.text for h in r.recall("locker code oolong").hits] == [KEPT]
        assert r.get(first).text == ""
    with Memory(url, embedder=None) as w:
        assert any("finished an erasure" in n for n in w.notes)
    assert rows_holding(url, "4815162342") == []
    # the failed eraser dropped its host's cached part of the namespace at once
    assert files_holding([tmp_path / "host-a"], b"4815162342") == []
    at_host(monkeypatch, tmp_path / "host-a")
    with Memory(url, embedder=None, read_only=True) as r:
        assert [h.text for h in r.recall("locker code oolong").hits] == [KEPT]
    assert files_holding([tmp_path], b"4815162342") == []


def test_a_copy_keeps_erasures_erased_in_every_direction(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_host(monkeypatch, tmp_path / "host")
    with Memory(url, embedder="hash", clock=clock()) as m:
        first = m.remember("alice", SECRET)
        m.remember("bob", KEPT)
        m.erase(fact=first)
    embedded = tmp_path / "embedded"
    copy_store(url, embedded)  # server -> directory
    back = fresh_store_url()
    try:
        copy_store(embedded, back)  # directory -> server
        for where in (embedded, back):
            with Memory(where, embedder="hash", read_only=True) as r:
                assert [h.text for h in r.recall("locker code oolong").hits] == [KEPT]
                assert r.get(first).text == "" and r.verify().ok
        assert files_holding([tmp_path], b"4815162342") == []
        assert rows_holding(back, "4815162342") == [] and rows_holding(back, "oolong")
    finally:
        drop_store(back)


def _back_up(url: str, backup: str) -> list[str]:
    """Copy every table of the store's schema into the schema ``backup``; returns their names."""
    with psycopg.connect(url, autocommit=True) as con:
        tables = [r[0] for r in con.execute(
            "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()")]
        con.execute(f"CREATE SCHEMA {backup}")
        for table in tables:
            con.execute(f"CREATE TABLE {backup}.{table} AS TABLE {table}")
    return tables


def _restore(url: str, backup: str, tables: list[str]) -> None:
    """Put the rows of ``backup`` back in place of the store's (as restoring a dump would)."""
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("SET session_replication_role = replica")  # past hmem_log's triggers
        for table in tables:
            con.execute(f"DELETE FROM {table}")
            con.execute(f"INSERT INTO {table} SELECT * FROM {backup}.{table}")
        con.execute(f"DROP SCHEMA {backup} CASCADE")


def test_a_database_backup_restored_after_an_erasure_serves_nothing_it_erased(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The key file kept apart from the database: a backup of the database from before an
    erasure, restored, shows the erased texts as erased to a reader, and its first writer logs
    the receipts the restored log lacks and writes the tables again."""
    at_host(monkeypatch, tmp_path / "host")
    with Memory(url, embedder=None, clock=clock()) as m:
        first = m.remember("alice", SECRET)
        m.remember("bob", KEPT)
    tables = _back_up(url, url.rsplit("%3D", 1)[1] + "_bak")
    with Memory(url, embedder=None, clock=clock()) as m:
        m.erase(fact=first)
    _restore(url, url.rsplit("%3D", 1)[1] + "_bak", tables)
    assert rows_holding(url, "4815162342")  # the restored tables hold the text
    at_host(monkeypatch, tmp_path / "new-host")
    with Memory(url, embedder=None, read_only=True) as r:
        assert [h.text for h in r.recall("locker code oolong").hits] == [KEPT]
        assert r.get(first).text == ""
    with Memory(url, embedder=None, clock=clock()) as w:
        assert any("backup restored" in n for n in w.notes)
        assert w.get(first).text == "" and w.verify().ok
    assert rows_holding(url, "4815162342") == []
    assert files_holding([tmp_path], b"4815162342") == []


def test_a_text_written_through_a_group_is_erased_from_the_staged_writes_too(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write another writer's group appended leaves its staged row (its texts in the clear)
    until the erasure deletes the settled rows."""
    at_host(monkeypatch, tmp_path / "host")
    with Memory(url, embedder=None) as a, Memory(url, embedder=None) as b:
        group = b.store.group
        assert group is not None
        staged = FactRemembered(subject="alice", text=SECRET, tx_at=datetime.now(timezone.utc))
        uid = group.stage([staged], {})
        a.remember("bob", KEPT)  # a leads: b's write goes in its group
        first, why = group.wait_for(uid)
        assert not why and rows_holding(url, "4815162342")
        a.erase(fact=first)
    assert rows_holding(url, "4815162342") == []


def test_every_read_of_another_host_shows_a_receipts_facts_erased_before_their_keys_go(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Not only the state: the events a why shows, the logged recalls, the log itself, read
    through a process that folded the receipt while the keys are still there."""
    monkeypatch.setattr(shredding, "shred", lambda *_: None)  # the keys are never destroyed
    at_host(monkeypatch, tmp_path / "host-a")
    with Memory(url, embedder=None, clock=clock(), log_recalls=True) as a:
        first = a.remember("alice", SECRET)
        a.recall("locker code", subject="alice")
    at_host(monkeypatch, tmp_path / "host-b")
    with Memory(url, embedder=None, read_only=True) as b:
        assert b.get(first).text == SECRET
        at_host(monkeypatch, tmp_path / "host-a")
        with Memory(url, embedder=None, clock=clock()) as a:
            a.erase(subject="alice")
        assert b.get(first).text == ""
        assert "4815162342" not in str(b.why(first))
        assert all("4815" not in (getattr(e, "text", "") or "") for e in b.why(first).events)
        assert all("locker" not in r.query for r in b.recalls())
        assert all("4815162342" not in getattr(ev, "text", "") for ev in b.store.log.read())


def test_an_erasure_whose_checkpoint_cannot_be_published_leaves_no_text_on_the_server(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    at_host(monkeypatch, tmp_path / "host")
    with Memory(url, embedder=None, clock=clock()) as a:
        first = a.remember("alice", SECRET)
        a.remember("bob", KEPT)
    assert rows_holding(url, "4815162342")

    def full(*_: object, **__: object) -> None:
        raise OSError(28, "No space left on device")

    with Memory(url, embedder=None, clock=clock()) as a:
        monkeypatch.setattr(checkpoint, "save", full)
        a.erase(fact=first)
        assert rows_holding(url, "4815162342") == []  # the namespace's shared part went too
        monkeypatch.undo()
    at_host(monkeypatch, tmp_path / "new-host")  # a new host replays the namespace
    with Memory(url, embedder=None, read_only=True) as r:
        assert [h.text for h in r.recall("locker code oolong").hits] == [KEPT]


def test_a_writer_finishes_an_erasure_whose_writer_died_after_its_receipt(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A long-lived writer elsewhere that takes the writer lock and finds an erasure under way
    finishes it (the erasing writer held the lock throughout, so it died): the tables and the
    shared checkpoint lose the texts without waiting for some writer's open."""
    at_host(monkeypatch, tmp_path / "host-a")
    with Memory(url, embedder=None, clock=clock()) as a:
        first = a.remember("alice", SECRET)
        a.remember("bob", KEPT)
    other = Memory(url, embedder=None, clock=clock())  # opened before the erasure
    try:
        def dies(*_: object) -> None:
            raise OSError("the key file's disk went away")

        monkeypatch.setattr(shredding, "shred", dies)
        with Memory(url, embedder=None, clock=clock()) as a:
            with pytest.raises(OSError):
                a.erase(fact=first)
        monkeypatch.undo()
        assert rows_holding(url, "4815162342")  # the tables still hold it
        other.remember("carol", "Carol keeps bees")  # a write under the lock finishes it
        assert any("finished an erasure" in n for n in other.notes)
        assert rows_holding(url, "4815162342") == []
        assert other.get(first).text == "" and other.verify().ok
    finally:
        other.close()


@pytest.mark.parametrize("backend", ["file", "postgres"])
def test_an_erasure_left_unfinished_is_finished_by_the_next_erasure_and_never_read_meanwhile(
    backend: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The erasing writer fails after logging its receipt: it reads the erased text no more
    (every read), and its next erasure finishes the first one before its own (the first's key
    destroyed, on a server no table row left)."""
    from tests.support.backends import new_store

    at_host(monkeypatch, tmp_path / "host")
    with new_store(backend) as where, Memory(where, embedder=None, clock=clock()) as m:
        first = m.remember("alice", SECRET)
        second = m.remember("tom", "Tom hides the spare key under the zebra mat")
        m.remember("bob", KEPT)

        def dies(*_: object) -> None:
            raise OSError("the key file's disk went away")

        monkeypatch.setattr(shredding, "shred", dies)
        with pytest.raises(OSError):
            m.erase(fact=first)
        monkeypatch.undo()
        at_host(monkeypatch, tmp_path / "host")
        assert m.get(first).text == ""
        assert all("4815" not in (getattr(e, "text", "") or "") for e in m.why(first).events)
        assert all("4815162342" not in getattr(ev, "text", "") for ev in m.store.log.read())
        m.erase(fact=second)
        keys = m.store.log.sealer.keys
        assert keys.key(first) is None and keys.key(second) is None
        assert not keys.erasing_now() and m.verify().ok
        if backend == "postgres":
            assert rows_holding(where, "4815162342") == [] and rows_holding(where, "zebra") == []
