"""The write calls of :class:`~hmem.memory.Memory`: remember, revise, forget, embeddings, and
the LLM layer's ``add`` / ``extract``. Each builds its events and appends them through one
:meth:`~hmem.handle.StoreHandle.transaction`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING, Any, cast

import msgspec
import numpy as np

from eventlog.events import (
    EmbeddingRecorded,
    FactForgotten,
    FactRemembered,
    FactRevised,
)
from hmem.args import (
    MAX_DIMS,
    check_sequence,
    confidence_arg,
    entity_names,
    fact_id,
    text_arg,
)
from hmem.dedup import DedupKey, dedup_key, duplicate_of, duplicates_of
from hmem.errors import AlreadyWritten, EmbedderUnavailable, InvalidInput
from hmem.handle import StoreHandle
from hmem.storage.retries import (
    check_not_written,
    forgotten_seq,
    remembered_ids,
    request_arg,
    revised_seq,
)
from hmem.storage.transaction import Transaction, transaction_time
from hmem.time.arguments import parse_when_opt
from hmem.time.iso import TimeLike
from hmem.views import Written
from projections.checks import MAX_TEXT_CHARS, check_fields
from projections.entities import fact_entities
from projections.timeutil import to_us
from replay.rebuild import Progress

if TYPE_CHECKING:  # the LLM layer is optional and imported only when used
    from hmem.llm.extraction import AddResult, ExtractorSpec
    from hmem.llm.extractor import Extractor

__all__ = ["WriteMethods"]

_REMEMBER_ARGS = frozenset({
    "subject", "text", "valid_from", "valid_to", "confidence", "entities", "source_agent",
    "source_ref",
})


class WriteMethods(StoreHandle):
    """Writes: every call appends events; nothing stored is ever changed."""

    _extractor: Extractor | None = None  # the default LLM extractor, built on first add()

    def _vector_of(self, subject: str, text: str) -> np.ndarray | None:
        if not isinstance(subject, str) or not isinstance(text, str) or not text.strip():
            return None  # validation reports it; never send junk to a model
        vectors = self.embed_facts([(subject, text)])
        return None if vectors is None else vectors[0]

    def remember(
        self,
        subject: str,
        text: str,
        *,
        valid_from: TimeLike | None = None,
        valid_to: TimeLike | None = None,
        confidence: float = 1.0,
        entities: Iterable[str] = (),
        source_agent: str | None = None,
        source_ref: str | None = None,
        dedup: bool = True,
        request_id: str | None = None,
    ) -> Written:
        """Store a new belief about ``subject``; returns its id (a :class:`~hmem.views.Written`:
        an int that also says whether it was stored now, a repeat or a retry).

        ``valid_from`` (when it became true in the world) defaults to now; ``valid_to`` to
        "still true". Entities default to the proper nouns of ``text`` (plus the subject).
        With an embedder in ``embed_mode="background"`` (the default) this returns after the
        log write and the fact's vector follows (``flush()`` waits for it); until then recall
        finds the fact by its words.

        A fact that only repeats a current one (same subject and normalised text, same
        period: see :meth:`duplicate_of`) is not stored again: its id is returned and nothing
        is written. ``dedup=False`` stores it anyway (e.g. conversation turns, each its own
        evidence).

        ``request_id`` (any name the client picks, e.g. a UUID) makes a retry safe: a write with
        a request id the store already holds in this namespace is answered as it was the first
        time and writes nothing, from any process; the same id for a different write is
        ``RequestIdReused``.
        """
        return self._append_facts([self._remembered(dict(
            subject=subject, text=text, valid_from=valid_from, valid_to=valid_to,
            confidence=confidence, entities=entities, source_agent=source_agent,
            source_ref=source_ref,
        ), 0)], dedup=dedup, request_id=request_id)[0]

    def remember_many(
        self, facts: Iterable[dict[str, Any]], *, dedup: bool = True,
        request_id: str | None = None,
    ) -> list[Written]:
        """Remember many facts as one write (one fsync; embeddings computed in batches).

        Each item holds ``remember``'s arguments by name, e.g.
        ``{"subject": "maya", "text": "...", "valid_from": "2025-01-01"}``. All or nothing:
        one invalid item rejects the batch. Returns the ids in order: with ``dedup`` (see
        :meth:`remember`) an item that repeats a current fact, or an earlier item of the
        batch, gets that fact's id. ``request_id`` names the whole batch (see :meth:`remember`).
        """
        check_sequence(facts, "facts", "a list of dicts of remember's arguments")
        return self._append_facts(
            [self._remembered(item, i) for i, item in enumerate(facts)], dedup=dedup,
            request_id=request_id,
        )

    def duplicate_of(
        self,
        subject: str,
        text: str,
        *,
        valid_from: TimeLike | None = None,
        valid_to: TimeLike | None = None,
    ) -> int | None:
        """The id of the current fact that remembering this would only repeat, or None: still
        believed, the same subject (case and spacing aside), the same text (case, punctuation
        and spacing aside), the same ``valid_to`` and, when given, the same ``valid_from``."""
        event = self._remembered(dict(subject=subject, text=text, valid_from=valid_from,
                                      valid_to=valid_to), 0)
        key = dedup_key(event.subject, event.text, event.valid_from, event.valid_to)
        with self.reading() as store:
            now = to_us(transaction_time(self.clock, store.log))
            return duplicate_of(store.projector, self.namespace, key, now)

    def _append_facts(
        self, events: list[FactRemembered], *, dedup: bool, request_id: str | None = None
    ) -> list[Written]:
        """Append new facts as one write, with their vectors (inline mode) or queued for the
        background worker (which then embeds what the log holds, never a refused text);
        with ``dedup``, repeats are answered with the id they repeat instead; a retried
        ``request_id`` is answered as the first call was (hmem/storage/retries.py)."""
        if request_arg(request_id) is not None:
            events = [msgspec.structs.replace(ev, request_id=request_id) for ev in events]
        try:
            return self._append_new_facts(events, dedup)
        except AlreadyWritten as retry:
            return [Written(i, "retry") for i in remembered_ids(
                retry, events, lambda ev: self._repeat_of(ev, dedup),
                lambda ev: dedup_key(ev.subject, ev.text, ev.valid_from, ev.valid_to),
            )]

    def _repeat_of(self, event: FactRemembered, dedup: bool) -> int | None:
        """The current fact ``event`` repeats (with ``dedup``), or None."""
        old = self._repeats([event], dedup, None)[0]
        return old if isinstance(old, int) else None

    def _append_new_facts(self, events: list[FactRemembered], dedup: bool) -> list[Written]:
        for event in events:  # the one check of their fields, before a model sees a text
            check_fields(event, at_tx=False)
        worker = self.embedding_worker()
        inline = worker is None and self.embedder is not None
        vectors: dict[int, np.ndarray] = {}
        if inline:  # embedded outside the lock: what is new now (checked again under it)
            vectors = self._vectors(events, _new(self._repeats(events, dedup, None)))
        with self.transaction() as txn:
            if worker is not None:
                self.check_embedder_dims()
            # a retried request is a retry, even of a repeat (a store whose writes go through
            # a group: asked of the state as it is, the group's leader asks the log's)
            asked = any(ev.request_id is not None for ev in events)
            with self.reading(caught_up=self.store.group is None or asked) as store:
                check_not_written(store.projector, store.log, events)
            repeats = self._repeats(events, dedup, txn.time)
            fresh = _new(repeats)
            if inline:  # a fact found a repeat above was forgotten or revised in between
                vectors |= self._vectors(events, [i for i in fresh if i not in vectors])
            positions: dict[int, int] = {}
            for i in fresh:
                positions[i] = txn.append(events[i], checked=True)
                if i in vectors:
                    txn.append(txn.vector(vectors[i], source_agent=self.source_agent),
                               of=positions[i])
            txn.commit()
            if worker is not None and fresh:  # under the lock: a flush or a tail scan sees both
                worker.put([(txn.seq(positions[i]), events[i].subject, events[i].text)
                             for i in fresh])
        return [Written(_id_of(i, repeats, positions, txn),
                        "new" if repeats[i] is None else "repeat") for i in range(len(events))]

    def _repeats(
        self, events: Sequence[FactRemembered], dedup: bool, now: datetime | None
    ) -> list[Repeat]:
        """Each event's :data:`Repeat` (all new without ``dedup``), written at ``now`` (None:
        the time a transaction would take now)."""
        if not dedup:
            return [None] * len(events)
        with self.reading() as store:
            now_us = to_us(now or transaction_time(self.clock, store.log))
            keys = [dedup_key(ev.subject, ev.text, ev.valid_from, ev.valid_to) for ev in events]
            stored = duplicates_of(store.projector, self.namespace, keys, now_us)
            return _batch_repeats(keys, stored, now_us)

    def _vectors(self, events: Sequence[FactRemembered], which: list[int]) -> dict[int, np.ndarray]:
        """The embedder's vectors of events ``which``, by position ({} without an embedder)."""
        got = self.embed_facts([(events[i].subject, events[i].text) for i in which])
        return {} if got is None else dict(zip(which, got, strict=True))

    def _remembered(self, item: object, i: int) -> FactRemembered:
        if not isinstance(item, dict):
            raise InvalidInput(f"facts[{i}] must be a dict of remember's arguments, e.g. "
                               f"{{'subject': 'maya', 'text': 'Maya lives in London'}}")
        unknown = set(item) - _REMEMBER_ARGS
        if unknown or not {"subject", "text"} <= set(item):
            raise InvalidInput(
                f"each item needs subject and text and may have {sorted(_REMEMBER_ARGS)}; "
                f"got {sorted(item)}"
            )
        subject = text_arg(item["subject"], "subject")
        text = text_arg(item["text"], "text", MAX_TEXT_CHARS)
        return FactRemembered(
            namespace=self.namespace, subject=subject, text=text,
            valid_from=parse_when_opt(item.get("valid_from"), "valid_from", self.clock),
            valid_to=parse_when_opt(item.get("valid_to"), "valid_to", self.clock),
            confidence=confidence_arg(item.get("confidence", 1.0)),
            entities=fact_entities(subject, text, entity_names(item.get("entities") or ())),
            source_agent=item.get("source_agent") or self.source_agent,
            source_ref=item.get("source_ref"),
        )

    def revise(
        self,
        fact_id: int,
        text: str,
        *,
        valid_from: TimeLike | None = None,
        valid_to: TimeLike | None = None,
        subject: str | None = None,
        confidence: float = 1.0,
        entities: Iterable[str] = (),
        reason: str | None = None,
        source_agent: str | None = None,
        source_ref: str | None = None,
        request_id: str | None = None,
    ) -> Written:
        """Replace fact ``fact_id`` with a new version; returns the new id (a
        :class:`~hmem.views.Written`). Nothing is overwritten.

        With ``valid_from`` the world changed at that time: the old fact stays believed as true
        until then. Without it this is a correction: the old statement is no longer believed at
        all (``as_of`` earlier times still shows it). Only the newest version of a chain can be
        revised. ``source_agent`` defaults to the old fact's. ``request_id``: as in
        :meth:`remember` (a retry returns the first call's new id).
        """
        fid = _fact_id(fact_id)
        request_arg(request_id)
        vf = parse_when_opt(valid_from, "valid_from", self.clock)
        vt = parse_when_opt(valid_to, "valid_to", self.clock)
        text = text_arg(text, "text", MAX_TEXT_CHARS)
        subject = None if subject is None else text_arg(subject, "subject")
        names = entity_names(entities)
        with self.reading() as store:
            old = store.projector.space(self.namespace).state.lookup(fid, self.namespace)
            old_subject, old_agent = old.subject, old.source_agent
        event = FactRevised(
            namespace=self.namespace, fact_id=fid, text=text, subject=subject, valid_from=vf,
            valid_to=vt, confidence=confidence_arg(confidence),
            entities=fact_entities(subject or old_subject, text, names), reason=reason,
            source_agent=source_agent or self.source_agent or old_agent, source_ref=source_ref,
            request_id=request_id,
        )
        try:
            return Written(self._append_revision(event, subject or old_subject))
        except AlreadyWritten as retry:
            return Written(revised_seq(retry, fid, text), "retry")

    def _append_revision(self, event: FactRevised, subject: str) -> int:
        """Append a revision (``subject``: its subject, old or new) with its vector."""
        check_fields(event, at_tx=False)  # the one check of its fields, before a model sees it
        worker = self.embedding_worker()
        if worker is not None:
            with self.transaction() as txn:
                self.check_embedder_dims()
                position = txn.append(event, checked=True)
                txn.commit()
                worker.put([(txn.seq(position), subject, event.text)])
            return txn.seq(position)
        vector = self._vector_of(subject, event.text)
        with self.transaction() as txn:
            position = txn.append(event, checked=True)
            if vector is not None:
                txn.append(txn.vector(vector, source_agent=self.source_agent), of=position)
        return txn.seq(position)

    def forget(
        self,
        fact_id: int,
        *,
        reason: str | None = None,
        source_agent: str | None = None,
        source_ref: str | None = None,
        request_id: str | None = None,
    ) -> Written:
        """Tombstone a fact: gone from recall from now on, still in history, why and as_of.

        Returns the seq of the tombstone event (a :class:`~hmem.views.Written`). Nothing is
        deleted. ``request_id``: as in
        :meth:`remember` (a retry returns the first call's tombstone).
        """
        fid = _fact_id(fact_id)
        try:
            with self.transaction() as txn:
                position = txn.append(FactForgotten(
                    fact_id=fid, reason=reason, source_agent=source_agent or self.source_agent,
                    source_ref=source_ref, request_id=request_arg(request_id),
                ))
        except AlreadyWritten as retry:
            return Written(forgotten_seq(retry, fid), "retry")
        return Written(txn.seq(position))

    def record_embedding(self, fact_id: int, model: str, vector: Any) -> int:
        """Record a vector for a fact as an event (replay never recomputes it); returns its seq."""
        fid = _fact_id(fact_id)
        if isinstance(vector, (str, bytes)):
            raise InvalidInput("vector must be a sequence of numbers, not a string")
        try:
            arr = np.asarray(vector, dtype="<f4")
        except (TypeError, ValueError) as e:
            raise InvalidInput(f"vector must be a sequence of numbers ({e})") from e
        if arr.ndim != 1 or not len(arr) or not np.isfinite(arr).all():
            raise InvalidInput("vector must be a non-empty 1-D array of finite numbers")
        if len(arr) > MAX_DIMS:
            raise InvalidInput(f"vector has {len(arr):,} dims; the limit is {MAX_DIMS:,}")
        with self.transaction() as txn:
            position = txn.append(EmbeddingRecorded(
                fact_id=fid, model=model, dims=len(arr), vector=arr.tobytes(),
                source_agent=self.source_agent,
            ))
        return txn.seq(position)

    def reembed(self, *, batch_size: int = 64, progress: Progress | None = None) -> int:
        """Embed, with the configured embedder, every fact of this namespace that has no vector
        from its model yet (history included, so time travel can use vectors too). Appends one
        ``EmbeddingRecorded`` per fact; returns how many."""
        embedder = self.embedder
        if embedder is None:
            raise EmbedderUnavailable(
                "no embedder is configured; pass embedder='local' (pip install 'hmem[local]'), "
                "'openai' or an Embedder"
            )
        self.flush()  # what the background worker has queued is not embedded twice
        with self.reading() as store:
            state = store.projector.space(self.namespace).state
            have = {v.fact_id for v in state.vectors if v.model == embedder.model}
            todo = [
                (f.id, f.subject, f.text)
                for f in sorted(state.in_namespace(self.namespace), key=lambda f: f.id)
                if f.id not in have and f.text  # an erased fact's text is empty: no vector
            ]
        done = 0
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            vectors = self.embed_facts([(subject, text) for _, subject, text in chunk])
            assert vectors is not None
            with self.transaction() as txn:
                for (fid, _, _), vector in zip(chunk, vectors, strict=True):
                    txn.append(txn.vector(vector, fid, source_agent=self.source_agent))
            done += len(chunk)
            if progress is not None:
                progress(done, len(todo))
        return done

    # ------------------------------------------------------------------ the LLM layer

    def add(
        self,
        messages: Iterable[dict[str, Any]],
        *,
        session_id: str,
        observed_at: TimeLike | None = None,
        namespace: str | None = None,
        extractor: ExtractorSpec = None,
        context_turns: int = 6,
        similar: int = 10,
        profile: str | None = None,
        source_ref: str | None = None,
    ) -> AddResult:
        """Store conversation turns, then extract facts from them with an LLM (``hmem[openai]``;
        ``HMEM_BASE_URL``, ``HMEM_API_KEY``, ``HMEM_LLM``). See :mod:`hmem.llm.extraction`.

        ``messages`` are ``{"role": ..., "content": ...}`` dicts (optionally ``"name"`` and
        ``"observed_at"``). The turns are stored first, as ``EpisodeRecorded`` events; then one
        extractor call sees them with the last ``context_turns`` turns of the session and the
        ``similar`` most similar facts, and its facts are appended in one atomic batch, each
        with its lineage (the turns, the model, the prompt version). All or nothing: when the
        extraction fails no fact is appended and :class:`~hmem.errors.ExtractionFailed` carries
        the stored turns' seqs, for :meth:`extract`.
        """
        from hmem.llm import extraction as extract

        check_sequence(messages, "messages", "a list of {'role': ..., 'content': ...} dicts")
        resolved = self._resolve_extractor(extractor)
        mem = self if namespace is None else self.in_namespace(namespace)
        mem.flush()  # candidates are compared with every fact's vector (they embed inline)
        return extract.add(
            cast("extract.Memory", mem), messages, extractor=resolved, session_id=session_id,
            observed_at=observed_at,
            context_turns=context_turns, similar=similar, profile=profile, source_ref=source_ref,
        )

    def extract(
        self,
        episode_seqs: Iterable[int],
        *,
        extractor: ExtractorSpec = None,
        context_turns: int = 6,
        similar: int = 10,
        profile: str | None = None,
    ) -> AddResult:
        """Extract facts from turns already stored (all of one session of this namespace): to
        retry after :class:`~hmem.errors.ExtractionFailed`, or to re-extract with another model
        (new events; nothing is changed in place)."""
        from hmem.llm import extraction as extract

        check_sequence(
            episode_seqs, "episode_seqs", "a list of seqs (ExtractionFailed.episode_seqs)"
        )
        resolved = self._resolve_extractor(extractor)
        self.flush()
        return extract.extract(
            cast("extract.Memory", self), list(episode_seqs), extractor=resolved,
            context_turns=context_turns,
            similar=similar, profile=profile,
        )

    def _resolve_extractor(self, spec: ExtractorSpec) -> Extractor:
        from hmem.llm.extraction import default_extractor, resolve_extractor

        if spec is not None:
            return resolve_extractor(spec)
        if self._extractor is None:
            self._extractor = default_extractor()
        return self._extractor


_fact_id = fact_id  # the argument check, under a name the parameters do not shadow


# A fact's fate in a deduplicated batch: None (new), an existing id (int), or ("batch", i):
# the same as the batch's earlier item i (a new one)
Repeat = int | tuple[str, int] | None


def _batch_repeats(
    keys: Sequence[DedupKey], stored: Sequence[int | None], now_us: int
) -> list[Repeat]:
    """Which events (their dedup ``keys``) repeat a current fact (``stored``: its id, from
    ``duplicates_of``) or an earlier event of the batch, by the rule ``duplicate_of`` applies
    to stored facts (the batch is written at ``now_us``)."""
    new: dict[tuple[str, str, int | None], list[tuple[int, int]]] = {}  # -> (start, item)
    out: list[Repeat] = []
    for i, (key, old) in enumerate(zip(keys, stored, strict=True)):
        subject, text, valid_from, valid_to = key
        same = new.setdefault((subject, text, valid_to), [])
        # without valid_from an item says it is true now: an earlier one already true now
        earlier = [k for start, k in same
                   if (start <= now_us if valid_from is None else start == valid_from)]
        if earlier:
            out.append(("batch", earlier[-1]))
            continue
        if old is None:
            same.append((now_us if valid_from is None else valid_from, i))
        out.append(old)
    return out


def _new(repeats: list[Repeat]) -> list[int]:
    return [i for i, old in enumerate(repeats) if old is None]


def _id_of(i: int, repeats: list[Repeat], positions: dict[int, int], txn: Transaction) -> int:
    old = repeats[i]
    if old is None:
        return txn.seq(positions[i])
    if isinstance(old, tuple):
        return _id_of(old[1], repeats, positions, txn)
    return old
