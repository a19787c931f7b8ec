"""The fold as columns: the state of every fact in numpy arrays, not a Python object per fact.

The semantics are those of :class:`projections.state.FactState` (documented there) and are held
equal to it by tests/test_fact_columns.py: every fact materialised by :meth:`FactColumns.fact`
equals ``FactState.facts[id]`` field by field, rows included, and every event FactState refuses
is refused here with the same error. The layout is described in projections/column_store.py.
Two ways in: :meth:`FactColumns.apply`, one event (live writes), and
:func:`projections.fact_fold.fold_all`, a bulk fold of a list of decoded events (replay).
Vectors and episodes are kept as FactState keeps them (lists and dicts of structs) in this
slice: they are a small part of a store's objects.

This is the projector's state (``projector.state``). Readers that want a fact get a
:class:`Fact` made on demand (``facts[id]``, :meth:`lookup`, :meth:`in_namespace`: the same
surface FactState offers, so callers did not change); the write path's checks read the columns;
the tables are written from the columns (projections/fact_rows.py) and loaded back into them in
bulk (projections/column_load.py); the recall indexes are built from them
(projections/index_build.py). Still per object: vectors, episodes and the distinct strings.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

import numpy as np
import numpy.typing as npt

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
from projections.column_store import (
    NONE,
    FactTable,
    Ragged,
    RowTable,
    Strings,
    Texts,
    UniqueStrings,
    grown,
)
from projections.entities import fact_entities
from projections.errors import (
    FactAlreadyForgotten,
    FactNotFound,
    FactSuperseded,
    InvalidInput,
    ProjectionError,
)
from projections.state import Episode, Fact, Row, Vector, subject_key
from projections.timeutil import to_us

__all__ = ["FactColumns", "REVISION_KINDS", "opt"]

REVISION_KINDS = (None, "world", "correction")  # FactTable.revision codes


def opt(value: int) -> int | None:
    """An int64 column's value, with the sentinel read back as None."""
    return None if value == NONE else value


def importance_code(value: int | None) -> int:
    """The int8 code of an importance: 0 None, 1..127 itself, -1 "kept in ``odd``"."""
    if value is None:
        return 0
    return value if type(value) is int and 0 < value < 128 else -1


class FactColumns:
    """All facts folded from events, as columns, with validation of new events against them.

    ``apply`` returns the ids of facts whose rows changed, as ``FactState.apply`` does.
    """

    def __init__(self) -> None:
        self.table = FactTable()
        self.rows = RowTable()
        self.slot_of: npt.NDArray[np.int32] = np.full(16, -1, dtype=np.int32)  # seq -> slot
        self.texts = Texts()
        self.namespaces = Strings()
        self.subjects = Strings()
        self.agents = Strings()  # source_agent
        self.refs = UniqueStrings()  # source_ref: mostly one per fact
        self.labels = Strings()  # extractor, prompt_version, category
        self.reasons = Strings()  # reason, forget_reason
        self.entity_names = Strings()
        self.entities = Ragged("int32")  # codes into entity_names; ends: facts.entities_end
        self.derived = Ragged("int64")  # derived_from seqs; ends: facts.derived_end
        self.terms = Strings()  # the text index's terms
        # each fact's index tokens, codes into terms (projections/fact_tokens.py; the projector
        # sets them): ends facts.tokens_end, set for the first ``tokened`` slots
        self.tokens = Ragged("int32")
        self.tokened = 0
        self.odd: dict[int, int] = {}  # slot -> an importance the int8 column cannot hold
        self.vectors: list[Vector] = []
        self.vector_dims: dict[tuple[str, str], int] = {}
        self.episodes: dict[int, Episode] = {}
        self.sessions: dict[tuple[str, str], list[int]] = {}
        self.last_seq = 0
        self.facts = FactsView(self)

    @property
    def n(self) -> int:
        """The number of facts."""
        return self.table.n

    # ------------------------------------------------------------------ lookup

    def slot(self, fact_id: object) -> int:
        """The slot of fact ``fact_id``, -1 if there is no such fact."""
        if not isinstance(fact_id, int) or not 0 < fact_id <= self.last_seq:
            return -1
        return int(self.slot_of[int(fact_id)])

    def slot_in(self, fact_id: int, namespace: str) -> int:
        """The slot of the fact with this id in this namespace; foreign ids are not found."""
        slot = self.slot(fact_id)
        if slot < 0 or self.namespaces.values[self.table.namespace[slot]] != namespace:
            raise FactNotFound(fact_id, namespace)
        return slot

    def lookup(self, fact_id: int, namespace: str) -> Fact:
        """The fact with this id in this namespace; foreign ids are not found, not resolved."""
        return self.fact_at(self.slot_in(fact_id, namespace))

    def in_namespace(self, namespace: str) -> Iterator[Fact]:
        """This namespace's facts in order of id, each made when it is reached."""
        return map(self.fact_at, self.namespace_slots(namespace).tolist())

    def head_of(self, fact_id: int) -> int:
        """The newest version of the chain that ``fact_id`` belongs to."""
        nxt = int(self.table.superseded_by[self.slot(fact_id)])
        while nxt != NONE:
            fact_id = nxt
            nxt = int(self.table.superseded_by[self.slot(nxt)])
        return fact_id

    # ------------------------------------------------------------------ validation

    def validate(self, ev: EventBase) -> None:
        """Raise a typed error if ``ev`` (stamped with its tx_at) may not be appended now."""
        check_fields(ev)
        self.check_applies(ev)

    def check_applies(self, ev: EventBase) -> None:
        """The checks that depend on the state (as ``FactState.check_applies``)."""
        if isinstance(ev, (FactRemembered, FactRevised)) and ev.derived_from:
            check_derived_from(ev, self._episode_namespace)
        facts = self.table
        if isinstance(ev, FactRevised):
            slot = self.slot_in(ev.fact_id, ev.namespace)
            check_revisable(
                ev, int(facts.ids[slot]), forgotten=int(facts.forgotten_seq[slot]) != NONE,
                superseded=int(facts.superseded_by[slot]) != NONE, head_of=self.head_of,
                open_valid_from=int(self.rows.valid_from[facts.last_row[slot]]),
            )
        elif isinstance(ev, FactForgotten):
            slot = self.slot_in(ev.fact_id, ev.namespace)
            check_forgettable(
                int(facts.ids[slot]), forgotten=int(facts.forgotten_seq[slot]) != NONE
            )
        elif isinstance(ev, EmbeddingRecorded):
            self.slot_in(ev.fact_id, ev.namespace)
        elif isinstance(ev, FactsErased):
            check_erasable(ev, lambda i, kind: self._has(i, kind, ev.namespace))
        elif not isinstance(ev, (FactRemembered, EpisodeRecorded, RecallServed)):
            raise InvalidInput(f"unknown event type {type(ev).__name__}")

    def _episode_namespace(self, seq: int) -> str | None:
        episode = self.episodes.get(seq)
        return None if episode is None else episode.namespace

    def _has(self, seq: int, kind: str, namespace: str) -> bool:
        if kind == "fact":
            slot = self.slot(seq)
            return slot >= 0 and self.namespaces.values[self.table.namespace[slot]] == namespace
        return self._episode_namespace(seq) == namespace

    def check_dims(self, ev: EmbeddingRecorded, batch: dict[tuple[str, str], int]) -> None:
        """As ``FactState.check_dims`` (write path only)."""
        check_dims(self.vector_dims, ev, batch)

    # ------------------------------------------------------------------ incremental fold

    def apply(self, ev: Event, *, validated: bool = False, tx: int | None = None) -> list[int]:
        """Fold one logged event; returns the ids of facts it created or changed.

        ``validated=True`` skips the checks for an event just validated against this state.
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
        seq = ev.seq
        self.slot_of = grown(self.slot_of, seq + 1, -1)
        self.last_seq = seq
        if tx is None:
            tx = to_us(ev.tx_at)
        if isinstance(ev, FactRemembered):
            vf = tx if ev.valid_from is None else to_us(ev.valid_from)
            vt = NONE if ev.valid_to is None else to_us(ev.valid_to)
            slot = self._new_fact(ev, ev.subject, tx)
            self._link_row(slot, vf, vt, seq, tx)
            return [seq]
        if isinstance(ev, FactRevised):
            return self._revise(ev, tx)
        if isinstance(ev, FactForgotten):
            slot = int(self.slot_of[ev.fact_id])
            self._close(int(self.table.last_row[slot]), seq, tx)
            f = self.table
            f.forgotten_seq[slot], f.forgotten_at[slot] = seq, tx
            f.forget_reason[slot] = self.reasons.code(ev.reason)
            return [int(f.ids[slot])]
        if isinstance(ev, EmbeddingRecorded):
            if ev.sealed:  # its key was erased: no vector (eventlog/sealing.py)
                return []
            self.add_vector(Vector(ev.fact_id, ev.namespace, ev.model, ev.dims, ev.vector, seq))
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
            return self._erase(ev, tx)
        raise ProjectionError(f"unknown event type {type(ev).__name__} at seq {ev.seq}")

    def _revise(self, ev: FactRevised, tx: int) -> list[int]:
        seq, f, r = ev.seq, self.table, self.rows
        old = int(self.slot_of[ev.fact_id])
        open_row = int(f.last_row[old])
        self._close(open_row, seq, tx)
        f.superseded_by[old], f.superseded_at[old] = seq, tx
        vf, vt = int(r.valid_from[open_row]), int(r.valid_to[open_row])
        new_vt = NONE if ev.valid_to is None else to_us(ev.valid_to)
        subject = ev.subject or self.subjects.values[f.subject[old]]
        new = self._new_fact(ev, subject, tx)
        if ev.valid_from is not None:
            change = to_us(ev.valid_from)
            self._link_row(old, vf, min(vt, change), seq, tx)
            self._link_row(new, change, new_vt, seq, tx)
            kind = 1
        else:
            self._link_row(new, vf, vt if new_vt == NONE else new_vt, seq, tx)
            kind = 2
        old_id = int(f.ids[old])
        f.supersedes[new], f.revision[new] = old_id, kind
        f.reason[new] = self.reasons.code(ev.reason)
        return [old_id, seq]

    def _erase(self, ev: FactsErased, tx: int) -> list[int]:
        f, why = self.table, self.reasons.code(erased_reason(ev))
        for fid in ev.fact_ids:
            slot = int(self.slot_of[fid])
            self._close(int(f.last_row[slot]), ev.seq, tx)
            if f.forgotten_seq[slot] == NONE:
                f.forgotten_seq[slot], f.forgotten_at[slot], f.forget_reason[slot] = ev.seq, tx, why
        return list(ev.fact_ids)

    def _close(self, row: int, seq: int, tx: int) -> None:
        r = self.rows
        if r.tx_to_seq[row] == NONE:
            r.tx_to_seq[row], r.tx_to[row] = seq, tx

    def _link_row(self, slot: int, vf: int, vt: int, seq: int, tx: int) -> None:
        """A new row of fact ``slot``, after its others: ``[vf, vt) x [seq, open)``."""
        r, f = self.rows, self.table
        i = r.n
        if i == len(r.slot):
            r.reserve(i + 1)
        r.slot[i], r.valid_from[i], r.valid_to[i] = slot, vf, vt
        r.tx_from_seq[i], r.tx_from[i] = seq, tx
        r.n = i + 1
        last = int(f.last_row[slot])
        if last < 0:
            f.first_row[slot] = i
        else:
            r.next[last] = i
        f.last_row[slot] = i

    def _new_fact(self, ev: FactRemembered | FactRevised, subject: str, tx: int) -> int:
        f = self.table
        slot = f.n
        if slot == len(f.ids):
            f.reserve(slot + 1)
        f.n = slot + 1
        self.slot_of[ev.seq] = slot
        f.ids[slot] = ev.seq
        f.namespace[slot] = self.namespaces.code(ev.namespace)
        f.subject[slot] = self.subjects.code(subject)
        self.texts.append(ev.text)
        f.confidence[slot] = ev.confidence
        f.source_agent[slot] = self.agents.code(ev.source_agent)
        f.source_ref[slot] = self.refs.code(ev.source_ref)
        f.created_at[slot] = tx
        names = ev.entities or fact_entities(subject, ev.text)
        f.entities_end[slot] = self.entities.append([self.entity_names.code(e) for e in names])
        f.derived_end[slot] = self.derived.append(ev.derived_from)
        labels = self.labels
        f.extractor[slot] = labels.code(ev.extractor)
        f.prompt_version[slot] = labels.code(ev.prompt_version)
        f.category[slot] = labels.code(ev.category)
        code = importance_code(ev.importance)
        f.importance[slot] = code
        if code < 0:
            self.odd[slot] = ev.importance  # type: ignore[assignment]
        return slot

    # ------------------------------------------------------------------ episodes

    def add_vector(self, vec: Vector) -> None:
        """Keep a recorded vector; the first of a (namespace, model) sets its dimensions."""
        self.vectors.append(vec)
        self.vector_dims.setdefault((vec.namespace, vec.model), vec.dims)

    def add_episode(self, episode: Episode) -> None:
        self.episodes[episode.seq] = episode
        self.sessions.setdefault((episode.namespace, episode.session_id), []).append(episode.seq)

    def episodes_in(self, namespace: str, session_id: str | None = None) -> list[Episode]:
        """This namespace's episodes (of one session, if given), in log order."""
        if session_id is not None:
            return [self.episodes[s] for s in self.sessions.get((namespace, session_id), ())]
        return [e for e in self.episodes.values() if e.namespace == namespace]

    # ------------------------------------------------------------------ reading

    def fact(self, fact_id: int) -> Fact:
        """The fact as a :class:`projections.state.Fact` (what FactState holds for it)."""
        slot = self.slot(fact_id)
        if slot < 0:
            raise KeyError(fact_id)
        return self.fact_at(slot)

    def fact_at(self, slot: int) -> Fact:
        """The fact in ``slot`` as a :class:`projections.state.Fact`."""
        f, item = self.table, int
        rows = []
        r, i = self.rows, item(f.first_row[slot])
        while i >= 0:
            rows.append(Row(
                item(r.valid_from[i]), opt(item(r.valid_to[i])), item(r.tx_from_seq[i]),
                item(r.tx_from[i]), opt(item(r.tx_to_seq[i])), opt(item(r.tx_to[i])),
            ))
            i = item(r.next[i])
        names = self.entity_names.values
        importance: int | None = item(f.importance[slot])
        if importance == 0:
            importance = None
        elif importance == -1:
            importance = self.odd[slot]
        return Fact(
            id=item(f.ids[slot]),
            namespace=self.namespaces.values[f.namespace[slot]],
            subject=self.subjects.values[f.subject[slot]],
            text=self.texts[slot],
            confidence=float(f.confidence[slot]),
            source_agent=self.agents.get(item(f.source_agent[slot])),
            source_ref=self.refs.get(item(f.source_ref[slot])),
            entities=tuple(names[c] for c in self.entities.run(f.entities_end, slot)),
            created_at=item(f.created_at[slot]),
            rows=rows,
            supersedes=opt(item(f.supersedes[slot])),
            revision=REVISION_KINDS[int(f.revision[slot])],
            reason=self.reasons.get(item(f.reason[slot])),
            superseded_by=opt(item(f.superseded_by[slot])),
            superseded_at=opt(item(f.superseded_at[slot])),
            forgotten_seq=opt(item(f.forgotten_seq[slot])),
            forgotten_at=opt(item(f.forgotten_at[slot])),
            forget_reason=self.reasons.get(item(f.forget_reason[slot])),
            doc_len=item(f.doc_len[slot]),
            derived_from=tuple(self.derived.run(f.derived_end, slot)),
            extractor=self.labels.get(item(f.extractor[slot])),
            prompt_version=self.labels.get(item(f.prompt_version[slot])),
            category=self.labels.get(item(f.category[slot])),
            importance=importance,
        )

    def ids(self) -> npt.NDArray[np.int64]:
        """Every fact's id, by slot (ascending)."""
        return self.table.ids[: self.n]

    def namespace_slots(self, namespace: str) -> npt.NDArray[np.intp]:
        """The slots of this namespace's facts, ascending (so in order of id)."""
        code = self.namespaces.codes.get(namespace)
        if code is None:
            return np.zeros(0, dtype=np.intp)
        return np.flatnonzero(self.table.namespace[: self.n] == code)

    def counts(self, namespace: str) -> dict[str, int]:
        """This namespace's facts, current / superseded / forgotten ones and distinct subject
        keys, counted over the columns (no fact is made)."""
        slots = self.namespace_slots(namespace)
        f = self.table
        superseded = f.superseded_by[slots] != NONE
        forgotten = f.forgotten_seq[slots] != NONE
        keys = {subject_key(self.subjects.values[c]) for c in np.unique(f.subject[slots]).tolist()}
        return {
            "facts": len(slots), "current": int((~superseded & ~forgotten).sum()),
            "superseded": int(superseded.sum()), "forgotten": int(forgotten.sum()),
            "subjects": len(keys),
        }

    def entity_count(self, namespace: str) -> int:
        """The number of distinct entities this namespace's facts name."""
        codes, _ = self.entities.gather(self.table.entities_end, self.namespace_slots(namespace))
        return len(np.unique(codes))

    def current_texts(self, namespace: str) -> list[tuple[int, str]]:
        """(id, text) of this namespace's current beliefs, in order of id."""
        slots = np.flatnonzero(self.current_mask(namespace)).tolist()
        ids = self.table.ids
        return [(int(ids[s]), self.texts[s]) for s in slots]

    def namespaces_with_facts(self) -> list[str]:
        """The namespaces that have facts."""
        codes = np.unique(self.table.namespace[: self.n])
        return [self.namespaces.values[c] for c in codes.tolist()]

    def ids_in(self, namespace: str) -> npt.NDArray[np.int64]:
        """The ids of this namespace's facts, ascending."""
        return self.table.ids[self.namespace_slots(namespace)]

    def current_mask(self, namespace: str | None = None) -> npt.NDArray[np.bool_]:
        """By slot: the fact is believed now (a chain head, not forgotten), and in
        ``namespace`` if given."""
        f, n = self.table, self.n
        mask: npt.NDArray[np.bool_] = (f.superseded_by[:n] == NONE) & (
            f.forgotten_seq[:n] == NONE
        )
        if namespace is not None:
            mask &= f.namespace[:n] == self.namespaces.codes.get(namespace, -2)
        return mask

    def believed_rows(self, seq: int, valid_at: int | None = None) -> npt.NDArray[np.intp]:
        """Rows believed at ``seq`` (and valid at ``valid_at`` microseconds if given)."""
        r, n = self.rows, self.rows.n
        mask = (r.tx_from_seq[:n] <= seq) & (seq < r.tx_to_seq[:n])
        if valid_at is not None:
            mask &= (r.valid_from[:n] <= valid_at) & (valid_at < r.valid_to[:n])
        return np.flatnonzero(mask)

    def nbytes(self) -> int:
        """Bytes of the fact and row columns (texts and string tables not counted)."""
        return (
            self.table.nbytes() + self.rows.nbytes() + self.slot_of[: self.last_seq + 1].nbytes
            + self.entities.values[: self.entities.n].nbytes
            + self.derived.values[: self.derived.n].nbytes
            + self.tokens.values[: self.tokens.n].nbytes
        )


class FactsView(Mapping[int, Fact]):
    """``FactState.facts`` over the columns: id -> :class:`Fact`, each made when it is read
    (a copy: changing it changes nothing stored)."""

    __slots__ = ("_cols",)

    def __init__(self, cols: FactColumns) -> None:
        self._cols = cols

    def __getitem__(self, fact_id: int) -> Fact:
        return self._cols.fact(fact_id)

    def __contains__(self, fact_id: object) -> bool:
        return self._cols.slot(fact_id) >= 0

    def __len__(self) -> int:
        return self._cols.n

    def __iter__(self) -> Iterator[int]:
        return iter(self._cols.ids().tolist())
