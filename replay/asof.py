"""Time travel on both axes: what was believed at a transaction time, true at a valid time.

Bounds: a row is believed at seq S when ``tx_from_seq <= S < tx_to_seq``; it is valid at V when
``valid_from <= V < valid_to``. A transaction *time* T means the last seq whose tx_at <= T.
Answered from the fold's version rows in memory.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from datetime import datetime

import duckdb
import numpy as np
import numpy.typing as npt

from projections.arrays import NONE
from projections.fold_state import REVISION_KINDS, FactColumns
from projections.sql_tables import insert, object_column
from projections.timeutil import from_us, from_us_opt
from replay.views import Belief

__all__ = ["as_of", "seq_at", "snapshot_query"]

_SNAPSHOT = """
CREATE TABLE snapshot (
    id BIGINT, namespace VARCHAR, subject VARCHAR, text VARCHAR, confidence DOUBLE,
    valid_from TIMESTAMPTZ, valid_to TIMESTAMPTZ, recorded_at TIMESTAMPTZ, recorded_seq BIGINT,
    superseded BOOLEAN, supersedes BIGINT, revision VARCHAR, source_agent VARCHAR,
    source_ref VARCHAR, entities VARCHAR[]
)
"""


def believed(
    cols: FactColumns, namespace: str, seq: int, valid_at_us: int | None = None
) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """(version rows, their facts' slots) of ``namespace`` believed at ``seq`` (and valid at
    ``valid_at_us`` if given), in order of fact id."""
    rows = cols.believed_rows(seq, valid_at_us)
    slots = cols.rows.slot[rows].astype(np.int64)
    mine = cols.table.namespace[slots] == cols.namespaces.codes.get(namespace, -2)
    rows, slots = rows[mine], slots[mine]
    order = np.argsort(slots, kind="stable")  # slots are in order of id
    return rows[order].astype(np.int64), slots[order]


def seq_at(tx_times: Sequence[int], time_us: int) -> int:
    """The last seq whose tx_at <= time_us (0 if none); tx_times[i] is the tx_at of seq i + 1."""
    return bisect.bisect_right(tx_times, time_us)


def as_of(
    cols: FactColumns, namespace: str, seq: int, valid_at_us: int | None = None
) -> list[Belief]:
    """Rows believed at ``seq`` (and valid at ``valid_at_us`` if given), ordered by fact id."""
    rows, slots = believed(cols, namespace, seq, valid_at_us)
    f, r = cols.table, cols.rows
    out = []
    for row, slot in zip(rows.tolist(), slots.tolist(), strict=True):
        superseded_by = int(f.superseded_by[slot])
        out.append(Belief(
            id=int(f.ids[slot]), subject=cols.subjects.values[f.subject[slot]],
            text=cols.texts[slot], valid_from=from_us(int(r.valid_from[row])),
            valid_to=_opt_time(int(r.valid_to[row])), recorded_at=from_us(int(r.tx_from[row])),
            confidence=float(f.confidence[slot]),
            superseded=superseded_by != NONE and superseded_by <= seq,
            source_agent=cols.agents.get(int(f.source_agent[slot])),
            source_ref=cols.refs.get(int(f.source_ref[slot])),
        ))
    return out


def snapshot_query(
    cols: FactColumns, namespace: str, seq: int, valid_at_us: int | None = None
) -> duckdb.DuckDBPyRelation:
    """The belief set at ``seq``, materialized as table ``snapshot`` in a new in-memory DuckDB
    database (independent of the store: it stays valid after the store changes or closes).
    Use ``.df()``, ``.fetchall()``, ``.write_parquet(path)`` on the returned relation."""
    rows, slots = believed(cols, namespace, seq, valid_at_us)
    f, r = cols.table, cols.rows
    superseded_by = f.superseded_by[slots]
    names = cols.entity_names.values
    data = {
        "id": f.ids[slots],
        "namespace": object_column([namespace] * len(slots)),
        "subject": object_column([cols.subjects.values[c] for c in f.subject[slots].tolist()]),
        "text": object_column([cols.texts[s] for s in slots.tolist()]),
        "confidence": f.confidence[slots],
        "valid_from": r.valid_from[rows],
        "valid_to": np.ma.masked_array(r.valid_to[rows], mask=r.valid_to[rows] == NONE),
        "recorded_at": r.tx_from[rows],
        "recorded_seq": r.tx_from_seq[rows],
        "superseded": (superseded_by != NONE) & (superseded_by <= seq),
        "supersedes": np.ma.masked_array(f.supersedes[slots], mask=f.supersedes[slots] == NONE),
        "revision": object_column([REVISION_KINDS[k] for k in f.revision[slots].tolist()]),
        "source_agent": object_column([cols.agents.get(c) for c in
                                       f.source_agent[slots].tolist()]),
        "source_ref": object_column([cols.refs.get(c) for c in f.source_ref[slots].tolist()]),
        "entities": object_column([
            [names[c] for c in run] for run in cols.entities.runs(f.entities_end, slots)
        ]),
    }
    out = duckdb.connect(":memory:")
    out.execute("SET TimeZone = 'UTC'")
    out.execute(_SNAPSHOT)
    insert(out, "snapshot", data)
    return out.table("snapshot")


def _opt_time(us: int) -> datetime | None:
    return from_us_opt(None if us == NONE else us)
