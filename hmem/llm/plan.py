"""Turning an extractor's candidates into events: cleaning, dedup, supersedes -> revise.

Runs under the writer lock, so the state it checks is the state the batch is appended to.
See :mod:`hmem.llm.extraction` for the rules.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec
import numpy as np

from eventlog.events import FactRemembered, FactRevised
from hmem.args import fact_id
from hmem.dedup import normalise
from hmem.errors import FactNotFound, HmemError, InvalidInput
from hmem.llm.extractor import Candidate, ExtractionRequest, ExtractorOutput
from hmem.storage.transaction import Transaction
from hmem.time.iso import parse_time
from projections.checks import CONTROL_CHARS, check_fields
from projections.entities import fact_entities
from projections.fold import check
from projections.records import Episode, Fact
from projections.timeutil import from_us, to_us

__all__ = [
    "CATEGORIES",
    "DUPLICATE_COSINE",
    "IgnoredSupersede",
    "Plan",
    "Replacement",
    "Skipped",
    "clean_subject",
    "clean_text",
    "default_subject",
    "normalise",
]

DUPLICATE_COSINE = 0.95
CATEGORIES = ("semantic", "episodic", "procedural")


class Replacement(msgspec.Struct, frozen=True):
    """Fact ``old_id`` replaced by ``new_id`` (a revise)."""

    old_id: int
    new_id: int


class Skipped(msgspec.Struct, frozen=True):
    """A candidate not stored: ``reason`` is "duplicate" (of ``duplicate_of``, None when it
    repeats an earlier candidate), "empty" or "invalid: ..."."""

    text: str
    reason: str
    duplicate_of: int | None = None


class IgnoredSupersede(msgspec.Struct, frozen=True):
    """A ``supersedes`` id that was not revised: not a fact of this namespace, forgotten,
    already superseded, already revised by this extraction, or one too many."""

    fact_id: int | str
    reason: str


def default_subject(episodes: list[Episode]) -> str:
    """The subject of a candidate that names none: the first turn's speaker, else its role."""
    return clean_subject(episodes[0].speaker) or clean_subject(episodes[0].role) or "user"


def clean_text(text: object) -> str:
    return text.strip() if isinstance(text, str) else ""


def clean_subject(subject: object) -> str:
    if not isinstance(subject, str):
        return ""
    return " ".join(CONTROL_CHARS.sub(" ", subject).split())[:200]


class Plan:
    """Turns candidates into the events of one transaction (which holds the store's lock, so
    the state cannot move meanwhile). ``added`` and ``revised`` hold transaction positions:
    the log gives them their seqs on commit."""

    def __init__(
        self,
        txn: Transaction,
        source_agent: str | None,
        episodes: list[Episode],
        output: ExtractorOutput,
        prompt_version: str,
        vectors: list[np.ndarray | None],
        source_ref: str | None,
    ) -> None:
        self.txn = txn
        self.namespace = txn.namespace
        self.source_agent = source_agent
        self.state = txn.store.projector.space(self.namespace).state
        self.indexes = txn.store.projector.indexes
        self.tx = txn.time
        self.episodes = episodes
        self.output = output
        self.prompt_version = prompt_version
        self.vectors = vectors
        self.source_ref = source_ref
        self.added: list[int] = []  # positions of new facts
        self.revised: list[tuple[int, int]] = []  # (old id, position of its new version)
        self.skipped: list[Skipped] = []
        self.ignored: list[IgnoredSupersede] = []

    def build(self, request: ExtractionRequest) -> None:
        ns = self.namespace
        texts = {normalise(text): fid for fid, text in self.state.current_texts(ns)}
        seen: dict[str, None] = {}
        claimed: set[int] = set()
        near = self._similar_vectors(request)
        accepted: list[np.ndarray] = []
        fallback = default_subject(self.episodes)
        for i, cand in enumerate(self.output.facts):
            text = clean_text(cand.text)
            if not text:
                self.skipped.append(Skipped(str(cand.text), "empty"))
                continue
            key = normalise(text) or text
            if key in texts or key in seen:
                self.skipped.append(Skipped(text, "duplicate", texts.get(key)))
                self._ignore_all(cand.supersedes, "its fact was a duplicate")
                continue
            target = self._target(cand.supersedes, claimed)
            vector = self.vectors[i] if i < len(self.vectors) else None
            if target is None and vector is not None:
                dup = _near_duplicate(vector, near, accepted)
                if dup is not False:
                    self.skipped.append(Skipped(text, "duplicate", dup))
                    continue
            subject = clean_subject(cand.subject) or fallback
            event = self._event(cand, text, subject, target)
            try:
                check_fields(event)
                check([event], self.state)
            except HmemError as e:
                self.skipped.append(Skipped(text, f"invalid: {e}"))
                if target is not None:
                    self.ignored.append(IgnoredSupersede(target.id, "its fact was invalid"))
                continue
            seen[key] = None
            position = self.txn.append(event, checked=True)
            if target is not None:
                claimed.add(target.id)
                self.revised.append((target.id, position))
            else:
                self.added.append(position)
            if vector is not None:
                accepted.append(vector)
                self.txn.append(self.txn.vector(vector, source_agent=self.source_agent),
                                of=position)

    def _event(
        self, cand: Candidate, text: str, subject: str, target: Fact | None
    ) -> FactRemembered | FactRevised:
        when = _parse_day(cand.valid_from)
        if when is None:
            when = from_us(max(e.observed_at for e in self.episodes))
        lineage: dict[str, Any] = dict(
            tx_at=self.tx, namespace=self.namespace, text=text,
            entities=fact_entities(subject, text, _names(cand.entities)),
            derived_from=tuple(e.seq for e in self.episodes), extractor=self.output.model,
            prompt_version=self.prompt_version,
            category=cand.category if cand.category in CATEGORIES else None,
            importance=_importance(cand.importance),
            source_agent=self.source_agent, source_ref=self.source_ref,
        )
        if target is None:
            return FactRemembered(subject=subject, valid_from=when, **lineage)
        row = target.open_row
        assert row is not None
        # A change in the world when the new fact starts after the old one; else a correction.
        change = when if to_us(when) > row.valid_from else None
        return FactRevised(
            fact_id=target.id, subject=subject if subject != target.subject else None,
            valid_from=change, reason=f"superseded by extraction ({self.output.model})",
            **lineage,
        )

    def _target(self, ids: list[int | str], claimed: set[int]) -> Fact | None:
        """The fact to revise: the first id naming a current fact of this namespace."""
        target: Fact | None = None
        for raw in ids:
            fid = _as_id(raw)
            if target is not None:
                self.ignored.append(IgnoredSupersede(raw, "a fact can supersede only one fact"))
                continue
            try:
                if fid is None:
                    raise FactNotFound(raw, self.namespace)
                fact = self.state.lookup(fid, self.namespace)
            except FactNotFound:
                self.ignored.append(IgnoredSupersede(raw, "not a fact in this namespace"))
                continue
            if fact.forgotten_seq is not None:
                self.ignored.append(IgnoredSupersede(fid, "forgotten"))
            elif fact.superseded_by is not None:
                self.ignored.append(IgnoredSupersede(fid, "already superseded"))
            elif fid in claimed:
                self.ignored.append(IgnoredSupersede(fid, "already revised by this extraction"))
            else:
                target = fact
        return target

    def _ignore_all(self, ids: list[int | str], reason: str) -> None:
        self.ignored.extend(IgnoredSupersede(raw, reason) for raw in ids)

    def _similar_vectors(self, request: ExtractionRequest) -> list[tuple[int, np.ndarray]]:
        """Vectors (of the configured model) of the similar facts shown to the extractor."""
        embedder = self.txn.embedder
        index = self.indexes.get(self.namespace)
        if embedder is None or index is None:
            return []
        vectors = index.vectors.get(embedder.model)
        if vectors is None:
            return []
        out = []
        for known in request.existing_facts:
            fact = self.state.facts.get(known.id)
            doc = index.doc(known.id)
            if fact is None or doc is None or fact.superseded_by is not None:
                continue
            if fact.forgotten_seq is not None:
                continue
            vector = vectors.get(doc)
            if vector is not None:
                out.append((known.id, vector))
        return out


def _near_duplicate(
    vector: np.ndarray, near: list[tuple[int, np.ndarray]], accepted: list[np.ndarray]
) -> int | None | bool:
    """The id of a similar fact with cosine > DUPLICATE_COSINE, None for an earlier candidate,
    False when there is none."""
    v = np.asarray(vector, dtype=np.float32)
    norm = float(np.linalg.norm(v))
    if norm == 0:
        return False
    v = v / norm
    for fid, other in near:
        if float(other @ v) > DUPLICATE_COSINE:
            return fid
    for other in accepted:
        o = np.asarray(other, dtype=np.float32)
        n = float(np.linalg.norm(o))
        if n and float(o @ v) / n > DUPLICATE_COSINE:
            return None
    return False


def _as_id(raw: object) -> int | None:
    """A model's fact id as an int, or None when it is not one (Memory's rule for ids)."""
    try:
        return fact_id(raw)
    except InvalidInput:
        return None


def _parse_day(value: str | None) -> datetime | None:
    """The candidate's date, if it is one (a bad or naive date from a model is dropped)."""
    if not value or not isinstance(value, str):
        return None
    try:
        return parse_time(value, "valid_from")
    except HmemError:
        return None


def _importance(value: int | float | None) -> int | None:
    if value is None or isinstance(value, bool):
        return None
    if not np.isfinite(value):
        return None
    return int(min(10, max(1, round(value))))


def _names(entities: list[str]) -> tuple[str, ...]:
    return tuple(
        name for name in (clean_subject(e) for e in entities if isinstance(e, str)) if name
    )
