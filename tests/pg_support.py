"""The PostgreSQL backend for the tests (issue 15): one throwaway server per test process,
started on first use (bench/pg_server.py; the tests that need it skip, naming why, where
PostgreSQL cannot start, and CI starts it), a fresh store per call (a schema of its own, named
in the URL's search_path), and the checks that hold the server's tables to the embedded
projection hmem reads from."""

from __future__ import annotations

import atexit
import itertools
import os
from datetime import datetime
from typing import Any

import pytest

psycopg = pytest.importorskip("psycopg", reason="the postgres extra: pip install 'hmem[postgres]'")

from bench.pg_server import PgServer  # noqa: E402

__all__ = ["pg_server", "fresh_store_url", "drop_store", "server_tables", "embedded_tables",
           "as_role", "READER_ROLES"]

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
    server = pg_server()
    schema = f"store_{os.getpid()}_{next(_names)}"
    with psycopg.connect(server.url, autocommit=True) as con:
        con.execute(f"CREATE SCHEMA {schema}")
    return f"{server.url}&options=-csearch_path%3D{schema}"


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


def _period(start: datetime | None, end: datetime | None) -> tuple[Any, ...]:
    """A period as (from, to), or ("empty",) when it holds no instant (PostgreSQL's empty
    range: it keeps no bounds, and contains nothing, as the embedded row does not)."""
    return ("empty",) if start is not None and end is not None and end <= start else (start, end)


_FACTS = ("id, namespace, subject, text, confidence, source_agent, source_ref, entities, "
          "created_at, supersedes, revision, reason, superseded_by, superseded_at, forgotten_seq, "
          "forgotten_at, forget_reason, derived_from")


def server_tables(url: str) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(facts, version rows) as the server's tables hold them, in the embedded form."""
    with psycopg.connect(url) as con:
        facts = [tuple(r) for r in con.execute(f"SELECT {_FACTS} FROM hmem_facts ORDER BY id")]
        versions = [
            (fid, no, ns, *(("empty",) if v_empty else (vf, vt)), tfs, tts,
             *(("empty",) if tx_empty else (tf, tt)))
            for fid, no, ns, v_empty, vf, vt, tfs, tts, tx_empty, tf, tt in con.execute(
                "SELECT fact_id, row_no, namespace, isempty(valid), lower(valid), upper(valid), "
                "tx_from_seq, tx_to_seq, isempty(tx), lower(tx), upper(tx) "
                "FROM hmem_fact_versions ORDER BY fact_id, row_no"
            )
        ]
    return facts, versions


def embedded_tables(con: Any) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The same two from the embedded projection's DuckDB connection."""
    facts = [tuple(r) for r in con.execute(f"SELECT {_FACTS} FROM facts ORDER BY id").fetchall()]
    versions = [
        (fid, no, ns, *_period(vf, vt), tfs, tts, *_period(tf, tt))
        for fid, no, ns, vf, vt, tfs, tts, tf, tt in con.execute(
            "SELECT fact_id, row_no, namespace, valid_from, valid_to, tx_from_seq, tx_to_seq, "
            "tx_from, tx_to FROM fact_versions ORDER BY fact_id, row_no"
        ).fetchall()
    ]
    return facts, versions
