"""The fact extractor: one prompt (:data:`EXTRACTION_PROMPT`, :data:`PROMPT_VERSION`), the
types it answers in, and :class:`LLMExtractor`, which asks an :class:`~hmem.llm.LLMClient`.

Anything with ``prompt_version`` and ``extract(request) -> ExtractorOutput`` is an extractor
(:class:`Extractor`), so tests and other pipelines can plug in their own.
"""

from __future__ import annotations

from typing import Protocol

import msgspec

from hmem.llm.client import LLMClient, LLMConfig, Usage

__all__ = [
    "EXTRACTION_PROMPT",
    "PROMPT_VERSION",
    "Candidate",
    "Extraction",
    "ExtractionRequest",
    "ExtractorOutput",
    "Extractor",
    "KnownFact",
    "LLMExtractor",
    "Turn",
]

PROMPT_VERSION = "extract-v1"

EXTRACTION_PROMPT = """\
You extract durable memories from a conversation for an assistant's long-term memory.

The user message is a JSON object:
- "new_turns": the turns to extract from (with "said_at", when each was said);
- "context_turns": earlier turns of the same conversation, for reference only (they were
  already processed: do not extract from them again);
- "existing_facts": facts already in memory that may be related, each with its "id";
- "profile": what is known about the user, if anything.

Answer with one JSON object and nothing else:
{"facts": [{"text": "...", "subject": "...", "category": "semantic", "importance": 5,
            "valid_from": "YYYY-MM-DD" or null, "entities": ["..."], "supersedes": [ids]}]}

Rules:
- Extract what the new turns state or clearly imply and would be useful to remember later:
  facts about the user and other people (names, relationships, jobs, places, possessions),
  preferences and opinions, plans and commitments, events that happened, decisions, and
  instructions about how the user wants things done. Skip greetings, small talk, questions
  that carry no information, and the assistant's generic advice.
- Each fact is one short, self-contained statement in the third person that can be understood
  without the conversation: use names, not pronouns ("Maya adopted a cat named Luna", not "she
  got one"); write dates as absolute dates, resolving "yesterday" or "last May" from "said_at".
  Call the user "the user" unless their name is known.
- "subject": the main person or thing the fact is about (e.g. "Maya"; "user" for the user).
- "category": "semantic" for lasting facts and preferences, "episodic" for something that
  happened at a particular time, "procedural" for how to do something or how the user wants
  things done.
- "importance": 1 (trivia) to 10 (essential to remember).
- "valid_from": the date it happened or became true, if the turns say or imply it; else null.
- "entities": the names of people, places, organisations and things the fact mentions.
- "supersedes": ids of existing facts that this fact replaces because they are no longer
  true or were wrong (a new address replaces the old one). Only ids from "existing_facts";
  never a fact that is merely related. Usually empty.
- Do not repeat a fact that existing_facts already state with the same meaning.
- If nothing is worth remembering, answer {"facts": []}.
"""


class Turn(msgspec.Struct, frozen=True):
    """A conversation turn as the extractor sees it."""

    turn: int
    role: str
    text: str
    said_at: str
    speaker: str | None = None


class KnownFact(msgspec.Struct, frozen=True):
    """An existing fact shown to the extractor, with the id it may supersede."""

    id: int
    subject: str
    text: str
    valid_from: str


class ExtractionRequest(msgspec.Struct, frozen=True):
    """Everything one extraction call sees."""

    session_id: str
    new_turns: tuple[Turn, ...]
    context_turns: tuple[Turn, ...] = ()
    existing_facts: tuple[KnownFact, ...] = ()
    profile: str | None = None


class Candidate(msgspec.Struct, frozen=True, kw_only=True):
    """One fact the extractor proposes. Lenient on purpose (ids may come as strings, the
    importance as a float); :mod:`hmem.llm.extraction` checks and cleans every field."""

    text: str
    subject: str = ""
    category: str | None = None
    importance: int | float | None = None
    valid_from: str | None = None
    entities: list[str] = []
    supersedes: list[int | str] = []


class Extraction(msgspec.Struct, frozen=True):
    """The JSON object the extractor answers with."""

    facts: list[Candidate] = []


class ExtractorOutput(msgspec.Struct, frozen=True):
    """What an extraction produced: candidates, the model that made them, tokens spent."""

    facts: tuple[Candidate, ...]
    model: str
    usage: Usage = msgspec.field(default_factory=Usage)


class Extractor(Protocol):
    prompt_version: str

    def extract(self, request: ExtractionRequest) -> ExtractorOutput: ...


class LLMExtractor:
    """Extracts facts with one chat call (JSON mode; invalid JSON is re-asked ``attempts``
    times in all, then :class:`~hmem.errors.LLMResponseInvalid`)."""

    def __init__(
        self,
        client: LLMClient | LLMConfig | None = None,
        *,
        attempts: int = 2,
        temperature: float = 0.0,
        max_tokens: int | None = None,
        prompt: str = EXTRACTION_PROMPT,
        prompt_version: str = PROMPT_VERSION,
    ) -> None:
        if not isinstance(client, LLMClient):
            client = LLMClient(client)
        self.client = client
        self.attempts = attempts
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.prompt = prompt
        self.prompt_version = prompt_version

    def __repr__(self) -> str:
        return f"LLMExtractor({self.client!r}, prompt_version={self.prompt_version!r})"

    def messages(self, request: ExtractionRequest) -> list[dict[str, str]]:
        """The chat messages for one request."""
        body = msgspec.json.encode(request).decode()
        return [
            {"role": "system", "content": self.prompt},
            {"role": "user", "content": body},
        ]

    def extract(self, request: ExtractionRequest) -> ExtractorOutput:
        before = self.client.usage
        extraction, result = self.client.chat_json(
            self.messages(request), Extraction, temperature=self.temperature,
            max_tokens=self.max_tokens, attempts=self.attempts,
        )
        after = self.client.usage
        usage = Usage(
            after.prompt_tokens - before.prompt_tokens,
            after.completion_tokens - before.completion_tokens,
            after.calls - before.calls,
        )
        model = result.model or self.client.config.model
        return ExtractorOutput(tuple(extraction.facts), model, usage)
