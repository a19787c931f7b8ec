"""The event log on PostgreSQL (issue 15, first slice): the file log's events and hash chain in
one append-only table, for stores that live on a server teams already run.

- ``hmem_log(seq, payload, chain, tx_us)``: one row per event. ``payload`` is the event's msgpack
  encoding, as in a segment record; ``chain`` the 16-byte hash chain through it
  (:func:`eventlog.format.chain_next` from :data:`~eventlog.format.ZERO_CHAIN`), so a log
  copied either way verifies the same.
- Seqs are a total order without gaps: an append takes a transaction-scoped advisory lock, reads
  the head, numbers its events after it and inserts them in that transaction. Nothing is
  numbered outside it, so a rolled-back or killed append leaves no hole; ``tx_at`` never goes
  back.
- UPDATE, DELETE and TRUNCATE of the table are refused by triggers.
- An acknowledged append is a committed transaction (the server's ``synchronous_commit`` default:
  in its WAL on disk), so it survives the server being killed.

Not yet (issue 15 goes on): sealing (payloads are in the clear here, so ``erase`` is not
available), the projections as tables, namespaces as row-level security, ``Memory(url)``.
Needs the ``postgres`` extra (psycopg 3).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from typing import Any

import msgspec

from eventlog.errors import LogWriteFailed, RecordRejected, ServerLogCorrupted
from eventlog.events import EPOCH, Event, EventBase, decode, encode_record
from eventlog.format import MAX_RECORD_BYTES, ZERO_CHAIN, chain_next

__all__ = ["PgLog", "SCHEMA"]

_LOCK = 0x686D656D  # "hmem": the advisory lock key of appends (and of the schema's creation)

SCHEMA = """
CREATE TABLE IF NOT EXISTS hmem_log (
    seq bigint PRIMARY KEY CHECK (seq > 0),
    payload bytea NOT NULL,
    chain bytea NOT NULL CHECK (length(chain) = 16),
    tx_us bigint NOT NULL
);
CREATE OR REPLACE FUNCTION hmem_log_refuse() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'hmem_log is append-only: % refused', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END $$;
DROP TRIGGER IF EXISTS hmem_log_no_change ON hmem_log;
CREATE TRIGGER hmem_log_no_change BEFORE UPDATE OR DELETE ON hmem_log
    FOR EACH ROW EXECUTE FUNCTION hmem_log_refuse();
DROP TRIGGER IF EXISTS hmem_log_no_truncate ON hmem_log;
CREATE TRIGGER hmem_log_no_truncate BEFORE TRUNCATE ON hmem_log
    FOR EACH STATEMENT EXECUTE FUNCTION hmem_log_refuse();
"""


_MICROSECOND = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc) - EPOCH
_PAGE = 10_000  # rows read per query


def _us(t: datetime) -> int:
    return (t - EPOCH) // _MICROSECOND


class PgLog:
    """An append-only event log in a PostgreSQL database (``url``: a libpq connection string)."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.url = url
        self._psycopg = psycopg
        self._con: Any = psycopg.connect(url, autocommit=True)
        with self._con.transaction():  # one creator at a time: concurrent CREATEs collide
            self._con.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
            self._con.execute(SCHEMA)

    @property
    def last_seq(self) -> int:
        """The newest event's seq (0 for an empty log)."""
        row = self._con.execute("SELECT max(seq) FROM hmem_log").fetchone()
        return int(row[0] or 0)

    def append_many(self, events: Sequence[EventBase]) -> list[Event]:
        """Number, stamp and append ``events`` as one transaction; returns them as logged.
        ``tx_at`` becomes the latest of the event's own, the log's last and the previous
        event's. All or nothing."""
        if not events:
            return []
        try:
            with self._con.transaction():
                self._con.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
                head = self._con.execute(
                    "SELECT seq, chain, tx_us FROM hmem_log ORDER BY seq DESC LIMIT 1"
                ).fetchone()
                seq, chain, last_us = head or (0, ZERO_CHAIN, 0)
                chain = bytes(chain)
                stamped: list[Event] = []
                rows = []
                for ev in events:
                    seq += 1
                    tx_us = max(_us(ev.tx_at), last_us)
                    tx_at = EPOCH + tx_us * _MICROSECOND
                    event = msgspec.structs.replace(ev, seq=seq, tx_at=tx_at)
                    payload = encode_record(event)
                    if len(payload) > MAX_RECORD_BYTES:
                        raise RecordRejected(
                            f"an event of {len(payload):,} bytes exceeds the "
                            f"{MAX_RECORD_BYTES:,}-byte record limit"
                        )
                    chain = chain_next(chain, payload)
                    rows.append((seq, payload, chain, tx_us))
                    stamped.append(event)  # type: ignore[arg-type]
                    last_us = tx_us
                with self._con.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO hmem_log (seq, payload, chain, tx_us) VALUES (%s, %s, %s, %s)",
                        rows,
                    )
        except self._psycopg.OperationalError as e:
            raise LogWriteFailed(f"append to {self._where()} failed: {e}") from e
        return stamped

    def read(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[Event]:
        """Events with ``from_seq <= seq <= to_seq``, in order, each checked against the chain
        (``LogCorrupted`` at the first that does not hold, or at a missing seq)."""
        from_seq = max(from_seq, 1)
        before = self._con.execute(
            "SELECT chain FROM hmem_log WHERE seq = %s", (from_seq - 1,)
        ).fetchone()
        chain = ZERO_CHAIN if from_seq == 1 else bytes(before[0]) if before else None
        if chain is None:
            raise ServerLogCorrupted(self._where(), from_seq - 1, "the row is missing")
        last = self.last_seq if to_seq is None else to_seq
        expect = from_seq
        while expect <= last:
            page = self._con.execute(
                "SELECT seq, payload, chain FROM hmem_log WHERE seq >= %s AND seq <= %s "
                "ORDER BY seq LIMIT %s", (expect, last, _PAGE)
            ).fetchall()
            if not page:
                raise ServerLogCorrupted(self._where(), expect, "the row is missing")
            for seq, payload, stored in page:
                if seq != expect:
                    raise ServerLogCorrupted(self._where(), expect, "the row is missing")
                chain = chain_next(chain, payload)
                if chain != bytes(stored):
                    raise ServerLogCorrupted(self._where(), seq, "the hash chain does not hold")
                event = decode(payload)
                if event.seq != seq:
                    raise ServerLogCorrupted(self._where(), seq, f"its event says seq {event.seq}")
                yield event
                expect += 1

    def verify(self) -> int:
        """Read the whole log through its chain; returns the number of events."""
        return sum(1 for _ in self.read())

    def close(self) -> None:
        self._con.close()

    def _where(self) -> str:
        info = self._con.info
        return f"hmem_log in database {info.dbname!r} on {info.host or 'localhost'}"

    def __enter__(self) -> PgLog:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()
