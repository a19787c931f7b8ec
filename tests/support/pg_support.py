"""The PostgreSQL backend for the tests: one throwaway server per test process,
started on first use (bench/pg_server.py; the tests that need it skip, naming why, where
PostgreSQL cannot start, and CI starts it), a fresh store per call (a schema of its own, named
in the URL's search_path), and roles to bind to namespaces."""

from __future__ import annotations

import atexit
import itertools
import os
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg", reason="the postgres extra: pip install 'hmem[postgres]'")

from bench.pg_server import PgServer  # noqa: E402

__all__ = ["pg_server", "fresh_store_url", "drop_store", "as_role", "READER_ROLES"]

_server: PgServer | None = None
_names = itertools.count()
# roles bound to namespaces by the tests (the cluster's, made once)
READER_ROLES = ("hmem_reader_a", "hmem_reader_b")


def pg_server() -> PgServer:
    """This process's server (started on first use; skips the test where it cannot start)."""
    global _server
    if _server is None:
        try:
            _server = PgServer()
        except FileNotFoundError as e:
            pytest.skip(str(e))
        atexit.register(_server.stop)
        with psycopg.connect(_server.url, autocommit=True) as con:
            for role in READER_ROLES:
                con.execute(f"CREATE ROLE {role} NOLOGIN")
    return _server


def fresh_store_url() -> str:
    """The URL of a new, empty store: a schema of its own on this process's server."""
    return pg_server().new_store(f"store_{os.getpid()}_{next(_names)}")


def drop_store(url: str) -> None:
    schema = url.rsplit("%3D", 1)[1]
    with psycopg.connect(pg_server().url, autocommit=True) as con:
        con.execute(f"DROP SCHEMA {schema} CASCADE")


def as_role(url: str, role: str) -> Any:
    """A connection to the store at ``url`` whose queries run as ``role`` (row-level security
    applies to it as to a login of its own)."""
    con = psycopg.connect(url, autocommit=True)
    con.execute(f"SET ROLE {role}")
    return con
