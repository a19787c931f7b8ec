"""The one error hierarchy of hmem.

Every error hmem raises on purpose is an :class:`HmemError`. Subclasses say precisely what went
wrong; messages say what to do about it. Third-party errors are translated at the boundary with
``raise X(...) from e``.
"""

from __future__ import annotations

__all__ = [
    "HmemError",
    "InvalidInput",
    "InvalidTime",
    "FactNotFound",
    "FactForgotten",
    "FactSuperseded",
    "StoreLocked",
    "StoreNotFound",
    "ReadOnlyStore",
    "StoreClosed",
    "LogError",
    "LogCorrupted",
    "UnsupportedFormat",
    "LogWriteFailed",
    "ProjectionError",
    "EmbedderError",
    "EmbedderUnavailable",
    "LLMError",
    "LLMNotConfigured",
    "LLMUnavailable",
    "LLMResponseInvalid",
    "ExtractionFailed",
]


class HmemError(Exception):
    """Base class of every error hmem raises on purpose."""


class InvalidInput(HmemError, ValueError):
    """An argument was rejected before anything was written."""


class InvalidTime(InvalidInput):
    """A time argument was naive, unparseable, or out of order."""


class FactNotFound(HmemError, LookupError):
    """No fact with this id exists in this namespace."""

    def __init__(self, fact_id: object, namespace: str) -> None:
        super().__init__(
            f"no fact {fact_id!r} in namespace {namespace!r}; "
            f"list facts with `hmem history SUBJECT` or `hmem recall QUERY`"
        )
        self.fact_id = fact_id
        self.namespace = namespace


class FactForgotten(HmemError):
    """The fact was forgotten (tombstoned); it can no longer be revised or forgotten again."""


class FactSuperseded(HmemError):
    """The fact was already revised; only the newest version of a chain can be revised."""

    def __init__(self, fact_id: int, head_id: int) -> None:
        super().__init__(
            f"fact {fact_id} was already revised; revise the newest version, fact {head_id}, instead"
        )
        self.fact_id = fact_id
        self.head_id = head_id


class StoreLocked(HmemError):
    """Another process holds this store open for writing."""


class StoreNotFound(HmemError, FileNotFoundError):
    """No store exists at this path (and it was opened read-only, so none was created)."""


class ReadOnlyStore(HmemError):
    """A write was attempted on a store opened read-only."""


class StoreClosed(HmemError):
    """The store was used after close()."""


class LogError(HmemError):
    """Base class of event-log errors."""


class LogCorrupted(LogError):
    """A record before the tail of the log failed its checks.

    Carries the segment path and byte offset of the first bad record.
    """

    def __init__(self, segment: str, offset: int, detail: str, store: str | None = None) -> None:
        where = f" --path {store}" if store else ""
        super().__init__(
            f"event log corrupted in {segment} at byte {offset}: {detail}. "
            f"Inspect with `hmem{where} log verify`; `hmem{where} log repair` keeps a backup and "
            f"truncates the log to the last good record (events after it are lost)"
        )
        self.segment = segment
        self.offset = offset
        self.detail = detail


class UnsupportedFormat(LogError):
    """The log was written by a newer (or unknown) format version."""


class LogWriteFailed(LogError):
    """A write or fsync of the log failed; the log refuses writes until it is reopened."""


class ProjectionError(HmemError):
    """The DuckDB projection could not be read or written; it can be rebuilt from the log."""


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


class ExtractionFailed(HmemError):
    """``Memory.add`` stored the raw turns but extracting facts from them failed.

    No fact of the failed extraction was appended. ``episode_seqs`` are the log seqs of the
    ``EpisodeRecorded`` events that *were* stored, so the caller can retry the extraction only
    (``Memory.extract(episode_seqs)``) instead of adding the turns twice."""

    def __init__(self, message: str, episode_seqs: tuple[int, ...] = ()) -> None:
        super().__init__(message)
        self.episode_seqs = tuple(episode_seqs)


def shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` for an error message, cut after ``limit`` characters (a user's value may
    be megabytes long)."""
    text = repr(value)
    if len(text) <= limit:
        return text
    size = f" ({len(value)} characters)" if isinstance(value, str) else ""
    return text[:limit] + "..." + size
