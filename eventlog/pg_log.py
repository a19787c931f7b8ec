"""The event log on PostgreSQL: the file log's events and hash chain in one append-only table,
for stores that live on a server teams already run.

- ``hmem_log(seq, payload, chain, tx_us)``: one row per event. ``payload`` is the event's msgpack
  encoding, as in a segment record; ``chain`` the 16-byte hash chain through it
  (:func:`eventlog.format.chain_next` from :data:`~eventlog.format.ZERO_CHAIN`), so a log
  copied either way verifies the same. Payloads are sealed (:mod:`eventlog.sealing`) when the
  store gives the log a :attr:`sealer` (hmem/storage/server_keys.py), else in the clear.
- Seqs are a total order without gaps: an append holds the store's writer lock (a row lock of
  ``hmem_writer``, which the server lets go if the process dies), reads the head, numbers its
  events after it and inserts them in one transaction. Nothing is numbered outside it, so a
  rolled-back or killed append leaves no hole; ``tx_at`` never goes back.
- UPDATE, DELETE and TRUNCATE of the table are refused by triggers.
- An acknowledged append is a committed transaction (the server's ``synchronous_commit``
  default: in its WAL on disk), so it survives the server being killed.

It is a :class:`~eventlog.protocol.Log` whose writers are all shared (each holds the writer lock
for one write transaction), stamped by :func:`eventlog.stamping.stamp`. An append runs
``then(events)`` inside its transaction, so that the tables derived from it commit with it.
Needs the ``postgres`` extra (psycopg 3).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, nullcontext
from datetime import datetime, timezone
from typing import Any

from eventlog.errors import (
    LogWriteFailed,
    ReadOnlyStore,
    ServerLogCorrupted,
    StoreClosed,
    StoreLocked,
    StoreNotFound,
)
from eventlog.events import EPOCH, Event, EventBase, decode
from eventlog.format import ZERO_CHAIN, chain_next
from eventlog.pg_schema import CREATE_LOCK, SCHEMA, WRITER_LOCK
from eventlog.protocol import Log, Then
from eventlog.sealing import Sealer
from eventlog.segments import ChainHead, Recovery
from eventlog.server_urls import denied, not_connected, redacted, unavailable
from eventlog.stamping import Head, stamp

__all__ = ["PgLog"]

_MICROSECOND = datetime(1970, 1, 1, 0, 0, 0, 1, tzinfo=timezone.utc) - EPOCH
_PAGE = 10_000  # rows read per query
_HEAD = "SELECT seq, chain, tx_us FROM hmem_log ORDER BY seq DESC LIMIT 1"
_INSERT = ("INSERT INTO hmem_log (seq, payload, chain, tx_us) SELECT * FROM "
           "unnest(%b::bigint[], %b::bytea[], %b::bytea[], %b::bigint[])")
# the rows after a seq, read in writing()'s round trip only when the lock was got (a
# transaction skips no row it locked itself)
_TAIL = ("SELECT seq, payload, chain FROM hmem_log WHERE seq > %s AND EXISTS (SELECT 1 FROM "
         "hmem_writer FOR UPDATE SKIP LOCKED) ORDER BY seq LIMIT %s")


def _us(t: datetime) -> int:
    return (t - EPOCH) // _MICROSECOND


class PgLog:
    """An append-only event log in a PostgreSQL database (``url``: a libpq connection string).

    ``read_only``: refuses appends and makes nothing (``StoreNotFound`` when the database has no
    log). ``lock_wait``: seconds a write waits for another writer's transaction before
    ``StoreLocked``. ``then`` hooks see the connection as :attr:`con`.
    """

    shared = True  # every writer takes the lock per write transaction
    fsync_policy = "always"  # what an acknowledged append survives: the server's commit
    sealer: Sealer | None = None  # seals texts on append, opens them on read; None: in the clear

    def __init__(self, url: str, *, read_only: bool = False, lock_wait: float = 10.0) -> None:
        import psycopg

        self.url = url
        self.read_only = read_only
        self.lock_wait = lock_wait
        self.recovery = Recovery()  # a server log has no torn tail to cut
        self._psycopg = psycopg
        self._held = 0  # depth of writing() blocks
        self._closed = False
        # the last event seen (seq, chain, tx_us): by the last refresh, or written here
        self._head: tuple[int, bytes, int] = (0, ZERO_CHAIN, 0)
        self._chains: dict[int, bytes] = {}  # seq -> chain, of the last two heads seen
        self._fresh = False  # the head was read under the lock this writer holds
        self._tail: tuple[int, list[Any]] = (0, [])  # rows read with the lock: (first seq, rows)
        self._lock_con: Any = None  # the writer lock's own connection (writing())
        try:
            self.con: Any = self._connect()
        except psycopg.OperationalError as e:
            raise not_connected(self.url, e) from e
        try:
            self._check_schema()
            if read_only:
                found: Any = self.con.execute("SELECT to_regclass('hmem_log')").fetchone()
                if found[0] is None:
                    raise StoreNotFound(
                        f"no hmem store in {self.where()}; create one by writing to it"
                    )
            elif not self._made():  # DDL only once: it locks the table against every writer
                with self.con.transaction():  # one creator at a time: concurrent CREATEs collide
                    self.con.execute("SELECT pg_advisory_xact_lock(%s)", (CREATE_LOCK,))
                    # made while this one waited: its DROP TRIGGER would queue behind a
                    # writer's read of hmem_log, and every read of hmem_log behind it
                    if not self._made():
                        self.con.execute(SCHEMA)
            self.refresh()
        except psycopg.errors.InsufficientPrivilege as e:
            refused = denied(self.url, self.con.info.user, self.read_only, e)
            self.con.close()
            raise refused from None
        except psycopg.errors.LockNotAvailable as e:
            locked = StoreLocked(f"another writer of {self.where()} held the log for "
                                 f"{self.lock_wait:g} s while this one opened it; try again")
            self.con.close()
            raise locked from e
        except BaseException:
            self.con.close()
            raise

    def _check_schema(self) -> None:
        """``StoreNotFound`` when the URL's search_path names no schema that exists (the
        tables would have nowhere to be)."""
        schema, path = self.con.execute("SELECT current_schema(), current_setting("
                                        "'search_path')").fetchone()
        if schema is None:
            raise StoreNotFound(
                f"the store at {redacted(self.url)} names no schema that exists (search_path "
                f"{path}); create it first (CREATE SCHEMA name, as the role that will own the "
                f"store) or correct options=-csearch_path=... in the URL"
            )

    def _made(self) -> bool:
        """Whether the log's table, both of its guards and the writers' lock row exist."""
        row = self.con.execute(
            "SELECT count(*), to_regclass('hmem_writer') IS NOT NULL FROM pg_trigger "
            "WHERE tgrelid = to_regclass('hmem_log') "
            "AND tgname IN ('hmem_log_no_change', 'hmem_log_no_truncate')"
        ).fetchone()
        return bool(row and row[0] == 2 and row[1])

    # ------------------------------------------------------------------ where it stands

    @property
    def last_seq(self) -> int:
        """The newest event's seq as of the last :meth:`refresh` or append (0: empty)."""
        return self._head[0]

    @property
    def last_tx_at(self) -> datetime:
        """tx_at of the newest event (the epoch when empty), as :attr:`last_seq`."""
        return EPOCH + self._head[2] * _MICROSECOND

    def __len__(self) -> int:
        return self.last_seq

    @property
    def size_bytes(self) -> int:
        """Bytes the log's table takes on the server (rows, indexes and TOAST)."""
        row = self._execute("SELECT pg_total_relation_size('hmem_log')").fetchone()
        return int(row[0])

    @property
    def segment_paths(self) -> list[Any]:
        return []

    def connection(self) -> Any:
        """The connection (:attr:`con`), made again if the server dropped it."""
        return self._live()

    @property
    def holding(self) -> bool:
        """Whether this process is inside :meth:`writing` (holds the writer lock)."""
        return self._held > 0

    def refresh(self) -> int:
        """Pick up events other writers appended; returns the last seq. (Inside
        :meth:`writing`, once: nobody else appends while the lock is held.)"""
        if self._held and self._fresh:
            return self.last_seq
        self._set_head(self._execute(_HEAD).fetchone() or (0, ZERO_CHAIN, 0))
        self._fresh = bool(self._held)
        return self.last_seq

    def _set_head(self, head: tuple[Any, ...]) -> None:
        seq, chain, tx_us = int(head[0]), bytes(head[1]), int(head[2])
        # the chain after the head before this one too: a tail read from it needs no query
        self._chains = {self._head[0]: self._head[1], seq: chain}
        self._head = (seq, chain, tx_us)

    def head(self) -> ChainHead:
        """The last seq and the hash chain after it (see :class:`~eventlog.segments.ChainHead`)."""
        seq = self.last_seq
        return ChainHead(seq, self.chain_at(seq).hex() if seq else "")

    def position(self, seq: int) -> tuple[int, int] | None:
        """None: a log of rows is found by seq (see :class:`eventlog.protocol.Log`)."""
        return None

    def chain_at(self, seq: int) -> bytes:
        """The hash chain after the event with this seq (identifies the whole prefix)."""
        if seq == 0:
            return ZERO_CHAIN
        if seq in self._chains:
            return self._chains[seq]
        row = self._execute("SELECT chain FROM hmem_log WHERE seq = %s", (seq,)).fetchone()
        if row is None:
            raise ServerLogCorrupted(self.where(), seq, "the row is missing")
        return bytes(row[0])

    # ------------------------------------------------------------------ write

    @contextmanager
    def writing(self, *, wait: bool = True) -> Iterator[None]:
        """A write transaction of this writer: hold the store's lock (waiting up to
        ``lock_wait`` seconds, or not at all without ``wait``: ``StoreLocked``) and take in
        what others appended; appends inside need no other lock. Reentrant."""
        if self._held:
            self._held += 1
            try:
                yield
            finally:
                self._held -= 1
            return
        self._check_writable()
        lock = self._lock_connection()
        try:
            with lock.pipeline():  # one round trip: the lock, then the head it guards
                lock.execute("BEGIN")
                # not waiting: SKIP LOCKED answers no row instead of an error that would
                # abort the pipeline; never prepared (a statement an error skips is not made)
                got = lock.execute(WRITER_LOCK + ("" if wait else " SKIP LOCKED"),
                                   prepare=False)
                cursor = lock.execute(_HEAD, prepare=False)  # read once the pipeline synced
                # what others appended since this writer's last look (its caller reads it
                # next), when the lock was got: no round trip of its own
                after = self.last_seq
                tail = lock.execute(_TAIL, (after, _PAGE), prepare=False)
            if got.fetchone() is None:
                raise self._psycopg.errors.LockNotAvailable("the writer lock is held")
            head = cursor.fetchone()
        except self._psycopg.errors.LockNotAvailable as e:
            lock.execute("ROLLBACK")
            raise StoreLocked(
                f"another writer of {self.where()} held it for {self.lock_wait:g} s; try again"
            ) from e
        except self._psycopg.errors.InsufficientPrivilege as e:
            lock.execute("ROLLBACK")
            raise denied(self.url, self.con.info.user, self.read_only, e) from None
        except self._psycopg.OperationalError as e:
            raise unavailable(self.url, e) from e
        self._held, self._fresh = 1, True
        self._tail = (after + 1, tail.fetchall())
        self._set_head(head or (0, ZERO_CHAIN, 0))
        try:
            yield
        finally:
            self._held, self._fresh, self._tail = 0, False, (0, [])
            try:
                if not (lock.closed or lock.broken):
                    lock.execute("ROLLBACK")  # the lock transaction wrote nothing
            except self._psycopg.OperationalError:
                pass  # the connection died: the server let the lock go with it

    def _lock_connection(self) -> Any:
        """The connection whose open transaction holds the writers' row lock in
        :meth:`writing` (so that the appends commit on :attr:`con` one by one, as under a
        session lock); made on first use, and again if the server dropped it."""
        if self._lock_con is None or self._lock_con.closed or self._lock_con.broken:
            try:
                self._lock_con = self._connect()
            except self._psycopg.OperationalError as e:
                raise unavailable(self.url, e) from e
        return self._lock_con

    def append(self, event: EventBase) -> Event:
        """Append one event; returns it stamped with its seq."""
        return self.append_many([event])[0]

    def append_many(
        self,
        events: Sequence[EventBase],
        links: Mapping[int, int] | None = None,
        *,
        durable: bool = True,
        then: Then | None = None,
    ) -> list[Event]:
        """Number, stamp (:func:`eventlog.stamping.stamp`) and append ``events`` as one
        transaction; returns them as logged. ``then(stamped)`` runs inside the transaction (an
        error there rolls the append back). All or nothing. ``durable`` is accepted for the
        file log's signature: every commit is durable."""
        del durable
        self._check_writable()
        if not events:
            return []
        con = self._live()
        try:
            # one round trip for the statements, one for the commit (pipeline mode); inside
            # a caller's transaction (a group: hmem/storage/group_commit.py), part of it
            idle = con.info.transaction_status == self._psycopg.pq.TransactionStatus.IDLE
            with con.pipeline(), con.transaction() if idle else nullcontext():
                if self._held and self._fresh:  # the head read under the lock still holds
                    head: tuple[Any, ...] | None = self._head
                else:
                    if not self._held:  # else writing()'s own connection holds the lock
                        con.execute(WRITER_LOCK)
                    head = con.execute(_HEAD).fetchone()
                seq, chain, tx_us = head or (0, ZERO_CHAIN, 0)
                stamped = stamp(events, Head(seq, EPOCH + tx_us * _MICROSECOND, bytes(chain)),
                                links, sealer=self.sealer)
                rows = [
                    (ev.seq, payload, chain, _us(ev.tx_at))
                    for ev, payload, chain in zip(*stamped, strict=True)
                ]
                for start in range(0, len(rows), _PAGE):  # one statement, not one a row
                    chunk = rows[start:start + _PAGE]
                    con.execute(_INSERT, [[row[k] for row in chunk] for k in range(4)])
                if then is not None:
                    then(stamped.events)
        except self._psycopg.errors.LockNotAvailable as e:
            raise StoreLocked(
                f"another writer of {self.where()} held it for {self.lock_wait:g} s; nothing "
                f"of this call was stored: try again"
            ) from e
        except self._psycopg.OperationalError as e:
            raise LogWriteFailed(
                f"append to the store at {redacted(self.url)} failed: {str(e).strip()}. The "
                f"server did not confirm it, so it may have been stored: retry the call with "
                f"the same request_id, which writes it at most once"
            ) from e
        except self._psycopg.Error as e:  # refused by the server: rolled back, nothing stored
            raise LogWriteFailed(
                f"{self.where()} refused the append ({type(e).__name__}: {e}); nothing of "
                f"this call was stored"
            ) from e
        self._set_head(rows[-1][0:1] + rows[-1][2:4])
        return stamped.events

    def sync(self) -> None:
        """Nothing to do: every append is a committed transaction."""

    # ------------------------------------------------------------------ read

    def read(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[Event]:
        """Events with ``from_seq <= seq <= to_seq`` (default: to the last seq as of the last
        refresh), in order and opened, each checked against the chain (``ServerLogCorrupted``
        at the first that does not hold, or at a missing seq)."""
        events = self.read_raw(from_seq, to_seq)
        return events if self.sealer is None else map(self.sealer.open, events)

    def read_raw(self, from_seq: int = 1, to_seq: int | None = None) -> Iterator[Event]:
        """As :meth:`read`, with events as the log stores them (sealed texts stay sealed)."""
        from_seq = max(from_seq, 1)
        last = self.last_seq if to_seq is None else min(to_seq, self.last_seq)
        if from_seq > last:
            return iter(())
        return self._read(from_seq, last, self.chain_at(from_seq - 1))

    def _read(self, expect: int, last: int, chain: bytes) -> Iterator[Event]:
        while expect <= last:
            first, tail = self._tail
            if tail and first == expect:  # read with the lock
                self._tail = (0, [])
                page = [row for row in tail if row[0] <= last]
            else:
                page = self._execute(
                    "SELECT seq, payload, chain FROM hmem_log WHERE seq >= %s AND seq <= %s "
                    "ORDER BY seq LIMIT %s", (expect, last, _PAGE)
                ).fetchall()
            if not page:
                raise ServerLogCorrupted(self.where(), expect, "the row is missing")
            for seq, payload, stored in page:
                if seq != expect:
                    raise ServerLogCorrupted(self.where(), expect, "the row is missing")
                chain = chain_next(chain, payload)
                if chain != bytes(stored):
                    raise ServerLogCorrupted(self.where(), seq, "the hash chain does not hold")
                yield self._decoded(seq, payload)
                expect += 1

    def read_raw_seqs(self, seqs: Sequence[int]) -> Iterator[Event]:
        """The events with ``seqs`` (ascending) as stored, in that order, each row checked
        against the chain with the rows beside it (``ServerLogCorrupted`` else): a row
        changed alone is found; rows changed from one on to the end, chains and all, are
        found by the head (``hmem log verify --expect``), as by :meth:`read`."""
        for at in range(0, len(seqs), _PAGE):
            page = list(seqs[at:at + _PAGE])
            rows = self._execute(
                "SELECT l.seq, l.payload, l.chain, p.chain, n.payload, n.chain FROM hmem_log l "
                "LEFT JOIN hmem_log p ON p.seq = l.seq - 1 LEFT JOIN hmem_log n ON n.seq = "
                "l.seq + 1 WHERE l.seq = ANY(%s) ORDER BY l.seq", (page,)).fetchall()
            found = {int(row[0]): row[1:] for row in rows}
            for seq in page:
                if seq not in found or (seq > 1 and found[seq][2] is None):
                    missing = seq if seq not in found else seq - 1
                    raise ServerLogCorrupted(self.where(), missing, "the row is missing")
                payload, stored, before, after, after_chain = found[seq]
                if chain_next(ZERO_CHAIN if seq == 1 else bytes(before), payload) != bytes(stored):
                    raise ServerLogCorrupted(self.where(), seq, "the hash chain does not hold")
                if after is not None and chain_next(bytes(stored), after) != bytes(after_chain):
                    raise ServerLogCorrupted(self.where(), seq + 1,
                                             "the hash chain does not hold")
                yield self._decoded(seq, payload)

    def get(self, seq: int) -> Event:
        """The event with this seq (opened: see :mod:`eventlog.sealing`)."""
        ev = self.get_raw(seq)
        return ev if self.sealer is None else self.sealer.open(ev)

    def get_raw(self, seq: int) -> Event:
        """The event with this seq as the log stores it (sealed texts stay sealed)."""
        row = self._execute("SELECT payload FROM hmem_log WHERE seq = %s", (seq,)).fetchone()
        if row is None:
            raise KeyError(f"no event with seq {seq} (the log holds 1..{self.last_seq})")
        return self._decoded(seq, row[0])

    def _decoded(self, seq: int, payload: bytes) -> Event:
        """The event in the row ``seq``, which must say it is that seq."""
        try:
            event = decode(payload)
        except ValueError as e:  # msgspec's DecodeError (and ValidationError, a subclass)
            raise ServerLogCorrupted(self.where(), seq, f"it holds no event ({e})") from e
        if event.seq != seq:
            raise ServerLogCorrupted(self.where(), seq, f"its event says seq {event.seq}")
        return event

    def verify(self) -> int:
        """Read the whole log through its chain; returns the number of events."""
        self.refresh()
        return sum(1 for _ in self.read())

    # ------------------------------------------------------------------ lifecycle

    def _execute(self, query: str, params: Sequence[object] | None = None) -> Any:
        try:
            return self._live().execute(query, params)
        except self._psycopg.errors.LockNotAvailable:
            raise
        except self._psycopg.OperationalError as e:
            raise unavailable(self.url, e) from e

    def _live(self) -> Any:
        """The connection, made again if the server dropped it (never inside a write
        transaction: the lock went with the old one)."""
        if self._closed:
            raise StoreClosed("the event log is closed")
        if self.con.closed or self.con.broken:
            if self._held:
                raise LogWriteFailed(
                    f"the connection to {redacted(self.url)} was lost during a write; nothing "
                    f"of it was acknowledged"
                )
            try:
                self.con = self._connect()
            except self._psycopg.OperationalError as e:
                raise unavailable(self.url, e) from e
        return self.con

    def _connect(self) -> Any:
        con = self._psycopg.connect(self.url, autocommit=True)
        con.execute(f"SET lock_timeout = {int(self.lock_wait * 1000)}")  # StoreLocked after it
        return con

    def _check_writable(self) -> None:
        if self._closed:
            raise StoreClosed("the event log is closed")
        if self.read_only:
            raise ReadOnlyStore("this log was opened read-only; open it without read_only to write")

    def close(self) -> None:
        self._closed = True
        self.con.close()
        if self._lock_con is not None:
            self._lock_con.close()

    def where(self) -> str:
        """The log's table and database, for messages."""
        info = self.con.info
        return f"hmem_log in database {info.dbname!r} on {info.host or 'localhost'}"

    def __enter__(self) -> PgLog:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


_: type[Log] = PgLog  # the server log is a Log (eventlog/protocol.py)
