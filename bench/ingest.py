"""Getting a benchmark's conversations into a store: raw turns, or facts extracted by an LLM."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from typing import Any

import msgspec

from bench.qa import Conversation
from hmem import Memory
from hmem.errors import ExtractionFailed, LLMUnavailable
from hmem.llm import Usage

__all__ = ["FixedClock", "CachedExtractor", "ingest_raw", "ingest_extract"]


def ingest_raw(m: Memory, conv: Conversation) -> int:
    """Store every non-empty turn of ``conv`` as one fact in namespace ``conv.id``; returns
    how many."""
    ns = m.in_namespace(conv.id)
    n = 0
    for session in conv.sessions:
        facts = []
        for t in session.turns:
            if not t.text.strip():
                continue
            fact: dict[str, Any] = {"subject": t.speaker, "text": t.text,
                                    "valid_from": session.when, "source_agent": "bench"}
            if t.ref is not None:
                fact["source_ref"] = t.ref
            facts.append(fact)
        if facts:
            ns.remember_many(facts, dedup=False)  # each turn is its own evidence
            n += len(facts)
    ns.flush()  # every turn's vector recorded before any question is asked
    return n


class FixedClock:
    """A deterministic store clock: 2030-01-01 UTC, one microsecond later at every reading."""

    def __init__(self) -> None:
        self._now = datetime(2030, 1, 1, tzinfo=timezone.utc)

    def __call__(self) -> datetime:
        self._now += timedelta(microseconds=1)
        return self._now


class CachedExtractor:
    """hmem's extraction prompt asked through a :class:`~bench.llm_cache.CachedLLM`, so
    extraction calls are cached like the others (``hmem.llm.extractor.LLMExtractor`` takes
    only a live client)."""

    def __init__(self, llm: Any, *, attempts: int = 2) -> None:
        from hmem.llm.extractor import EXTRACTION_PROMPT, PROMPT_VERSION

        self.llm, self.attempts = llm, attempts
        self.prompt, self.prompt_version = EXTRACTION_PROMPT, PROMPT_VERSION
        self.usage = Usage()
        self.failed = 0

    def messages(self, request: Any) -> list[dict[str, str]]:
        return [{"role": "system", "content": self.prompt},
                {"role": "user", "content": msgspec.json.encode(request).decode()}]

    def extract(self, request: Any) -> Any:
        from hmem.llm.extractor import Extraction, ExtractorOutput

        before = self.llm.usage
        try:
            extraction, result = self.llm.chat_json(self.messages(request), Extraction,
                                                    attempts=self.attempts)
        finally:  # count the asks of a failed extraction too (extraction runs alone)
            after = self.llm.usage
            self.usage = self.usage + Usage(after.prompt_tokens - before.prompt_tokens,
                                            after.completion_tokens - before.completion_tokens,
                                            after.calls - before.calls)
        return ExtractorOutput(tuple(extraction.facts), result.model, result.usage)


def _message(speaker: str, text: str, when: datetime) -> dict[str, Any]:
    if speaker in ("user", "assistant", "system"):
        return {"role": speaker, "content": text, "observed_at": when}
    return {"role": "user", "name": speaker, "content": text, "observed_at": when}


def ingest_extract(m: Memory, conv: Conversation, extractor: CachedExtractor) -> int:
    """``Memory.add`` every session of ``conv`` (namespace ``conv.id``); returns how many
    facts were stored. A failed extraction is counted in ``extractor.failed`` and skipped;
    an unreachable endpoint stops the run."""
    ns = m.in_namespace(conv.id)
    n = 0
    for i, session in enumerate(conv.sessions):
        messages = [_message(t.speaker, t.text, session.when) for t in session.turns
                    if t.text.strip()]
        if not messages:
            continue
        try:
            result = ns.add(messages, session_id=f"{conv.id}/{session.id or i + 1}",
                            observed_at=session.when, extractor=extractor)
        except ExtractionFailed as e:
            if isinstance(e.__cause__, LLMUnavailable):
                raise e.__cause__ from e
            extractor.failed += 1
            continue
        n += len(result.fact_ids)
    return n
