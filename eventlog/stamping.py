"""How an append numbers, times and chains its events: one rule for every log.

Both logs (the segment files of eventlog/log.py and the table of eventlog/pg_log.py) call
:func:`stamp` under their writer lock with the head they append after, then store what it
returns: each event's payload (the msgpack record, sealed when the log seals) and the hash chain
through it. So an event gets the same seq, tx time, links and chain on either backend.

- Seqs follow the head without a gap.
- Transaction time never goes backwards: an event stamped before the head's tx time (another
  writer appended after this one read its clock) is stamped with the head's; the transaction
  happens now, under the lock.
- ``links[j] = i`` sets event ``j``'s ``fact_id`` to the seq event ``i`` gets (``i < j``), so
  a caller never predicts a seq.
- A payload larger than :data:`~eventlog.format.MAX_RECORD_BYTES`, or a field msgpack cannot
  encode, is :class:`~eventlog.errors.RecordRejected` before anything is written.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, NamedTuple

import msgspec

from eventlog.errors import RecordRejected
from eventlog.events import Event, EventBase, encode_record
from eventlog.format import MAX_RECORD_BYTES, chain_next
from eventlog.sealing import Sealer

__all__ = ["Head", "Stamped", "check_links", "stamp", "stamped_as"]


class Head(NamedTuple):
    """Where a log ends: its last seq, the tx time of that event and the chain after it."""

    seq: int
    tx_at: datetime
    chain: bytes


class Stamped(NamedTuple):
    """What an append stores: the events as logged, their payloads and the chain after each."""

    events: list[Event]
    payloads: list[bytes]
    chains: list[bytes]

    @property
    def head(self) -> Head:
        """The log's head once these are stored."""
        last = self.events[-1]
        return Head(last.seq, last.tx_at, self.chains[-1])


def check_links(links: Mapping[int, int], n: int) -> None:
    """``ValueError`` unless every link points from a later event of the batch to an earlier one."""
    for j, i in links.items():
        if not 0 <= i < j < n:
            raise ValueError(f"link {j} -> {i} must point from a later event to an earlier one")


def stamp(
    events: Sequence[EventBase],
    head: Head,
    links: Mapping[int, int] | None = None,
    *,
    sealer: Sealer | None = None,
) -> Stamped:
    """Number, time, link, encode (and seal, with ``sealer``) ``events`` after ``head``."""
    links = links or {}
    check_links(links, len(events))
    seq, last_tx, chain = head
    stamped: list[Event] = []
    payloads: list[bytes] = []
    chains: list[bytes] = []
    if sealer is not None:  # every key this batch may use is on disk before it is
        sealer.keys.reserve(seq + len(events))
    for j, ev in enumerate(events):
        seq += 1
        event = _numbered(ev, seq, last_tx, stamped[links[j]].seq if j in links else None)
        stamped.append(event)
        last_tx = event.tx_at
    for stored in stamped if sealer is None else sealer.seal_many(stamped):
        payload = encode_record(stored)
        if len(payload) > MAX_RECORD_BYTES:
            raise RecordRejected(
                f"an event of {len(payload):,} bytes exceeds the {MAX_RECORD_BYTES:,}-byte "
                f"record limit; store less in one event (shorter texts, fewer entities, a "
                f"smaller vector)"
            )
        chain = chain_next(chain, payload)
        payloads.append(payload)
        chains.append(chain)
    return Stamped(stamped, payloads, chains)


def stamped_as(events: Sequence[EventBase], first_seq: int, first_tx: datetime,
               links: Mapping[int, int] | None = None) -> list[Event]:
    """``events`` as the append that logged the first of them at ``first_seq``, stamped
    ``first_tx``, returned them from :func:`stamp` (a writer whose events another process
    appended learns only those two)."""
    links = links or {}
    stamped: list[Event] = []
    last_tx = first_tx
    for j, ev in enumerate(events):
        event = _numbered(ev, first_seq + j, last_tx,
                          stamped[links[j]].seq if j in links else None)
        stamped.append(event)
        last_tx = event.tx_at
    return stamped


def _numbered(ev: EventBase, seq: int, last_tx: datetime, fact_id: int | None) -> Event:
    """``ev`` with its seq, its tx time never before ``last_tx``, and its linked fact."""
    changes: dict[str, Any] = {"seq": seq}
    if ev.tx_at < last_tx:
        changes["tx_at"] = last_tx
    if fact_id is not None:
        changes["fact_id"] = fact_id
    event: Event = msgspec.structs.replace(ev, **changes)  # type: ignore[assignment]
    return event
