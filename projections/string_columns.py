"""Strings of the columnar fold: a table of distinct strings known by code (:class:`Strings`:
subjects, agents, labels), and strings by slot in one UTF-8 buffer (:class:`Texts`: fact texts;
:class:`UniqueStrings`: nearly all distinct values such as source refs), which a checkpoint
part may leave on disk until read."""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from contextlib import nullcontext
from typing import Any

import numpy as np
import numpy.typing as npt

from projections.arrays import grown
from projections.part_blob import PartBlob
from projections.string_lookup import BlobLookup

__all__ = ["Strings", "Texts", "UniqueStrings"]

# held while a table read from UTF-8 changes form or adds values (readers of the buffer need it
# not: the buffer never changes)
_LAZY = threading.RLock()


class Strings:
    """A string table: each distinct string once, known by its code (its index); None is -1.

    Filled in bulk (:meth:`fill`, :meth:`fill_utf8`), the value -> code dict is made only when
    first needed. Values given as UTF-8 bytes stay bytes until every one is asked for
    (:attr:`values`, :attr:`codes`): one is read by :meth:`get`, found by :meth:`find` (a key
    per string, projections/string_lookup.py), and values added meanwhile are held apart."""

    __slots__ = ("_values", "_codes", "_utf8", "_lookup", "_finds")

    def __init__(self) -> None:
        # every value; while ``_utf8`` holds the first ones as bytes, those added after them
        self._values: list[str] = []
        self._codes: dict[str | None, int] | None = {None: -1}  # of ``_values``' values
        self._utf8: tuple[bytes, list[int]] | None = None  # (blob, each value's end)
        self._lookup: BlobLookup | None = None
        self._finds = 0  # values found one at a time by key

    @property
    def values(self) -> list[str]:
        """The strings, in code order."""
        if self._utf8 is not None:
            with _LAZY:
                utf8 = self._utf8
                if utf8 is not None:
                    self._decode(*utf8)
        return self._values

    def _decode(self, blob: bytes, ends: list[int]) -> None:
        """Leave the UTF-8 form (under ``_LAZY``): every value decoded, the ones added after
        them appended; ``_utf8`` is cleared last, so a reader that sees it cleared sees every
        value."""
        starts = [0, *ends][: len(ends)]
        if blob.isascii():  # one character a byte: decode once, cut the text
            text = blob.decode("ascii")
            decoded = [text[a:b] for a, b in zip(starts, ends, strict=True)]
        else:
            decoded = [
                blob[a:b].decode("utf-8", "surrogatepass")
                for a, b in zip(starts, ends, strict=True)
            ]
        decoded += self._values
        self._values, self._codes, self._lookup = decoded, None, None
        self._utf8 = None

    @property
    def codes(self) -> dict[str | None, int]:
        """Value -> code (None -> -1)."""
        codes = self._codes
        if codes is None or self._utf8 is not None:
            values = self.values
            codes = {None: -1}
            codes.update(zip(values, range(len(values)), strict=True))  # no copy made
            self._codes = codes
        return codes

    def find(self, value: str | None) -> int | None:
        """The code of ``value`` (-1 for None); None when the table does not hold it. Found
        one at a time by key (~5 us) until that has cost what the dict costs to make (~1 us
        a value): a writer's table then makes it."""
        if self._utf8 is None:
            codes = self._codes
            return (self.codes if codes is None else codes).get(value)
        with _LAZY:
            if self._utf8 is None or self._finds > max(len(self) // 8, 64):
                return self.codes.get(value)
            assert self._codes is not None
            code = self._codes.get(value)
            if code is None and value is not None:
                self._finds += 1
                code = self._held_lookup().find(value)
            return code

    def _held_lookup(self) -> BlobLookup:
        assert self._utf8 is not None
        if self._lookup is None:
            self._lookup = BlobLookup(*self._utf8)
        return self._lookup

    def code(self, value: str | None) -> int:
        """The code of ``value`` (added if new); -1 for None."""
        with _LAZY if self._utf8 is not None else nullcontext():
            code = self.find(value)
            if code is None:
                code = len(self)
                self._values.append(value)  # type: ignore[arg-type]
                if self._codes is not None:
                    self._codes[value] = code
            return code

    def encode(self, values: Sequence[str | None]) -> npt.NDArray[np.int32]:
        """Codes of many values at once (new ones added in order of first appearance)."""
        n = len(values)
        if values.count(None) == n:
            return np.full(n, -1, dtype=np.int32)
        if self._utf8 is not None:
            with _LAZY:
                if self._utf8 is not None:
                    return self._encode_held(values)
        codes = self.codes
        for value in dict.fromkeys(values):
            if value not in codes:
                codes[value] = len(self._values)
                self._values.append(value)  # type: ignore[arg-type]
        return np.fromiter(map(codes.__getitem__, values), dtype=np.int32, count=n)

    def _encode_held(self, values: Sequence[str | None]) -> npt.NDArray[np.int32]:
        """:meth:`encode` in the UTF-8 form (under ``_LAZY``): the values not added since
        found by key at once."""
        added = self._codes
        assert added is not None
        distinct = [v for v in dict.fromkeys(values) if v is not None and v not in added]
        found: dict[str | None, int | None] = dict(
            zip(distinct, self._held_lookup().find_many(distinct), strict=True))
        for value, code in found.items():
            if code is None:
                found[value] = self.code(value)
        codes = self.codes if self._utf8 is None else added  # code() may have left the form
        get = found.get
        return np.fromiter((codes[v] if (c := get(v)) is None else c for v in values),
                           dtype=np.int32, count=len(values))

    def get(self, code: int) -> str | None:
        if code < 0:
            return None
        utf8 = self._utf8
        if utf8 is None:
            return self._values[code]
        blob, ends = utf8
        if code < len(ends):  # the buffer never changes
            return blob[ends[code - 1] if code else 0:ends[code]].decode("utf-8", "surrogatepass")
        with _LAZY:
            return self._values[code if self._utf8 is None else code - len(ends)]

    def fill(self, values: list[str]) -> None:
        """Set the table to ``values`` (distinct, in code order), replacing what it held."""
        self._values, self._codes, self._utf8, self._lookup = values, None, None, None

    def fill_utf8(self, blob: bytes, ends: list[int]) -> None:
        """:meth:`fill` with the values as one UTF-8 buffer and where each ends in it."""
        self._values, self._codes, self._utf8, self._lookup = [], {None: -1}, (blob, ends), None
        self._finds = 0

    def __len__(self) -> int:
        if self._utf8 is None:
            return len(self._values)
        with _LAZY:  # the form may change meanwhile (see get)
            utf8 = self._utf8
            return len(self._values) + (0 if utf8 is None else len(utf8[1]))


class Texts:
    """Strings by slot as one UTF-8 buffer and where each starts and ends in it, not a ``str``
    object each (a fact's text costs its bytes plus 16). Lone surrogates round-trip
    ("surrogatepass"). Appended in slot order, or placed at given slots in any order
    (:meth:`place`: a bulk load that need not sort the texts)."""

    __slots__ = ("blob", "tail", "starts", "ends", "n")

    def __init__(self) -> None:
        # in memory, or left in a checkpoint part until read (projections/part_blob.py)
        self.blob: bytearray | PartBlob = bytearray()
        # texts placed after a buffer left in a part (a reader folding the log's tail): kept
        # apart, so that one new text does not read the part's buffer in
        self.tail = bytearray()
        self.starts: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.ends: npt.NDArray[np.int64] = np.zeros(0, dtype=np.int64)
        self.n = 0

    def append(self, text: str) -> None:
        self.extend([text])

    def extend(self, texts: Iterable[str]) -> None:
        texts = list(texts)
        self.place(np.arange(self.n, self.n + len(texts)), texts)

    def place(self, slots: npt.NDArray[Any], texts: Sequence[str]) -> None:
        """Put ``texts[i]`` at slot ``slots[i]``; ``n`` becomes one past the highest slot set
        (a slot below it that was never set reads as "")."""
        if not len(texts):
            return
        encoded = [t.encode("utf-8", "surrogatepass") for t in texts]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        ends = len(self.blob) + len(self.tail) + np.cumsum(lengths)
        (self.tail if isinstance(self.blob, PartBlob) else self.blob).extend(b"".join(encoded))
        need = int(slots.max()) + 1
        self.starts, self.ends = grown(self.starts, need), grown(self.ends, need)
        self.starts[slots], self.ends[slots] = ends - lengths, ends
        self.n = max(self.n, need)

    def in_memory(self) -> bytearray:
        """The buffer, read in first if it was left in a checkpoint part (with the tail)."""
        if isinstance(self.blob, PartBlob):
            on_disk, whole = self.blob, self.blob.whole()
            whole += self.tail
            self.blob, self.tail = whole, bytearray()
            on_disk.close()
        return self.blob

    def __bytes__(self) -> bytes:
        """The whole buffer (the part's, then the tail)."""
        return bytes(self.blob) + bytes(self.tail)

    def __getitem__(self, slot: int) -> str:
        if not 0 <= slot < self.n:
            raise IndexError(slot)
        start, end, held = self.starts.item(slot), self.ends.item(slot), len(self.blob)
        text = self.blob[start:end] if start < held else self.tail[start - held:end - held]
        return text.decode("utf-8", "surrogatepass")

    def __len__(self) -> int:
        return self.n

    def nbytes(self) -> int:
        """Bytes held in memory (a buffer left on disk not counted)."""
        held = len(self.tail) if isinstance(self.blob, PartBlob) else len(self.blob)
        return held + self.starts[: self.n].nbytes + self.ends[: self.n].nbytes


class UniqueStrings(Texts):
    """A string table without sharing, for values that are nearly all distinct (source refs
    like "D3:12"): each value gets a new code and is kept as bytes, with no dict from value to
    code (which would cost more than the values). Same surface as :class:`Strings`."""

    __slots__ = ()

    @property
    def values(self) -> UniqueStrings:
        return self

    def code(self, value: str | None) -> int:
        if value is None:
            return -1
        self.append(value)
        return self.n - 1

    def encode(self, values: Sequence[str | None]) -> npt.NDArray[np.int32]:
        codes = np.full(len(values), -1, dtype=np.int32)
        given = [i for i, v in enumerate(values) if v is not None]
        if given:
            codes[given] = np.arange(self.n, self.n + len(given), dtype=np.int32)
            self.extend([values[i] for i in given])  # type: ignore[misc]
        return codes

    def get(self, code: int) -> str | None:
        return None if code < 0 else self[code]
