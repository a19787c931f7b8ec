"""The tables of a store on PostgreSQL that hold what is not a fact: the conversation turns
(episodes), the logged recalls and the facts each returned, and the recorded vectors. Written
in the transaction of the append they follow from, as ``hmem_facts`` is
(:mod:`projections.server_tables`), under the same row-level security per namespace.

Each has the columns of the SQL surface's table of the same name (:mod:`projections.sql_tables`,
docs/audit.md), so a query written against ``Memory.sql`` runs on the server with ``hmem_``
before the table's name:

- ``hmem_episodes``: one row per recorded turn (``EpisodeRecorded``): its text, who said it,
  when (``observed_at``, valid time) and when it was recorded.
- ``hmem_recalls``: one row per logged recall (``RecallServed``): the query, everything that
  shaped the answer (``config`` as the JSON text it was logged as: ``jsonb`` could not hold
  every string it may carry), the caller, ``hit_count``. The query's vector stays in the log.
- ``hmem_recall_hits``: one row per fact a logged recall returned, with its rank and score.
- ``hmem_vectors``: one row per recorded embedding, its values as ``real[]`` (float4, the
  float32 values the log holds, exactly): readable in SQL (``vector[1]``, ``unnest``,
  ``array_length``) and castable to pgvector's ``vector`` where that extension is installed,
  where a ``bytea`` would need its layout decoded by every reader.

``hmem_meta.records_seq`` is the last seq these tables hold; it moves with their rows in the
append's transaction. A store made before them has none: its first writer of this version
makes the tables and fills them from the state once, setting it
(:meth:`hmem.storage.server_backend.ServerBackend.after_open`). Texts are where the state keeps
them (as ``hmem_facts`` keeps a fact's), so whatever later empties them there can empty them
here; a NUL shows as U+FFFD, as in ``hmem_facts``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from eventlog.events import EPOCH, EpisodeRecorded, Event, RecallServed
from projections.projector import Projector
from projections.records import Episode, Vector
from projections.sql_insert import insert_rows
from projections.timeutil import to_us

__all__ = [
    "RECORD_TABLES", "RECORD_DDL", "RECORD_WALL", "differences", "embedded_records",
    "records_seq", "rewrite_namespaces", "rewrite_records", "server_records", "write_records",
]

# table -> its columns, in the order of the SQL surface's table of the same name
RECORD_TABLES: dict[str, tuple[str, ...]] = {
    "hmem_episodes": ("seq", "namespace", "session_id", "turn", "role", "speaker", "text",
                      "observed_at", "recorded_at", "source_agent", "source_ref"),
    "hmem_recalls": ("seq", "namespace", "served_at", "query", "hit_limit", "max_tokens",
                     "as_of_seq", "valid_at", "subject", "reference_at", "config", "model",
                     "source_agent", "source_ref", "hit_count"),
    "hmem_recall_hits": ("seq", "namespace", "fact_id", "rank", "score"),
    "hmem_vectors": ("fact_id", "namespace", "model", "dims", "vector", "seq"),
}
_ORDER = {"hmem_episodes": "seq", "hmem_recalls": "seq", "hmem_recall_hits": "seq, rank",
          "hmem_vectors": "seq"}

RECORD_DDL = """
CREATE TABLE IF NOT EXISTS hmem_episodes (
    seq bigint PRIMARY KEY,
    namespace text NOT NULL,
    session_id text NOT NULL,
    turn bigint NOT NULL,
    role text NOT NULL,
    speaker text,
    text text NOT NULL,
    observed_at timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL,
    source_agent text,
    source_ref text
);
CREATE INDEX IF NOT EXISTS hmem_episodes_session ON hmem_episodes (namespace, session_id, turn);
CREATE TABLE IF NOT EXISTS hmem_recalls (
    seq bigint PRIMARY KEY,
    namespace text NOT NULL,
    served_at timestamptz NOT NULL,
    query text NOT NULL,
    hit_limit bigint NOT NULL,
    max_tokens bigint NOT NULL,
    as_of_seq bigint,
    valid_at timestamptz,
    subject text,
    reference_at timestamptz,
    config text NOT NULL,
    model text,
    source_agent text,
    source_ref text,
    hit_count integer NOT NULL
);
CREATE INDEX IF NOT EXISTS hmem_recalls_namespace ON hmem_recalls (namespace, served_at);
CREATE TABLE IF NOT EXISTS hmem_recall_hits (
    seq bigint NOT NULL,
    namespace text NOT NULL,
    fact_id bigint NOT NULL,
    rank integer NOT NULL,
    score double precision NOT NULL,
    PRIMARY KEY (seq, rank)
);
CREATE INDEX IF NOT EXISTS hmem_recall_hits_fact ON hmem_recall_hits (namespace, fact_id);
CREATE TABLE IF NOT EXISTS hmem_vectors (
    fact_id bigint NOT NULL,
    namespace text NOT NULL,
    model text NOT NULL,
    dims bigint NOT NULL,
    vector real[] NOT NULL,
    seq bigint PRIMARY KEY
);
CREATE INDEX IF NOT EXISTS hmem_vectors_fact ON hmem_vectors (namespace, fact_id);
-- a new store starts at 0; one made before these tables has no records_seq until its first
-- writer of this version fills them (after_open)
INSERT INTO hmem_meta SELECT 'records_seq', '0' WHERE NOT EXISTS (SELECT 1 FROM hmem_log)
    ON CONFLICT DO NOTHING;
"""

# The namespace wall on them: the policy of hmem_facts ({schema}: the tables' schema, quoted)
RECORD_WALL = "".join(f"""
ALTER TABLE {table} ENABLE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS hmem_namespace_wall ON {table};
CREATE POLICY hmem_namespace_wall ON {table} FOR SELECT
    USING (namespace = ANY ({{schema}}.hmem_namespaces_of(current_user)));"""
                      for table in RECORD_TABLES)

_US = timedelta(microseconds=1)
_NUL_SHOWN = "\ufffd"  # as projections.server_tables.NUL_SHOWN


def records_seq(con: Any) -> int | None:
    """The last seq the record tables hold; None for a store made before them (or before its
    first writer of this version filled them)."""
    row = con.execute("SELECT value FROM hmem_meta WHERE key = 'records_seq'").fetchone()
    return None if row is None else int(row[0])


def write_records(
    con: Any, projector: Projector, stamped: Sequence[Event], *, after: int
) -> Callable[[], bool]:
    """Send the rows of the records among ``stamped`` (just folded into ``projector``) and
    move ``records_seq`` from ``after`` to the fold's last seq, in the caller's transaction,
    without waiting for the server (it may run in pipeline mode).
    Returns ``done()``: call it once the caller's own statements are sent; when the tables
    were not at ``after`` (a writer that did not keep them appended since), it writes every
    row again and returns True."""
    moved = con.execute(
        "UPDATE hmem_meta SET value = %s WHERE key = 'records_seq' AND value = %s RETURNING 1",
        (str(projector.last_seq), str(after)),
    )
    episodes, recalls, vectors = [], [], []
    for namespace in dict.fromkeys(ev.namespace for ev in stamped):
        state, events = (space := projector.space(namespace)).state, space.events
        new = [ev.seq for ev in stamped if ev.namespace == namespace
               and isinstance(ev, (EpisodeRecorded, RecallServed))]
        episodes += [state.episodes[s] for s in new if s in state.episodes]
        recalls += [events.recalls[s] for s in new if s in events.recalls]
        mine = []
        for vec in reversed(state.vectors):  # the batch's vectors are the last ones
            if vec.seq <= after:
                break
            mine.append(vec)
        vectors += mine[::-1]
    _insert(con, _rows(episodes, recalls, sorted(vectors, key=lambda v: v.seq)))

    def done() -> bool:
        if moved.fetchone() is not None:
            return False
        rewrite_records(con, projector, copy=False)
        return True

    return done


def rewrite_records(con: Any, projector: Projector, *, copy: bool) -> None:
    """Every row of the record tables again, and ``records_seq`` at the fold's last seq: with
    COPY (outside pipeline mode), or as INSERTs."""
    for table in RECORD_TABLES:
        con.execute(f"DELETE FROM {table}")
    con.execute("INSERT INTO hmem_meta VALUES ('records_seq', %s) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(projector.last_seq),))
    rows = embedded_records(projector)
    if not copy:
        _insert(con, rows)
        return
    with con.cursor() as cur:
        for table, table_rows in rows.items():
            with cur.copy(f"COPY {table} ({', '.join(RECORD_TABLES[table])}) FROM STDIN") as cp:
                for row in table_rows:
                    cp.write_row(row)
    con.execute(f"ANALYZE {', '.join(RECORD_TABLES)}")


def rewrite_namespaces(con: Any, projector: Projector, namespaces: Iterable[str]) -> None:
    """Every record row of ``namespaces`` again, from the fold (after an erasure folded them
    again), in the caller's transaction; ``records_seq`` stays."""
    chosen = sorted(set(namespaces))
    for table in RECORD_TABLES:
        con.execute(f"DELETE FROM {table} WHERE namespace = ANY(%s)", (chosen,))
    spaces = [projector.space(namespace) for namespace in chosen]
    _insert(con, _rows([e for s in spaces for e in s.state.episodes.values()],
                       [r for s in spaces for r in s.events.recalls.values()],
                       [v for s in spaces for v in s.state.vectors]))


def _insert(con: Any, rows: dict[str, list[tuple[Any, ...]]]) -> None:
    for table, table_rows in rows.items():
        insert_rows(con, table, RECORD_TABLES[table], table_rows)


def embedded_records(projector: Projector) -> dict[str, list[tuple[Any, ...]]]:
    """Every record table's rows from the state, as the server shows them (times as
    datetimes, a NUL as U+FFFD, vectors as lists of floats)."""
    spaces = [space for _, space in projector.spaces()]
    return _rows([e for s in spaces for e in s.state.episodes.values()],
                 [r for s in spaces for r in s.events.recalls.values()],
                 [v for s in spaces for v in s.state.vectors])


def _rows(
    episodes: Iterable[Episode], recalls: Sequence[RecallServed], vectors: Iterable[Vector]
) -> dict[str, list[tuple[Any, ...]]]:
    """The rows the record tables hold for these records, as sent to the server."""
    return {
        "hmem_episodes": [
            (e.seq, _text(e.namespace), _text(e.session_id), e.turn, _text(e.role),
             _text(e.speaker), _text(e.text), _time(e.observed_at), _time(e.recorded_at),
             _text(e.source_agent), _text(e.source_ref))
            for e in episodes
        ],
        "hmem_recalls": [
            (r.seq, _text(r.namespace), _time(to_us(r.tx_at)), _text(r.query), r.limit,
             r.max_tokens, r.as_of_seq, _opt_time(r.valid_at), _text(r.subject),
             _opt_time(r.reference_time), _text(r.config),
             _text(r.model), _text(r.source_agent), _text(r.source_ref), len(r.hits))
            for r in recalls
        ],
        "hmem_recall_hits": [
            (r.seq, _text(r.namespace), fid, rank, score)
            for r in recalls
            for rank, (fid, score) in enumerate(zip(r.hits, r.scores, strict=True), 1)
        ],
        "hmem_vectors": [
            (v.fact_id, _text(v.namespace), _text(v.model), v.dims,
             np.frombuffer(v.vector, dtype="<f4").tolist(), v.seq)
            for v in vectors
        ],
    }


def server_records(con: Any) -> dict[str, list[tuple[Any, ...]]]:
    """Every record table's rows as the server holds them (empty for a table not made yet)."""
    out: dict[str, list[tuple[Any, ...]]] = {}
    for table, columns in RECORD_TABLES.items():
        if con.execute("SELECT to_regclass(%s)", (table,)).fetchone()[0] is None:
            out[table] = []
            continue
        out[table] = [tuple(r) for r in con.execute(
            f"SELECT {', '.join(columns)} FROM {table} ORDER BY {_ORDER[table]}")]
    return out


def differences(con: Any, projector: Projector) -> dict[str, tuple[int, int]]:
    """Per record table whose rows differ from the state's: (rows missing, rows extra)."""
    out = {}
    wanted = embedded_records(projector)
    for table, got in server_records(con).items():
        have, need = Counter(map(_canonical, got)), Counter(map(_canonical, wanted[table]))
        missing, extra = need - have, have - need
        if missing or extra:
            out[table] = (sum(missing.values()), sum(extra.values()))
    return out


def _canonical(row: tuple[Any, ...]) -> tuple[Any, ...]:
    """A row comparable across the two engines: times in microseconds, a vector as its
    float32 bytes (the server's float4 values read back as floats are those exactly)."""
    return tuple(
        to_us(v) if isinstance(v, datetime)
        else np.asarray(v, dtype="<f4").tobytes() if isinstance(v, list) else v
        for v in row
    )


def _time(us: int) -> datetime:
    return EPOCH + us * _US


def _opt_time(value: datetime | None) -> datetime | None:
    return None if value is None else _time(to_us(value))


def _text(value: str | None) -> str | None:
    return None if value is None else value.replace("\x00", _NUL_SHOWN)
