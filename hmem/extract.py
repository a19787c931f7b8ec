"""``Memory.add``: store conversation turns, then extract facts from them with an LLM.

1. The turns are appended first, in one batch, as ``EpisodeRecorded`` events (raw, as said).
2. One extractor call sees the new turns, the last ``context_turns`` turns of the session and
   the ``similar`` facts recall finds for the turns (with their ids).
3. Its candidates are cleaned and checked, then appended in one atomic batch (with their
   embeddings), each with its lineage: ``derived_from`` (the turns' seqs), ``extractor`` (the
   model) and ``prompt_version``.

ADD-only: the model never deletes. A candidate is skipped when its normalised text equals a
current fact's (or an earlier candidate's), or, when an embedder is configured, when its cosine
with one of the similar facts (or an earlier candidate) exceeds :data:`DUPLICATE_COSINE`. Its
``supersedes`` become a ``revise`` of the first id that names a current fact of *this*
namespace; other ids are ignored and reported (:class:`IgnoredSupersede`). Re-extracting with
another model appends new events; nothing is changed in place.

All or nothing: when the extraction fails (the endpoint, invalid JSON after re-asking, the
store) no fact is appended, the turns stay, and :class:`~hmem.errors.ExtractionFailed` carries
their seqs for ``Memory.extract(seqs)``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from typing import TYPE_CHECKING, Any

import msgspec
import numpy as np

from eventlog.events import EpisodeRecorded, EventBase, FactRemembered, FactRevised
from hmem.errors import ExtractionFailed, FactNotFound, HmemError, InvalidInput
from hmem.llm.client import LLMClient, LLMConfig, Usage
from hmem.llm.extractor import (
    Candidate,
    ExtractionRequest,
    Extractor,
    ExtractorOutput,
    KnownFact,
    LLMExtractor,
    Turn,
)
from hmem.timeparse import TimeLike, parse_time, parse_time_opt
from projections.entities import fact_entities
from projections.state import Episode, Fact, check_fields
from projections.timeutil import from_us, to_us

if TYPE_CHECKING:
    from hmem.memory import Memory

__all__ = [
    "AddResult",
    "DUPLICATE_COSINE",
    "ExtractorSpec",
    "IgnoredSupersede",
    "Revision",
    "Skipped",
    "add",
    "extract",
    "normalise",
    "resolve_extractor",
]

DUPLICATE_COSINE = 0.95
CATEGORIES = ("semantic", "episodic", "procedural")
ExtractorSpec = Extractor | LLMClient | LLMConfig | None
_QUERY_CHARS = 2000


class Revision(msgspec.Struct, frozen=True):
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


class AddResult(msgspec.Struct, frozen=True):
    """What one ``Memory.add`` (or ``Memory.extract``) stored."""

    session_id: str
    episode_seqs: tuple[int, ...]
    added: tuple[int, ...]  # ids of new facts (remembered)
    revised: tuple[Revision, ...]  # facts replaced by a new version (old id -> new id)
    skipped: tuple[Skipped, ...]
    ignored_supersedes: tuple[IgnoredSupersede, ...]
    usage: Usage
    model: str
    prompt_version: str

    @property
    def fact_ids(self) -> tuple[int, ...]:
        """Every fact this extraction created, added or revised, in log order."""
        return tuple(sorted((*self.added, *(r.new_id for r in self.revised))))


def resolve_extractor(memory: Memory, spec: ExtractorSpec) -> Extractor:
    """An extractor from a spec: an :class:`Extractor`, an ``LLMClient``, an ``LLMConfig``, or
    None: one built from the environment on first use and kept by this ``Memory``."""
    if spec is None:
        if memory._extractor is None:
            memory._extractor = LLMExtractor(LLMClient(LLMConfig.from_env()))
        return memory._extractor  # type: ignore[no-any-return]
    if isinstance(spec, (LLMClient, LLMConfig)):
        return LLMExtractor(spec)
    if not callable(getattr(spec, "extract", None)) or not hasattr(spec, "prompt_version"):
        raise InvalidInput(
            "extractor must be an LLMExtractor (or anything with prompt_version and "
            "extract(request)), an LLMClient, an LLMConfig or None"
        )
    return spec


# ---------------------------------------------------------------------- recording the turns


def add(
    memory: Memory,
    messages: Iterable[dict[str, Any]],
    *,
    extractor: Extractor,
    session_id: str,
    observed_at: TimeLike | None,
    context_turns: int,
    similar: int,
    profile: str | None,
    source_ref: str | None,
) -> AddResult:
    """See ``Memory.add``."""
    _check_limits(context_turns, similar)
    if not isinstance(session_id, str) or not session_id.strip():
        raise InvalidInput("session_id must be a non-empty string, e.g. 'chat-2025-03-01'")
    turns = _turns(messages, parse_time_opt(observed_at, "observed_at"))
    with memory._lock:
        store = memory._open()
        tx = memory._now(store)
        first = len(store.projector.state.sessions.get((memory.namespace, session_id), ()))
        stamped = store.append_batch([
            EpisodeRecorded(
                tx_at=tx, namespace=memory.namespace, session_id=session_id, turn=first + i,
                role=role, text=text, speaker=speaker, observed_at=when,
                source_agent=memory.source_agent, source_ref=source_ref,
            )
            for i, (role, speaker, text, when) in enumerate(turns)
        ])
    seqs = [ev.seq for ev in stamped]
    return _run(memory, seqs, extractor, context_turns, similar, profile, source_ref)


def extract(
    memory: Memory,
    episode_seqs: list[int],
    *,
    extractor: Extractor,
    context_turns: int,
    similar: int,
    profile: str | None,
) -> AddResult:
    """See ``Memory.extract``."""
    _check_limits(context_turns, similar)
    return _run(memory, episode_seqs, extractor, context_turns, similar, profile, None)


def _turns(
    messages: Iterable[dict[str, Any]], observed_at: datetime | None
) -> list[tuple[str, str | None, str, datetime | None]]:
    if isinstance(messages, (str, dict)):
        raise InvalidInput("messages must be a list of {'role': ..., 'content': ...} dicts")
    out = []
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise InvalidInput(f"messages[{i}] must be a dict with 'role' and 'content'")
        text = message.get("content", message.get("text"))
        role = message.get("role", "user")
        speaker = message.get("name", message.get("speaker"))
        if not isinstance(text, str) or not text.strip():
            raise InvalidInput(f"messages[{i}] has no text: give 'content' as a non-empty string")
        if not isinstance(role, str) or (speaker is not None and not isinstance(speaker, str)):
            raise InvalidInput(f"messages[{i}]: 'role' and 'name' must be strings")
        when = message.get("observed_at")
        when = observed_at if when is None else parse_time(when, f"messages[{i}].observed_at")
        out.append((role.strip() or "user", speaker, text.strip(), when))
    if not out:
        raise InvalidInput("messages is empty; give at least one turn")
    return out


def _check_limits(context_turns: int, similar: int) -> None:
    if isinstance(context_turns, bool) or not isinstance(context_turns, int) or context_turns < 0:
        raise InvalidInput("context_turns must be an integer >= 0")
    if isinstance(similar, bool) or not isinstance(similar, int) or similar < 0:
        raise InvalidInput("similar must be an integer >= 0")


# ---------------------------------------------------------------------- extraction


def _run(
    memory: Memory,
    seqs: list[int],
    extractor: Extractor,
    context_turns: int,
    similar: int,
    profile: str | None,
    source_ref: str | None,
) -> AddResult:
    episodes = _episodes(memory, seqs)
    session = episodes[0].session_id
    try:
        request = _request(memory, episodes, context_turns, similar, profile)
        output = extractor.extract(request)
        if not isinstance(output, ExtractorOutput):
            raise InvalidInput(
                f"the extractor returned {type(output).__name__}, not an ExtractorOutput"
            )
        vectors = _embed_candidates(memory, output.facts, _default_subject(episodes))
        with memory._lock:
            plan = _Plan(memory, episodes, output, extractor.prompt_version, vectors, source_ref)
            plan.build(request)
            memory._open().append_batch(plan.events)
    except ExtractionFailed:
        raise
    except HmemError as e:
        raise ExtractionFailed(
            f"extracting facts from session {session!r} failed, so no fact was stored: "
            f"{type(e).__name__}: {e}. The turns are stored (episode seqs "
            f"{', '.join(map(str, seqs))}); retry only the extraction with "
            f"Memory.extract({seqs!r})",
            tuple(seqs),
        ) from e
    return AddResult(
        session_id=session,
        episode_seqs=tuple(seqs),
        added=tuple(plan.added),
        revised=tuple(plan.revised),
        skipped=tuple(plan.skipped),
        ignored_supersedes=tuple(plan.ignored),
        usage=output.usage,
        model=output.model,
        prompt_version=extractor.prompt_version,
    )


def _episodes(memory: Memory, seqs: list[int]) -> list[Episode]:
    """The stored turns named by ``seqs``: all of this namespace and of one session."""
    if not seqs:
        raise InvalidInput("no episode seqs given")
    with memory._lock:
        state = memory._read().projector.state
        found = []
        for seq in seqs:
            episode = state.episodes.get(seq) if isinstance(seq, int) else None
            if episode is None or episode.namespace != memory.namespace:
                raise InvalidInput(
                    f"{seq!r} is not a recorded turn in namespace {memory.namespace!r}; list "
                    f"them with Memory.episodes()"
                )
            found.append(episode)
    if len({e.session_id for e in found}) != 1 or len(set(seqs)) != len(seqs):
        raise InvalidInput("the episode seqs must be distinct turns of one session")
    return sorted(found, key=lambda e: e.seq)


def _request(
    memory: Memory, episodes: list[Episode], context_turns: int, similar: int,
    profile: str | None,
) -> ExtractionRequest:
    session, first = episodes[0].session_id, episodes[0].seq
    with memory._lock:
        state = memory._read().projector.state
        earlier = [e for e in state.episodes_in(memory.namespace, session) if e.seq < first]
    context = earlier[-context_turns:] if context_turns else []
    query = " ".join(e.text for e in episodes)[:_QUERY_CHARS]
    known: list[KnownFact] = []
    if similar and query.strip():
        for hit in memory.recall(query, limit=similar, max_tokens=10**9).hits:
            known.append(KnownFact(hit.id, hit.subject, hit.text, _day(hit.valid_from)))
    return ExtractionRequest(
        session_id=session,
        new_turns=tuple(_turn(e) for e in episodes),
        context_turns=tuple(_turn(e) for e in context),
        existing_facts=tuple(known),
        profile=profile,
    )


def _turn(e: Episode) -> Turn:
    return Turn(e.turn, e.role, e.text, from_us(e.observed_at).isoformat(), e.speaker)


def _day(when: datetime) -> str:
    return when.date().isoformat()


def _default_subject(episodes: list[Episode]) -> str:
    """The subject of a candidate that names none: the first turn's speaker, else its role."""
    return _clean_subject(episodes[0].speaker) or _clean_subject(episodes[0].role) or "user"


def _embed_candidates(
    memory: Memory, facts: tuple[Candidate, ...], default_subject: str
) -> list[np.ndarray | None]:
    """Each candidate's vector (None for an unusable candidate or without an embedder)."""
    usable = [i for i, c in enumerate(facts) if _clean_text(c.text)]
    vectors: list[np.ndarray | None] = [None] * len(facts)
    if memory.embedder is None or not usable:
        return vectors
    pairs = [
        (_clean_subject(facts[i].subject) or default_subject, _clean_text(facts[i].text))
        for i in usable
    ]
    got = memory._embed(pairs)
    assert got is not None
    for i, vector in zip(usable, got):
        vectors[i] = vector
    return vectors


_PUNCT = re.compile(r"[^\w\s]")
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def normalise(text: str) -> str:
    """The text as duplicates are compared: case-folded, without punctuation, spaces collapsed."""
    return " ".join(_PUNCT.sub(" ", text.casefold()).split())


def _clean_text(text: object) -> str:
    return text.strip() if isinstance(text, str) else ""


def _clean_subject(subject: object) -> str:
    if not isinstance(subject, str):
        return ""
    return " ".join(_CONTROL.sub(" ", subject).split())[:200]


class _Plan:
    """Turns candidates into events, under the writer lock (the state cannot move meanwhile)."""

    def __init__(
        self,
        memory: Memory,
        episodes: list[Episode],
        output: ExtractorOutput,
        prompt_version: str,
        vectors: list[np.ndarray | None],
        source_ref: str | None,
    ) -> None:
        self.memory = memory
        self.store = memory._open()
        self.state = self.store.projector.state
        self.tx = memory._now(self.store)
        self.episodes = episodes
        self.output = output
        self.prompt_version = prompt_version
        self.vectors = vectors
        self.source_ref = source_ref
        self.events: list[EventBase] = []
        self.added: list[int] = []
        self.revised: list[Revision] = []
        self.skipped: list[Skipped] = []
        self.ignored: list[IgnoredSupersede] = []

    def build(self, request: ExtractionRequest) -> None:
        ns = self.memory.namespace
        texts = {
            normalise(f.text): f.id
            for f in self.state.in_namespace(ns)
            if f.superseded_by is None and f.forgotten_seq is None
        }
        seen: dict[str, None] = {}
        claimed: set[int] = set()
        near = self._similar_vectors(request)
        accepted: list[np.ndarray] = []
        default_subject = _default_subject(self.episodes)
        for i, cand in enumerate(self.output.facts):
            text = _clean_text(cand.text)
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
            subject = _clean_subject(cand.subject) or default_subject
            event = self._event(cand, text, subject, target)
            try:
                check_fields(event)
                self.state.check_applies(event)
            except HmemError as e:
                self.skipped.append(Skipped(text, f"invalid: {e}"))
                if target is not None:
                    self.ignored.append(IgnoredSupersede(target.id, "its fact was invalid"))
                continue
            seen[key] = None
            fid = self.store.log.last_seq + len(self.events) + 1
            self.events.append(event)
            if target is not None:
                claimed.add(target.id)
                self.revised.append(Revision(target.id, fid))
            else:
                self.added.append(fid)
            if vector is not None:
                accepted.append(vector)
                self.events.append(self.memory._embedding_event(self.tx, fid, vector))

    def _event(
        self, cand: Candidate, text: str, subject: str, target: Fact | None
    ) -> FactRemembered | FactRevised:
        when = _parse_day(cand.valid_from)
        if when is None:
            when = from_us(max(e.observed_at for e in self.episodes))
        lineage: dict[str, Any] = dict(
            tx_at=self.tx, namespace=self.memory.namespace, text=text,
            entities=fact_entities(subject, text, _names(cand.entities)),
            derived_from=tuple(e.seq for e in self.episodes), extractor=self.output.model,
            prompt_version=self.prompt_version,
            category=cand.category if cand.category in CATEGORIES else None,
            importance=_importance(cand.importance),
            source_agent=self.memory.source_agent, source_ref=self.source_ref,
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
                    raise FactNotFound(raw, self.memory.namespace)
                fact = self.state.lookup(fid, self.memory.namespace)
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
        embedder = self.memory.embedder
        index = self.store.projector.indexes.get(self.memory.namespace)
        if embedder is None or index is None:
            return []
        vectors = index.vectors.get(embedder.model)
        if vectors is None:
            return []
        out = []
        for known in request.existing_facts:
            fact = self.state.facts.get(known.id)
            doc = index.doc_of.get(known.id)
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
    if isinstance(raw, bool):
        return None
    if isinstance(raw, int):
        return raw
    if isinstance(raw, str) and raw.strip().lstrip("#").isdigit():
        return int(raw.strip().lstrip("#"))
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
        name for name in (_clean_subject(e) for e in entities if isinstance(e, str)) if name
    )
