"""How the time finder (:mod:`hmem.time.expressions`) reads around a phrase, in work linear in
the query however long it is: the word and the preposition before a phrase are read from a
window of :data:`WINDOW` characters before it, "when" opening a sentence is found by reading
back only the non-word characters before each "when", and the "from" that joins two ranges is
found once per query. (Searching the whole query before each phrase, as a regex anchored at the
phrase does, made a long query's work grow with its square.)
"""

from __future__ import annotations

import re

__all__ = ["WINDOW", "asks_when", "before", "first_from", "joins_from", "prev_word"]

WINDOW = 64  # characters read back from a phrase for the word or preposition before it

_I = re.IGNORECASE
FROM = re.compile(r"\b(?:between|from)\s+$|from\s", _I)  # before a range that a second one ends
_FROM_END = re.compile(r"\b(?:between|from)\s+$", _I)
_FROM_ANY = re.compile(r"from\s", _I)
# asking for a time: "when" opening a sentence ((?:^|[.?!;:]\s+)\W*when\b), or one of these
_ASKS_TIME = re.compile(r"\b(?:what|which)\s+(?:year|month|date|day|week|weekend|time|season)\b|"
                        r"\bhow\s+(?:long|many\s+\w+)\s+ago\b|\bsince\s+when\b", _I)
_WHEN = re.compile(r"(?<!\w)when\b", _I)
_WORD_CHAR = re.compile(r"\w")
_STOP_SPACE = re.compile(r"[.?!;:]\s")
_LAST_WORD = re.compile(r"([a-z]+)\W*$")


def prev_word(text: str, pos: int) -> str:
    """The lowercase word just before ``pos`` (only non-word characters between), read from
    the last :data:`WINDOW` characters: a word cut by the window's edge is none of the short
    words the finder asks about, so it counts as no word."""
    low = max(0, pos - WINDOW)
    m = _LAST_WORD.search(text[low:pos].lower())
    if m is None or (low and m.start() == 0 and text[low - 1].isalpha()):
        return ""
    return m.group(1)


def before(pattern: re.Pattern[str], text: str, pos: int) -> re.Match[str] | None:
    """``pattern`` (anchored with ``$``) ending at ``pos``, looked for in the :data:`WINDOW`
    characters before it: bounded work per phrase."""
    return pattern.search(text, max(0, pos - WINDOW), pos)


def asks_when(query: str) -> tuple[int, str] | None:
    """(start, text) of the first phrase asking for a time, as the regex
    ``(?:^|[.?!;:]\\s+)\\W*when\\b`` or :data:`_ASKS_TIME` would find it, in linear time: each
    "when" reads back only the run of non-word characters before it."""
    other = _ASKS_TIME.search(query)
    for m in _WHEN.finditer(query, 0, len(query) if other is None else other.start()):
        run = m.start()
        while run and not _WORD_CHAR.match(query, run - 1):
            run -= 1
        stop = None if run == 0 else _STOP_SPACE.search(query, run, m.start())
        if run == 0 or stop is not None:
            start = 0 if stop is None else stop.start()
            return start, query[start:m.end()]
    return None if other is None else (other.start(), other[0])


def first_from(query: str) -> re.Match[str] | None:
    """The query's first "from " (read once, for :func:`joins_from`)."""
    return _FROM_ANY.search(query)


def joins_from(query: str, pos: int, from_at: re.Match[str] | None) -> int | None:
    """Where :data:`FROM` finds "between" or "from" for a range starting at ``pos`` (searched
    for up to ``pos``, else matched at it), without reading the whole query again: the query's
    first "from " (``from_at``) if it ends by ``pos``, or "between" / "from" just before."""
    found = [m.start() for m in (before(_FROM_END, query, pos),) if m is not None]
    if from_at is not None and from_at.end() <= pos:
        found.append(from_at.start())
    if found:
        return min(found)
    return pos if FROM.match(query, pos) else None
