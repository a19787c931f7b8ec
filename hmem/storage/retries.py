"""Idempotent retries: a write that carries a client's ``request_id`` is written once.

The store refuses, under its write lock, a batch whose request id its log already holds
(:func:`check_not_written` raises :class:`~hmem.errors.AlreadyWritten` with what that write
logged); the write methods then answer the retry from those events, as the first call answered,
and write nothing. A request id that names a different write is
:class:`~hmem.errors.RequestIdReused`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from eventlog.events import Event, EventBase, FactForgotten, FactRemembered, FactRevised
from eventlog.protocol import Log
from eventlog.sealing import ERASED
from hmem.errors import AlreadyWritten, RequestIdReused
from projections.checks import check_name
from projections.projector import Projector

__all__ = [
    "check_not_written",
    "forgotten_seq",
    "remembered_ids",
    "request_arg",
    "revised_seq",
]


def request_arg(request_id: str | None) -> str | None:
    """A request id checked as an argument (a non-empty name, no control characters)."""
    if request_id is not None:
        check_name("request_id", request_id)
    return request_id


def check_not_written(projector: Projector, log: Log, events: Sequence[EventBase]) -> None:
    """Raise :class:`AlreadyWritten` when an event's request id names a write already logged in
    its namespace (run under the write lock, after folding the log's tail)."""
    asked: set[tuple[str, str]] = set()
    for ev in events:
        request_id = getattr(ev, "request_id", None)
        if request_id is None or (ev.namespace, request_id) in asked:
            continue
        asked.add((ev.namespace, request_id))
        seqs = projector.request_seqs(ev.namespace, request_id)
        earlier = [  # one read over the candidates (a write's events are adjacent)
            old for old in (log.read(seqs[0], seqs[-1]) if seqs else ())
            if old.seq in seqs and getattr(old, "request_id", None) == request_id
            and old.namespace == ev.namespace
        ]
        if earlier:
            raise AlreadyWritten(request_id, earlier)


def remembered_ids(
    retry: AlreadyWritten,
    items: Sequence[FactRemembered],
    repeat_of: Callable[[FactRemembered], int | None],
    key: Callable[[FactRemembered], object],
) -> list[int]:
    """The ids a remember (or remember_many) answered the first time, for its retry ``items``.

    The first call stored its new items, in order, as the events of ``retry``; each other item
    repeated a fact: an earlier item with the same ``key`` (dedup's), or ``repeat_of(item)``, a
    current fact it repeats."""
    earlier = list(retry.events)
    if not all(isinstance(ev, FactRemembered) for ev in earlier):
        raise _reused(retry, "a revise or forget")
    _check_not_erased(retry)
    ids: list[int] = []
    stored: dict[object, int] = {}
    at = 0
    for item in items:
        same = key(item)
        if at < len(earlier) and _same_fact(earlier[at], item):
            ids.append(earlier[at].seq)
            stored.setdefault(same, earlier[at].seq)
            at += 1
            continue
        old = stored.get(same)
        old = repeat_of(item) if old is None else old
        if old is None:
            raise _reused(retry, "other facts")
        ids.append(old)
    if at != len(earlier):
        raise _reused(retry, "other facts")
    return ids


def revised_seq(retry: AlreadyWritten, fact_id: int, text: str) -> int:
    """The new version's id a revise answered the first time."""
    _check_not_erased(retry)
    (ev, *more) = retry.events
    if more or not isinstance(ev, FactRevised) or ev.fact_id != fact_id or ev.text != text:
        raise _reused(retry, "another write")
    return ev.seq


def forgotten_seq(retry: AlreadyWritten, fact_id: int) -> int:
    """The tombstone's seq a forget answered the first time."""
    (ev, *more) = retry.events
    if more or not isinstance(ev, FactForgotten) or ev.fact_id != fact_id:
        raise _reused(retry, "another write")
    return ev.seq


def _same_fact(ev: Event, item: FactRemembered) -> bool:
    assert isinstance(ev, FactRemembered)
    return (ev.subject, ev.text) == (item.subject, item.text)


def _check_not_erased(retry: AlreadyWritten) -> None:
    """A write whose words were erased cannot be told from another write with its id: the id
    is refused whatever the call (never answered as if the call were its retry)."""
    if any(ev.sealed == ERASED for ev in retry.events):
        raise _reused(retry, "a write that was erased")


def _reused(retry: AlreadyWritten, what: str) -> RequestIdReused:
    seqs = ", ".join(str(ev.seq) for ev in retry.events)
    return RequestIdReused(
        f"request id {retry.request_id!r} already names {what} (seq {seqs}); nothing was "
        f"written. Give each new write its own request id"
    )
