"""Roles on a PostgreSQL store: what a role bound to namespaces can and cannot do to the
store's writers and to other roles, and what a new user who gets the URL or a role wrong is told
(a typed error that says what to do, never a driver traceback)."""

from __future__ import annotations

import itertools
import subprocess
import sys
from pathlib import Path

import pytest

from hmem import Memory, errors
from hmem.storage.store import Store
from projections.server_records import RECORD_TABLES
from projections.server_tables import grant_namespace, revoke_namespace
from tests.support.pg_support import fresh_store_url, pg_server, psycopg

ROOT = Path(__file__).resolve().parents[2]
_logins = itertools.count()


@pytest.fixture
def url() -> str:
    return fresh_store_url()


def login_role(url: str, namespace: str) -> tuple[str, str]:
    """A new role that logs in, bound to ``namespace`` of the store at ``url``: (name, its
    URL of the store)."""
    name = f"analyst_{next(_logins)}_{abs(hash(url)) % 10**6}"
    with psycopg.connect(pg_server().url, autocommit=True) as admin:
        admin.execute(f"CREATE ROLE {name} LOGIN")
    with psycopg.connect(url, autocommit=True) as owner:
        grant_namespace(owner, name, namespace)
    return name, url.replace("postgresql://hmem@", f"postgresql://{name}@", 1)


def hmem(path: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hmem", "--embedder", "none", "--path", path,
                           *args], capture_output=True, text=True, check=False, cwd=ROOT)


def test_a_bound_role_cannot_stop_the_writers(url: str) -> None:
    """Any role that can connect can take any advisory lock; the writers' lock is a row lock
    on a table a bound role has no right to, so it can hold nothing a writer waits for."""
    with Memory(url, embedder=None) as m:
        m.remember("maya", "Maya lives in London")
    _, analyst = login_role(url, "default")
    with psycopg.connect(analyst, autocommit=True) as con:
        con.execute("BEGIN")
        for key in (0x686D656D, 0, 1):  # the old constant key, and others
            con.execute("SELECT pg_advisory_lock(%s)", (key,))
        grabs = ["SELECT one FROM hmem_writer FOR UPDATE", "LOCK TABLE hmem_log",
                 "LOCK TABLE hmem_facts IN EXCLUSIVE MODE", "SELECT id FROM hmem_facts FOR UPDATE"]
        for table in RECORD_TABLES:  # the records' tables, written in the same transaction
            grabs += [f"LOCK TABLE {table} IN EXCLUSIVE MODE",
                      f"SELECT namespace FROM {table} FOR UPDATE"]
        for grab in grabs:
            con.execute("SAVEPOINT s")
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                con.execute(grab)
            con.execute("ROLLBACK TO SAVEPOINT s")
        done = subprocess.run(  # another process writes while the analyst holds all of that
            [sys.executable, "-c", "import sys; from hmem import Memory\n"
             "with Memory(sys.argv[1], embedder=None) as m: m.remember('tom', 'Tom likes tea')",
             url], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False)
        assert done.returncode == 0, done.stderr[-1000:]
        assert con.execute("SELECT count(*) FROM hmem_facts").fetchone()[0] == 2
        con.execute("ROLLBACK")


def test_a_bound_role_learns_only_its_own_namespaces(url: str) -> None:
    with Memory(url, embedder=None) as m:
        m.remember("maya", "Maya lives in London")
        m.in_namespace("hr").remember("tom", "Tom earns 90k")
    a, as_a = login_role(url, "default")
    b, _ = login_role(url, "hr")
    with psycopg.connect(as_a, autocommit=True) as con:
        ask = "SELECT hmem_namespaces_of(%s)"
        assert con.execute(ask, (a,)).fetchone()[0] == ["default"]
        assert con.execute(ask, (b,)).fetchone()[0] == []  # not another role's
        assert con.execute(ask, ("hmem",)).fetchone()[0] == []
        assert [r[0] for r in con.execute("SELECT text FROM hmem_facts")] == [
            "Maya lives in London"]
    with psycopg.connect(url, autocommit=True) as owner:
        revoke_namespace(owner, a, "default")
    with psycopg.connect(as_a, autocommit=True) as con:
        assert con.execute("SELECT count(*) FROM hmem_facts").fetchone()[0] == 0


def test_binding_a_role_that_does_not_exist_says_so(url: str) -> None:
    with Memory(url, embedder=None):
        pass
    with psycopg.connect(url, autocommit=True) as owner:
        for bind in (grant_namespace, revoke_namespace):
            with pytest.raises(errors.InvalidInput, match="no role named 'nobody'.*CREATE ROLE"):
                bind(owner, "nobody", "default")


def test_a_bound_role_running_hmem_is_told_what_it_may_do(url: str) -> None:
    with Memory(url, embedder=None) as m:
        m.remember("maya", "Maya lives in London")
    name, analyst = login_role(url, "default")
    with pytest.raises(errors.AccessDenied, match=f"role '{name}' may not read"):
        Memory(analyst, read_only=True, embedder=None)
    with pytest.raises(errors.AccessDenied, match="reads its rows in SQL"):
        Memory(analyst, embedder=None)
    for args in (("recall", "maya"), ("stats",), ("remember", "x", "y")):
        done = hmem(analyst, *args)
        assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-1500:]
        assert "may not" in done.stderr and "***" not in done.stderr


def test_a_url_naming_no_schema_says_how_to_make_one() -> None:
    missing = pg_server().url + "&options=-csearch_path%3Dno_such_schema"
    for read_only in (False, True):
        with pytest.raises(errors.StoreNotFound, match="no_such_schema.*CREATE SCHEMA"):
            Memory(missing, read_only=read_only, embedder=None)
    done = hmem(missing, "remember", "maya", "Maya lives in London")
    assert done.returncode == 1 and "Traceback" not in done.stderr
    assert "CREATE SCHEMA" in done.stderr


@pytest.mark.parametrize("where", ["host=/nonexistent/socket", "host=127.0.0.1&port=1"])
def test_a_server_that_cannot_be_reached_is_unavailable_not_missing(where: str) -> None:
    target = f"postgresql://hmem@/postgres?{where}&connect_timeout=3"
    with pytest.raises(errors.ServerUnavailable, match="unavailable.*try again"):
        Memory(target, embedder=None)
    done = hmem(target, "stats")
    assert done.returncode == 1 and "Traceback" not in done.stderr, done.stderr[-1500:]


def test_erasure_on_a_server_store_in_the_clear_names_the_url_and_why(url: str) -> None:
    """A store made before server stores sealed their texts (here: seal=False) stays in the
    clear, and says so, with its URL and never its password or a cache directory."""
    secret = url.replace("postgresql://hmem@", "postgresql://hmem:s3cret@", 1)
    clear = Store(secret, seal=False)
    try:
        with Memory(store=clear, embedder=None) as m:
            m.remember("maya", "Maya lives in London")
    finally:
        clear.close()
    with Memory(secret, embedder=None) as m:  # stays in the clear, never half sealed
        assert m.store.log.sealer is None
        m.remember("maya", "Maya likes tea")
        with pytest.raises(errors.ErasureUnavailable) as refused:
            m.erase(subject="maya")
    message = str(refused.value)
    assert "postgresql://hmem:***@" in message and "in the clear" in message
    assert ".cache" not in message and "s3cret" not in message
