"""Group commit for a store on a server: the writes of many writer processes numbered and
committed in one transaction, so that eight writers append more than one does.

A write (:meth:`Store.append_batch` outside a :meth:`~eventlog.pg_log.PgLog.writing` block)
first tries the store's writer lock without waiting. Free: the writer *leads* (below) with its
own write first. Held: the write is *staged*, its events (not yet numbered) one row (a *unit*)
of the unlogged table ``hmem_pending``, and its writer waits for a group's ``NOTIFY
hmem_pending``.

A leader, holding the lock, folds what the others appended, locks every pending unit
(``FOR UPDATE``), checks each against the state as a lone write is checked, appends its own
write and the units that pass as one batch (the tables with them), records each unit's result
in its row (the seq of its first event, or why it was refused), and commits once. Its NOTIFY,
delivered at the commit, tells each unit's writer its result and names the oldest unit still
pending, whose writer leads the next group (a writer that hears nothing for a while reads its
row, and leads if the lock is free).

A unit that touches a fact (or a request id) an earlier write of the group touches waits for
the next group, so each write is checked against a state its own checks can assume (as if the
writes ran one after another); a unit that cannot be read or checked is refused, saying why. A
writer whose unit was refused checks its write again against the state it folds now and raises
what those checks raise (or stages it again: the state moved on).

A writer that gives up waiting deletes its row, waiting for a leader that holds it: if the
leader appended it, the write was stored and is returned; if its fate cannot be learned (the
server gone), ``LogWriteFailed`` says to retry with the same ``request_id``; ``StoreLocked`` only
when nothing was stored. A unit whose writer's session has ended is dropped unread, so a writer
that dies before its write is committed wrote nothing, as with a lone write. Leaders delete
settled rows after a minute (an erasure at once) and pending ones after :data:`ORPHANED`. The
rows hold the writes' texts in the clear until then, in a table no role but the store's owner
reads; it is unlogged (in no WAL, replica or base backup), but ``pg_dump`` copies its rows
unless given ``--no-unlogged-table-data``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from contextlib import ExitStack
from datetime import datetime
from typing import Any, Protocol

import msgspec

from eventlog.errors import HmemError, LogWriteFailed, StoreLocked
from eventlog.events import (
    EmbeddingRecorded,
    Event,
    EventBase,
    FactForgotten,
    FactRevised,
    decode,
    encode_record,
)
from eventlog.pg_log import PgLog
from eventlog.stamping import stamped_as
from projections.checks import check_fields
from projections.timeutil import from_us, to_us

__all__ = ["GroupCommit", "GroupedStore", "ORPHANED"]

GROUP = 64  # units a leader takes at once
ORPHANED = 120  # seconds after which a staged unit has no writer waiting for it
_ATTEMPTS = 3  # stagings of one write the leaders refuse while the writer's own checks pass
_NOTICE_WAIT = 0.02  # seconds a staged writer waits for a group's NOTIFY before it looks
_PATIENCE = 0.05  # seconds after which any staged writer leads when the lock is free
_SETTLED_KEPT = 60  # seconds a settled unit's row is kept for a writer that missed its NOTIFY
_REFUSED, _NEXT = -1, -2  # what a NOTIFY tells a unit besides where its events went
_UNIT = msgspec.msgpack.Decoder(tuple[list[bytes], list[tuple[int, int]]])
_encoder = msgspec.msgpack.Encoder()


class GroupedStore(Protocol):
    """What group commit uses of its store (:class:`hmem.storage.store.Store`)."""

    diverged: bool

    def catch_up(self) -> int: ...

    def check_batch(self, events: Sequence[EventBase], links: Mapping[int, int]) -> None: ...

    def append_checked(self, events: Sequence[EventBase], links: Mapping[int, int],
                       settle: Callable[[list[Event]], None]) -> list[Event]: ...

    def maybe_publish(self) -> None: ...

    def finish_interrupted_erasure(self) -> None: ...


class GroupCommit:
    """Group commit of the store ``store`` on the server log ``log`` (see the module
    docstring)."""

    def __init__(self, log: PgLog, store: GroupedStore) -> None:
        self.log = log
        self.store = store
        self._led: dict[int, list[Event]] = {}  # this writer's own unit, when it led
        self._stamped: dict[int, datetime] = {}  # its unit's first tx time, by first seq
        # the session that LISTENs: its (pid, backend start), named by the units it stages
        self._session: tuple[Any, Any] = (None, None)

    def usable(self) -> bool:
        """Whether a write now may go through a group (not inside a writing() block: the lock
        held here would keep the group from ever being led)."""
        return not self.log.holding

    def append(self, events: Sequence[EventBase], links: Mapping[int, int],
               checked: Collection[int]) -> list[Event]:
        """Append ``events`` (``links`` as :meth:`Store.append_batch` takes them) in a group,
        led by this writer or another; returns them as logged."""
        for j, ev in enumerate(events):  # what needs no state fails before anything is staged
            if j not in checked:
                check_fields(ev)
        try:
            led = self._lead(own=(events, links))
            if led is not None:
                return led[1]
            refused = ""
            for _ in range(_ATTEMPTS):
                first, refused = self.wait_for(self.stage(events, links))
                if not refused:
                    return self._mine(first, events, links)
                self.store.catch_up()  # refused by a leader: this writer's own checks, now
                self.store.check_batch(events, links)
        except self._errors() as e:  # the server went away: the write's fate is unknown
            raise LogWriteFailed(
                f"append to {self.log.where()} failed: {' '.join(str(e).split())}. The server "
                f"did not confirm it, so it may have been stored: retry the call with the same "
                f"request_id, which writes it at most once"
            ) from e
        raise LogWriteFailed(f"the write was refused {_ATTEMPTS} times ({refused}); nothing "
                             f"of it was stored")

    # ------------------------------------------------------------------ a staged write

    def stage(self, events: Sequence[EventBase], links: Mapping[int, int]) -> int:
        """Stage a write (its fields checked) for the next group; returns its unit's id."""
        unit = _encoder.encode(([encode_record(ev) for ev in events], sorted(links.items())))
        con = self.log.connection()
        if self._session[0] != con.info.backend_pid:  # a new connection (one was dropped)
            con.execute("LISTEN hmem_pending")
            self._session = con.execute("SELECT pid, backend_start FROM pg_stat_activity "
                                        "WHERE pid = pg_backend_pid()").fetchone()
        for _ in con.notifies(timeout=0):  # earlier groups': none of them can name this unit
            pass
        row = con.execute(  # with its session: a unit whose writer's session ended is dropped
            "INSERT INTO hmem_pending (unit, pid, backend_start) VALUES (%s, %s, %s) "
            "RETURNING id", (unit, *self._session)).fetchone()
        return int(row[0])

    def wait_for(self, uid: int) -> tuple[int, str]:
        """(first seq, "") once the staged unit ``uid`` is appended, (0, why) once it is
        refused; leads a group when it is named next (or is the oldest waiting)."""
        started = time.monotonic()
        deadline = started + self.log.lock_wait
        try:
            while True:
                heard = self._await_group(uid)  # a leader holds the lock: its NOTIFY
                if isinstance(heard, tuple):
                    first, tx_us = heard
                    if tx_us is not None:
                        self._stamped[first] = from_us(tx_us)
                    return (first, "")
                if heard == _NEXT:
                    settled, oldest = None, True
                else:  # refused, or no word of it
                    settled, oldest = self._settled(uid)
                # the oldest waiting leads the next group; any, once the lock is free and it
                # has waited a while (the oldest may be a writer that died)
                if settled is None and (oldest or time.monotonic() - started > _PATIENCE):
                    led = self._lead(unit=uid, wait=oldest)
                    settled = None if led is None else led[0].get(uid)
                if settled is not None:
                    return settled
                if time.monotonic() > deadline:
                    raise StoreLocked(
                        f"another writer of {self.log.where()} held the store for "
                        f"{self.log.lock_wait:g} s; nothing of this call was stored: try again")
        except BaseException as e:  # an interrupt too: a staged write is never left behind
            known, final = self._unstage(uid)  # waits for a leader holding the row
            if not isinstance(e, Exception):
                raise
            if not known:
                raise self._unknown(e) from e
            if final is not None and not final[1]:
                return final  # settled while this writer gave up: stored after all
            raise  # deleted while pending (or refused): nothing of it was stored

    def _unknown(self, e: BaseException) -> LogWriteFailed:
        return LogWriteFailed(
            f"a write to {self.log.where()} waited for its group and could not learn whether "
            f"it was stored ({type(e).__name__}: {e}); retry the call with the same "
            f"request_id, which writes it at most once")

    def _settled(self, uid: int) -> tuple[tuple[int, str] | None, bool]:
        """(the unit's result, None while it is pending; whether it is the oldest pending)."""
        row = self.log.connection().execute(
            "SELECT first_seq, error, id = (SELECT min(id) FROM hmem_pending WHERE first_seq "
            "IS NULL AND error IS NULL) FROM hmem_pending WHERE id = %s", (uid,)).fetchone()
        if row is None:  # dropped: settled long ago (its NOTIFY missed) or taken for orphaned
            raise self._unknown(LookupError(f"staged write {uid} is no longer there"))
        return _result(row[:2]), bool(row[2])

    def _await_group(self, uid: int) -> tuple[int, int | None] | int | None:
        """Until a group's NOTIFY names the unit ``uid`` (or a while): the seq and tx time
        (microseconds) of its first event, :data:`_REFUSED`, :data:`_NEXT` (this writer
        leads the next group), or None (no word of it: look at the row)."""
        con = self.log.connection()
        until = time.monotonic() + _NOTICE_WAIT
        while (left := until - time.monotonic()) > 0:
            for notice in con.notifies(timeout=left, stop_after=1):
                heard = _named(notice.payload, uid)
                if heard is not None:
                    return heard
        return None

    def _unstage(self, uid: int) -> tuple[bool, tuple[int, str] | None]:
        """Delete the unit's row, waiting for a leader holding it (up to three times the lock
        wait): (whether its fate is known, its result: None when it was still pending, so it
        is never appended now). Not known: the server gone, the leader stalled, or the row
        dropped."""
        try:
            con = self.log.connection()
            with con.transaction():
                # a group holds it milliseconds: a leader that holds it this long is gone
                con.execute(f"SET LOCAL lock_timeout = {int(self.log.lock_wait * 3000)}")
                row = con.execute("DELETE FROM hmem_pending WHERE id = %s RETURNING first_seq, "
                                  "error", (uid,)).fetchone()
        except (HmemError, self._errors()):
            return False, None
        if row is None:
            return False, None
        return True, _result(row)

    def _mine(self, first: int, events: Sequence[EventBase], links: Mapping[int, int]
              ) -> list[Event]:
        """This writer's events as logged (``first``: the seq of the first)."""
        led = self._led.pop(first, None)
        if led is not None:
            return led
        # not folded: the state takes them in with the others' at its next catch-up (every
        # read and every lead folds first), so a writer that only writes folds the others'
        # events in batches, when it leads
        tx = self._stamped.pop(first, None)
        if tx is not None:  # stamped here as the leader stamped them: no round trip
            return stamped_as(events, first, tx, links)
        return [self.log.get(seq) for seq in range(first, first + len(events))]

    # ------------------------------------------------------------------ leading

    def _lead(self, *, own: tuple[Sequence[EventBase], Mapping[int, int]] | None = None,
              unit: int = 0, wait: bool = False
              ) -> tuple[dict[int, tuple[int, str]], list[Event]] | None:
        """Take the writer lock (if it is free, or once it is with ``wait``) and append
        ``own`` (raising what its checks raise) with every pending unit that passes its
        checks, in one transaction; returns (the units' results by id, ``own`` as logged).
        None: another writer holds the lock."""
        with ExitStack() as held:
            try:
                held.enter_context(self.log.writing(wait=wait))
            except StoreLocked:
                if wait:
                    raise
                return None
            self.store.catch_up()
            self.store.finish_interrupted_erasure()
            if own is not None:
                self.store.check_batch(*own)
            results, mine, led = self._group(own, unit)
            self._led.update(led)  # committed: this writer's unit as logged
            self.store.maybe_publish()  # after the commit (the lock still held)
            return results, mine

    def _group(self, own: tuple[Sequence[EventBase], Mapping[int, int]] | None, uid: int
               ) -> tuple[dict[int, tuple[int, str]], list[Event], dict[int, list[Event]]]:
        """One group, in one transaction (the writer lock held): (the units' results by id,
        ``own`` as logged, the unit ``uid`` as logged by its first seq). Its NOTIFY tells each
        unit's writer its result and names the oldest unit still pending, whose writer leads
        the next group. Units whose writer's session has ended are dropped unread (a writer
        that died before its write was committed wrote nothing)."""
        log, store = self.log, self.store
        con = log.connection()
        try:
            with con.pipeline(), con.transaction():  # BEGIN and the two: one round trip
                con.execute(  # rows their writers read, or no writer waits for
                    "DELETE FROM hmem_pending p WHERE staged_at < clock_timestamp() - "
                    "make_interval(secs => CASE WHEN first_seq IS NULL AND error IS NULL "
                    "THEN %s ELSE %s END) OR (first_seq IS NULL AND error IS NULL AND pid IS "
                    "NOT NULL AND NOT EXISTS (SELECT 1 FROM pg_stat_activity a WHERE a.pid = "
                    "p.pid AND (a.backend_start = p.backend_start OR a.backend_start IS NULL)))",
                    (ORPHANED, _SETTLED_KEPT))
                rows = con.execute(
                    "SELECT id, unit FROM hmem_pending WHERE first_seq IS NULL AND error "
                    "IS NULL ORDER BY id LIMIT %s FOR UPDATE", (GROUP,)).fetchall()
                results, firsts, mine, led = self._append_group(
                    [(int(i), bytes(u)) for i, u in rows], own, uid)
                if results or rows:  # sent with the COMMIT: no round trip of its own
                    con.execute(
                        "SELECT pg_notify('hmem_pending', %s || coalesce(' next:' || (SELECT "
                        "min(id) FROM hmem_pending WHERE first_seq IS NULL AND error IS NULL "
                        "AND NOT id = ANY(%s)), ''))",
                        (_payload(results, firsts), list(results)))
        except BaseException as e:
            store.diverged = True  # folded, then not committed: loaded again
            if isinstance(e, HmemError) or not isinstance(e, self._errors()):
                raise
            raise LogWriteFailed(f"the group's commit on {log.where()} failed ({e}); "
                                 f"retry with the same request_id") from e
        return results, mine, led

    def _append_group(
        self, rows: list[tuple[int, bytes]],
        own: tuple[Sequence[EventBase], Mapping[int, int]] | None, uid: int,
    ) -> tuple[dict[int, tuple[int, str]], dict[int, datetime], list[Event],
               dict[int, list[Event]]]:
        """Append ``own`` (checked) with each unit of ``rows`` that passes its checks as one
        batch and record every result, in the caller's transaction; returns the results by
        unit id, the tx time of each appended unit's first event, ``own`` as logged and the
        unit ``uid`` as logged (by its first seq). A unit
        that cannot be read or checked (a newer hmem's, say) is refused, saying why."""
        store, con = self.store, self.log.connection()
        refused: dict[int, str] = {}
        taken: list[tuple[int, Sequence[EventBase], Mapping[int, int]]] = []
        touched: set[object] = set()
        if own is not None:
            taken.append((0, *own))
            touched |= set(_touches(own[0]))
        for row_id, unit in rows:
            try:
                payloads, pairs = _UNIT.decode(unit)
                events: list[EventBase] = [decode(p) for p in payloads]
                links = dict(pairs)
                keys = set(_touches(events))
                if keys & touched:
                    continue  # the next group's: it depends on what an earlier write changes
                store.check_batch(events, links)
            except Exception as e:  # noqa: BLE001 (the unit's writer is told, typed there)
                refused[row_id] = f"{type(e).__name__}: {e}"
                continue
            touched |= keys
            taken.append((row_id, events, links))
        if len(taken) > 1:  # checked alone, then as the one batch they are appended as
            merged, links, starts = _merged(taken)
            try:
                store.check_batch(merged, links)
            except HmemError:  # they pass alone, not together: the first one alone
                taken = taken[:1]
        results: dict[int, tuple[int, str]] = {i: (0, why) for i, why in refused.items()}
        firsts: dict[int, datetime] = {}
        mine: list[Event] = []
        led: dict[int, list[Event]] = {}
        if taken:
            merged, links, starts = _merged(taken)

            def settle(stamped: list[Event]) -> None:
                nonlocal mine
                for (row_id, events, _), start in zip(taken, starts, strict=True):
                    logged = stamped[start:start + len(events)]
                    if row_id == 0:
                        mine = logged
                        continue
                    results[row_id] = (logged[0].seq, "")
                    firsts[row_id] = logged[0].tx_at
                    if row_id == uid:
                        led[logged[0].seq] = logged
                done = [i for i, _, _ in taken if i]
                if done:  # not for a lone write
                    con.execute("UPDATE hmem_pending p SET first_seq = r.seq FROM unnest("
                                "%s::bigint[], %s::bigint[]) r(id, seq) WHERE p.id = r.id",
                                (done, [results[i][0] for i in done]))

            store.append_checked(merged, links, settle)
        if refused:
            con.execute("UPDATE hmem_pending p SET error = r.why FROM unnest(%s::bigint[], "
                        "%s::text[]) r(id, why) WHERE p.id = r.id",
                        (list(refused), list(refused.values())))
        return results, firsts, mine, led

    def _errors(self) -> type[Exception]:
        import psycopg

        return psycopg.Error


def _result(row: Any) -> tuple[int, str] | None:
    """A row's (first seq, why refused), None while it is pending."""
    first, error = row
    if error is not None:
        return (0, str(error))
    return None if first is None else (int(first), "")


def _touches(events: Iterable[EventBase]) -> Iterable[object]:
    """What a unit's events depend on another unit not changing: the facts they revise,
    forget or embed, and their request ids."""
    for ev in events:
        if isinstance(ev, (FactRevised, FactForgotten, EmbeddingRecorded)) and ev.fact_id:
            yield ("fact", ev.fact_id)
        request_id = getattr(ev, "request_id", None)
        if request_id is not None:
            yield ("request", ev.namespace, request_id)


def _merged(taken: list[tuple[int, Sequence[EventBase], Mapping[int, int]]]
            ) -> tuple[list[EventBase], dict[int, int], list[int]]:
    """The units as one batch: their events, their links (shifted) and where each starts."""
    merged: list[EventBase] = []
    links: dict[int, int] = {}
    starts: list[int] = []
    for _, events, unit_links in taken:
        start = len(merged)
        starts.append(start)
        merged += events
        links.update({start + j: start + i for j, i in unit_links.items()})
    return merged, links, starts


def _payload(results: Mapping[int, tuple[int, str]], firsts: Mapping[int, datetime]) -> str:
    """A group's NOTIFY: ``id:seq:us`` of each appended unit (the seq of its first event and
    that event's tx time in microseconds: its writer stamps its events as the leader did),
    ``id:!`` of each refused one (the server adds ``next:id``, the oldest unit still
    pending, whose writer leads the next group)."""
    return " ".join(f"{i}:{seq}:{to_us(firsts[i])}" if not why
                    else f"{i}:!" for i, (seq, why) in results.items())


def _named(payload: str, uid: int) -> tuple[int, int | None] | int | None:
    """What a group's NOTIFY says of the unit ``uid`` (see :meth:`GroupCommit._await_group`)."""
    mine, leads = f"{uid}:", f"next:{uid}"
    for word in payload.split():
        if word == leads:
            return _NEXT
        if word.startswith(mine):
            rest = word[len(mine):]
            if rest == "!":
                return _REFUSED
            seq, _, tx_us = rest.partition(":")  # no tx time from an hmem before it sent one
            return int(seq), int(tx_us) if tx_us else None
    return None
