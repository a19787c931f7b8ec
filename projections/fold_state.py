"""The fold's state: every fact in numpy arrays, not a Python object per fact, and its reads.

Only the fold (:func:`projections.fold.fold`) changes it. Readers that want a fact get a
:class:`~projections.records.Fact` made on demand (``facts[id]``, :meth:`lookup`,
:meth:`in_namespace`); the write path's rules read the columns; the recall indexes are built
from them (projections/index_build.py); the layout is described in projections/arrays.py.
Vectors and episodes are kept as lists and dicts of structs: they are a small part of a
store's objects.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import numpy.typing as npt

from eventlog.events import EmbeddingRecorded
from projections.arrays import NONE, FactTable, Ragged, RowTable, distinct
from projections.checks import check_dims
from projections.errors import FactNotFound
from projections.records import Episode, Fact, Row, Vector, subject_key
from projections.string_columns import Strings, Texts, UniqueStrings

__all__ = [
    "EntityRuns", "FactColumns", "FactsView", "KeptTurns", "REVISION_KINDS", "TermPostings", "opt",
]

REVISION_KINDS = (None, "world", "correction")  # FactTable.revision codes


def _values(column: Any, slots: Sequence[int]) -> list[Any]:
    """``column``'s values at ``slots``: gathered at once from an array, one at a time from a
    column that is not made yet (or for one or two slots, where a gather costs more)."""
    if len(slots) > 2 and isinstance(column, np.ndarray):
        return column[np.asarray(slots, dtype=np.int64)].tolist()  # type: ignore[no-any-return]
    return [column.item(slot) for slot in slots]


def opt(value: int) -> int | None:
    """An int64 column's value, with the sentinel read back as None."""
    return None if value == NONE else value


def importance_code(value: int | None) -> int:
    """The int8 code of an importance: 0 None, 1..127 itself, -1 "kept in ``odd``"."""
    if value is None:
        return 0
    return value if type(value) is int and 0 < value < 128 else -1


class TermPostings(NamedTuple):
    """The postings of the facts at slots ``0 .. docs - 1`` (document i is slot i), term-major:
    term ``codes[g]`` (codes ascending) is held by ``documents[starts[g]:starts[g + 1]]``
    (ascending) with term frequencies ``tfs``, counts in the narrowest unsigned type that holds
    them (projections/index_tokens.py)."""

    codes: npt.NDArray[np.int32]
    starts: npt.NDArray[np.int64]
    documents: npt.NDArray[np.int32]
    tfs: npt.NDArray[np.unsignedinteger[Any]]
    docs: int


class KeptTurns(NamedTuple):
    """The source positions and turn links of the facts at slots ``0 .. docs - 1`` (document
    ``i`` is slot ``i``): each fact's session (a code into ``sessions``, -1: no position) and
    turn, and its ``prev_doc`` / ``next_doc`` (projections/kept_turns.py)."""

    sessions: list[str]
    session: npt.NDArray[np.signedinteger[Any]]  # loaded from a part: as narrow as stored
    turn: npt.NDArray[np.signedinteger[Any]]
    prev_doc: npt.NDArray[np.signedinteger[Any]]
    next_doc: npt.NDArray[np.signedinteger[Any]]

    @property
    def docs(self) -> int:
        return len(self.session)


class EntityRuns(NamedTuple):
    """The facts at slots ``0 .. docs - 1`` (document ``i`` is slot ``i``) by the entities they
    name: entity ``codes[r]`` (codes ascending) is named by ``documents[bounds[r]:bounds[r +
    1]]`` (ascending, once per naming) (projections/kept_entities.py)."""

    codes: npt.NDArray[np.int32]
    bounds: npt.NDArray[np.int64]
    documents: npt.NDArray[np.signedinteger[Any]]
    docs: int


class FactColumns:
    """All facts folded from events, as columns."""

    def __init__(self) -> None:
        self.table = FactTable()
        self.rows = RowTable()
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
        # each fact's index tokens, codes into terms (projections/index_tokens.py; the projector
        # sets them): ends facts.tokens_end, set for the first ``tokened`` slots
        self.tokens = Ragged("int32")
        self.tokened = 0
        # what those tokens make for the first facts, kept (namespace_postings) so that a
        # checkpoint part saves it and a load does not sort them again
        self.postings: TermPostings | None = None
        # the first facts' source positions and turn links (projections/kept_turns.py), kept
        # for the same reason
        self.turns: KeptTurns | None = None
        self.entity_runs: EntityRuns | None = None  # and their entities' documents
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
        """The slot of fact ``fact_id``, -1 if there is no such fact (slots are in id order:
        found by a search of the ids)."""
        if not isinstance(fact_id, int) or not 0 < fact_id <= self.last_seq:
            return -1
        ids = self.table.ids[: self.table.n]
        at = int(ids.searchsorted(fact_id))
        return at if at < len(ids) and int(ids[at]) == fact_id else -1

    def slots(self, ids: object) -> npt.NDArray[np.int64]:
        """The slots of the facts ``ids`` (an array or sequence of ints; -1 for an id that is
        no fact)."""
        wanted = np.asarray(ids, dtype=np.int64)
        held = self.table.ids[: self.table.n]
        if not len(held):
            return np.full(len(wanted), -1, dtype=np.int64)
        at = np.searchsorted(held, wanted).astype(np.int64)
        found = held[np.minimum(at, len(held) - 1)] == wanted
        return np.where(found, at, -1)

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

    # ------------------------------------------------------------------ write rules

    def check_dims(self, ev: EmbeddingRecorded, batch: dict[tuple[str, str], int]) -> None:
        """A vector must have the length of its model's earlier vectors in its namespace (those
        of the state, or of ``batch``: what the same write adds first). Write path only: a
        log written before this rule replays, and recall leaves such vectors out."""
        check_dims(self.vector_dims, ev, batch)

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
        """The fact as a :class:`~projections.records.Fact`."""
        slot = self.slot(fact_id)
        if slot < 0:
            raise KeyError(fact_id)
        return self.fact_at(slot)

    def fact_at(self, slot: int) -> Fact:
        """The fact in ``slot`` as a :class:`~projections.records.Fact`."""
        return self.facts_at([slot])[0]

    def facts_at(self, slots: Sequence[int]) -> list[Fact]:
        """The facts in ``slots`` as :class:`~projections.records.Fact`, each column read once
        for them all (a recall's hits are read together)."""
        f, r = self.table.reader(), self.rows.reader()  # a few facts make no column

        def column(name: str) -> list[Any]:
            return _values(f(name), slots)

        rows: list[list[Row]] = []
        for i in column("first_row"):
            fact_rows = []
            while i >= 0:
                fact_rows.append(Row(
                    r("valid_from").item(i), opt(r("valid_to").item(i)),
                    r("tx_from_seq").item(i), r("tx_from").item(i),
                    opt(r("tx_to_seq").item(i)), opt(r("tx_to").item(i)),
                ))
                i = r("next").item(i)
            rows.append(fact_rows)
        names, namespaces, subjects = (self.entity_names.values, self.namespaces.values,
                                       self.subjects.values)
        agents, refs, reasons, labels = self.agents.get, self.refs.get, self.reasons.get, \
            self.labels.get
        entities_end, derived_end = f("entities_end"), f("derived_end")
        importance = [None if v == 0 else self.odd[slot] if v == -1 else v
                      for v, slot in zip(column("importance"), slots, strict=True)]
        return [
            Fact(
                id=fact_id, namespace=namespaces[namespace], subject=subjects[subject],
                text=self.texts[slot], confidence=confidence, source_agent=agents(agent),
                source_ref=refs(ref),
                entities=tuple(names[c] for c in self.entities.run(entities_end, slot)),
                created_at=created_at, rows=fact_rows, supersedes=opt(supersedes),
                revision=REVISION_KINDS[revision], reason=reasons(reason),
                superseded_by=opt(superseded_by), superseded_at=opt(superseded_at),
                forgotten_seq=opt(forgotten_seq), forgotten_at=opt(forgotten_at),
                forget_reason=reasons(forget_reason), doc_len=doc_len,
                derived_from=tuple(self.derived.run(derived_end, slot)),
                extractor=labels(extractor), prompt_version=labels(prompt_version),
                category=labels(category), importance=fact_importance,
            )
            for (slot, fact_rows, fact_importance, fact_id, namespace, subject, confidence,
                 agent, ref, created_at, supersedes, revision, reason, superseded_by,
                 superseded_at, forgotten_seq, forgotten_at, forget_reason, doc_len, extractor,
                 prompt_version, category) in zip(
                slots, rows, importance, *map(column, (
                    "ids", "namespace", "subject", "confidence", "source_agent", "source_ref",
                    "created_at", "supersedes", "revision", "reason", "superseded_by",
                    "superseded_at", "forgotten_seq", "forgotten_at", "forget_reason",
                    "doc_len", "extractor", "prompt_version", "category",
                )), strict=True)
        ]

    def term_counts(self, fact_ids: Sequence[int] | npt.NDArray[np.int64]
                    ) -> list[dict[str, int]]:
        """The BM25 document (term -> count) of each of ``fact_ids``: the index tokens the
        projector recorded for it (projections/index_tokens.py), no text tokenized again."""
        return [self.slot_term_counts(slot) for slot in self.slots(fact_ids).tolist()]

    def slot_term_counts(self, slot: int) -> dict[str, int]:
        """The BM25 document of the fact at ``slot``, from its recorded index tokens."""
        by_code: dict[int, int] = {}
        for code in self.tokens.run(self.table.tokens_end, slot):
            by_code[code] = by_code.get(code, 0) + 1
        name = self.terms.get
        return {name(code): n for code, n in by_code.items()}  # type: ignore[misc]

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
        keys = {subject_key(self.subjects.values[c]) for c in distinct(f.subject[slots]).tolist()}
        return {
            "facts": len(slots), "current": int((~superseded & ~forgotten).sum()),
            "superseded": int(superseded.sum()), "forgotten": int(forgotten.sum()),
            "subjects": len(keys),
        }

    def entity_count(self, namespace: str) -> int:
        """The number of distinct entities this namespace's facts name."""
        codes, _ = self.entities.gather(self.table.entities_end, self.namespace_slots(namespace))
        return len(distinct(codes))

    def current_texts(self, namespace: str) -> list[tuple[int, str]]:
        """(id, text) of this namespace's current beliefs, in order of id."""
        slots = np.flatnonzero(self.current_mask(namespace)).tolist()
        ids = self.table.ids
        return [(int(ids[s]), self.texts[s]) for s in slots]

    def namespaces_with_facts(self) -> list[str]:
        """The namespaces that have facts."""
        codes = distinct(self.table.namespace[: self.n])
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
            self.table.nbytes() + self.rows.nbytes()
            + self.entities.nbytes() + self.derived.nbytes() + self.tokens.nbytes()
        )


class FactsView(Mapping[int, Fact]):
    """The facts by id: id -> :class:`Fact`, each made when it is read (a copy: changing it
    changes nothing stored)."""

    __slots__ = ("_cols",)

    def __init__(self, cols: FactColumns) -> None:
        self._cols = cols

    def __getitem__(self, fact_id: int) -> Fact:
        return self._cols.fact(fact_id)

    def many(self, fact_ids: Sequence[int]) -> dict[int, Fact]:
        """The facts ``fact_ids`` by id, made together (an id that is no fact is left out)."""
        slots = self._cols.slots(fact_ids).tolist()
        found = [slot for slot in slots if slot >= 0]
        return {fact.id: fact for fact in self._cols.facts_at(found)}

    def __contains__(self, fact_id: object) -> bool:
        return self._cols.slot(fact_id) >= 0

    def __len__(self) -> int:
        return self._cols.n

    def __iter__(self) -> Iterator[int]:
        return iter(self._cols.ids().tolist())
