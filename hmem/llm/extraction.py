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

from collections.abc import Iterable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Protocol

import msgspec
import numpy as np

from eventlog.events import EpisodeRecorded
from hmem.embedders import Embedder
from hmem.errors import ExtractionFailed, HmemError, InvalidInput, LLMError
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
from hmem.llm.plan import (
    DUPLICATE_COSINE,
    IgnoredSupersede,
    Plan,
    Replacement,
    Skipped,
    clean_subject,
    clean_text,
    default_subject,
    normalise,
)
from hmem.recall.hits import RecallResult
from hmem.storage.store import Store
from hmem.storage.transaction import Transaction
from hmem.time.iso import TimeLike, parse_time, parse_time_opt
from projections.checks import MAX_TEXT_CHARS, check_text
from projections.records import Episode
from projections.timeutil import from_us


class Memory(Protocol):
    """What extraction uses of a ``Memory``: its public seams and recall."""

    namespace: str
    source_agent: str | None

    @property
    def embedder(self) -> Embedder | None: ...

    def transaction(self) -> AbstractContextManager[Transaction]: ...

    def reading(self) -> AbstractContextManager[Store]: ...

    def embed_facts(self, pairs: list[tuple[str, str]]) -> np.ndarray | None: ...

    def recall(self, query: str, *, limit: int, max_tokens: int) -> RecallResult: ...

__all__ = [
    "AddResult",
    "DUPLICATE_COSINE",
    "ExtractorSpec",
    "IgnoredSupersede",
    "Replacement",
    "Skipped",
    "add",
    "default_extractor",
    "extract",
    "normalise",
    "resolve_extractor",
]

ExtractorSpec = Extractor | LLMClient | LLMConfig | None
_QUERY_CHARS = 2000


class AddResult(msgspec.Struct, frozen=True):
    """What one ``Memory.add`` (or ``Memory.extract``) stored."""

    session_id: str
    episode_seqs: tuple[int, ...]
    added: tuple[int, ...]  # ids of new facts (remembered)
    revised: tuple[Replacement, ...]  # facts replaced by a new version (old id -> new id)
    skipped: tuple[Skipped, ...]
    ignored_supersedes: tuple[IgnoredSupersede, ...]
    usage: Usage
    model: str
    prompt_version: str

    @property
    def fact_ids(self) -> tuple[int, ...]:
        """Every fact this extraction created, added or revised, in log order."""
        return tuple(sorted((*self.added, *(r.new_id for r in self.revised))))


def default_extractor() -> Extractor:
    """The extractor ``Memory.add`` uses when given none: an LLM configured from the
    environment (``HMEM_BASE_URL``, ``HMEM_API_KEY``, ``HMEM_LLM``)."""
    return LLMExtractor(LLMClient(LLMConfig.from_env()))


def resolve_extractor(spec: Extractor | LLMClient | LLMConfig) -> Extractor:
    """An extractor from a spec: an :class:`Extractor`, an ``LLMClient`` or an ``LLMConfig``."""
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
    with memory.transaction() as txn:
        sessions = txn.store.projector.space(memory.namespace).state.sessions
        first = len(sessions.get((memory.namespace, session_id), ()))
        positions = [
            txn.append(EpisodeRecorded(
                session_id=session_id, turn=first + i, role=role, text=text, speaker=speaker,
                observed_at=when, source_agent=memory.source_agent, source_ref=source_ref,
            ))
            for i, (role, speaker, text, when) in enumerate(turns)
        ]
    seqs = [txn.seq(p) for p in positions]
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
    if isinstance(messages, (str, dict)) or not isinstance(messages, Iterable):
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
        try:
            output = extractor.extract(request)
        except HmemError:
            raise
        except Exception as e:  # the plug-in boundary: whatever it raises, keep the seqs
            raise LLMError(f"the extractor raised {type(e).__name__}: {e}") from e
        if not isinstance(output, ExtractorOutput):
            raise InvalidInput(
                f"the extractor returned {type(output).__name__}, not an ExtractorOutput"
            )
        vectors = _embed_candidates(memory, output.facts, default_subject(episodes))
        with memory.transaction() as txn:
            plan = Plan(
                txn, memory.source_agent, episodes, output, extractor.prompt_version, vectors,
                source_ref,
            )
            plan.build(request)
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
        added=tuple(txn.seq(p) for p in plan.added),
        revised=tuple(Replacement(old, txn.seq(p)) for old, p in plan.revised),
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
    with memory.reading() as store:
        state = store.projector.space(memory.namespace).state
        found = []
        for seq in seqs:
            ok = isinstance(seq, int) and not isinstance(seq, bool)
            episode = state.episodes.get(seq) if ok else None
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
    with memory.reading() as store:
        state = store.projector.space(memory.namespace).state
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


def _is_text(*values: str) -> bool:
    try:
        for value in values:
            check_text("text", value, MAX_TEXT_CHARS)
    except InvalidInput:
        return False
    return True


def _embed_candidates(
    memory: Memory, facts: tuple[Candidate, ...], default_subject: str
) -> list[np.ndarray | None]:
    """Each candidate's vector (None for an unusable candidate or without an embedder)."""
    pairs: list[tuple[str, str]] = []
    usable: list[int] = []
    for i, c in enumerate(facts):
        pair = (clean_subject(c.subject) or default_subject, clean_text(c.text))
        if pair[1] and _is_text(*pair):  # what the store refuses never goes to a model
            usable.append(i)
            pairs.append(pair)
    vectors: list[np.ndarray | None] = [None] * len(facts)
    if memory.embedder is None or not usable:
        return vectors
    got = memory.embed_facts(pairs)
    assert got is not None
    for i, vector in zip(usable, got, strict=True):
        vectors[i] = vector
    return vectors
