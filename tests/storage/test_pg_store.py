"""A store on PostgreSQL seen from outside: many writer processes on one database,
the server killed under them, a refused append, texts PostgreSQL cannot hold, read-only opens,
the cache a process starts from, and the CLI on a URL. The stateful machine
(tests/stateful/test_stateful_pg.py) holds the semantics to the model; these hold the edges."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from eventlog.pg_log import PgLog
from hmem import Memory, errors
from hmem.storage.server_backend import server_checkpoint_seq
from tests.support.backends import second_clock
from tests.support.pg_support import fresh_store_url, pg_server, psycopg

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def url() -> str:
    return fresh_store_url()


def _count(url: str, query: str) -> int:
    with psycopg.connect(url) as con:
        return int(con.execute(query).fetchone()[0])


def test_a_store_on_the_server_answers_as_the_embedded_one(url: str, tmp_path: Path) -> None:
    """The same writes on both backends give the same answers through every read."""
    answers = []
    for where in (str(tmp_path / "s"), url):
        with Memory(where, embedder="hash-8", embed_mode="inline", clock=second_clock()) as m:
            a = m.remember("maya", "Maya lives in London", valid_from="2024-01-01")
            b = m.revise(a, "Maya lives in Paris", valid_from="2025-05-01", reason="moved")
            c = m.remember("tom", "Tom likes tea")
            m.forget(c, reason="wrong")
            answers.append((
                [h.id for h in m.recall("where does maya live").hits],
                [(f.id, f.text) for f in m.as_of(2)],
                [(f.id, f.text) for f in m.history("maya")],
                str(m.why(b)).replace(where, "STORE"),
                m.stats().facts,
                m.sql("SELECT count(*) FROM fact_versions").fetchall(),
                m.verify().ok,
            ))
    assert answers[0] == answers[1]


def test_texts_postgresql_cannot_hold_are_kept_in_the_log(url: str) -> None:
    """A NUL in a text is stored and read back as given; the server's table shows U+FFFD."""
    with Memory(url, embedder=None) as m:
        fid = m.remember("maya", "a\x00b", source_ref="turn\x001")
        assert m.get(fid).text == "a\x00b"
        assert m.verify().ok
    with psycopg.connect(url) as con:
        row = con.execute("SELECT text, source_ref FROM hmem_facts").fetchone()
    assert row == ("a\ufffdb", "turn\ufffd1")


def test_an_append_the_server_refuses_stores_nothing_and_is_forgotten(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """When the server refuses the tables' rows, the append is rolled back: a typed error,
    nothing in the log, and the process's projection does not keep what was never logged."""
    import projections.server_tables as tables

    with Memory(url, embedder=None) as m:
        kept = m.remember("maya", "Maya lives in London")
        real = tables.write_facts

        def refuse(con: Any, *args: Any, **kwargs: Any) -> bool:
            con.execute("SELECT 1/0")
            return real(con, *args, **kwargs)

        monkeypatch.setattr(tables, "write_facts", refuse)
        with pytest.raises(errors.LogWriteFailed, match="refused the append"):
            m.remember("tom", "Tom likes tea")
        monkeypatch.setattr(tables, "write_facts", real)
        assert m.last_seq == 1 and [f.id for f in m.as_of(m.last_seq)] == [kept]
        assert [h.text for h in m.recall("tea").hits] == []
        assert m.remember("zoe", "Zoe plays chess") == 2  # the seq the refused one never took
        assert m.verify().ok
    assert _count(url, "SELECT count(*) FROM hmem_log") == 2


WRITER = """
import sys
import traceback
from hmem import Memory
from hmem.errors import HmemError
url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    m = Memory(url, embedder=None)
except Exception as e:  # the server was killed before this writer opened the store
    print("stopped", type(e).__name__, isinstance(e, HmemError), flush=True)
    traceback.print_exc()
    n = 0
for i in range(n):
    try:
        fid = m.remember(name, f"{name} note {i}", request_id=f"{name}-{i}")
    except Exception as e:
        print("stopped", type(e).__name__, isinstance(e, HmemError), flush=True)
        traceback.print_exc()
        break
    print(fid, flush=True)
"""


def _writers(url: str, n: int, names: str = "pqrs") -> list[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return [subprocess.Popen([sys.executable, "-c", WRITER, url, name, str(n)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            for name in names]


def _check_acked(url: str, acked: dict[str, list[int]]) -> None:
    """Every acknowledged remember is there with its text; the log has no gap, its chain
    holds, and the server's tables agree with a replay."""
    with Memory(url, embedder=None, read_only=True) as m:
        for name, ids in acked.items():
            for i, fid in enumerate(ids):
                assert m.in_namespace("default").get(fid).text == f"{name} note {i}"
        assert m.verify().ok
    with PgLog(url, read_only=True) as log:
        assert log.verify() == log.last_seq


def test_writer_processes_on_one_database(url: str) -> None:
    """Four processes race to make the store and write to it: one store, no gap."""
    acked = {}
    for name, p in zip("pqrs", _writers(url, 25), strict=True):
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        assert "stopped" not in out, out + err  # the writer's traceback
        acked[name] = list(map(int, out.split()))
        assert len(acked[name]) == 25
    _check_acked(url, acked)
    assert sorted(sum(acked.values(), [])) == list(range(1, 101))


def test_every_acknowledged_remember_survives_the_server_killed(url: str) -> None:
    """Writer processes remember while the server is killed with SIGKILL: each stops with a
    typed error; after a restart each remember a writer saw acknowledged is there, and a
    retry of every one of them (same request id) writes nothing."""
    server = pg_server()
    Memory(url, embedder=None).close()
    procs = _writers(url, 100_000)
    assert procs[0].stdout is not None
    first = [procs[0].stdout.readline() for _ in range(30)]  # acknowledged; more in flight
    server.kill()
    acked: dict[str, list[int]] = {}
    for name, p in zip("pqrs", procs, strict=True):
        out, err = p.communicate(timeout=300)
        lines = (first if name == "p" else []) + out.splitlines()
        assert lines[-1].startswith("stopped") and lines[-1].endswith("True"), err
        acked[name] = [int(x) for x in lines[:-1]]
    server.start()
    _check_acked(url, acked)
    with Memory(url, embedder=None) as m:
        before = m.last_seq
        for name, ids in acked.items():
            for i, fid in enumerate(ids[-3:], start=len(ids) - 3 if len(ids) > 3 else 0):
                assert m.remember(name, f"{name} note {i}", request_id=f"{name}-{i}") == fid
        assert m.last_seq == before


def test_reopening_a_store_alters_nothing(url: str) -> None:
    """The tables and the log's guards are made once: a writer's open sends no DDL after
    that (DDL would lock the tables against every other writer and reader)."""
    with Memory(url, embedder=None) as m:
        m.remember("maya", "Maya lives in London")
    statements: list[str] = []
    real = psycopg.Connection.execute

    def execute(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        statements.append(str(query))
        return real(self, query, *args, **kwargs)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(psycopg.Connection, "execute", execute)
        with Memory(url, embedder=None) as m:
            m.remember("tom", "Tom likes tea")
    ddl = [q for q in statements if q.lstrip().upper().startswith(
        ("CREATE", "ALTER", "DROP", "REVOKE", "GRANT"))]
    assert statements and ddl == []


def test_read_only_needs_a_store_and_follows_the_writers(url: str) -> None:
    with pytest.raises(errors.StoreNotFound, match="no hmem store"):
        Memory(url, read_only=True, embedder=None)
    with Memory(url, embedder=None) as w, Memory(url, read_only=True, embedder=None) as r:
        fid = w.remember("maya", "Maya lives in London")
        assert [h.id for h in r.recall("maya london").hits] == [fid]
        with pytest.raises(errors.ReadOnlyStore):
            r.remember("tom", "Tom likes tea")


def _record_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """From now on, the first seq of every read of a server log, in order."""
    reads: list[int] = []
    real = PgLog.read

    def read(self: PgLog, from_seq: int = 1, to_seq: int | None = None) -> Any:
        reads.append(from_seq)
        return real(self, from_seq, to_seq)

    monkeypatch.setattr(PgLog, "read", read)
    return reads


def test_a_process_starts_from_the_checkpoint_not_the_whole_log(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint a process published on this host is where the next one starts: it
    reads only the log's tail from the server."""
    with Memory(url, embedder=None) as m:
        m.remember_many([{"subject": "maya", "text": f"note {i}"} for i in range(300)])
    with Memory(url, embedder=None) as other:  # another writer appends after the checkpoint
        other.remember("tom", "Tom likes tea")
    reads = _record_reads(monkeypatch)
    with Memory(url, embedder=None, read_only=True) as r:
        assert r.store.checkpoints.seq >= 300
        assert [h.text for h in r.recall("tom tea").hits] == ["Tom likes tea"]
    assert reads and min(reads) > 300


def test_a_process_on_another_host_starts_from_the_servers_checkpoint(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A host with an empty cache fetches the checkpoint a writer shared on the server and
    reads only the log's tail; an older one is replaced by a newer one."""
    with Memory(url, embedder=None) as m:
        m.remember_many([{"subject": "maya", "text": f"note {i}"} for i in range(300)])
        m.remember("tom", "Tom likes tea")
    reads = _record_reads(monkeypatch)
    monkeypatch.setenv("HMEM_CACHE", str(tmp_path / "other-host"))
    with Memory(url, embedder=None, read_only=True) as r:
        assert r.store.checkpoints.seq == 301
        assert [h.text for h in r.recall("tom tea").hits] == ["Tom likes tea"]
        assert not reads or min(reads) > 301
        assert r.verify().ok  # (verify replays the whole log, to compare)
    monkeypatch.setenv("HMEM_CACHE", str(tmp_path / "third-host"))
    with Memory(url, embedder=None) as w:  # a writer there: its checkpoint is fetched too
        assert w.store.checkpoints.seq == 301
        w.remember("zoe", "Zoe plays chess")
    # without a checkpoint anywhere, every row is read (and the answer is the same)
    with psycopg.connect(url, autocommit=True) as con:
        con.execute("DELETE FROM hmem_checkpoint_parts")
    monkeypatch.setenv("HMEM_CACHE", str(tmp_path / "fourth-host"))
    reads.clear()
    with Memory(url, embedder=None, read_only=True) as r:
        assert r.store.checkpoints.seq == 0
        assert [h.text for h in r.recall("zoe chess").hits] == ["Zoe plays chess"]
    assert min(reads) == 1


def test_a_new_host_fetches_the_parts_of_the_namespaces_it_serves_only(
    url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The server keeps a part per namespace; a host with an empty cache fetches the manifest,
    then a namespace's part when it first uses it. A writer's next share sends the parts that
    changed only."""
    with Memory(url, embedder=None) as m:
        for ns in ("ana", "ben", "cy"):
            m.in_namespace(ns).remember_many(
                [{"subject": ns, "text": f"{ns} note {i}"} for i in range(50)])
    with psycopg.connect(url, autocommit=True) as con:
        shared = {r[0]: r[1] for r in con.execute(
            "SELECT file, seq FROM hmem_checkpoint_parts WHERE file LIKE '%.part' "
            "AND file NOT LIKE '%.tx-%'")}
        times = [r[0] for r in con.execute(
            "SELECT file FROM hmem_checkpoint_parts WHERE file LIKE '%.tx-%'")]
    assert len(shared) == 3 and len(times) == 1  # a part per namespace, and the tx times
    host = tmp_path / "new-host"
    monkeypatch.setenv("HMEM_CACHE", str(host))
    with Memory(url, namespace="ben", embedder=None, read_only=True) as r:
        assert [h.text for h in r.recall("ben note 7").hits][:1] == ["ben note 7"]
        fetched = sorted(p.name for p in host.rglob("*.part"))
        assert len(fetched) == 1 and fetched[0] in shared
        assert r.in_namespace("cy").recall("cy note 3").hits  # cy's part fetched too
        assert len(list(host.rglob("*.part"))) == 2
        then = r.store.log.get(100).tx_at  # ben's last fact's
        assert len(r.as_of(then)) == 50  # time travel by a time: the tx times fetched now
        assert sorted(p.name for p in host.rglob("*.tx-*.part")) == times and r.notes == []
    monkeypatch.setenv("HMEM_CACHE", str(tmp_path / "writer-host"))
    with Memory(url, namespace="cy", embedder=None) as w:
        w.remember("cy", "cy note new")
    with psycopg.connect(url, autocommit=True) as con:
        now = {r[0]: r[1] for r in con.execute(
            "SELECT file, seq FROM hmem_checkpoint_parts WHERE file LIKE '%.part' "
            "AND file NOT LIKE '%.tx-%'")}
    assert len(now) == 3 and len(set(now) & set(shared)) == 2  # ana's, ben's: as they were
    assert all(now[f] == shared[f] for f in set(now) & set(shared))
    monkeypatch.setenv("HMEM_CACHE", str(host))  # the first host again: cy's old part goes
    with Memory(url, namespace="cy", embedder=None, read_only=True) as r:
        assert "cy note new" in {h.text for h in r.recall("cy note new").hits}
    assert sorted(p.name for p in host.rglob("*.part")) == sorted(
        [*fetched, *(f for f in now if f not in shared)])  # ben's (still named), cy's new:
    # cy's old part, fetched for the checkpoint before, is gone from this host's cache



def test_tables_behind_the_log_are_written_again(url: str) -> None:
    """A log appended by something that did not keep the tables (a bare PgLog) is met by the
    next writer, which writes the tables whole."""

    from eventlog.events import FactRemembered

    with Memory(url, embedder=None) as m:
        m.remember("maya", "Maya lives in London")
    with PgLog(url) as log:
        log.append(FactRemembered(subject="tom", text="Tom likes tea",
                                  tx_at=datetime.now(timezone.utc)))
    with Memory(url, embedder=None) as m:
        assert any("tables were behind" in n for n in m.notes)
        assert m.verify().ok
    assert _count(url, "SELECT count(*) FROM hmem_facts") == 2


def test_the_cli_takes_a_url_as_its_path(url: str, tmp_path: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HMEM_HOME": url}

    def hmem(*args: str) -> str:
        done = subprocess.run([sys.executable, "-m", "hmem", *args], env=env, text=True,
                              capture_output=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done.stdout

    hmem("remember", "maya", "Maya lives in London")
    hmem("--path", url, "remember", "tom", "Tom likes tea")
    assert "Maya lives in London" in hmem("recall", "where does maya live")
    assert "2 facts" in hmem("stats") or "facts" in hmem("stats")
    shown = hmem("log", "show")  # through the store's Log, whichever backend holds it
    assert "Maya lives in London" in shown and "Tom likes tea" in shown
    assert hmem("log", "verify").startswith("ok: 2 events in hmem_log")


@pytest.mark.parametrize("url", [
    "postgresql://agent:s3cret@127.0.0.1:1/memory",
    "postgresql://agent@127.0.0.1:1/memory?password=s3cret&connect_timeout=2",
])
def test_a_password_in_the_url_is_never_shown(url: str) -> None:
    """A server that cannot be reached: a typed error that names the store without its
    password (ServerUnavailable: it may be back later; StoreNotFound is for a store that is
    not there)."""
    with pytest.raises(errors.ServerUnavailable) as info:
        Memory(url, embedder=None)
    assert "s3cret" not in str(info.value) and "***" in str(info.value)


def test_two_mcp_servers_on_one_server_store(url: str) -> None:
    """`hmem mcp --path postgresql://...`: what one agent's server remembers, another's
    recalls."""
    pytest.importorskip("mcp", reason="the mcp extra")
    from tests.storage.test_shared_store import RawClient

    a, b = RawClient(url), RawClient(url)  # type: ignore[arg-type]
    try:
        a.remember(1, "Maya keeps bees on the roof", "r-1")
        fid = a.receive()["result"]["structuredContent"]["id"]
        b.send({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "recall", "arguments": {"query": "bees roof"}}})
        hits = b.receive()["result"]["structuredContent"]["hits"]
        assert [h["id"] for h in hits] == [fid]
    finally:
        for client in (a, b):
            client.proc.kill()
            client.proc.wait()


def test_writers_killed_while_others_write_lose_no_acknowledged_write(url: str) -> None:
    """Two of four writer processes are killed (SIGKILL) mid-run, perhaps while leading a
    group or with a write staged: the others go on; every acknowledged remember is there, no
    write is there twice, and the log has no gap."""
    Memory(url, embedder=None).close()
    procs = _writers(url, 100_000)
    acked: dict[str, list[int]] = {}
    for name, p in zip("pqrs", procs, strict=True):
        assert p.stdout is not None
        acked[name] = [int(p.stdout.readline()) for _ in range(20)]
    for p in procs[:2]:
        p.kill()
    for name, p in zip("rs", procs[2:], strict=True):
        assert p.stdout is not None
        acked[name] += [int(p.stdout.readline()) for _ in range(30)]  # they go on
        p.kill()
    for p in procs:
        p.communicate(timeout=60)
    _check_acked(url, acked)
    with Memory(url, embedder=None, read_only=True) as m:
        texts = m.sql("SELECT text FROM facts").fetchall()
        assert len(texts) == len(set(texts)) == m.last_seq  # each write once, nothing else


def test_a_close_shares_this_hosts_checkpoint_when_the_servers_is_older(url: str) -> None:
    """A writer publishes on its host at 1% of the log and shares on the server at a tenth; a
    close that publishes nothing (a tail under 1/256 of the log) still puts the host's newer
    checkpoint on the server, so a new host does not fold up to a tenth of the log."""
    with Memory(url, embedder=None, checkpoint_every=100) as m:
        m.remember_many([{"subject": "maya", "text": f"note {i}"} for i in range(1000)])
        log = m.store.log
        for i in range(5000):  # until a publish on this host the server did not get
            m.remember("tom", f"Tom likes tea {i}")
            if m.store.checkpoints.seq == log.last_seq > server_checkpoint_seq(log):
                break
        held = m.store.checkpoints.seq
        assert held == log.last_seq > server_checkpoint_seq(log)
        m.remember("zoe", "Zoe plays chess")  # a tail of one: the close publishes nothing
    with Memory(url, embedder=None, read_only=True) as r:
        assert r.store.checkpoints.seq == held  # this host's, as it was
        assert server_checkpoint_seq(r.store.log) == held
