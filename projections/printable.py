"""Stored text made safe to show: to a person (a terminal, a notebook) or as JSON.

Stored text is anyone's: it may hold escape sequences, carriage returns, C1 controls, bidi
controls that reorder what a reader sees (U+202E makes "gpj.exe" read "exe.jpg"), line
separators and lone surrogates. :func:`visible` shows each of them as an escape (``\\x1b``,
``\\u202e``) so that text cannot drive a terminal or hide what it says; :func:`json_visible`
does the same inside encoded JSON, where ``\\uXXXX`` is the JSON escape of the same character,
so a JSON reader decodes the text exactly as stored.
"""

from __future__ import annotations

import re

__all__ = ["visible", "json_visible", "UNSAFE"]

# DEL, C1 controls, the bidi controls (ALM, LRM, RLM, LRE..RLO, LRI..PDI), the line and
# paragraph separators: what JSON encoders leave raw inside strings
_RAW_IN_JSON = "\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069"
# those, C0 controls but tab (newline and carriage return too), and lone surrogates
UNSAFE = re.compile(f"[\x00-\x08\x0a-\x1f{_RAW_IN_JSON}\ud800-\udfff]")
_JSON_RAW = re.compile(f"[{_RAW_IN_JSON}]")
_NAMED = {"\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    c = match.group()
    return _NAMED.get(c) or (f"\\x{ord(c):02x}" if ord(c) < 0x100 else f"\\u{ord(c):04x}")


def visible(line: str) -> str:
    """``line`` safe to print for a person: each unsafe character shown as its escape
    (``\\x1b``, ``\\r``, ``\\n``, ``\\u202e``, ``\\ud800``); tabs stay; text without such
    characters comes back unchanged."""
    return UNSAFE.sub(_escape, line)


def json_visible(encoded: str) -> str:
    """Encoded JSON with every raw DEL, C1, bidi control and line separator in its strings
    written as a ``\\uXXXX`` escape: the same JSON value, nothing left to drive a terminal
    that shows the document. (Outside strings JSON holds only ASCII, so only strings change.)"""
    return _JSON_RAW.sub(lambda m: f"\\u{ord(m.group()):04x}", encoded)
