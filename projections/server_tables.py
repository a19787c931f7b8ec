"""The tables of a store on PostgreSQL: what it shows to SQL on the server, written in the
transaction of the append they follow from.

- ``hmem_facts``: one row per fact, as the embedded ``facts`` table (texts, provenance, the
  revision chain), with ``chain_id``: the first fact of its revision chain.
- ``hmem_fact_versions``: every version row of every fact, with the valid period and the
  transaction period as ``tstzrange`` (``[from, to)``, open-ended as ``infinity``), and the
  transaction seqs. An exclusion constraint makes two versions of one chain that are believed
  at the same transaction time for overlapping valid times impossible: the server refuses the
  write, whatever wrote it.
- ``hmem_meta``: the store's id and ``tables_seq``, the last seq the tables hold (moved in the
  same transaction as the rows, so they never disagree with the log they say they follow).
- ``hmem_checkpoint_parts``: the last checkpoint a writer published (projections/checkpoint.py,
  in parts), so that a process on a host that has none starts from it instead of reading every
  row of the log (hmem/storage/server_backend.py).
- ``hmem_episodes``, ``hmem_recalls``, ``hmem_recall_hits``, ``hmem_vectors``: what is not a
  fact (:mod:`projections.server_records`), written in the same transaction.
- Namespaces are row-level security: a role bound to namespaces (:func:`grant_namespace`)
  reads only their rows of these six tables, whatever SQL it sends, and cannot read the log.

The rows are those the SQL surface makes from the fold (:mod:`projections.sql_tables`), replaced
for the facts each batch changed; a NUL character in a text (which PostgreSQL's ``text`` cannot
hold) shows as U+FFFD there, while the log keeps it. Only the owner of the tables writes them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from eventlog.events import EPOCH
from projections.arrays import NONE
from projections.errors import InvalidInput
from projections.fold_state import FactColumns
from projections.projector import Projector
from projections.server_records import RECORD_DDL, RECORD_TABLES, RECORD_WALL
from projections.sql_insert import insert_rows
from projections.sql_tables import TIME_COLUMNS, fact_rows, version_rows

__all__ = [
    "FACT_COLUMNS", "NUL_SHOWN", "TABLES_VERSION", "create_tables", "differences", "embedded_rows",
    "grant_namespace", "revoke_namespace", "rewrite_namespaces", "server_rows", "store_id",
    "tables_seq", "write_facts",
]

_TABLES = """
CREATE TABLE IF NOT EXISTS hmem_meta (key text PRIMARY KEY, value text NOT NULL);
INSERT INTO hmem_meta VALUES ('store_id', gen_random_uuid()::text), ('tables_seq', '0')
    ON CONFLICT DO NOTHING;
REVOKE ALL ON hmem_meta FROM PUBLIC;
CREATE TABLE IF NOT EXISTS hmem_facts (
    id bigint PRIMARY KEY,
    chain_id bigint NOT NULL,
    namespace text NOT NULL,
    subject text NOT NULL,
    text text NOT NULL,
    confidence double precision NOT NULL,
    source_agent text,
    source_ref text,
    entities text[] NOT NULL,
    created_at timestamptz NOT NULL,
    supersedes bigint,
    revision text,
    reason text,
    superseded_by bigint,
    superseded_at timestamptz,
    forgotten_seq bigint,
    forgotten_at timestamptz,
    forget_reason text,
    derived_from bigint[] NOT NULL
);
CREATE INDEX IF NOT EXISTS hmem_facts_namespace ON hmem_facts (namespace, subject);
CREATE TABLE IF NOT EXISTS hmem_fact_versions (
    fact_id bigint NOT NULL,
    row_no integer NOT NULL,
    chain_id bigint NOT NULL,
    namespace text NOT NULL,
    valid tstzrange NOT NULL,
    tx tstzrange NOT NULL,
    tx_from_seq bigint NOT NULL,
    tx_to_seq bigint,
    PRIMARY KEY (fact_id, row_no),
    -- one chain, one belief per (transaction time, valid time): core gist needs no btree_gist
    -- for the chain's equality when it is a one-point range
    EXCLUDE USING gist (int8range(chain_id, chain_id, '[]') WITH &&, tx WITH &&, valid WITH &&)
);
CREATE TABLE IF NOT EXISTS hmem_checkpoint_parts (
    seq bigint NOT NULL, file text NOT NULL, part integer NOT NULL, data bytea NOT NULL,
    PRIMARY KEY (seq, file, part)
);
ALTER TABLE hmem_checkpoint_parts ALTER COLUMN data SET STORAGE EXTERNAL;
REVOKE ALL ON hmem_checkpoint_parts FROM PUBLIC;
CREATE INDEX IF NOT EXISTS hmem_fact_versions_namespace ON hmem_fact_versions (namespace);
CREATE TABLE IF NOT EXISTS hmem_namespace_roles (
    role name NOT NULL, namespace text NOT NULL, PRIMARY KEY (role, namespace)
);
REVOKE ALL ON hmem_namespace_roles FROM PUBLIC;
-- writes staged for group commit (hmem/storage/group_commit.py); unlogged: a staged write is
-- acknowledged only once a committed transaction of hmem_log holds it
CREATE UNLOGGED TABLE IF NOT EXISTS hmem_pending (
    id bigserial PRIMARY KEY,
    unit bytea NOT NULL,
    staged_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    pid integer,  -- the writer's session: a unit whose session ended is never appended
    backend_start timestamptz,
    first_seq bigint,
    error text
);
ALTER TABLE hmem_pending ADD COLUMN IF NOT EXISTS pid integer;
ALTER TABLE hmem_pending ADD COLUMN IF NOT EXISTS backend_start timestamptz;
REVOKE ALL ON hmem_pending FROM PUBLIC;
"""

# The wall: a bound role sees the rows of its namespaces; the function reads the bindings with
# its owner's rights (the roles have none on them), and answers only for a role the session's
# login is a member of (so a bound role cannot list another role's namespaces). {schema} is the
# tables' schema, quoted.
_WALL = """
CREATE OR REPLACE FUNCTION {schema}.hmem_namespaces_of(who name) RETURNS text[]
    LANGUAGE sql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $$
    SELECT coalesce(array_agg(namespace), '{{}}') FROM {schema}.hmem_namespace_roles
    WHERE role = who AND pg_has_role(session_user, who, 'MEMBER') $$;
REVOKE ALL ON FUNCTION {schema}.hmem_namespaces_of(name) FROM PUBLIC;
ALTER TABLE hmem_facts ENABLE ROW LEVEL SECURITY;
ALTER TABLE hmem_fact_versions ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS hmem_namespace_wall ON hmem_facts;
CREATE POLICY hmem_namespace_wall ON hmem_facts FOR SELECT
    USING (namespace = ANY ({schema}.hmem_namespaces_of(current_user)));
DROP POLICY IF EXISTS hmem_namespace_wall ON hmem_fact_versions;
CREATE POLICY hmem_namespace_wall ON hmem_fact_versions FOR SELECT
    USING (namespace = ANY ({schema}.hmem_namespaces_of(current_user)));
"""

FACT_COLUMNS = (
    "id", "namespace", "subject", "text", "confidence", "source_agent", "source_ref",
    "entities", "created_at", "supersedes", "revision", "reason", "superseded_by",
    "superseded_at", "forgotten_seq", "forgotten_at", "forget_reason", "derived_from",
)
_US = timedelta(microseconds=1)
# PostgreSQL's text cannot hold U+0000: the tables show it as U+FFFD (the log keeps it)
NUL_SHOWN = "\ufffd"


# of _TABLES, _WALL and the record tables' (projections/server_records.py): a store at this
# version is not altered on open. "1": facts and versions; "2": episodes, recalls, vectors too;
# "3": hmem_pending (group commit); "4": its writer's session
TABLES_VERSION = "4"
_READ = ("hmem_facts", "hmem_fact_versions", *RECORD_TABLES)  # what a bound role may SELECT


def create_tables(con: Any) -> None:
    """Make the tables, the store's id and the namespace wall, unless the store already has
    them at :data:`TABLES_VERSION` (the DDL takes locks that would stall every writer and
    reader of the tables at each open). A store of an older version gets the tables it lacks,
    and the roles bound to its namespaces read them too. The caller holds the store's lock."""
    from psycopg import sql

    if con.execute("SELECT to_regclass('hmem_meta')").fetchone()[0] is not None:
        row = con.execute("SELECT value FROM hmem_meta WHERE key = 'tables_version'").fetchone()
        if row is not None and row[0] == TABLES_VERSION:
            return
    con.execute(_TABLES + RECORD_DDL)
    schema = sql.Identifier(con.execute("SELECT current_schema()").fetchone()[0])
    con.execute((_WALL + RECORD_WALL).format(schema=schema.as_string(con)))
    for (role,) in con.execute("SELECT DISTINCT role FROM hmem_namespace_roles "
                               "WHERE role IN (SELECT rolname FROM pg_roles)").fetchall():
        _grant_reads(con, role, schema)
    con.execute("INSERT INTO hmem_meta VALUES ('tables_version', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (TABLES_VERSION,))


def _grant_reads(con: Any, role: str, schema: Any) -> None:
    """Let ``role`` read the tables the wall guards (``schema``: the tables', an Identifier)."""
    from psycopg import sql

    tables = sql.SQL(", ").join(sql.SQL("{}.{}").format(schema, sql.Identifier(t)) for t in _READ)
    con.execute(sql.SQL("GRANT SELECT ON {} TO {}").format(tables, sql.Identifier(role)))


def store_id(con: Any) -> str | None:
    """The store's id (made with its tables), None before they exist."""
    if con.execute("SELECT to_regclass('hmem_meta')").fetchone()[0] is None:
        return None
    row = con.execute("SELECT value FROM hmem_meta WHERE key = 'store_id'").fetchone()
    return None if row is None else str(row[0])


def tables_seq(con: Any) -> int:
    """The last seq the tables hold."""
    return int(con.execute("SELECT value FROM hmem_meta WHERE key = 'tables_seq'").fetchone()[0])


def write_facts(
    con: Any, projector: Projector, ids: Mapping[str, Iterable[int]], *, after: int
) -> bool:
    """Replace the rows of the facts ``ids`` (by namespace) with the fold's, in the caller's
    transaction, and move ``tables_seq`` from ``after`` to the fold's last seq. When the
    tables were not at ``after`` (written by something that did not keep them), every fact's
    rows are written instead; returns whether that happened. Sends its statements without
    waiting between them (it may run in pipeline mode); ``after=-1`` writes every fact's rows
    (with COPY, outside pipeline mode)."""
    if after < 0:
        _rewrite(con, projector, copy=True)
        return True
    moved = con.execute(
        "UPDATE hmem_meta SET value = %s WHERE key = 'tables_seq' AND value = %s RETURNING 1",
        (str(projector.last_seq), str(after)),
    )
    chosen = {ns: sorted(set(some)) for ns, some in ids.items()}
    old = sorted(i for some in chosen.values() for i in some if i <= after)  # new: no rows yet
    if old:
        con.execute("DELETE FROM hmem_fact_versions WHERE fact_id = ANY(%s)", (old,))
        con.execute("DELETE FROM hmem_facts WHERE id = ANY(%s)", (old,))
    facts: list[list[Any]] = []
    versions: list[list[Any]] = []
    for namespace, some in chosen.items():  # every namespace's rows in one statement each
        more = _rows(projector.space(namespace).state, some)
        facts += more[0]
        versions += more[1]
    _insert_rows(con, facts, versions)
    if moved.fetchone() is None:  # behind: every fact's rows, statement by statement
        _rewrite(con, projector, copy=False)
        return True
    return False


def rewrite_namespaces(con: Any, projector: Projector, namespaces: Iterable[str]) -> None:
    """Every row of the facts of ``namespaces`` again, from the fold (after an erasure folded
    them again), in the caller's transaction; ``tables_seq`` stays."""
    chosen = sorted(set(namespaces))
    con.execute("DELETE FROM hmem_fact_versions WHERE namespace = ANY(%s)", (chosen,))
    con.execute("DELETE FROM hmem_facts WHERE namespace = ANY(%s)", (chosen,))
    for namespace in chosen:
        state = projector.space(namespace).state
        every = state.table.ids[: state.n].tolist()
        for start in range(0, len(every), 10_000):
            _insert(con, state, every[start:start + 10_000])


def _insert(con: Any, state: FactColumns, ids: Sequence[int]) -> None:
    _insert_rows(con, *_rows(state, ids))


def _insert_rows(con: Any, facts: list[list[Any]], versions: list[list[Any]]) -> None:
    insert_rows(con, "hmem_facts", ("chain_id", *FACT_COLUMNS), facts)
    insert_rows(con, "hmem_fact_versions", _VERSION_COLUMNS.split(", "), versions)


def _rewrite(con: Any, projector: Projector, *, copy: bool) -> None:
    """Every fact's rows, and ``tables_seq`` at the fold's last seq: with COPY and fresh
    planner statistics (a bulk write), or as INSERTs (in pipeline mode, where COPY cannot run)."""
    con.execute("DELETE FROM hmem_fact_versions")
    con.execute("DELETE FROM hmem_facts")
    con.execute("UPDATE hmem_meta SET value = %s WHERE key = 'tables_seq'",
                (str(projector.last_seq),))
    for _, space in projector.spaces():
        state = space.state
        every = state.table.ids[: state.n].tolist()
        for start in range(0, len(every), 10_000):
            (_copy if copy else _insert)(con, state, every[start:start + 10_000])
    if copy:
        # the planner's statistics now, not when autovacuum comes by: without them a
        # namespace's as_of scans the exclusion index (4 ms for 200 rows of 30k) instead of
        # the namespace's
        con.execute("ANALYZE hmem_facts, hmem_fact_versions")


def _copy(con: Any, state: FactColumns, ids: Sequence[int]) -> None:
    facts, versions = _rows(state, ids)
    with con.cursor() as cur:
        with cur.copy(f"COPY hmem_facts (chain_id, {', '.join(FACT_COLUMNS)}) FROM STDIN") as cp:
            for row in facts:
                cp.write_row(row)
        with cur.copy(f"COPY hmem_fact_versions ({_VERSION_COLUMNS}) FROM STDIN") as cp:
            for row in versions:
                cp.write_row(row)


_VERSION_COLUMNS = "fact_id, row_no, chain_id, namespace, valid, tx, tx_from_seq, tx_to_seq"


def _rows(state: FactColumns, ids: Sequence[int]) -> tuple[list[list[Any]], list[list[Any]]]:
    """The ``hmem_facts`` and ``hmem_fact_versions`` rows of the facts ``ids``."""
    if not ids:
        return [], []
    chains = {fid: _chain_id(state, fid) for fid in ids}
    facts = fact_rows(state, ids)
    columns = [_column(name, facts[name]) for name in FACT_COLUMNS]  # column by column
    fact_out = [[chains[row[0]], *row] for row in zip(*columns, strict=True)]
    v = version_rows(state, ids)
    version_out = [
        [fid, no, chains[fid], ns, _range(vf, vt), _range(tf, tt), tfs, tts]
        for fid, no, ns, vf, vt, tfs, tf, tts, tt in zip(
            v["fact_id"].tolist(), v["row_no"].tolist(), v["namespace"],
            v["valid_from"].tolist(), _opt(v["valid_to"]), v["tx_from_seq"].tolist(),
            v["tx_from"].tolist(), _opt(v["tx_to_seq"]), _opt(v["tx_to"]), strict=True,
        )
    ]
    return fact_out, version_out


def _chain_id(state: FactColumns, fact_id: int) -> int:
    """The first fact of ``fact_id``'s revision chain."""
    supersedes = state.table.supersedes
    while True:
        before = int(supersedes[state.slot(fact_id)])
        if before == NONE:
            return fact_id
        fact_id = before


def _opt(values: Any) -> list[Any]:
    if isinstance(values, np.ma.MaskedArray):
        return [None if m else int(x) for x, m in
                zip(values.data.tolist(), np.ma.getmaskarray(values).tolist(), strict=True)]
    return [None if x == NONE else int(x) for x in values.tolist()]


def _time(us: int) -> datetime:
    return EPOCH + us * _US


def _range(start: int, end: int | None) -> str:
    upper = "" if end is None else f'"{_time(end).isoformat()}"'
    return f'["{_time(start).isoformat()}",{upper})'


def _column(name: str, values: Any) -> list[Any]:
    """A column of the fold's rows as the server takes it: NULL for a masked value, times as
    datetimes, a NUL in a text as U+FFFD."""
    out = _opt(values) if isinstance(values, np.ma.MaskedArray) else values.tolist()
    if name.endswith("_at"):
        return [None if x is None else _time(int(x)) for x in out]
    if values.dtype == object:
        return [_shown(x.tolist() if isinstance(x, np.ndarray | np.generic) else x)
                for x in out]
    return out


def grant_namespace(con: Any, role: str, namespace: str) -> None:
    """Let ``role`` read ``namespace``'s rows of ``hmem_facts``, ``hmem_fact_versions``,
    ``hmem_episodes``, ``hmem_recalls``, ``hmem_recall_hits`` and ``hmem_vectors`` (and nothing
    of other namespaces, nor the log)."""
    from psycopg import sql

    _check_role(con, role)
    schema = sql.Identifier(con.execute("SELECT current_schema()").fetchone()[0])
    names = {"role": sql.Identifier(role), "schema": schema}
    with con.transaction():
        con.execute("INSERT INTO hmem_namespace_roles VALUES (%s, %s) ON CONFLICT DO NOTHING",
                    (role, namespace))
        for statement in (
            "GRANT USAGE ON SCHEMA {schema} TO {role}",
            "GRANT EXECUTE ON FUNCTION {schema}.hmem_namespaces_of(name) TO {role}",
        ):
            con.execute(sql.SQL(statement).format(**names))
        _grant_reads(con, role, schema)


def revoke_namespace(con: Any, role: str, namespace: str) -> None:
    """Take ``namespace`` back from ``role`` (its other namespaces stay)."""
    _check_role(con, role)
    con.execute("DELETE FROM hmem_namespace_roles WHERE role = %s AND namespace = %s",
                (role, namespace))


def _check_role(con: Any, role: str) -> None:
    if not isinstance(role, str) or con.execute(
        "SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)
    ).fetchone() is None:
        raise InvalidInput(
            f"no role named {role!r} on this server; create it first (CREATE ROLE name LOGIN "
            f"PASSWORD '...', as an administrator), then bind it"
        )


def _shown(value: Any) -> Any:
    """A value as the server's tables show it (NUL as U+FFFD)."""
    if isinstance(value, str):
        return value.replace("\x00", NUL_SHOWN)
    if isinstance(value, list):
        return [_shown(v) for v in value]
    return value


def _period(start: datetime | None, end: datetime | None) -> tuple[Any, ...]:
    """A period as (from, to), or ("empty",) when it holds no instant (PostgreSQL's empty
    range: it keeps no bounds, and contains nothing, as the embedded row does not)."""
    return ("empty",) if start is not None and end is not None and end <= start else (start, end)


_FACTS = ("id, namespace, subject, text, confidence, source_agent, source_ref, entities, "
          "created_at, supersedes, revision, reason, superseded_by, superseded_at, forgotten_seq, "
          "forgotten_at, forget_reason, derived_from")


def server_rows(con: Any) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """(facts, version rows) as the server's tables hold them, in the form of
    :func:`embedded_rows` (a period as (from, to), or ("empty",))."""
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


def embedded_rows(projector: Projector) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The same two from the state, as the server shows them (NUL as U+FFFD)."""
    facts: list[tuple[Any, ...]] = []
    versions: list[tuple[Any, ...]] = []
    for _, space in projector.spaces():
        some, more = _embedded_rows(space.state)
        facts += some
        versions += more
    facts.sort(key=lambda row: row[0])  # by id, as server_rows reads them
    versions.sort(key=lambda row: (row[0], row[1]))  # by fact id, row number
    return facts, versions


def _embedded_rows(state: FactColumns) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    ids = state.table.ids[: state.n].tolist()
    got = fact_rows(state, ids)
    columns = [_values(got[c], c) for c in _FACTS.split(", ")]
    facts = [tuple(_shown(v) for v in row) for row in zip(*columns, strict=True)]
    v = version_rows(state, ids)
    versions = [
        (fid, no, ns, *_period(vf, vt), tfs, tts, *_period(tf, tt))
        for fid, no, ns, vf, vt, tfs, tts, tf, tt in zip(*(
            _values(v[c], c) for c in ("fact_id", "row_no", "namespace", "valid_from",
                                       "valid_to", "tx_from_seq", "tx_to_seq", "tx_from", "tx_to")
        ), strict=True)
    ]
    return facts, versions


def _values(column: Any, name: str) -> list[Any]:
    """A column's values as plain Python values (NULL as None, times as datetimes)."""
    if isinstance(column, np.ma.MaskedArray):
        values = [None if m else v for v, m in
                  zip(column.data.tolist(), np.ma.getmaskarray(column).tolist(), strict=True)]
    else:
        values = list(column.tolist())
    if name.endswith(TIME_COLUMNS):
        return [None if v is None else _time(v) for v in values]
    return values


def differences(con: Any, projector: Projector) -> dict[str, tuple[int, int]]:
    """Per server table whose rows differ from the state's: (rows missing, rows extra). Empty
    when they agree."""
    out = {}
    for table, got, want in zip(("hmem_facts", "hmem_fact_versions"), server_rows(con),
                                embedded_rows(projector), strict=True):
        have, need = Counter(map(_canonical, got)), Counter(map(_canonical, want))
        missing, extra = need - have, have - need
        if missing or extra:
            out[table] = (sum(missing.values()), sum(extra.values()))
    return out


def _canonical(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row comparable across the two engines: times in microseconds, lists as tuples."""
    return tuple(
        (v - EPOCH) // _US if isinstance(v, datetime)
        else tuple(v) if isinstance(v, list) else v
        for v in row
    )
