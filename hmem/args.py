"""Checks of the facade's arguments, shared by the library, the CLI and the LLM layer.

Each returns the argument as the store wants it, or raises :class:`~hmem.errors.InvalidInput`
with a message that says what to pass instead. Nothing is written before they pass.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterable

import numpy as np

from eventlog.errors import shown
from projections.checks import CONTROL_CHARS, MAX_NAME_CHARS
from projections.errors import InvalidInput

__all__ = [
    "MAX_DIMS",
    "MAX_ID",
    "check_namespace",
    "check_sequence",
    "confidence_arg",
    "seq_arg",
    "entity_names",
    "fact_id",
    "name_arg",
    "text_arg",
]

MAX_ID = 2**63 - 1  # ids are seqs: 64-bit integers
MAX_DIMS = 65_536  # the longest vector a caller may record


def check_namespace(namespace: object) -> str:
    """A namespace: a short, printable, non-empty name."""
    if not isinstance(namespace, str) or not namespace.strip():
        raise InvalidInput("namespace must be a non-empty string, e.g. 'default'")
    if len(namespace) > MAX_NAME_CHARS:
        raise InvalidInput(
            f"namespace has {len(namespace):,} characters; the limit is {MAX_NAME_CHARS}: use a "
            f"short printable name")
    if CONTROL_CHARS.search(namespace):
        raise InvalidInput(
            f"namespace {shown(namespace)} has control characters; use a short printable "
            f"name")
    if any("\ud800" <= c <= "\udfff" for c in namespace):
        raise InvalidInput(
            f"namespace {shown(namespace)} is not valid Unicode text (a lone surrogate); "
            f"decode it with errors='replace' first"
        )
    return namespace


def fact_id(value: object) -> int:
    """A fact id: an integer, or a string of digits ("42", "#42"; not "²")."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer, str)):
        raise InvalidInput(f"a fact id is an integer (e.g. 42), not {shown(value)}")
    if isinstance(value, str):
        text = value.strip().lstrip("#")
        if not (text.isascii() and text.isdigit()):
            raise InvalidInput(f"a fact id is an integer (e.g. 42 or #42), not {shown(value)}")
        value = int(text) if len(text) <= 20 else MAX_ID + 1
    number = int(value)
    if abs(number) > MAX_ID:
        raise InvalidInput(
            f"a fact id is an integer of at most 64 bits, not {shown(value)}; find ids with "
            f"`hmem recall` or `hmem history`"
        )
    return number


def confidence_arg(value: object) -> float:
    """A confidence: a real number from 0 to 1 (numpy scalars too), as a plain float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidInput(f"confidence must be a number from 0 to 1, not {shown(value)}")
    number = float(value)
    if not 0.0 <= number <= 1.0:  # NaN fails too
        raise InvalidInput(f"confidence must be a number from 0 to 1, not {shown(value)}")
    return number


def seq_arg(value: object, label: str = "seq") -> int:
    """A log seq: an integer (numpy integers too)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidInput(f"{label} must be an integer seq (e.g. 12), not {shown(value)}")
    return int(value)


def check_sequence(value: object, label: str, want: str) -> None:
    """A list-like argument (not a string, bytes or a dict)."""
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise InvalidInput(f"{label} must be {want}, not {type(value).__name__}")


def text_arg(value: object, label: str, limit: int = MAX_NAME_CHARS) -> str:
    """A string argument of at most ``limit`` characters (a name's, unless a text's is
    given), stripped (the store's own checks judge the content)."""
    if not isinstance(value, str):
        raise InvalidInput(f"{label} must be a string, not {type(value).__name__}")
    _check_length(value, label, limit)
    return value.strip()


def name_arg(value: object, label: str) -> object:
    """A name a call looks for (a subject, a session id, a reason): refused when it is a
    string longer than ``MAX_NAME_CHARS`` (no longer one was ever written); returned as it
    is, for the call's own checks."""
    if isinstance(value, str):
        _check_length(value, label, MAX_NAME_CHARS)
    return value


def _check_length(value: str, label: str, limit: int) -> None:
    if len(value) > limit:
        raise InvalidInput(
            f"{label} has {len(value):,} characters; the limit is {limit:,}: shorten it")


def entity_names(entities: Iterable[str]) -> tuple[str, ...]:
    """Entity names given by a caller: a list of strings."""
    if isinstance(entities, str):
        raise InvalidInput("entities must be a list of names, not one string")
    check_sequence(entities, "entities", "a list of names")
    names = tuple(entities)
    for name in names:
        text_arg(name, "entity")
    return names
