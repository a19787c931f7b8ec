"""Replayable retrieval: recalls logged as events, listed, and re-run against what they saw.

With recall logging on (``Memory(path, log_recalls=True)``, ``HMEM_LOG_RECALLS=1``, ``hmem mcp
--log-recalls``) every recall the writer answers appends a :class:`~eventlog.events.RecallServed`
event: the query, every parameter that shaped the answer, the ranking knobs, the query's
embedding, the caller, and the hits in rank order. It is written at once but without its own
fsync (it reaches disk with the next write, the batch flusher or close), so logging costs a
recall no disk wait.

Replay (:func:`replay_recall`) folds the log up to the event before the recall into a fresh
in-memory projection (the exact state the recall saw: recall events change no fact) and ranks
the logged query there with the logged knobs, reference time and query vector. The same code
returns the same hits; where it does not (a newer hmem ranks differently), the answer says so
and shows both lists.
"""

from __future__ import annotations

import math
from datetime import datetime

import msgspec
import numpy as np

from eventlog.events import RecallServed
from eventlog.protocol import Log
from eventlog.sealing import is_erased
from hmem.errors import AlreadyErased, InvalidInput
from hmem.recall.hits import RecallResult
from hmem.recall.ranking import RecallConfig, RecallQuery, rank
from hmem.recall.request import NO_BUDGET, RecallRequest, query_at
from projections.projector import Projector
from replay.views import fact_id, pretty_text, quote, source_of, tx

__all__ = [
    "LoggedRecall", "RecallReplay", "ServedHit", "served_event", "recall_view", "replay_lines",
    "replay_recall",
]


class ServedHit(msgspec.Struct, frozen=True):
    """One fact a recall returned: its id, rank (1 = best) and score."""

    id: int
    rank: int
    score: float


class LoggedRecall(msgspec.Struct, frozen=True):
    """A logged recall: what was asked, by whom, when, and what it returned."""

    seq: int
    served_at: datetime
    query: str
    limit: int
    max_tokens: int | None  # None: no budget (limit hits)
    as_of_seq: int | None
    valid_at: datetime | None
    subject: str | None
    model: str | None
    source_agent: str | None
    source_ref: str | None
    hits: tuple[ServedHit, ...]

    def __str__(self) -> str:
        return self.render()

    _repr_pretty_ = pretty_text  # IPython / Jupyter show str()

    def render(self) -> str:
        """One line: seq, time, caller, query, the ids it returned (as ``hmem recalls``)."""
        ids = ", ".join(fact_id(h.id) for h in self.hits) or "nothing"
        return (f"seq {self.seq}  {tx(self.served_at)}  "
                f"[{source_of(self.source_agent, self.source_ref)}]  {quote(self.query)} -> {ids}")


class RecallReplay(msgspec.Struct, frozen=True):
    """A logged recall re-run against the log prefix it saw. ``same`` is True when the replay
    returned the same facts in the same order with the same scores; otherwise ``differences``
    says how they differ and both lists are here to compare."""

    recall: LoggedRecall
    replayed: tuple[ServedHit, ...]
    same: bool
    differences: str = ""
    # events before the recall whose texts were erased since: the replay ranks without their
    # words, so it may differ from what was served for that reason alone
    erased_before: int = 0

    def __str__(self) -> str:
        return "\n".join(replay_lines(self))

    _repr_pretty_ = pretty_text  # IPython / Jupyter show str()


def replay_lines(replay: RecallReplay) -> list[str]:
    """The logged hits beside the replayed ones, and whether they agree."""
    r = replay.recall
    lines = [f"recall seq {r.seq}  {tx(r.served_at)}  {quote(r.query)}"]
    if replay.same:
        lines.append("replayed: the same hits in the same order")
    else:
        lines.append(f"replayed DIFFERENTLY: {replay.differences}")
    if replay.erased_before:
        lines.append(f"note: {replay.erased_before} event(s) before this recall were erased "
                     f"since; the replay ranks without their words (a difference is expected)")
    lines.append(f"  {'rank':>4}  {'logged':>18}  {'replayed':>18}")
    for i in range(max(len(r.hits), len(replay.replayed))):
        was = r.hits[i] if i < len(r.hits) else None
        now = replay.replayed[i] if i < len(replay.replayed) else None
        cell = [f"{fact_id(h.id)} {h.score:.4g}" if h else "-" for h in (was, now)]
        lines.append(f"  {i + 1:>4}  {cell[0]:>18}  {cell[1]:>18}")
    return lines


def served_event(
    query: RecallQuery,
    request: RecallRequest,
    config: RecallConfig,
    result: RecallResult,
    *,
    source_agent: str | None,
    source_ref: str | None,
) -> RecallServed:
    """The event that logs a recall (``tx_at`` and namespace are stamped by the transaction)."""
    vector = b"" if query.vector is None else np.asarray(query.vector, dtype="<f4").tobytes()
    return RecallServed(
        query=request.query, limit=request.limit, max_tokens=request.max_tokens,
        as_of_seq=query.as_of_seq, valid_at=request.valid_at, subject=request.subject,
        reference_time=request.reference_time, config=msgspec.json.encode(config).decode(),
        model=query.model, query_vector=vector, hits=tuple(h.id for h in result),
        scores=tuple(float(h.score) for h in result), source_agent=source_agent,
        source_ref=source_ref,
    )


def recall_view(ev: RecallServed) -> LoggedRecall:
    hits = tuple(
        ServedHit(fid, rank, score)
        for rank, (fid, score) in enumerate(zip(ev.hits, ev.scores, strict=True), 1)
    )
    return LoggedRecall(
        seq=ev.seq, served_at=ev.tx_at, query=ev.query, limit=ev.limit,
        max_tokens=None if ev.max_tokens >= NO_BUDGET else ev.max_tokens,
        as_of_seq=ev.as_of_seq, valid_at=ev.valid_at, subject=ev.subject, model=ev.model,
        source_agent=ev.source_agent,
        source_ref=ev.source_ref, hits=hits,
    )


def logged_recall(log: Log, namespace: str, seq: int) -> RecallServed:
    """The recall event at ``seq`` in ``namespace`` (a typed error for anything else)."""
    if isinstance(seq, bool) or not isinstance(seq, int) or not 1 <= seq <= log.last_seq:
        raise InvalidInput(f"no logged recall at seq {seq!r}; list them with recalls()")
    ev = log.get(seq)
    if not isinstance(ev, RecallServed) or ev.namespace != namespace:
        raise InvalidInput(
            f"seq {seq} is not a recall logged in namespace {namespace!r}; list them with "
            f"recalls()"
        )
    if is_erased(ev):
        raise AlreadyErased(f"the recall at seq {seq} was erased (its query is gone): there is "
                            f"nothing to replay")
    return ev


def logged_config(text: str) -> RecallConfig:
    """The RecallConfig a recall was served with. A recall logged before ``dense_search``
    existed scanned every vector, one logged before ``require_evidence`` returned any
    candidate, one logged before ``subject_boost`` did not favour the subjects a query names
    (and embedded their names), and one logged before ``asker_subject`` did not take the first
    person for anyone: each is replayed that way."""
    fields = msgspec.json.decode(text)
    fields.setdefault("dense_search", "exact")
    fields.setdefault("require_evidence", False)
    fields.setdefault("subject_boost", 0.0)
    fields.setdefault("embed_subject_names", True)
    fields.setdefault("asker_subject", "")
    return msgspec.convert(fields, RecallConfig)


def replay_recall(log: Log, namespace: str, seq: int) -> RecallReplay:
    """Re-run the recall logged at ``seq`` against the log before it (see the module doc)."""
    ev = logged_recall(log, namespace, seq)
    config = logged_config(ev.config)
    projector = Projector()
    events = list(log.read(1, seq - 1))
    erased = sum(map(is_erased, events))
    projector.apply_all(events, bulk=True)
    vector = np.frombuffer(ev.query_vector, dtype="<f4") if ev.model is not None else None
    query = query_at(
        projector.tx_times, ev.query, limit=ev.limit, max_tokens=ev.max_tokens,
        as_of_seq=ev.as_of_seq, valid_at=ev.valid_at, subject=ev.subject,
        reference_time=ev.reference_time, now=ev.tx_at, model=ev.model, vector=vector,
    )
    result = rank(projector, namespace, config, query)
    logged = recall_view(ev)
    replayed = tuple(ServedHit(h.id, rank, float(h.score)) for rank, h in enumerate(result, 1))
    differences = _differences(logged.hits, replayed)
    return RecallReplay(logged, replayed, not differences, differences, erased)


def _differences(logged: tuple[ServedHit, ...], replayed: tuple[ServedHit, ...]) -> str:
    was, now = [h.id for h in logged], [h.id for h in replayed]
    if was != now:
        gone = [i for i in was if i not in now]
        new = [i for i in now if i not in was]
        parts = [f"logged {was}, replayed {now}"]
        if gone:
            parts.append(f"no longer returned: {gone}")
        if new:
            parts.append(f"newly returned: {new}")
        if not gone and not new:
            parts.append("same facts in another order")
        return "; ".join(parts)
    moved = [
        f"{a.id}: {a.score:.6g} -> {b.score:.6g}"
        for a, b in zip(logged, replayed, strict=True)
        if not math.isclose(a.score, b.score, rel_tol=1e-6, abs_tol=1e-12)
    ]
    return f"same order, other scores ({'; '.join(moved)})" if moved else ""
