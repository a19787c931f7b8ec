"""The reference fold: events -> facts with bi-temporal version rows, one object per fact.

The library's fold (projections/fold.py) is held to it event by event
(tests/projections/test_fold.py); it is held to the naive model (tests/stateful/model.py) by
the stateful test through the store. The rules, written plainly:

A fact is one statement; its id is the seq of the event that created it. Each fact has one or
two *version rows*, each a rectangle in the bi-temporal plane::

    valid_from <= world time < valid_to        (valid_to None = still true / open-ended)
    tx_from_seq <= belief seq < tx_to_seq      (tx_to_seq None = still believed)

* remember at seq s: one row [vf, vt) x [s, inf). ``valid_from`` defaults to the tx time.
* revise with valid_from V (the world changed) at seq s: the old row closes at s and the old fact
  gets a new row [vf, min(vt, V)) x [s, inf): it stays believed for its earlier period. The new
  fact gets [V, vt') x [s, inf).
* revise without valid_from (a correction) at seq s: the old row closes at s and the old fact is
  not believed at all from then on; the new fact takes over the old valid period [vf, vt) x [s, inf)
  (or [vf, vt') with an explicit valid_to).
* forget at seq s: the open row closes at s. Nothing is deleted.

A fact is *superseded at seq S* if ``superseded_by <= S``. Rows are never removed and
``tx_from`` never changes once written.
"""

from __future__ import annotations

from collections.abc import Iterable

from eventlog.events import (
    EmbeddingRecorded,
    EpisodeRecorded,
    Event,
    EventBase,
    FactForgotten,
    FactRemembered,
    FactRevised,
    FactsErased,
    RecallServed,
)
from projections.checks import (
    check_derived_from,
    check_dims,
    check_erasable,
    check_fields,
    check_forgettable,
    check_revisable,
    erased_reason,
)
from projections.entities import fact_entities
from projections.errors import (
    FactAlreadyForgotten,
    FactNotFound,
    FactSuperseded,
    InvalidInput,
    ProjectionError,
)
from projections.records import Episode, Fact, Row, Vector
from projections.timeutil import to_us

__all__ = ["FactState"]

class FactState:
    """All facts folded from events, with validation of new events against them.

    ``apply`` returns the ids of facts whose rows changed, so projections can write them.
    """

    def __init__(self) -> None:
        self.facts: dict[int, Fact] = {}
        self.vectors: list[Vector] = []
        # (namespace, model) -> the length of its vectors: fixed by the first one recorded.
        self.vector_dims: dict[tuple[str, str], int] = {}
        self.episodes: dict[int, Episode] = {}
        self.sessions: dict[tuple[str, str], list[int]] = {}  # (namespace, session) -> seqs
        self.last_seq = 0

    # ------------------------------------------------------------------ validation

    def lookup(self, fact_id: int, namespace: str) -> Fact:
        """The fact with this id in this namespace; foreign ids are not found, not resolved."""
        fact = self.facts.get(fact_id) if isinstance(fact_id, int) else None
        if fact is None or fact.namespace != namespace:
            raise FactNotFound(fact_id, namespace)
        return fact

    def validate(self, ev: EventBase) -> None:
        """Raise a typed error if ``ev`` (stamped with its tx_at) may not be appended now."""
        check_fields(ev)
        self.check_applies(ev)

    def check_applies(self, ev: EventBase) -> None:
        """The checks that depend on the state: what the fold needs to apply ``ev`` at all.

        Replay runs only these: an event an older hmem accepted is never refused later because
        a field rule got stricter.
        """
        if isinstance(ev, (FactRemembered, FactRevised)):
            check_derived_from(ev, self._episode_namespace)
        if isinstance(ev, FactRevised):
            old = self.lookup(ev.fact_id, ev.namespace)
            row = old.open_row
            check_revisable(
                ev, old.id, forgotten=old.forgotten_seq is not None,
                superseded=old.superseded_by is not None, head_of=self.head_of,
                # a head that was not forgotten is believed: it has an open row
                open_valid_from=0 if row is None else row.valid_from,
            )
        elif isinstance(ev, FactForgotten):
            fact = self.lookup(ev.fact_id, ev.namespace)
            check_forgettable(fact.id, forgotten=fact.forgotten_seq is not None)
        elif isinstance(ev, EmbeddingRecorded):
            self.lookup(ev.fact_id, ev.namespace)
        elif isinstance(ev, FactsErased):
            check_erasable(ev, lambda i, kind: self._has(i, kind, ev.namespace))
        elif not isinstance(ev, (FactRemembered, EpisodeRecorded, RecallServed)):
            raise InvalidInput(f"unknown event type {type(ev).__name__}")

    def _episode_namespace(self, seq: int) -> str | None:
        episode = self.episodes.get(seq)
        return None if episode is None else episode.namespace

    def _has(self, seq: int, kind: str, namespace: str) -> bool:
        if kind == "fact":
            fact = self.facts.get(seq)
            return fact is not None and fact.namespace == namespace
        return self._episode_namespace(seq) == namespace

    def check_dims(self, ev: EmbeddingRecorded, batch: dict[tuple[str, str], int]) -> None:
        """A vector must have the length of its model's earlier vectors in its namespace (those
        of the state, or of ``batch``: what the same write adds first). Write path only: a
        log written before this rule replays, and recall leaves such vectors out."""
        check_dims(self.vector_dims, ev, batch)

    def head_of(self, fact_id: int) -> int:
        """The newest version of the chain that ``fact_id`` belongs to."""
        fact = self.facts[fact_id]
        while fact.superseded_by is not None:
            fact = self.facts[fact.superseded_by]
        return fact.id

    # ------------------------------------------------------------------ fold

    def apply(self, ev: Event, *, validated: bool = False, tx: int | None = None) -> list[int]:
        """Fold one logged event; returns the ids of facts it created or changed.

        ``validated=True`` skips the checks for an event that was just validated against this
        state (the write path); replay runs :meth:`check_applies`.
        """
        if ev.seq != self.last_seq + 1:
            raise ProjectionError(
                f"event seq {ev.seq} applied after seq {self.last_seq}; the projection is out of "
                f"step with the log. Rebuild it with `hmem replay rebuild`"
            )
        try:
            if not validated:
                self.check_applies(ev)
        except InvalidInput as e:
            raise ProjectionError(f"logged event {ev.seq} is invalid: {e}") from e
        except (FactNotFound, FactAlreadyForgotten, FactSuperseded) as e:
            raise ProjectionError(f"logged event {ev.seq} does not apply: {e}") from e
        self.last_seq = ev.seq
        seq = ev.seq
        if tx is None:
            tx = to_us(ev.tx_at)
        if isinstance(ev, FactRemembered):
            vf = tx if ev.valid_from is None else to_us(ev.valid_from)
            vt = None if ev.valid_to is None else to_us(ev.valid_to)
            self.facts[seq] = self._new_fact(ev, ev.subject, [Row(vf, vt, seq, tx)], tx)
            return [seq]
        if isinstance(ev, FactRevised):
            old = self.facts[ev.fact_id]
            row = old.open_row
            assert row is not None
            row.tx_to_seq, row.tx_to = seq, tx
            old.superseded_by, old.superseded_at = seq, tx
            new_vt = None if ev.valid_to is None else to_us(ev.valid_to)
            if ev.valid_from is not None:
                change = to_us(ev.valid_from)
                kept_to = change if row.valid_to is None else min(row.valid_to, change)
                old.rows.append(Row(row.valid_from, kept_to, seq, tx))
                new_row = Row(change, new_vt, seq, tx)
                kind = "world"
            else:
                new_row = Row(row.valid_from, row.valid_to if new_vt is None else new_vt, seq, tx)
                kind = "correction"
            new = self._new_fact(ev, ev.subject or old.subject, [new_row], tx)
            new.supersedes, new.revision, new.reason = old.id, kind, ev.reason
            self.facts[seq] = new
            return [old.id, seq]
        if isinstance(ev, FactForgotten):
            fact = self.facts[ev.fact_id]
            row = fact.open_row
            if row is not None:
                row.tx_to_seq, row.tx_to = seq, tx
            fact.forgotten_seq, fact.forgotten_at, fact.forget_reason = seq, tx, ev.reason
            return [fact.id]
        if isinstance(ev, EmbeddingRecorded):
            if ev.sealed:  # its key was erased: no vector (eventlog/sealing.py)
                return []
            self.vectors.append(
                Vector(ev.fact_id, ev.namespace, ev.model, ev.dims, ev.vector, seq)
            )
            self.vector_dims.setdefault((ev.namespace, ev.model), ev.dims)
            return []
        if isinstance(ev, EpisodeRecorded):
            self.add_episode(Episode(
                seq, ev.namespace, ev.session_id, ev.turn, ev.role, ev.speaker, ev.text,
                tx if ev.observed_at is None else to_us(ev.observed_at), tx,
                ev.source_agent, ev.source_ref,
            ))
            return []
        if isinstance(ev, RecallServed):
            return []  # a read, not a belief
        if isinstance(ev, FactsErased):
            reason = erased_reason(ev)
            for fid in ev.fact_ids:
                fact = self.facts[fid]
                row = fact.open_row
                if row is not None:
                    row.tx_to_seq, row.tx_to = seq, tx
                if fact.forgotten_seq is None:
                    fact.forgotten_seq, fact.forgotten_at, fact.forget_reason = seq, tx, reason
            return list(ev.fact_ids)
        raise ProjectionError(f"unknown event type {type(ev).__name__} at seq {ev.seq}")

    @staticmethod
    def _new_fact(
        ev: FactRemembered | FactRevised, subject: str, rows: list[Row], tx: int
    ) -> Fact:
        # The lineage (eventlog.events.LINEAGE_FIELDS), written out: this runs once per fact
        # in replay, where a dict of getattr would cost more than the rest of this call.
        return Fact(
            derived_from=ev.derived_from,
            extractor=ev.extractor,
            prompt_version=ev.prompt_version,
            category=ev.category,
            importance=ev.importance,
            id=ev.seq,
            namespace=ev.namespace,
            subject=subject,
            text=ev.text,
            confidence=ev.confidence,
            source_agent=ev.source_agent,
            source_ref=ev.source_ref,
            entities=ev.entities or fact_entities(subject, ev.text),
            created_at=tx,
            rows=rows,
        )

    def in_namespace(self, namespace: str) -> Iterable[Fact]:
        return (f for f in self.facts.values() if f.namespace == namespace)

    def add_episode(self, episode: Episode) -> None:
        self.episodes[episode.seq] = episode
        self.sessions.setdefault((episode.namespace, episode.session_id), []).append(episode.seq)

    def episodes_in(self, namespace: str, session_id: str | None = None) -> list[Episode]:
        """This namespace's episodes (of one session, if given), in log order."""
        if session_id is not None:
            return [self.episodes[s] for s in self.sessions.get((namespace, session_id), ())]
        return [e for e in self.episodes.values() if e.namespace == namespace]
