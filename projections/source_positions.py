"""Source positions (session, turn) of many source refs at once, read from their UTF-8 bytes.

:func:`projections.recall_index.source_position` reads one ref: the turn is the number (at most
18 digits) that ends it after its last ':', the session is the ref up to that number. Building a
namespace's index reads every ref of the namespace; :func:`source_positions` reads them from the
bytes they are kept in (:class:`projections.column_store.Texts`) with array arithmetic. A ref
with a non-ASCII byte or a newline (where the regex's Unicode digits and its ``$`` differ from
plain bytes) is read one by one by ``source_position``. tests/test_index_build.py holds the two
equal.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from projections.recall_index import source_position

__all__ = ["source_positions"]

I64 = npt.NDArray[np.int64]
_MAX_DIGITS = 18
_COLON, _NEWLINE, _ZERO, _NINE = ord(":"), ord("\n"), ord("0"), ord("9")


def source_positions(
    blob: bytes | bytearray, starts: I64, ends: I64
) -> tuple[I64, list[str], list[int]]:
    """(indexes of the refs that name a position, ascending; their sessions; their turns) for
    the refs ``blob[starts[i]:ends[i]]`` (UTF-8)."""
    b = np.frombuffer(blob, dtype=np.uint8)
    starts, ends = np.asarray(starts, dtype=np.int64), np.asarray(ends, dtype=np.int64)
    m = len(starts)
    # the run of ASCII digits that ends each ref (one more than the limit: too long)
    run = np.zeros(m, dtype=np.int64)
    alive = ends > starts
    for k in range(1, _MAX_DIGITS + 2):
        pos = ends - k
        alive &= pos >= starts
        byte = b[np.where(alive, pos, 0)] if len(b) else np.zeros(m, dtype=np.uint8)
        alive &= (byte >= _ZERO) & (byte <= _NINE)
        run += alive
    run_start = ends - run
    colons = np.flatnonzero(b == _COLON)
    before = np.searchsorted(colons, run_start) - 1  # the last colon before the run
    has_colon = (before >= 0) & (colons[np.maximum(before, 0)] >= starts) if len(colons) else (
        np.zeros(m, dtype=bool)
    )
    named = has_colon & (run >= 1) & (run <= _MAX_DIGITS)
    odd_bytes = np.flatnonzero((b >= 0x80) | (b == _NEWLINE))
    odd = np.searchsorted(odd_bytes, starts) != np.searchsorted(odd_bytes, ends)
    turn = np.zeros(m, dtype=np.int64)
    for k in range(_MAX_DIGITS):
        take = named & (k < run)
        digit = b[np.where(take, run_start + k, 0)].astype(np.int64) - _ZERO if len(b) else 0
        turn = np.where(take, turn * 10 + digit, turn)
    positions: dict[int, tuple[str, int]] = {}
    plain = named & ~odd
    for i, a, z, t in zip(np.flatnonzero(plain).tolist(), starts[plain].tolist(),
                          run_start[plain].tolist(), turn[plain].tolist(), strict=True):
        positions[i] = (blob[a:z].decode("ascii"), t)
    for i in np.flatnonzero(odd).tolist():
        got = source_position(blob[starts[i]:ends[i]].decode("utf-8", "surrogatepass"))
        if got is not None:
            positions[i] = got
    order = sorted(positions)
    return (
        np.array(order, dtype=np.int64),
        [positions[i][0] for i in order],
        [positions[i][1] for i in order],
    )
