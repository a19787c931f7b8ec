"""Group commit's answers when things go wrong: a writer that gives up while a slow group holds
its write learns it was stored; a group that fails leaves nothing for a later write to be taken
for; a unit that cannot be read is refused, not the leader's write; a retry whose first write
another writer led is answered as a retry; a writer that died before its write was committed
wrote nothing; the leader publishes its checkpoint after the group's commit."""
from __future__ import annotations

import threading
import time

import pytest

from hmem import Memory
from tests.storage.test_group_commit import remembered
from tests.support.pg_support import psycopg


def test_a_writer_that_gives_up_while_a_group_holds_its_write_learns_it_was_stored(
    url: str,
) -> None:
    with Memory(url, embedder=None) as a, Memory(url, embedder=None) as b:
        group = b.store.group
        b.store.log.lock_wait = 0.5
        b.store.log.con.execute("SET lock_timeout = 500")
        b.store.log._lock_connection().execute("SET lock_timeout = 500")
        uid = group.stage([remembered("bob", "Bob's staged note")], {})
        # a leads a group that takes b's unit, and is slow inside its transaction
        real = a.store.append_checked

        def slow(events, links, settle):  # type: ignore[no-untyped-def]
            def slow_settle(stamped):  # type: ignore[no-untyped-def]
                settle(stamped)
                time.sleep(2.0)
            return real(events, links, slow_settle)

        a.store.append_checked = slow  # type: ignore[method-assign]
        t = threading.Thread(target=lambda: a.remember("ana", "Ana leads", dedup=False))
        t.start()
        time.sleep(0.2)
        first, why = group.wait_for(uid)  # gave up waiting, then learned it was stored
        t.join()
        assert why == "" and a.get(first).text == "Bob's staged note"
        assert [f.text for f in a.history("bob")] == ["Bob's staged note"]


def test_a_leader_publishes_its_checkpoint_after_the_groups_commit(url: str) -> None:
    seen: list[str] = []
    with Memory(url, embedder=None, checkpoint_every=1) as a, \
            Memory(url, embedder=None) as b:
        a.remember("x", "first", dedup=False)
        real = a.store.checkpoints.publish

        def spy(*args, **kw):  # type: ignore[no-untyped-def]
            seen.append(a.store.log.con.info.transaction_status.name)
            return real(*args, **kw)

        a.store.checkpoints.publish = spy  # type: ignore[method-assign]
        a.store.checkpoints.due = lambda *_a, **_k: True  # type: ignore[method-assign]
        uid = b.store.group.stage([remembered("bob", "Bob staged")], {})
        a.remember("ana", "Ana leads", dedup=False)
        assert b.store.group.wait_for(uid)[1] == ""
    assert seen and seen[0] == "IDLE", seen  # after the group's COMMIT


def test_a_failed_group_leaves_nothing_a_later_write_is_taken_for(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eventlog.errors import LogWriteFailed
    from hmem.storage import group_commit

    with Memory(url, embedder=None) as a, Memory(url, embedder=None) as b:
        a.remember("x", "first", dedup=False)
        real = group_commit._payload
        calls = []

        def fails_once(results, firsts):  # type: ignore[no-untyped-def]
            calls.append(1)
            if len(calls) == 1:  # the group's COMMIT is lost (here: before it is sent)
                raise psycopg.OperationalError("server closed the connection unexpectedly")
            return real(results, firsts)

        monkeypatch.setattr(group_commit, "_payload", fails_once)
        uid1 = b.store.group.stage([remembered("bob", "one")], {})
        with pytest.raises(LogWriteFailed):
            b.store.group.wait_for(uid1)  # b leads its own unit; the group fails
        assert b.store.group._led == {}
        b.store.diverged = False
        b.store.catch_up()
        events = [remembered("bob", "two"), remembered("bob", "three")]
        uid2 = b.store.group.stage(events, {})
        uid_a = a.store.group.stage([remembered("ana", "ana")], {})
        assert a.store.group.wait_for(uid_a)[1] == ""  # a leads: b's uid2 first
        first, _ = b.store.group.wait_for(uid2)
        got = b.store.group._mine(first, events, {})
        assert [e.text for e in got] == ["two", "three"]


def test_a_unit_that_cannot_be_read_is_refused_and_the_leaders_writes_go_on(url: str) -> None:
    import msgspec

    with Memory(url, embedder=None) as a:
        a.remember("x", "first", dedup=False)
        unit = msgspec.msgpack.encode(([msgspec.msgpack.encode({"type": "future_kind"})], []))
        with psycopg.connect(url, autocommit=True) as con:  # a newer writer's unit, waiting
            con.execute("INSERT INTO hmem_pending (unit, pid, backend_start) SELECT %s, pid, "
                        "backend_start FROM pg_stat_activity WHERE pid = pg_backend_pid()",
                        (unit,))
            for i in range(3):  # the leader's own writes go on
                a.remember("ana", f"Ana {i}", dedup=False)
            why = con.execute("SELECT error FROM hmem_pending").fetchone()[0]
        assert why.startswith("ValidationError")  # refused, saying why


def test_a_retry_of_a_write_another_writer_led_is_answered_as_a_retry(url: str) -> None:
    from msgspec.structs import replace

    with Memory(url, embedder=None) as a, Memory(url, embedder=None) as b:
        ev = replace(remembered("bob", "Bob likes tea"), request_id="r-1")
        uid = b.store.group.stage([ev], {})
        a.remember("ana", "Ana leads", dedup=False)
        first, _ = b.store.group.wait_for(uid)  # as b.remember(..., request_id="r-1") would
        again = b.remember("bob", "Bob likes tea", request_id="r-1")
        assert again == first and again.outcome == "retry"


def test_a_write_staged_by_a_writer_that_died_is_never_appended(url: str) -> None:
    with Memory(url, embedder=None) as a:
        a.remember("x", "first", dedup=False)
        b = Memory(url, embedder=None)
        b.store.group.stage([remembered("bob", "Bob's unacknowledged write")], {})
        b.store.log.con.close()  # the writer's process dies (its session ends)
        b.store.log._lock_connection().close()
        time.sleep(1.0)  # its caller never heard back; restarted, it sees no such fact
        assert a.history("bob") == []
        a.remember("ana", "Ana writes", dedup=False)  # any later write by anyone
        assert a.history("bob") == []  # never appended: its writer is gone
        with psycopg.connect(url) as con:
            assert con.execute("SELECT count(*) FROM hmem_pending").fetchone()[0] == 0


def test_an_interrupted_writer_leaves_no_staged_write_behind(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Memory(url, embedder=None) as a, Memory(url, embedder=None) as b:
        group = b.store.group
        uid = group.stage([remembered("bob", "Bob's write the user cancelled")], {})

        def interrupted(*_: object) -> None:
            raise KeyboardInterrupt

        monkeypatch.setattr(group, "_await_group", interrupted)
        with pytest.raises(KeyboardInterrupt):
            group.wait_for(uid)
        a.remember("ana", "Ana leads", dedup=False)
        assert a.history("bob") == []


def test_a_write_staged_by_an_earlier_hmem_without_its_session_is_still_appended(
    url: str,
) -> None:
    """A writer of the release before (no session recorded) is not taken for a dead one."""
    from hmem.storage.group_commit import GroupCommit

    with Memory(url, embedder=None) as a:
        a.remember("x", "first", dedup=False)
        unit = GroupCommit(a.store.log, a.store)  # its encoding of a unit
        with psycopg.connect(url, autocommit=True) as con:
            con.execute("INSERT INTO hmem_pending (unit) VALUES (%s)", (
                __import__("msgspec").msgpack.encode((
                    [__import__("eventlog.events", fromlist=["x"]).encode_record(
                        remembered("bob", "Bob from an older writer"))], [])),))
        del unit
        a.remember("ana", "Ana leads", dedup=False)
        assert [f.text for f in a.history("bob")] == ["Bob from an older writer"]


def test_a_writer_whose_connection_the_server_dropped_stages_with_its_new_session(
    url: str,
) -> None:
    """A staged unit names the session that waits for it (a unit of an ended session is
    dropped as orphaned), so after a reconnect the writer's units carry the new one."""
    with Memory(url, embedder=None) as a, Memory(url, embedder=None) as b:
        group = b.store.group
        for round_ in range(3):
            old = b.store.log.connection().info.backend_pid
            with psycopg.connect(url, autocommit=True) as admin:
                admin.execute("SELECT pg_terminate_backend(%s)", (old,))
            with pytest.raises(psycopg.OperationalError):
                b.store.log.con.execute("SELECT 1")  # the client learns it is gone
            con = b.store.log.connection()  # made again
            assert con.info.backend_pid != old
            uid = group.stage([remembered("bob", f"after reconnect {round_}")], {})
            with psycopg.connect(url) as admin:
                staged_pid = admin.execute("SELECT pid FROM hmem_pending WHERE id = %s",
                                           (uid,)).fetchone()[0]
            assert staged_pid == con.info.backend_pid
            a.remember("ana", f"Ana leads {round_}", dedup=False)
            first, why = group.wait_for(uid)
            assert why == "" and b.store.log.get(first).text == f"after reconnect {round_}"
