"""A checkpoint part's block that fails its digest, made again from the log.

A large namespace's fact texts and index tokens stay in its part, each 16 KiB block checked as
it is read (projections/part_blob.py). A block that fails is never believed: these make what it
held from the facts it spans, each fact's text read from the event that made it (``text_of``:
seq -> text, the store's log) and its tokens from its subject and that text, as the projector
made them when it folded the event. The tokens are coded into the state's terms.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from projections.compact_columns import DiskColumn
from projections.fold_state import FactColumns
from projections.index_docs import index_counts
from projections.part_blob import BLOCK, PartBlob

__all__ = ["recover_from_log", "text_blocks", "token_blocks"]

TextOf = Callable[[int], str]  # a fact's id (the seq of its event) -> its text, from the log


def recover_from_log(cols: FactColumns, text_of: TextOf, note: Callable[[str], None]) -> None:
    """Have the part's texts and tokens left on disk made again from the log where a block
    fails its digest (``note`` is told which)."""
    texts = cols.texts.blob
    if isinstance(texts, PartBlob):
        texts.recover = _noted(text_blocks(cols, text_of), "fact texts", note)
    tokens = cols.tokens.peek("values")
    tokens = getattr(tokens, "make", tokens)  # a column appended to before it was made
    if isinstance(tokens, DiskColumn):
        tokens.blob.recover = _noted(
            token_blocks(cols, tokens.stored, len(tokens.blob)), "index tokens", note)


def _noted(make: Callable[[int], bytes], what: str, note: Callable[[str], None]
           ) -> Callable[[int], bytes]:
    def block(i: int) -> bytes:
        note(f"block {i} of the checkpoint part's {what} failed its digest; made it again "
             f"from the log")
        return make(i)

    return block


def text_blocks(cols: FactColumns, text_of: TextOf) -> Callable[[int], bytes]:
    """Block ``i`` of the part's fact texts (the UTF-8 of each fact's text, slot after slot)."""
    texts = cols.texts

    def block(i: int) -> bytes:
        lo, hi = i * BLOCK, min((i + 1) * BLOCK, len(texts.blob))
        first, last = _spanned(texts.starts[: texts.n], texts.ends[: texts.n], lo, hi)
        data = b"".join(text_of(int(cols.table.ids[slot])).encode("utf-8", "surrogatepass")
                        for slot in range(first, last))
        base = int(texts.starts[first]) if first < last else lo
        return data[lo - base: hi - base]

    return block


def token_blocks(cols: FactColumns, stored: np.dtype[Any], length: int
                 ) -> Callable[[int], bytes]:
    """Block ``i`` of the part's index tokens (``length`` bytes of term codes as ``stored``,
    each fact's run after the previous one's)."""
    size = stored.itemsize
    values = length // size

    def block(i: int) -> bytes:
        lo, hi = i * BLOCK // size, min((i + 1) * BLOCK // size, values)
        ends = cols.table.tokens_end[: cols.tokened]
        starts = np.concatenate(([0], ends[:-1])) if len(ends) else ends
        first, last = _spanned(starts, ends, lo, hi)
        subjects, code = cols.subjects.values, cols.terms.code
        runs = [code(term) for slot in range(first, last)
                for term, tf in index_counts(subjects[int(cols.table.subject[slot])],
                                             cols.texts[slot]).items()
                for _ in range(tf)]
        base = int(starts[first]) if first < last else lo
        return np.array(runs[lo - base: hi - base], dtype=stored).tobytes()

    return block


def _spanned(starts: np.ndarray, ends: np.ndarray, lo: int, hi: int) -> tuple[int, int]:
    """The slots ``first .. last - 1`` whose runs ``starts[s] .. ends[s]`` (back to back)
    overlap ``lo .. hi``."""
    first = int(np.searchsorted(ends, lo, side="right"))
    last = int(np.searchsorted(starts, hi, side="left"))
    return first, max(first, last)
