"""Load the columnar fold (:class:`FactColumns`) back from the projection's tables, in bulk.

What the writer's reopen and a reader's checkpoint do instead of replaying the log: every column
comes out of DuckDB as one numpy array (no Python object per fact but the texts' bytes and the
distinct strings), string columns already coded by a join against their distinct values, and
version rows in (fact, row_no) order, linked with array arithmetic. tests/test_fact_columns.py
holds the result equal, fact by fact, to the fold of the same log.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
import numpy as np
import numpy.typing as npt

from projections.column_store import NONE, Strings, UniqueStrings
from projections.fact_columns import FactColumns
from projections.records import Episode, Vector

__all__ = ["load_columns"]

_NULL = f"{NONE}::BIGINT"  # an int column's None, as the fold keeps it
_CHUNK = 65_536


def load_columns(con: duckdb.DuckDBPyConnection, last_seq: int) -> FactColumns:
    """The fold state the tables hold (they hold the log folded up to ``last_seq``)."""
    cols = FactColumns()
    got = con.execute(
        "SELECT id, confidence, epoch_us(created_at) AS created_at, "
        f"coalesce(supersedes, {_NULL}) AS supersedes, "
        "CASE revision WHEN 'world' THEN 1 WHEN 'correction' THEN 2 ELSE 0 END AS revision, "
        f"coalesce(superseded_by, {_NULL}) AS superseded_by, "
        f"coalesce(epoch_us(superseded_at), {_NULL}) AS superseded_at, "
        f"coalesce(forgotten_seq, {_NULL}) AS forgotten_seq, "
        f"coalesce(epoch_us(forgotten_at), {_NULL}) AS forgotten_at, "
        "doc_len, coalesce(importance, 0) AS importance, importance IS NULL AS no_importance, "
        "len(entities) AS n_entities, len(derived_from) AS n_derived "
        "FROM facts ORDER BY id"
    ).fetchnumpy()
    n = len(got["id"])
    f = cols.table
    f.reserve(n)
    f.n = n
    ids = np.asarray(got["id"], dtype=np.int64)
    f.ids[:n] = ids
    for name in ("confidence", "created_at", "supersedes", "revision", "superseded_by",
                 "superseded_at", "forgotten_seq", "forgotten_at", "doc_len"):
        getattr(f, name)[:n] = got[name]
    _importance(cols, np.asarray(got["importance"], dtype=np.int64), got["no_importance"])
    codes = _coded(con, cols.namespaces, ["namespace"])
    codes |= _coded(con, cols.subjects, ["subject"])
    codes |= _coded(con, cols.agents, ["source_agent"])
    codes["source_ref"] = _unshared(con, cols.refs, "source_ref")
    codes |= _coded(con, cols.labels, ["extractor", "prompt_version", "category"])
    codes |= _coded(con, cols.reasons, ["reason", "forget_reason"])
    for name, column in codes.items():
        getattr(f, name)[:n] = column
    f.entities_end[:n] = np.cumsum(got["n_entities"])
    f.derived_end[:n] = np.cumsum(got["n_derived"])
    _entities(con, cols)
    derived = con.execute(
        "SELECT unnest(derived_from) AS d FROM facts ORDER BY id"
    ).fetchnumpy()["d"]
    cols.derived.extend(np.asarray(derived, dtype=np.int64))
    cols.slot_of = np.full(max(last_seq + 1, 16), -1, dtype=np.int32)
    cols.slot_of[ids] = np.arange(n, dtype=np.int32)
    _texts(con, cols)
    _tokens(con, cols)
    _rows(con, cols)
    _vectors_and_episodes(con, cols)
    cols.last_seq = last_seq
    return cols


def _importance(cols: FactColumns, values: npt.NDArray[np.int64], none: np.ndarray) -> None:
    """FactTable.importance codes: 0 None, 1..127 the value, -1 kept in ``cols.odd``."""
    n = len(values)
    fits = (values > 0) & (values < 128)
    code = np.where(np.asarray(none, dtype=bool), 0, np.where(fits, values, -1))
    cols.table.importance[:n] = code
    for slot in np.flatnonzero(code == -1).tolist():
        cols.odd[slot] = int(values[slot])


def _coded(
    con: duckdb.DuckDBPyConnection, strings: Strings, columns: Sequence[str]
) -> dict[str, npt.NDArray[np.int32]]:
    """Fill ``strings`` with the distinct values of ``columns`` (one table shared by them) and
    return each column's codes by slot (-1 for NULL), coded by DuckDB."""
    union = "SELECT DISTINCT v FROM (" + " UNION ALL ".join(
        f"SELECT {c} AS v FROM facts WHERE {c} IS NOT NULL" for c in columns
    ) + ")"
    values = [r[0] for r in con.execute(f"SELECT v FROM ({union}) ORDER BY v").fetchall()]
    strings.fill(values)
    if not values:
        n = int(con.execute("SELECT count(*) FROM facts").fetchone()[0])  # type: ignore[index]
        return {c: np.full(n, -1, dtype=np.int32) for c in columns}
    joins = " ".join(f"LEFT JOIN d s{i} ON facts.{c} = s{i}.v" for i, c in enumerate(columns))
    select = ", ".join(f"coalesce(s{i}.code, -1) AS {c}" for i, c in enumerate(columns))
    got = con.execute(
        f"WITH d AS (SELECT v, row_number() OVER (ORDER BY v) - 1 AS code FROM ({union})) "
        f"SELECT {select} FROM facts {joins} ORDER BY facts.id"
    ).fetchnumpy()
    return {c: np.asarray(got[c], dtype=np.int32) for c in columns}


def _texts(con: duckdb.DuckDBPyConnection, cols: FactColumns) -> None:
    """The texts, in the table's own order (no sort of every text by id) and a chunk at a
    time (a str per fact only for a chunk), each put at its fact's slot."""
    texts = con.execute("SELECT id, text FROM facts")
    while chunk := texts.fetchmany(_CHUNK):
        ids, values = zip(*chunk, strict=True)
        cols.texts.place(cols.slot_of[np.array(ids, dtype=np.int64)], values)


def _unshared(
    con: duckdb.DuckDBPyConnection, strings: UniqueStrings, column: str
) -> npt.NDArray[np.int32]:
    """Fill ``strings`` with a column's values in id order, a chunk at a time; returns the
    codes by slot (-1 for NULL)."""
    given = con.execute(f"SELECT {column} IS NOT NULL AS given FROM facts ORDER BY id").fetchnumpy()
    mask = np.asarray(given["given"], dtype=bool)
    codes = np.full(len(mask), -1, dtype=np.int32)
    codes[mask] = np.arange(int(mask.sum()), dtype=np.int32)
    values = con.execute(f"SELECT {column} FROM facts WHERE {column} IS NOT NULL ORDER BY id")
    while chunk := values.fetchmany(_CHUNK):
        strings.extend([row[0] for row in chunk])
    return codes


def _entities(con: duckdb.DuckDBPyConnection, cols: FactColumns) -> None:
    names = [
        r[0] for r in con.execute(
            "SELECT DISTINCT unnest(entities) AS e FROM facts ORDER BY e"
        ).fetchall()
    ]
    cols.entity_names.fill(names)
    if not names:
        return
    got = con.execute(
        "WITH n AS (SELECT v, row_number() OVER (ORDER BY v) - 1 AS code FROM "
        "(SELECT DISTINCT unnest(entities) AS v FROM facts)), "
        "e AS (SELECT id, unnest(entities) AS v, unnest(range(len(entities))) AS k FROM facts) "
        "SELECT n.code FROM e JOIN n USING (v) ORDER BY e.id, e.k"
    ).fetchnumpy()
    cols.entities.extend(np.asarray(got["code"], dtype=np.int32))


def _tokens(con: duckdb.DuckDBPyConnection, cols: FactColumns) -> None:
    """Each fact's index tokens (projections/fact_tokens.py) from the ``postings`` table: a
    term repeated ``tf`` times, terms coded in sorted order."""
    terms = "SELECT DISTINCT term FROM postings"
    cols.terms.fill([r[0] for r in con.execute(f"{terms} ORDER BY term").fetchall()])
    got = con.execute(
        f"WITH d AS (SELECT term, row_number() OVER (ORDER BY term) - 1 AS code FROM ({terms})) "
        "SELECT p.fact_id, d.code, p.tf FROM postings p JOIN d USING (term) "
        "ORDER BY p.fact_id, d.code"
    ).fetchnumpy()
    tfs = np.asarray(got["tf"], dtype=np.int64)
    cols.tokens.extend(np.repeat(np.asarray(got["code"], dtype=np.int32), tfs))
    slots = cols.slot_of[np.asarray(got["fact_id"], dtype=np.int64)]
    n = cols.n
    cols.table.tokens_end[:n] = np.cumsum(np.bincount(slots, weights=tfs, minlength=n)[:n])
    cols.tokened = n


def _rows(con: duckdb.DuckDBPyConnection, cols: FactColumns) -> None:
    """Version rows in (fact, row_no) order: each fact's rows are consecutive, so ``next`` is
    the following row within the fact and ``first_row`` / ``last_row`` its run's ends."""
    got = con.execute(
        "SELECT fact_id, epoch_us(valid_from) AS valid_from, "
        f"coalesce(epoch_us(valid_to), {_NULL}) AS valid_to, tx_from_seq, "
        f"epoch_us(tx_from) AS tx_from, coalesce(tx_to_seq, {_NULL}) AS tx_to_seq, "
        f"coalesce(epoch_us(tx_to), {_NULL}) AS tx_to FROM fact_versions ORDER BY fact_id, row_no"
    ).fetchnumpy()
    r, f = cols.rows, cols.table
    m = len(got["fact_id"])
    r.reserve(m)
    r.n = m
    slots = cols.slot_of[np.asarray(got["fact_id"], dtype=np.int64)]
    r.slot[:m] = slots
    for name in ("valid_from", "valid_to", "tx_from_seq", "tx_from", "tx_to_seq", "tx_to"):
        getattr(r, name)[:m] = got[name]
    if not m:
        return
    same = slots[1:] == slots[:-1]
    r.next[: m - 1] = np.where(same, np.arange(1, m), -1)
    r.next[m - 1] = -1
    starts = np.flatnonzero(np.concatenate(([True], ~same)))
    ends = np.append(starts[1:], m) - 1
    f.first_row[slots[starts]] = starts
    f.last_row[slots[starts]] = ends


def _vectors_and_episodes(con: duckdb.DuckDBPyConnection, cols: FactColumns) -> None:
    for r in con.execute(
        "SELECT fact_id, namespace, model, dims, vector, seq FROM vectors ORDER BY seq"
    ).fetchall():
        vec = np.asarray(r[4], dtype="<f4").tobytes()
        cols.add_vector(Vector(r[0], r[1], r[2], r[3], vec, r[5]))
    for r in con.execute(
        "SELECT seq, namespace, session_id, turn, role, speaker, text, epoch_us(observed_at), "
        "epoch_us(recorded_at), source_agent, source_ref FROM episodes ORDER BY seq"
    ).fetchall():
        cols.add_episode(Episode(*r))
