"""Group commit on a store on PostgreSQL (hmem/storage/group_commit.py): writes staged while
another writer leads are appended in its group, in one transaction, each checked as a lone
write is; a write that no longer passes its checks is refused and its writer told why; a write
that depends on what an earlier write of the group changes waits for the next group; a staged
write no writer waits for any longer is never appended. Two ``Memory`` objects on one URL are two
writers (each its own connections); threads make them write at once."""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import pytest

from eventlog.events import EmbeddingRecorded, FactRemembered, FactRevised
from hmem import Memory
from hmem.errors import FactAlreadyForgotten
from tests.support.pg_support import psycopg


def remembered(subject: str, text: str) -> FactRemembered:
    return FactRemembered(subject=subject, text=text, tx_at=datetime.now(timezone.utc))


def transactions(url: str) -> list[tuple[int, str]]:
    """Each hmem_log row's seq and the transaction that inserted it."""
    with psycopg.connect(url) as con:
        return [(int(s), str(x)) for s, x in con.execute(
            "SELECT seq, xmin::text FROM hmem_log ORDER BY seq")]


def pending(url: str) -> int:
    """Staged units no group has settled."""
    with psycopg.connect(url) as con:
        return int(con.execute("SELECT count(*) FROM hmem_pending WHERE first_seq IS NULL AND "
                               "error IS NULL").fetchone()[0])


def test_writes_staged_while_another_leads_are_appended_in_its_group_in_one_transaction(
    url: str,
) -> None:
    with Memory(url, embedder=None) as a, Memory(url, embedder=None) as b:
        group = b.store.group
        assert group is not None
        staged = [group.stage([remembered("bob", f"Bob note {i}")], {}) for i in range(3)]
        own = a.remember("ana", "Ana leads", dedup=False)  # the lock is free: a leads
        settled = [group.wait_for(uid) for uid in staged]
        assert settled == [(own + 1 + i, "") for i in range(3)]  # after the leader's own
        rows = transactions(url)
        assert len({xid for seq, xid in rows if seq >= own}) == 1  # one commit for the group
        assert [h.text for h in b.history("bob")] == [f"Bob note {i}" for i in range(3)]
        assert a.verify().ok and b.verify().ok
    assert pending(url) == 0


def test_a_writer_whose_write_another_led_returns_its_events_as_the_log_holds_them(
    url: str,
) -> None:
    """Told only the seq and tx time of its first event, a writer stamps its events as the
    leader did: seqs, a link to an earlier event of its write, a tx time the log moved past."""
    with Memory(url, embedder=None) as a, Memory(url, embedder=None) as b:
        group = b.store.group
        assert group is not None
        long_ago = datetime(2001, 1, 1, tzinfo=timezone.utc)
        events = [FactRemembered(subject="bob", text="Bob note", tx_at=long_ago),
                  EmbeddingRecorded(fact_id=0, model="m", dims=2, vector=bytes(8), tx_at=long_ago)]
        uid = group.stage(events, {1: 0})
        a.remember("ana", "Ana leads", dedup=False)
        first, why = group.wait_for(uid)
        assert why == ""
        got = group._mine(first, events, {1: 0})
        assert got == [b.store.log.get(seq) for seq in (first, first + 1)]
        assert got[1].fact_id == first and got[0].tx_at > long_ago


def test_a_staged_write_that_no_longer_passes_its_checks_is_refused_saying_why(
    url: str,
) -> None:
    with Memory(url, embedder=None) as a, Memory(url, embedder=None) as b:
        fact = a.remember("maya", "Maya lives in London")
        group = b.store.group
        assert group is not None
        b.get(fact)  # b's state has the fact: its revise passes b's own checks
        revise = FactRevised(fact_id=int(fact), text="Maya lives in Paris",
                             tx_at=datetime.now(timezone.utc))
        uid = group.stage([revise], {})
        a.forget(fact)  # a leads: b's revise touches the fact a's forget does, so it waits
        first, why = group.wait_for(uid)  # b leads the next group: its revise is refused
        assert first == 0 and why.startswith("FactAlreadyForgotten") and str(fact) in why
        with pytest.raises(FactAlreadyForgotten, match=str(fact)):
            b.revise(fact, "Maya lives in Paris")  # what the writer itself is told
        assert [f.text for f in a.history("maya")] == ["Maya lives in London"]
    assert pending(url) == 0


def test_a_staged_write_no_writer_waits_for_is_never_appended(url: str) -> None:
    with Memory(url, embedder=None) as a:
        group = a.store.group
        assert group is not None
        orphan = group.stage([remembered("ghost", "never appended")], {})
        with psycopg.connect(url, autocommit=True) as con:
            con.execute("UPDATE hmem_pending SET staged_at = staged_at - interval '1 hour' "
                        "WHERE id = %s", (orphan,))
        a.remember("ana", "Ana writes after it")
        assert a.history("ghost") == [] and a.last_seq == 1
    assert pending(url) == 0


def test_writers_writing_at_once_are_numbered_without_gaps_each_write_once(url: str) -> None:
    Memory(url, embedder=None).close()
    writers = [Memory(url, embedder=None) for _ in range(4)]
    ids: dict[str, list[int]] = {}
    errors: list[BaseException] = []

    def write(m: Memory, name: str) -> None:
        try:
            ids[name] = [m.remember(name, f"{name} note {i}", dedup=False,
                                    request_id=f"{name}-{i}") for i in range(25)]
        except BaseException as e:  # noqa: BLE001 (reported below)
            errors.append(e)

    threads = [threading.Thread(target=write, args=(m, f"w{i}"))
               for i, m in enumerate(writers)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=120)
        assert not errors, errors
        every = sorted(i for some in ids.values() for i in some)
        assert every == list(range(1, 101))  # gapless, each write once
        check = writers[0]
        for name, some in ids.items():
            assert [check.get(i).text for i in some] == [f"{name} note {i}" for i in range(25)]
            again = check.remember(name, f"{name} note 3", dedup=False, request_id=f"{name}-3")
            assert again == some[3] and again.outcome == "retry"
        assert check.last_seq == 100 and all(m.verify().ok for m in writers)
    finally:
        for m in writers:
            m.close()
    assert pending(url) == 0
