"""Source positions (session, turn) of many source refs at once, read from their UTF-8 bytes.

:func:`projections.recall_index.source_position` reads one ref: the turn is the number (at most
18 digits) that ends it after its last ':', the session is the ref up to that number. Building a
namespace's index reads every ref of the namespace; :func:`source_positions` reads them from the
bytes they are kept in (:class:`projections.string_columns.Texts`) with array arithmetic. A ref
with a non-ASCII byte or a newline (where the regex's Unicode digits and its ``$`` differ from
plain bytes) is read one by one by ``source_position``. Sessions come back as codes into a list
of the distinct ones (one ``np.unique`` over fixed-width values, no ``str`` per ref).
tests/projections/test_index_build.py holds the two equal.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from projections.recall_index import source_position

__all__ = ["source_positions"]

I64 = npt.NDArray[np.int64]
_MAX_DIGITS = 18
_MAX_SESSION = 64  # bytes of a session compared as a fixed-width value; longer: one by one
_CHUNK = 1 << 16  # refs read at a time
_COLON, _NEWLINE, _ZERO, _NINE = ord(":"), ord("\n"), ord("0"), ord("9")


def source_positions(
    blob: bytes | bytearray, starts: I64, ends: I64
) -> tuple[I64, I64, list[str], I64]:
    """(indexes of the refs that name a position, ascending; their sessions as codes into the
    list of distinct sessions that comes next; their turns) for the refs
    ``blob[starts[i]:ends[i]]`` (UTF-8)."""
    b = np.frombuffer(blob, dtype=np.uint8)
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    m = len(starts)
    colons = np.flatnonzero(b == _COLON)
    # read one by one: non-ASCII, newlines, NULs (a fixed-width bytes value drops trailing
    # ones) and sessions too long to compare as fixed-width values
    odd_bytes = np.flatnonzero((b >= 0x80) | (b == _NEWLINE) | (b == 0))
    run_start, turn = np.empty(m, dtype=np.int64), np.empty(m, dtype=np.int64)
    named, odd = np.empty(m, dtype=bool), np.empty(m, dtype=bool)
    for at in range(0, m, _CHUNK):  # a chunk at a time: the temporaries of one chunk
        part = slice(at, at + _CHUNK)
        run_start[part], named[part], odd[part], turn[part] = _read_refs(
            b, colons, odd_bytes, starts[part], ends[part])
    plain = np.flatnonzero(named & ~odd)
    codes = np.full(m, -1, dtype=np.int64)
    names = _code_sessions(b, starts[plain], run_start[plain], plain, codes)
    code_of = {name: code for code, name in enumerate(names)}
    for i in np.flatnonzero(odd).tolist():
        got = source_position(blob[starts[i]:ends[i]].decode("utf-8", "surrogatepass"))
        if got is not None:
            codes[i] = code_of.setdefault(got[0], len(code_of))
            turn[i] = got[1]
    found = np.flatnonzero(codes >= 0)
    return found, codes[found], list(code_of), turn[found]


def _read_refs(
    b: npt.NDArray[np.uint8], colons: I64, odd_bytes: I64, starts: I64, ends: I64
) -> tuple[I64, npt.NDArray[np.bool_], npt.NDArray[np.bool_], I64]:
    """(where each ref's turn starts, whether it names a position, whether it is read one by
    one, its turn) of the refs ``b[starts[i]:ends[i]]``."""
    m = len(starts)
    # the run of ASCII digits that ends each ref (one more than the limit: too long)
    run = np.zeros(m, dtype=np.int64)
    alive = ends > starts
    for k in range(1, _MAX_DIGITS + 2):  # until no ref has k digits (turns are short)
        pos = ends - k
        alive &= pos >= starts
        byte = b[np.where(alive, pos, 0)] if len(b) else np.zeros(m, dtype=np.uint8)
        alive &= (byte >= _ZERO) & (byte <= _NINE)
        if not alive.any():
            break
        run += alive
    run_start = ends - run
    before = np.searchsorted(colons, run_start) - 1  # the last colon before the run
    has_colon = (before >= 0) & (colons[np.maximum(before, 0)] >= starts) if len(colons) else (
        np.zeros(m, dtype=bool)
    )
    named = has_colon & (run >= 1) & (run <= _MAX_DIGITS)
    odd = np.searchsorted(odd_bytes, starts) != np.searchsorted(odd_bytes, ends)
    odd |= named & (run_start - starts > _MAX_SESSION)
    turn = np.zeros(m, dtype=np.int64)
    for k in range(int(run[named].max(initial=0))):  # the longest run read, digit by digit
        take = named & (k < run)
        digit = b[np.where(take, run_start + k, 0)].astype(np.int64) - _ZERO if len(b) else 0
        turn = np.where(take, turn * 10 + digit, turn)
    return run_start, named, odd, turn


def _code_sessions(b: npt.NDArray[np.uint8], starts: I64, stops: I64, which: I64,
                   codes: I64) -> list[str]:
    """Code the sessions ``b[starts[i]:stops[i]]`` (ASCII, no NUL) of refs ``which``: compared
    as fixed-width byte strings, one sort for all; returns the distinct ones in code order."""
    if not len(which):
        return []
    lengths = stops - starts
    width = max(int(lengths.max()), 1)
    # as big-endian integers, zero-padded, when they fit in 8 bytes: the same order, a faster
    # sort (the padded bytes are the first 8 columns of the same array)
    padded = np.zeros((len(which), max(width, 8)), dtype=np.uint8)
    last = len(b) - 1
    for k in range(width):  # a column at a time: memory of one index per ref, not per byte
        padded[:, k] = np.where(k < lengths, b[np.minimum(starts + k, last)], 0)
    if width <= 8:
        keys = padded.view(">u8").ravel()
        # a session's refs come in runs: the distinct ones are found among the runs' heads
        head = np.flatnonzero(np.concatenate(([True], keys[1:] != keys[:-1])))
        _, first, of_head = np.unique(keys[head], return_index=True, return_inverse=True)
        inverse = np.repeat(of_head, np.diff(np.append(head, len(keys))))
        distinct = np.ascontiguousarray(padded[head[first], :width]).view(f"S{width}").ravel()
    else:
        distinct, inverse = np.unique(padded.view(f"S{width}").ravel(), return_inverse=True)
    codes[which] = inverse.ravel()
    return [value.decode("ascii") for value in distinct.tolist()]
