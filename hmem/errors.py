"""The one error hierarchy of hmem: every public error type, wherever it is raised.

Every error hmem raises on purpose is an :class:`HmemError`. Subclasses say precisely what went
wrong; messages say what to do about it. Third-party errors are translated at the boundary with
``raise X(...) from e``. Each floor owns the errors it raises (the log's and the store's live in
``eventlog.errors``, the fold's in ``projections.errors``, the optional layers' here); this module
re-exports them all, so ``from hmem.errors import ...`` is the one place to catch them from.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from eventlog.errors import (
    AccessDenied,
    HmemError,
    KeyFileDamaged,
    KeyFileError,
    KeyFileMissing,
    LogCorrupted,
    LogError,
    LogWriteFailed,
    ReadersOpen,
    ReadOnlyStore,
    RecordRejected,
    RepairUnavailable,
    ServerLogCorrupted,
    ServerUnavailable,
    StoreClosed,
    StoreLocked,
    StoreNotFound,
    UnsupportedFormat,
    shown,
)
from eventlog.witness import WitnessError
from projections.errors import (
    FactAlreadyForgotten,
    FactNotFound,
    FactSuperseded,
    InvalidInput,
    InvalidTime,
    ProjectionError,
)

__all__ = [
    "HmemError",
    "InvalidInput",
    "InvalidTime",
    "FactNotFound",
    "FactAlreadyForgotten",
    "FactForgotten",
    "FactSuperseded",
    "StoreLocked",
    "StoreNotFound",
    "AccessDenied",
    "ReadOnlyStore",
    "StoreClosed",
    "LogError",
    "LogCorrupted",
    "ServerLogCorrupted",
    "ServerUnavailable",
    "RepairUnavailable",
    "UnsupportedFormat",
    "LogWriteFailed",
    "RecordRejected",
    "WitnessError",
    "ProjectionError",
    "EmbedderError",
    "EmbedderUnavailable",
    "EmbeddingFailed",
    "LLMError",
    "LLMNotConfigured",
    "LLMUnavailable",
    "LLMResponseInvalid",
    "ExtractionFailed",
    "QueryTimeout",
    "KeyFileError",
    "KeyFileMissing",
    "KeyFileDamaged",
    "ReadersOpen",
    "ErasureError",
    "NothingToErase",
    "AlreadyErased",
    "ErasureUnavailable",
    "ErasureUnfinished",
    "AlreadyWritten",
    "CopyFailed",
    "RequestIdReused",
    "shown",
]

FactForgotten = FactAlreadyForgotten  # the older name (it clashed with the event type)


class EmbedderError(HmemError):
    """An embedder failed (bad response, wrong dims, model mismatch, endpoint error)."""


class EmbedderUnavailable(EmbedderError):
    """The embedder cannot be used here: an extra is not installed or it is not configured.

    The message names the install command or the settings to make."""


class LLMError(HmemError):
    """Base class of errors from the (optional) LLM layer, ``hmem.llm``."""


class LLMNotConfigured(LLMError):
    """No model or endpoint is configured, or the ``openai`` extra is not installed.

    The message names the environment variables (or the install command)."""


class LLMUnavailable(LLMError):
    """The endpoint failed: an HTTP error, a timeout or a connection error (after retries)."""


class LLMResponseInvalid(LLMError):
    """The model's answer was not the JSON asked for, after re-asking.

    ``raw`` holds an excerpt of the last answer."""

    def __init__(self, message: str, raw: str = "") -> None:
        super().__init__(message)
        self.raw = raw


class QueryTimeout(HmemError):
    """``Memory.sql`` stopped a query that ran longer than its timeout."""


class ExtractionFailed(HmemError):
    """``Memory.add`` stored the raw turns but extracting facts from them failed.

    No fact of the failed extraction was appended. ``episode_seqs`` are the log seqs of the
    ``EpisodeRecorded`` events that *were* stored, so the caller can retry the extraction only
    (``Memory.extract(episode_seqs)``) instead of adding the turns twice."""

    def __init__(self, message: str, episode_seqs: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.episode_seqs = tuple(episode_seqs)


class EmbeddingFailed(EmbedderError):
    """Background embedding failed. The facts are stored (and found by text search); their
    vectors are not. ``fact_ids`` are the facts still waiting: ``flush()`` retries them, the
    next open of the store redoes them, ``hmem reembed`` embeds any fact without a vector."""

    def __init__(self, message: str, fact_ids: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.fact_ids = tuple(fact_ids)


class ErasureError(HmemError):
    """Base class of erasure errors; nothing was erased."""


class NothingToErase(ErasureError, LookupError):
    """The erasure names no fact, subject, episode or namespace this store holds."""


class AlreadyErased(ErasureError):
    """Everything the erasure names was erased before (the message names the receipt)."""


class ErasureUnavailable(ErasureError):
    """The store keeps its texts in the clear (it was made before hmem sealed texts, or with
    sealing off): a tombstone is all it can do."""


class ErasureUnfinished(ErasureError):
    """A writer died in the middle of an erasure; the store's writer finishes it when it next
    opens, and until then a reader does not open (its copy could still hold the texts)."""


class CopyFailed(HmemError):
    """A copy of a store (``hmem copy``) did not read back as the source: nothing in the source
    changed; remove the destination and copy again."""


class AlreadyWritten(HmemError):
    """The write's ``request_id`` names a write the store already holds; ``events`` are what
    that write logged. ``remember``, ``revise`` and ``forget`` answer such a retry from them
    (the caller never sees this error); a raw transaction raises it and writes nothing."""

    def __init__(self, request_id: str, events: Sequence[Any]) -> None:
        seqs = ", ".join(str(ev.seq) for ev in events)
        super().__init__(
            f"request {request_id!r} was already written (seq {seqs}); nothing was written again"
        )
        self.request_id = request_id
        self.events = tuple(events)


class RequestIdReused(InvalidInput):
    """A ``request_id`` already names a different write; nothing was written. A request id
    names one write: give each new write a new one."""
