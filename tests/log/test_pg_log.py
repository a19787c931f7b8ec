"""The event log on PostgreSQL: gapless seqs from many writer processes,
the hash chain per row, UPDATE / DELETE / TRUNCATE refused, tampering found, and every
acknowledged append present after the server is killed with SIGKILL and restarted. The tests
start their own server (tests/pg_server.py)."""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

psycopg = pytest.importorskip("psycopg", reason="the postgres extra: pip install 'hmem[postgres]'")

from bench.pg_server import PgServer  # noqa: E402
from eventlog.errors import ServerLogCorrupted, StoreLocked  # noqa: E402
from eventlog.events import FactRemembered  # noqa: E402
from eventlog.format import chain_next  # noqa: E402
from eventlog.pg_log import PgLog  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
_names = itertools.count()


@pytest.fixture(scope="module")
def server() -> Iterator[PgServer]:
    try:
        pg = PgServer()
    except FileNotFoundError as e:
        pytest.skip(str(e))
    try:
        yield pg
    finally:
        pg.stop()


@pytest.fixture
def url(server: PgServer) -> str:
    """A fresh database on the module's server."""
    name = f"t{os.getpid()}_{next(_names)}"
    with psycopg.connect(server.url, autocommit=True) as con:
        con.execute(f"CREATE DATABASE {name}")
    return server.url.replace("/postgres?", f"/{name}?")


def fact(i: int, tx: datetime = T0) -> FactRemembered:
    return FactRemembered(subject="maya", text=f"Maya note {i}", tx_at=tx)


def test_events_come_back_in_order_with_their_chain(url: str) -> None:
    with PgLog(url) as log:
        first = log.append_many([fact(0), fact(1)])
        late = log.append_many([fact(2, T0 - timedelta(days=1))])  # tx_at never goes back
        assert [e.seq for e in first + late] == [1, 2, 3]
        assert late[0].tx_at == first[-1].tx_at
        assert list(log.read()) == first + late
        assert list(log.read(2, 2)) == first[1:]
        assert log.verify() == log.last_seq == 3
    with PgLog(url) as again:  # a second open finds the schema and the head
        assert [e.seq for e in again.append_many([fact(3)])] == [4]


@pytest.mark.parametrize("statement", [
    "UPDATE hmem_log SET payload = payload || '\\x00'::bytea WHERE seq = 1",
    "DELETE FROM hmem_log WHERE seq = 2",
    "TRUNCATE hmem_log",
])
def test_the_log_refuses_update_delete_and_truncate(url: str, statement: str) -> None:
    with PgLog(url) as log:
        log.append_many([fact(i) for i in range(3)])
        with psycopg.connect(url, autocommit=True) as con:
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only"):
                con.execute(statement)
        assert log.verify() == 3


def test_a_row_changed_behind_the_triggers_is_found(url: str) -> None:
    with PgLog(url) as log:
        events = log.append_many([fact(i) for i in range(5)])
        with psycopg.connect(url, autocommit=True) as con:  # a superuser drops the guard
            con.execute("ALTER TABLE hmem_log DISABLE TRIGGER hmem_log_no_change")
            con.execute("UPDATE hmem_log SET payload = (SELECT payload FROM hmem_log "
                        "WHERE seq = 2) WHERE seq = 4")
        got = []
        with pytest.raises(ServerLogCorrupted, match="at seq 4"):
            got.extend(log.read())
        assert got == events[:3]  # every event before it, and nothing after
        assert list(log.read_raw_seqs([1, 2])) == events[:2]
        for seqs in ([1, 4], [3]):  # read by its seq, or after a row read
            with pytest.raises(ServerLogCorrupted, match="at seq 4"):
                list(log.read_raw_seqs(seqs))



def test_a_row_changed_with_its_chain_made_again_is_found_when_read_by_its_seq(url: str) -> None:
    with PgLog(url) as log:
        events = log.append_many([fact(i) for i in range(6)])
        with psycopg.connect(url, autocommit=True) as con:
            con.execute("ALTER TABLE hmem_log DISABLE TRIGGER hmem_log_no_change")
            payload = bytes(con.execute("SELECT payload FROM hmem_log WHERE seq = 2").fetchone()[0])
            forged = chain_next(log.chain_at(3), payload)  # row 4's link to row 3 holds again
            con.execute("UPDATE hmem_log SET payload = %s, chain = %s WHERE seq = 4",
                        (payload, forged))
        with pytest.raises(ServerLogCorrupted, match="at seq 5"):  # its link to row 5 fails
            list(log.read_raw_seqs([2, 4]))
        assert list(log.read_raw_seqs([1, 6])) == [events[0], events[5]]


WRITER = """
import sys
from datetime import datetime, timezone
from eventlog.events import FactRemembered
from eventlog.pg_log import PgLog
url, name, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    log = PgLog(url)
except Exception as e:  # the server was killed before this writer connected
    print("stopped", type(e).__name__, flush=True)
    n = 0
for i in range(n):
    batch = [FactRemembered(subject=name, text=f"{name} {i} {j}",
                            tx_at=datetime.now(timezone.utc)) for j in range(1 + i % 3)]
    try:
        got = log.append_many(batch)
    except Exception as e:
        print("stopped", type(e).__name__, flush=True)
        break
    print(" ".join(str(e.seq) for e in got), flush=True)
"""


def _writers(url: str, n: int) -> list[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return [subprocess.Popen([sys.executable, "-c", WRITER, url, name, str(n)],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
            for name in ("p", "q", "r", "s")]


def _check(url: str, acked: dict[str, list[list[int]]]) -> None:
    """Seqs 1..N without a gap, the chain whole, and each acknowledged batch there, whole."""
    with PgLog(url) as log:
        events = list(log.read())
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    by_seq = {e.seq: e for e in events}
    for name, batches in acked.items():
        for i, seqs in enumerate(batches):
            assert [by_seq[s].text for s in seqs] == [f"{name} {i} {j}" for j in range(len(seqs))]
    times = [e.tx_at for e in events]
    assert times == sorted(times)


def test_a_writer_that_finds_the_log_made_while_it_waited_to_make_it_opens_at_once(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Writers racing to make the log: one that saw no log, then took the creation lock after
    another made it, makes nothing. (Making it again drops the log's triggers, which waits
    for every writer holding the lock; a writer whose next statement then queues behind that
    waits on itself, until the lock wait runs out.)"""
    with PgLog(url) as holder, holder.writing():
        real, looks = PgLog._made, itertools.count()
        monkeypatch.setattr(PgLog, "_made", lambda self: next(looks) > 0 and real(self))
        with PgLog(url, lock_wait=1) as late:  # its first look: not made yet
            assert late.last_seq == 0
        assert next(looks) == 2  # looked again under the creation lock


def test_an_open_the_server_keeps_waiting_for_a_lock_is_store_locked(url: str) -> None:
    PgLog(url).close()
    with psycopg.connect(url) as con:  # a transaction holding hmem_log against every reader
        con.execute("LOCK TABLE hmem_log IN ACCESS EXCLUSIVE MODE")
        with pytest.raises(StoreLocked, match="held the log for 0.5 s while this one opened"):
            PgLog(url, lock_wait=0.5)


def test_four_writer_processes_append_without_a_gap(url: str) -> None:
    PgLog(url).close()  # the schema first (writers racing to make it is the next test's case)
    acked: dict[str, list[list[int]]] = {}
    for name, p in zip("pqrs", _writers(url, 30), strict=True):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        acked[name] = [list(map(int, line.split())) for line in out.splitlines()]
        assert len(acked[name]) == 30
    _check(url, acked)
    assert sum(len(s) for b in acked.values() for s in b) == 4 * sum(1 + i % 3 for i in range(30))


def test_every_acknowledged_append_survives_the_server_killed(server: PgServer, url: str) -> None:
    """Writers append while the server is killed with SIGKILL: each stops with an error; after a
    restart every append a writer saw acknowledged is there, whole, in a log without a gap, and
    appends go on."""
    procs = _writers(url, 100_000)
    assert procs[0].stdout is not None
    first = [procs[0].stdout.readline() for _ in range(40)]  # acknowledged; many in flight
    server.kill()
    acked: dict[str, list[list[int]]] = {}
    for name, p in zip("pqrs", procs, strict=True):
        out, _ = p.communicate(timeout=120)
        lines = (first if name == "p" else []) + out.splitlines()
        assert lines[-1].startswith("stopped")
        acked[name] = [list(map(int, line.split())) for line in lines[:-1]]
    server.start()
    _check(url, acked)
    with PgLog(url) as log:
        head = log.last_seq
        assert [e.seq for e in log.append_many([fact(0)])] == [head + 1]
        assert log.verify() == head + 1
