"""Time travel on both axes: what was believed at a transaction time, true at a valid time.

Bounds: a row is believed at seq S when ``tx_from_seq <= S < tx_to_seq``; it is valid at V when
``valid_from <= V < valid_to``. A transaction *time* T means the last seq whose tx_at <= T.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

import duckdb

from projections.timeutil import from_us, from_us_opt
from replay.views import Belief

__all__ = ["as_of", "seq_at", "snapshot_query"]

_BELIEVED_AT = """
FROM fact_versions v JOIN facts f ON f.id = v.fact_id
WHERE v.namespace = $ns
  AND v.tx_from_seq <= $seq AND (v.tx_to_seq IS NULL OR v.tx_to_seq > $seq)
"""
_VALID_AT = """
  AND epoch_us(v.valid_from) <= $valid AND (v.valid_to IS NULL OR epoch_us(v.valid_to) > $valid)
"""
_SUPERSEDED = "coalesce(f.superseded_by <= $seq, false) AS superseded"
_BELIEF_COLUMNS = f"""
SELECT f.id, f.subject, f.text, epoch_us(v.valid_from), epoch_us(v.valid_to),
       epoch_us(v.tx_from), f.confidence, {_SUPERSEDED}, f.source_agent, f.source_ref
"""
_SNAPSHOT_COLUMNS = f"""
SELECT f.id, f.namespace, f.subject, f.text, f.confidence, v.valid_from, v.valid_to,
       v.tx_from AS recorded_at, v.tx_from_seq AS recorded_seq, {_SUPERSEDED},
       f.supersedes, f.revision, f.source_agent, f.source_ref, f.entities
"""
_SNAPSHOT_TIMES = ("valid_from", "valid_to", "recorded_at")


def _believed(
    con: duckdb.DuckDBPyConnection, columns: str, namespace: str, seq: int,
    valid_at_us: int | None,
) -> duckdb.DuckDBPyConnection:
    params: dict[str, object] = {"ns": namespace, "seq": seq}
    sql = columns + _BELIEVED_AT
    if valid_at_us is not None:
        sql += _VALID_AT
        params["valid"] = valid_at_us
    return con.execute(sql + " ORDER BY f.id", params)


def seq_at(tx_times: Sequence[int], time_us: int) -> int:
    """The last seq whose tx_at <= time_us (0 if none); tx_times[i] is the tx_at of seq i + 1."""
    return bisect.bisect_right(tx_times, time_us)


def as_of(
    con: duckdb.DuckDBPyConnection, namespace: str, seq: int, valid_at_us: int | None = None
) -> list[Belief]:
    """Rows believed at ``seq`` (and valid at ``valid_at_us`` if given), ordered by fact id."""
    rows = _believed(con, _BELIEF_COLUMNS, namespace, seq, valid_at_us).fetchall()
    return [
        Belief(
            id=r[0], subject=r[1], text=r[2], valid_from=from_us(r[3]),
            valid_to=from_us_opt(r[4]), recorded_at=from_us(r[5]), confidence=r[6],
            superseded=r[7], source_agent=r[8], source_ref=r[9],
        )
        for r in rows
    ]


def snapshot_query(
    con: duckdb.DuckDBPyConnection, namespace: str, seq: int, valid_at_us: int | None = None
) -> duckdb.DuckDBPyRelation:
    """The belief set at ``seq``, materialized as table ``snapshot`` in a new in-memory DuckDB
    database (independent of the store: it stays valid after the store changes or closes).
    Use ``.df()``, ``.fetchall()``, ``.write_parquet(path)`` on the returned relation."""
    data = _believed(con, _SNAPSHOT_COLUMNS, namespace, seq, valid_at_us).fetchnumpy()
    out = duckdb.connect(":memory:")
    out.execute("SET TimeZone = 'UTC'")
    out.register("_snapshot", data)
    casts = ", ".join(f"{c}::TIMESTAMPTZ AS {c}" for c in _SNAPSHOT_TIMES)
    out.execute(f"CREATE TABLE snapshot AS SELECT * REPLACE ({casts}) FROM _snapshot")
    out.unregister("_snapshot")
    return out.table("snapshot")
