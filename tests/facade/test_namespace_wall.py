"""The namespace wall over every read surface the stateful test does not drive.

Two or three namespaces with hostile names (quotes, semicolons, LIKE wildcards, unicode, very
long) hold overlapping subjects and identical texts, a conversation turn and a logged recall
each. Through ``Memory.events``, ``Memory.sql``
(every table), ``export_parquet``, ``timeline_rows`` and the in-process MCP tools, a memory opened
on one namespace only ever returns and counts its own facts, and ids from another namespace are
rejected (nothing appended), never resolved.
"""

from __future__ import annotations

import json
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

import duckdb
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog.events import EpisodeRecorded
from hmem import Memory, errors
from hmem.notebook.export import export_parquet
from hmem.notebook.timeline import timeline_rows
from projections.sql_tables import TABLES
from tests.conftest import examples
from tests.support.backends import BACKENDS, new_store

HOSTILE = [
    "default", "o'ther\"; DROP TABLE facts; --", "%", "_", "a%b_c", "ns\\'", "名前空間 🧠",
    "x" * 300, "' OR '1'='1", "y" * 500,
]
SUBJECTS = ["maya", "Maya", "tom"]
TEXTS = ["maya lives in london", "tom likes tea", "maya likes tea in london"]

ops = st.lists(
    st.tuples(st.integers(0, 2), st.sampled_from(["remember", "revise", "forget", "embed"]),
              st.sampled_from(SUBJECTS), st.sampled_from(TEXTS), st.integers(0, 10**6)),
    min_size=2, max_size=14,
)


def build(  # type: ignore[no-untyped-def]
    path: str, names: list[str], program
) -> tuple[Memory, dict[str, set[int]]]:
    clock = iter(
        datetime(2026, 1, 1, tzinfo=timezone.utc) + timedelta(minutes=i) for i in range(10**4)
    )
    m = Memory(path, embedder="hash-8", clock=lambda: next(clock), embed_mode="inline",
               log_recalls=True)
    views = {n: m.in_namespace(n) for n in names}
    ids: dict[str, set[int]] = {n: set() for n in names}
    live: dict[str, list[int]] = {n: [] for n in names}
    for k, op, subject, text, pick in program:
        ns = names[k % len(names)]
        v = views[ns]
        if op == "remember" or not live[ns]:
            fid = v.remember(subject, text, dedup=False)  # each a fact the program may change
        elif op == "revise":
            old = live[ns].pop(pick % len(live[ns]))
            fid = v.revise(old, text + " now")
        elif op == "forget":
            v.forget(live[ns].pop(pick % len(live[ns])))
            continue
        else:
            v.record_embedding(live[ns][pick % len(live[ns])], "other-model", [0.5, 0.25])
            continue
        ids[ns].add(fid)
        live[ns].append(fid)
    for ns in names:  # every namespace holds every subject and text, a turn, a recall
        for subject, text in zip(SUBJECTS, TEXTS, strict=True):
            ids[ns].add(views[ns].remember(subject, text))
        with views[ns].transaction() as txn:
            txn.append(EpisodeRecorded(session_id="s", turn=0, role="user", text=TEXTS[0]))
        views[ns].recall("maya tea london")  # logged
    return m, ids


RECORDS = ("episode", "recall")  # events about themselves, not about a fact


def check_sql_surfaces(a: Memory, mine: set[int]) -> None:
    ns = a.namespace
    events = a.events().fetchall()
    cols = a.events().columns
    assert {r[cols.index("namespace")] for r in events} == {ns}
    assert {r[cols.index("fact_id")] for r in events if r[cols.index("type")] not in RECORDS
            } == mine
    assert len(events) == a.stats().namespace_events
    for table in TABLES:
        assert {r[0] for r in a.sql(f"SELECT DISTINCT namespace FROM {table}").fetchall()} <= {ns}
    assert {r[0] for r in a.sql("SELECT id FROM facts").fetchall()} == mine
    assert {r[0] for r in a.sql("SELECT fact_id FROM fact_versions").fetchall()} == mine
    assert {r[0] for r in a.sql("SELECT fact_id FROM entities").fetchall()} <= mine
    assert {r[0] for r in a.sql("SELECT fact_id FROM vectors").fetchall()} <= mine
    assert a.sql("SELECT count(*) FROM facts").fetchall()[0][0] == len(mine) == a.stats().facts
    # a hostile name used as a value in the user's own query matches only this namespace
    same = a.sql("SELECT count(*) FROM facts WHERE namespace = ?", [ns])
    assert same.fetchall()[0][0] == len(mine)
    like = a.sql("SELECT count(*) FROM facts WHERE namespace LIKE '%'")
    assert like.fetchall()[0][0] == len(mine)


def check_export(a: Memory, mine: set[int], out: Path) -> None:
    result = export_parquet(a, out)
    assert json.loads(Path(result.manifest).read_text())["namespace"] == a.namespace
    con = duckdb.connect()
    for name, table in result.tables.items():
        rel = con.sql(f"SELECT * FROM read_parquet('{table.path}')")
        rows = rel.fetchall()
        assert len(rows) == table.rows
        assert {r[rel.columns.index("namespace")] for r in rows} <= {a.namespace}
        if name == "events":
            rows = [r for r in rows if r[rel.columns.index("type")] not in RECORDS]
        if name != "recalls":  # (a recall's rows name no fact: its hits do)
            key = "id" if name == "facts" else "fact_id"
            assert {r[rel.columns.index(key)] for r in rows} <= mine
    con.close()


def check_timeline(a: Memory, mine: set[int]) -> None:
    rows = timeline_rows(a, SUBJECTS)
    assert {r.id for r in rows} == mine


@settings(max_examples=examples(dev=4, ci=6), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(names=st.lists(st.sampled_from(HOSTILE), min_size=2, max_size=3, unique=True), program=ops)
@pytest.mark.parametrize("backend", BACKENDS)
def test_no_read_surface_shows_another_namespace(backend, names, program):
    with tempfile.TemporaryDirectory() as d, new_store(backend) as where:
        m, ids = build(where, names, program)
        if backend == "postgres":
            check_row_level_security(where, names, ids, m)
        with m:
            for ns in names:
                a = m.in_namespace(ns)
                mine = ids[ns]
                others = set().union(*(ids[o] for o in names if o != ns))
                check_sql_surfaces(a, mine)
                check_export(a, mine, Path(d) / "export")
                check_timeline(a, mine)
                before = m.last_seq
                for fid in sorted(others)[:3]:  # foreign ids are rejected, not resolved
                    for call in (a.why, a.get, lambda f, a=a: a.revise(f, "x"), a.forget,
                                 lambda f, a=a: a.record_embedding(f, "m", [1.0])):
                        with pytest.raises(errors.FactNotFound):
                            call(fid)
                assert m.last_seq == before


def check_row_level_security(
    url: str, names: list[str], ids: dict[str, set[int]], m: Memory
) -> None:
    """On a server store, a role bound to one namespace reads exactly its facts' rows in raw
    SQL, whatever it asks for, its episodes, logged recalls, their hits and its vectors (as
    ``Memory.sql`` shows that namespace's), and nothing of the log."""
    from projections.server_tables import grant_namespace, revoke_namespace
    from tests.support.pg_support import READER_ROLES, as_role, psycopg

    role = READER_ROLES[0]
    with psycopg.connect(url, autocommit=True) as owner:
        for ns in names:
            grant_namespace(owner, role, ns)
            try:
                with as_role(url, role) as con:
                    for query in ("SELECT id FROM hmem_facts",
                                  "SELECT fact_id FROM hmem_fact_versions",
                                  "SELECT id FROM hmem_facts WHERE namespace <> 'x' OR true",
                                  "SELECT id FROM hmem_facts f WHERE EXISTS "
                                  "(SELECT 1 FROM hmem_facts g WHERE g.id <> f.id)"):
                        assert {r[0] for r in con.execute(query)} <= ids[ns], query
                    assert {r[0] for r in con.execute("SELECT id FROM hmem_facts")} == ids[ns]
                    for table in ("episodes", "recalls", "recall_hits", "vectors"):
                        want = m.in_namespace(ns).sql(f"SELECT seq FROM {table}").fetchall()
                        assert want, table  # each namespace holds some: the wall shows them
                        for query in (f"SELECT seq FROM hmem_{table}",
                                      f"SELECT seq FROM hmem_{table} WHERE namespace <> 'x' "
                                      f"OR true"):
                            assert sorted(con.execute(query).fetchall()) == sorted(want), query
                    with pytest.raises(psycopg.errors.InsufficientPrivilege):
                        con.execute("SELECT * FROM hmem_log")
            finally:
                revoke_namespace(owner, role, ns)


# ---------------------------------------------------------------------------- MCP, in process

try:
    from hmem.adapters import mcp_tools as mcp_server
except ImportError:  # the mcp extra is not installed
    mcp_server = None  # type: ignore[assignment]


def call(server, name: str, **arguments):  # type: ignore[no-untyped-def]
    """Call a tool the way the SDK does, in process; returns the result in wire form."""
    import anyio

    async def go():  # type: ignore[no-untyped-def]
        return await server.call_tool(name, arguments)

    result = anyio.run(go)
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


def _ids(value) -> set[int]:  # type: ignore[no-untyped-def]
    """Every fact id found anywhere in a structured tool result."""
    found: set[int] = set()
    if isinstance(value, dict):
        for key, item in value.items():
            id_key = key in ("id", "fact_id", "supersedes", "superseded_by", "revises")
            if id_key and isinstance(item, int):
                found.add(item)
            found |= _ids(item)
    elif isinstance(value, list):
        for item in value:
            found |= _ids(item)
    return found


@pytest.mark.skipif(mcp_server is None, reason="needs the mcp extra")
def test_mcp_tools_show_only_their_namespace(tmp_path):
    names = ["o'ther\"; --", "%_", "名前 🧠"]
    program = [(k, "remember", s, t, 0) for k in range(3)
               for s, t in zip(SUBJECTS, TEXTS, strict=True)]
    program += [(k, "revise", "maya", "maya moved to paris", 0) for k in range(3)]
    program += [(k, "forget", "tom", "", 1) for k in range(3)]
    m, ids = build(str(tmp_path / "s"), names, program)
    with m:
        for ns in names:
            a = m.in_namespace(ns)
            mine = ids[ns]
            others = set().union(*(ids[o] for o in names if o != ns))
            server = mcp_server.build_server(a)
            seen: set[int] = set()
            for name, args in [
                ("recall", {"query": "maya tea london paris", "limit": 50}),
                ("recall", {"query": "tom", "as_of": 1}),
                ("history", {"subject": "maya"}), ("history", {"subject": "TOM"}),
                ("diff", {"since": 0}), ("stats", {}),
            ]:
                result = call(server, name, **args)
                assert not result.get("isError"), result
                seen |= _ids(result["structuredContent"])
            assert seen and seen <= mine
            stats = call(server, "stats")["structuredContent"]
            assert stats["facts"] == len(mine) and stats["namespace"] == ns
            before = m.last_seq
            for fid in sorted(others)[:4]:
                for name, args in [("why", {}), ("forget", {}), ("revise", {"text": "stolen"})]:
                    result = call(server, name, id=fid, **args)
                    assert result["isError"] and "no fact" in result["content"][0]["text"]
            assert m.last_seq == before


@pytest.mark.parametrize("reader", ["read_blob", "read_text", "read_csv"])
def test_sql_cannot_read_the_store_files_which_hold_every_namespace(tmp_path, reader):
    with Memory(tmp_path / "s", embedder=None) as m:
        m.in_namespace("secret").remember("x", "the secret code is 1234")
        files = str(tmp_path / "s" / "log" / "*.hlog")
        with pytest.raises(errors.InvalidInput, match="disabled"):
            m.sql(f"SELECT * FROM {reader}('{files}')").fetchall()
        with pytest.raises(errors.InvalidInput, match="read-only"):
            m.sql("SET enable_external_access = true")
        assert m.sql("SELECT count(*) FROM facts").fetchall() == [(0,)]
        export_parquet(m, tmp_path / "out")  # export still writes its files
        assert (tmp_path / "out" / "facts.parquet").exists()
