"""Checks of an event's own fields, run on the write path before anything is appended.

Replay never runs them (an event an older hmem accepted is never refused later because a rule got
stricter); the fold's checks against the state (below) are run by projections/fold.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from datetime import datetime

from eventlog.events import (
    EmbeddingRecorded,
    EpisodeRecorded,
    EventBase,
    FactForgotten,
    FactRemembered,
    FactRevised,
    FactsErased,
    RecallServed,
)
from projections.errors import FactAlreadyForgotten, FactSuperseded, InvalidInput, InvalidTime
from projections.timeutil import from_us, to_us

__all__ = [
    "CONTROL_CHARS",
    "MAX_ENTITIES",
    "MAX_NAME_CHARS",
    "MAX_TEXT_CHARS",
    "check_derived_from",
    "check_dims",
    "check_erasable",
    "erased_reason",
    "check_fields",
    "check_forgettable",
    "check_name",
    "check_period",
    "check_revisable",
    "check_text",
    "check_timing",
]

# "restored": erasures a key file records that its log (a backup restored) had no receipt of
ERASE_SCOPES = ("fact", "subject", "episode", "namespace", "restored")
MAX_TEXT_CHARS = 100_000
MAX_NAME_CHARS = 500
MAX_ENTITIES = 1_000
CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f]")
_SURROGATE = re.compile(r"[\ud800-\udfff]")


def check_fields(ev: EventBase, *, at_tx: bool = True) -> None:
    """Checks of the event's own fields (the write path runs them once before appending).
    ``at_tx=False`` leaves out the one that depends on the event's tx time (a fact true since
    it was learned must end after that): :func:`check_timing` runs it once the time is set."""
    check_name("namespace", ev.namespace)
    for label, value in (("source_agent", ev.source_agent), ("source_ref", ev.source_ref)):
        if value is not None:
            check_text(label, value, MAX_NAME_CHARS, allow_empty=True)
    request_id = getattr(ev, "request_id", None)
    if request_id is not None:
        check_name("request_id", request_id)
    if isinstance(ev, FactRemembered):
        check_name("subject", ev.subject)
        _check_statement(ev.text, ev.confidence, ev.entities)
        _check_lineage(ev)
        if at_tx or ev.valid_from is not None:
            check_timing(ev)
    elif isinstance(ev, FactRevised):
        if ev.subject is not None:
            check_name("subject", ev.subject)
        _check_statement(ev.text, ev.confidence, ev.entities)
        _check_lineage(ev)
        check_text("reason", ev.reason or "", MAX_NAME_CHARS, allow_empty=True)
    elif isinstance(ev, EpisodeRecorded):
        check_name("session_id", ev.session_id)
        check_name("role", ev.role)
        if ev.speaker is not None:
            check_name("speaker", ev.speaker)
        check_text("text", ev.text, MAX_TEXT_CHARS)
        if isinstance(ev.turn, bool) or not isinstance(ev.turn, int) or ev.turn < 0:
            raise InvalidInput(f"turn must be an integer >= 0, not {ev.turn!r}")
    elif isinstance(ev, FactForgotten):
        check_text("reason", ev.reason or "", MAX_NAME_CHARS, allow_empty=True)
    elif isinstance(ev, EmbeddingRecorded):
        check_name("model", ev.model)
        if ev.dims <= 0 or len(ev.vector) != 4 * ev.dims:
            raise InvalidInput(
                f"vector has {len(ev.vector)} bytes but dims={ev.dims} needs {4 * ev.dims} "
                f"(little-endian float32)"
            )
    elif isinstance(ev, RecallServed):
        _check_recall(ev)
    elif isinstance(ev, FactsErased):
        if ev.scope not in ERASE_SCOPES:
            raise InvalidInput(f"scope must be one of {ERASE_SCOPES}, not {ev.scope!r}")
        check_text("reason", ev.reason or "", MAX_NAME_CHARS, allow_empty=True)
        ids = ev.named
        if not ids or len(set(ids)) != len(ids):
            raise InvalidInput("an erasure names each erased event once, and at least one")


def _check_recall(ev: RecallServed) -> None:
    check_text("query", ev.query, MAX_TEXT_CHARS)
    for label, value in (("limit", ev.limit), ("max_tokens", ev.max_tokens)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InvalidInput(f"{label} must be an integer of at least 1, not {value!r}")
    if ev.subject is not None:
        check_name("subject", ev.subject)
    if ev.model is not None:
        check_name("model", ev.model)
    check_text("config", ev.config, MAX_TEXT_CHARS)
    if len(ev.query_vector) % 4 or (ev.model is None and ev.query_vector):
        raise InvalidInput("query_vector must be float32 values of the query's embedding model")
    if len(ev.hits) != len(ev.scores):
        raise InvalidInput(f"{len(ev.hits)} hits but {len(ev.scores)} scores")


def _check_lineage(ev: FactRemembered | FactRevised) -> None:
    for label, value in (
        ("extractor", ev.extractor), ("prompt_version", ev.prompt_version),
        ("category", ev.category),
    ):
        if value is not None:
            check_name(label, value)
    if ev.importance is not None and (
        isinstance(ev.importance, bool) or not isinstance(ev.importance, int)
        or not 1 <= ev.importance <= 10
    ):
        raise InvalidInput(f"importance must be an integer from 1 to 10, not {ev.importance!r}")
    if len(set(ev.derived_from)) != len(ev.derived_from):
        raise InvalidInput("derived_from names an episode twice")


def check_timing(ev: EventBase) -> None:
    """The check of an event's fields that depends on its tx time: a fact without
    ``valid_from`` is true from its tx time on, and must end after it."""
    if isinstance(ev, FactRemembered):
        vf = to_us(ev.tx_at) if ev.valid_from is None else to_us(ev.valid_from)
        check_period(vf, ev.valid_to)


def check_text(label: str, value: str, limit: int, *, allow_empty: bool = False) -> None:
    if not isinstance(value, str):
        raise InvalidInput(f"{label} must be a string, not {type(value).__name__}")
    if not allow_empty and not value.strip():
        raise InvalidInput(f"{label} is empty; give a non-empty {label}")
    if len(value) > limit:
        raise InvalidInput(f"{label} has {len(value)} characters; the limit is {limit}")
    bad = None if value.isascii() else _SURROGATE.search(value)
    if bad:
        raise InvalidInput(
            f"{label} is not valid Unicode text (a lone surrogate at {bad.start()}); "
            f"decode it with errors='replace' first"
        )


def check_name(label: str, value: str) -> None:
    check_text(label, value, MAX_NAME_CHARS)
    if CONTROL_CHARS.search(value):
        raise InvalidInput(f"{label} {value!r} contains control characters; remove them")


def _check_statement(text: str, confidence: float, entities: tuple[str, ...]) -> None:
    check_text("text", text, MAX_TEXT_CHARS)
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, (int, float))
        or not math.isfinite(confidence)
        or not 0.0 <= confidence <= 1.0
    ):
        raise InvalidInput(f"confidence must be a number from 0 to 1, not {confidence!r}")
    if len(entities) > MAX_ENTITIES:
        raise InvalidInput(f"{len(entities):,} entities; the limit is {MAX_ENTITIES:,} per fact")
    for name in entities:
        check_name("entity", name)


def check_period(valid_from: int, valid_to: datetime | None) -> None:
    if valid_to is not None and to_us(valid_to) <= valid_from:
        raise InvalidTime(
            f"valid_to {valid_to.isoformat()} is not after valid_from "
            f"{from_us(valid_from).isoformat()}; a fact must be true for some time"
        )


# ---------------------------------------------------------------------- checks against a state
# The refusals of the fold (projections/fold.py; the write path asks it with check()),
# written once: each takes what it needs of the state as values.


def check_derived_from(
    ev: FactRemembered | FactRevised, episode_namespace: Callable[[int], str | None]
) -> None:
    """Every seq in ``derived_from`` is a recorded episode of the event's namespace
    (``episode_namespace(seq)`` is that episode's namespace, None if there is none)."""
    for seq in ev.derived_from:
        if not isinstance(seq, int) or episode_namespace(seq) != ev.namespace:
            raise InvalidInput(
                f"derived_from names {seq!r}, which is not a recorded episode (turn) in "
                f"namespace {ev.namespace!r}; give the seqs of EpisodeRecorded events"
            )


def check_revisable(
    ev: FactRevised,
    fact_id: int,
    *,
    forgotten: bool,
    superseded: bool,
    head_of: Callable[[int], int],
    open_valid_from: int,
) -> None:
    """``ev`` may revise fact ``fact_id`` (found in its namespace): not forgotten, not already
    revised, and its period starts after the open row's ``valid_from`` (a world change) or
    ends after it (a correction)."""
    if forgotten:
        raise FactAlreadyForgotten(
            f"fact {fact_id} was forgotten; it cannot be revised. Remember a new fact "
            f"instead"
        )
    if superseded:
        raise FactSuperseded(fact_id, head_of(fact_id))
    if ev.valid_from is None:
        check_period(open_valid_from, ev.valid_to)
    else:
        vf = to_us(ev.valid_from)
        if vf <= open_valid_from:
            raise InvalidTime(
                f"valid_from {ev.valid_from.isoformat()} is not after fact {fact_id}'s "
                f"valid_from {from_us(open_valid_from).isoformat()}: a change in the world "
                f"must come after the old fact became true. To correct the old fact "
                f"instead, revise without valid_from"
            )
        check_period(vf, ev.valid_to)


def check_erasable(ev: FactsErased, has: Callable[[int, str], bool]) -> None:
    """Every id an erasure lists is an earlier event of its namespace of the kind it is listed
    as: ``has(id, kind)`` for kind "fact" and "episode" (recalls are not folded: only their
    range is checked)."""
    for kind, ids in (("fact", ev.fact_ids), ("episode", ev.episode_ids),
                      ("recall", ev.recall_ids)):
        for i in ids:
            if not isinstance(i, int) or isinstance(i, bool) or i < 1 or (
                0 < ev.seq <= i  # stamped (replay): only earlier events
            ) or (kind != "recall" and not has(i, kind)):
                raise InvalidInput(
                    f"the erasure lists {i!r} as a {kind} of namespace {ev.namespace!r}, "
                    f"which it is not"
                )


def erased_reason(ev: FactsErased) -> str:
    """The forget reason the fold gives a fact an erasure ends."""
    return f"erased (receipt {ev.seq})"


def check_forgettable(fact_id: int, *, forgotten: bool) -> None:
    if forgotten:
        raise FactAlreadyForgotten(f"fact {fact_id} is already forgotten")


def check_dims(
    vector_dims: dict[tuple[str, str], int],
    ev: EmbeddingRecorded,
    batch: dict[tuple[str, str], int],
) -> None:
    """A vector must have the length of its model's earlier vectors in its namespace (those
    of the state, ``vector_dims``, or of ``batch``: what the same write adds first)."""
    key = (ev.namespace, ev.model)
    want = vector_dims.get(key, batch.get(key))
    if want is not None and ev.dims != want:
        raise InvalidInput(
            f"model {ev.model!r} has {want}-dimensional vectors in namespace "
            f"{ev.namespace!r}; this one has {ev.dims}. Record it under another model name "
            f"(a model's vectors must all be comparable)"
        )
    batch[key] = ev.dims
