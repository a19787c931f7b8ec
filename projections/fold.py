"""The fold: logged events -> the state of every fact (:class:`FactColumns`). The one home of
the semantics; replay, catch-up and every write go through :func:`fold`, and the write path asks
:func:`check` whether the fold would take a batch.

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
* an erasure receipt at seq s: every fact it lists that is still believed is forgotten at s
  (reason "erased (receipt s)"); an embedding whose key was erased leaves no vector.

A fact is *superseded at seq S* if ``superseded_by <= S``. Rows are never removed and
``tx_from`` never changes once written. tests/projections/test_fold.py holds the fold to a plain
object-per-fact fold written from these rules (tests/projections/reference_fold.py), event by event.

How, for any number of events at once:

1. The facts the events create (remember and revise, the bulk of any log) become columns in one
   pass: one ``attrgetter`` per event, transposed, then a string table lookup or ``np.fromiter``
   per column. Each gets a new slot; its first version row is row ``base + j``.
2. The events that touch earlier facts or need the state's checks (revise, forget, embedding,
   episode, erasure, and a remember with ``derived_from``) are walked in seq order over a small
   shadow of what they change (superseded, forgotten, open row, per touched slot), running the
   checks of projections/checks.py. A fact exists for an event only if its id is below the
   event's seq. Their effects are collected as lists.
3. Nothing of the state changes until all events passed their checks; then the columns are
   appended and the collected effects written with fancy indexing.

The first event refused (or out of step) stops the fold: the events before it are folded and a
``ProjectionError`` says which event and why. (Strings of refused events may remain in the
string tables; no fact refers to them.)
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime, timedelta, timezone
from itertools import chain
from operator import attrgetter
from typing import cast

import msgspec
import numpy as np

from eventlog.errors import HmemError
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
from projections.arrays import NONE
from projections.checks import (
    check_derived_from,
    check_erasable,
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
from projections.fold_state import FactColumns, importance_code
from projections.records import Episode, Vector
from projections.timeutil import to_us

EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = timedelta(microseconds=1)

__all__ = ["check", "fold", "fold_all", "touched_facts"]

_REFUSALS = (InvalidInput, FactNotFound, FactAlreadyForgotten, FactSuperseded)
_CREATED = attrgetter(
    "seq", "namespace", "subject", "text", "confidence", "source_agent", "source_ref",
    "entities", "derived_from", "extractor", "prompt_version", "category", "importance",
    "valid_from", "valid_to",
)


def fold(events: Sequence[Event], into: FactColumns, *, gaps: bool = False,
         txs: Sequence[int] | None = None) -> None:
    """Fold ``events`` (the next ones of the log, in order) into ``into``. On the first event
    the fold refuses, the events before it are folded and ``ProjectionError`` names it.
    ``gaps``: the events are one namespace's of the log's next ones (increasing seqs after
    ``into.last_seq``, not every seq); ``txs``: their tx times in microseconds, if the caller
    has them."""
    refused = _Bulk(into, events, gaps=gaps, txs=txs).run()
    if refused is None:
        return
    at, error = refused
    if at:  # raises for an earlier one (an event out of step is found before the checks)
        fold(events[:at], into, gaps=gaps)
    ev = events[at]
    if error is None:
        raise ProjectionError(
            f"event seq {ev.seq} applied after seq {into.last_seq}; the projection is out of "
            f"step with the log. Rebuild it with `hmem replay rebuild`"
        )
    how = "is invalid" if isinstance(error, InvalidInput) else "does not apply"
    raise ProjectionError(f"logged event {ev.seq} {how}: {error}") from error


def fold_all(events: Sequence[Event], into: FactColumns | None = None) -> FactColumns:
    """:func:`fold` into ``into`` (a new, empty state by default); returns the state."""
    cols = FactColumns() if into is None else into
    fold(events, cols)
    return cols


def check(events: Sequence[EventBase], state: FactColumns, *, skip: Sequence[int] = ()) -> None:
    """Whether the fold would take ``events`` as the log's next events, each seen against
    ``state`` as it is before them (a fact or episode one of them makes is not there for the
    others); raises the refusal's own typed error (``FactNotFound``, ``InvalidTime``, ...).
    The events need not be numbered yet; ``skip`` names positions not to check (embeddings
    linked to a fact of the same batch). The write path's one state check."""
    if all(type(ev) is FactRemembered and not ev.derived_from for ev in events):
        return  # nothing of the state to check
    base = state.last_seq
    numbered = [
        cast(Event, msgspec.structs.replace(ev, seq=base + 1 + j))
        for j, ev in enumerate(ev for j, ev in enumerate(events) if j not in skip)
    ]
    refused = _Bulk(state, numbered, isolated=True).run(commit=False)
    if refused is not None and refused[1] is not None:
        raise refused[1]


def touched_facts(events: Iterable[Event]) -> set[int]:
    """Ids of the facts whose rows ``events`` create or change."""
    ids: set[int] = set()
    for ev in events:
        if isinstance(ev, FactRemembered):
            ids.add(ev.seq)
        elif isinstance(ev, FactRevised):
            ids.update((ev.fact_id, ev.seq))
        elif isinstance(ev, FactForgotten):
            ids.add(ev.fact_id)
        elif isinstance(ev, FactsErased):
            ids.update(ev.fact_ids)
    return ids


class _Bulk:
    """One bulk fold of ``events`` into ``cols``: :meth:`run` checks, then commits."""

    def __init__(self, cols: FactColumns, events: Sequence[Event], *, isolated: bool = False,
                 gaps: bool = False, txs: Sequence[int] | None = None) -> None:
        """``isolated``: each event sees only the state before all of them (:func:`check`);
        ``gaps``: the seqs increase but need not be every one (:func:`fold`)."""
        self.cols, self.events, self.isolated, self.gaps = cols, events, isolated, gaps
        self.given_txs = txs
        self.base_seq, self.base_slot, self.base_row = cols.last_seq, cols.n, cols.rows.n

    def run(self, *, commit: bool = True) -> tuple[int, HmemError | None] | None:
        """Check the events, then fold them (unless ``commit`` is false); or the index of the
        first one refused with its error (None: out of step), and nothing folded."""
        events, cols, n = self.events, self.cols, len(self.events)
        if not n:
            return None
        seqs = np.fromiter((e.seq for e in events), dtype=np.int64, count=n)
        if self.gaps:
            bad = np.flatnonzero(seqs <= np.concatenate(([self.base_seq], seqs[:-1])))
        else:
            bad = np.flatnonzero(seqs != np.arange(self.base_seq + 1, self.base_seq + n + 1))
        if bad.size and not self.isolated:
            return int(bad[0]), None
        epoch, us = EPOCH, _US  # projections.timeutil.to_us, inlined
        self.txs = self.given_txs if self.given_txs is not None else [
            (e.tx_at - epoch) // us for e in events]
        made = [i for i, e in enumerate(events) if isinstance(e, (FactRemembered, FactRevised))]
        self.made = made
        # the slots of the facts this batch makes, by seq - base_seq - 1 (-1: made none)
        self.new_slot = np.full(int(seqs.max()) - self.base_seq, -1, dtype=np.int64)
        self.new_slot[seqs[made] - self.base_seq - 1] = np.arange(
            self.base_slot, self.base_slot + len(made))
        self.new_ids = seqs[made]
        fields = list(zip(*map(_CREATED, (events[i] for i in made)), strict=True)) or [()] * 15
        (_, namespaces, subjects, self.texts, self.confidence, self.agents_, self.refs_,
         self.entities_, self.derived_, self.extractor, self.prompt_version, self.category,
         self.importance, valid_from, valid_to) = fields
        self.subjects_ = list(subjects)
        self.ns_codes = cols.namespaces.encode(namespaces)
        created = [self.txs[i] for i in made]
        self.vf = [tx if v is None else to_us(v) for v, tx in zip(valid_from, created, strict=True)]
        self.vt = [NONE if v is None else to_us(v) for v in valid_to]
        self.created = created
        # effects of the ordered events, collected
        self.sup: dict[int, tuple[int, int]] = {}  # slot -> (superseding seq, tx)
        self.forgotten: dict[int, tuple[int, int, str | None]] = {}  # slot -> seq, tx, reason
        self.open: dict[int, int] = {}  # slot -> its open row (-1: none), once touched
        self.last: dict[int, int] = {}  # slot -> its last row, once it got a second
        self.links: list[tuple[int, int]] = []  # (row, next row)
        self.closes: list[tuple[int, int, int]] = []  # (row, seq, tx)
        self.kept: list[tuple[int, int, int, int, int]] = []  # kept rows: slot, vf, vt, seq, tx
        self.revised: dict[int, tuple[int, int, str | None]] = {}  # new slot -> old id, kind, why
        self.vectors: list[Vector] = []
        self.episodes: dict[int, Episode] = {}
        for i, ev in enumerate(events):
            if type(ev) is FactRemembered and not ev.derived_from:
                continue
            try:
                self.step(i, ev)
            except _REFUSALS as e:
                return i, e
        if not commit:
            return None
        self.commit()
        return None

    # ------------------------------------------------------------------ the shadow state

    def _slot(self, fact_id: object, namespace: str, seq: int) -> int:
        last = self.base_seq if self.isolated else seq - 1
        if not isinstance(fact_id, int) or not 0 < fact_id <= last:
            raise FactNotFound(fact_id, namespace)
        slot = self._slot_of(int(fact_id))
        if slot < 0 or self._namespace_code(slot) != self.cols.namespaces.codes.get(namespace):
            raise FactNotFound(fact_id, namespace)
        return slot

    def _slot_of(self, fact_id: int) -> int:
        """The slot of fact ``fact_id`` (made before this batch or by it), -1 for none."""
        if fact_id > self.base_seq:
            return int(self.new_slot[fact_id - self.base_seq - 1])
        return self.cols.slot(fact_id)

    def _namespace_code(self, slot: int) -> int:
        if slot < self.base_slot:
            return int(self.cols.table.namespace[slot])
        return int(self.ns_codes[slot - self.base_slot])

    def _superseded(self, slot: int) -> bool:
        return slot in self.sup or (
            slot < self.base_slot and int(self.cols.table.superseded_by[slot]) != NONE
        )

    def _is_forgotten(self, slot: int) -> bool:
        return slot in self.forgotten or (
            slot < self.base_slot and int(self.cols.table.forgotten_seq[slot]) != NONE
        )

    def _open_row(self, slot: int) -> int:
        row = self.open.get(slot)
        if row is not None:
            return row
        if slot >= self.base_slot:
            return self.base_row + slot - self.base_slot
        row = int(self.cols.table.last_row[slot])
        return row if int(self.cols.rows.tx_to_seq[row]) == NONE else -1

    def _last_row(self, slot: int) -> int:
        row = self.last.get(slot)
        if row is not None:
            return row
        if slot >= self.base_slot:
            return self.base_row + slot - self.base_slot
        return int(self.cols.table.last_row[slot])

    def _row_valid(self, row: int) -> tuple[int, int]:
        j = row - self.base_row
        if j < 0:
            r = self.cols.rows
            return int(r.valid_from[row]), int(r.valid_to[row])
        if j < len(self.made):
            return self.vf[j], self.vt[j]
        kept = self.kept[j - len(self.made)]
        return kept[1], kept[2]

    def _head_of(self, fact_id: int) -> int:
        while True:
            slot = self._slot_of(fact_id)
            nxt = self.sup[slot][0] if slot in self.sup else (
                int(self.cols.table.superseded_by[slot]) if slot < self.base_slot else NONE
            )
            if nxt == NONE:
                return fact_id
            fact_id = nxt

    def _episode_namespace(self, seq: int) -> str | None:
        episode = self.cols.episodes.get(seq)
        if episode is None and not self.isolated:
            episode = self.episodes.get(seq)
        return None if episode is None else episode.namespace

    def _has(self, seq: int, kind: str, namespace: str, at: int) -> bool:
        if kind == "episode":
            return self._episode_namespace(seq) == namespace
        try:
            self._slot(seq, namespace, at)
        except FactNotFound:
            return False
        return True

    # ------------------------------------------------------------------ one ordered event

    def step(self, i: int, ev: Event) -> None:
        seq, tx = ev.seq, self.txs[i]
        if isinstance(ev, (FactRemembered, FactRevised)) and ev.derived_from:
            check_derived_from(ev, self._episode_namespace)
        if isinstance(ev, FactRevised):
            self._revise(ev, seq, tx)
        elif isinstance(ev, FactForgotten):
            slot = self._slot(ev.fact_id, ev.namespace, seq)
            check_forgettable(ev.fact_id, forgotten=self._is_forgotten(slot))
            row = self._open_row(slot)
            if row >= 0:
                self.closes.append((row, seq, tx))
                self.open[slot] = -1
            self.forgotten[slot] = (seq, tx, ev.reason)
        elif isinstance(ev, EmbeddingRecorded):
            self._slot(ev.fact_id, ev.namespace, seq)
            if ev.sealed:  # its key was erased: no vector (eventlog/sealing.py)
                return
            self.vectors.append(
                Vector(ev.fact_id, ev.namespace, ev.model, ev.dims, ev.vector, seq)
            )
        elif isinstance(ev, EpisodeRecorded):
            self.episodes[seq] = Episode(
                seq, ev.namespace, ev.session_id, ev.turn, ev.role, ev.speaker, ev.text,
                tx if ev.observed_at is None else to_us(ev.observed_at), tx,
                ev.source_agent, ev.source_ref,
            )
        elif isinstance(ev, FactsErased):
            check_erasable(ev, lambda i, kind: self._has(i, kind, ev.namespace, seq))
            why = erased_reason(ev)
            for fid in ev.fact_ids:
                slot = self._slot_of(fid)
                row = self._open_row(slot)
                if row >= 0:
                    self.closes.append((row, seq, tx))
                    self.open[slot] = -1
                if not self._is_forgotten(slot):
                    self.forgotten[slot] = (seq, tx, why)
        elif not isinstance(ev, (FactRemembered, RecallServed)):
            raise InvalidInput(f"unknown event type {type(ev).__name__}")

    def _revise(self, ev: FactRevised, seq: int, tx: int) -> None:
        old = self._slot(ev.fact_id, ev.namespace, seq)
        row = self._open_row(old)
        vf, vt = self._row_valid(row) if row >= 0 else (0, NONE)
        check_revisable(
            ev, ev.fact_id, forgotten=self._is_forgotten(old),
            superseded=self._superseded(old), head_of=self._head_of, open_valid_from=vf,
        )
        new = self._slot_of(seq)
        j = new - self.base_slot
        self.closes.append((row, seq, tx))
        self.sup[old] = (seq, tx)
        self.open[old] = -1
        new_vt = NONE if ev.valid_to is None else to_us(ev.valid_to)
        if ev.valid_from is not None:
            change = to_us(ev.valid_from)
            kept = self.base_row + len(self.made) + len(self.kept)
            self.kept.append((old, vf, min(vt, change), seq, tx))
            self.links.append((self._last_row(old), kept))
            self.last[old] = self.open[old] = kept
            self.vf[j], self.vt[j] = change, new_vt
            kind = 1
        else:
            self.vf[j], self.vt[j] = vf, vt if new_vt == NONE else new_vt
            kind = 2
        self.subjects_[j] = ev.subject or self._subject(old)
        self.revised[new] = (int(ev.fact_id), kind, ev.reason)

    def _subject(self, slot: int) -> str:
        if slot < self.base_slot:
            return self.cols.subjects.values[int(self.cols.table.subject[slot])]
        return str(self.subjects_[slot - self.base_slot])

    # ------------------------------------------------------------------ commit

    def commit(self) -> None:
        cols, made, base_slot, base_row = self.cols, self.made, self.base_slot, self.base_row
        f, r, m = cols.table, cols.rows, len(made)
        labels = cols.labels
        names = [
            e or fact_entities(s, t)
            for e, s, t in zip(self.entities_, self.subjects_, self.texts, strict=True)
        ]
        rows_of = np.arange(base_row, base_row + m, dtype=np.int32)
        importance = (
            np.zeros(m, dtype=np.int8) if self.importance.count(None) == m
            else np.fromiter(map(importance_code, self.importance), np.int8, m)
        )
        f.extend({
            "ids": self.new_ids,
            "namespace": self.ns_codes,
            "subject": cols.subjects.encode(self.subjects_),
            "confidence": np.array(self.confidence, dtype=np.float64),
            "source_agent": cols.agents.encode(self.agents_),
            "source_ref": cols.refs.encode(self.refs_),
            "created_at": np.array(self.created, dtype=np.int64),
            "entities_end": _ends(cols.entities.n, names),
            "derived_end": _ends(cols.derived.n, self.derived_),
            "extractor": labels.encode(self.extractor),
            "prompt_version": labels.encode(self.prompt_version),
            "category": labels.encode(self.category),
            "importance": importance,
            "first_row": rows_of,
            "last_row": rows_of,
        })
        for j in np.flatnonzero(importance < 0).tolist():
            cols.odd[base_slot + j] = self.importance[j]
        cols.texts.extend(self.texts)
        cols.entities.extend(cols.entity_names.encode(list(chain.from_iterable(names))))
        if any(self.derived_):
            cols.derived.extend(np.fromiter(chain.from_iterable(self.derived_), np.int64))
        r.extend({
            "slot": np.arange(base_slot, base_slot + m, dtype=np.int32),
            "valid_from": np.array(self.vf, dtype=np.int64),
            "valid_to": np.array(self.vt, dtype=np.int64),
            "tx_from_seq": f.ids[base_slot:base_slot + m],
            "tx_from": f.created_at[base_slot:base_slot + m],
        })
        if self.kept:
            slots, vfs, vts, seqs, txs = zip(*self.kept, strict=True)
            r.extend({"slot": slots, "valid_from": vfs, "valid_to": vts, "tx_from_seq": seqs,
                      "tx_from": txs})
        for slot, (old_id, kind, why) in self.revised.items():
            f.supersedes[slot], f.revision[slot] = old_id, kind
            f.reason[slot] = cols.reasons.code(why)
        if self.closes:  # a column is made whole when first written
            _scatter(r.tx_to_seq, r.tx_to, self.closes)
        for row, nxt in self.links:
            r.next[row] = nxt
        for slot, row in self.last.items():
            f.last_row[slot] = row
        if self.sup:
            _scatter(f.superseded_by, f.superseded_at,
                     [(s, q, t) for s, (q, t) in self.sup.items()])
        for slot, (seq, tx, why) in self.forgotten.items():
            f.forgotten_seq[slot], f.forgotten_at[slot] = seq, tx
            f.forget_reason[slot] = cols.reasons.code(why)
        cols.last_seq = int(self.events[-1].seq)
        for vec in self.vectors:
            cols.add_vector(vec)
        for episode in self.episodes.values():
            cols.add_episode(episode)


def _ends(start: int, runs: Sequence[Sequence[object]]) -> np.ndarray:
    if not any(runs):
        return np.full(len(runs), start, dtype=np.int64)
    lengths = np.fromiter(map(len, runs), np.int64, len(runs))
    return start + np.cumsum(lengths)


def _scatter(seqs: np.ndarray, times: np.ndarray, items: list[tuple[int, int, int]]) -> None:
    """``seqs[i], times[i] = seq, tx`` for each ``(i, seq, tx)``."""
    if items:
        at, seq, tx = (np.array(c, dtype=np.int64) for c in zip(*items, strict=True))
        seqs[at], times[at] = seq, tx
