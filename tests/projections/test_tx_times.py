"""Every event's tx time, kept in the checkpoint's file and read by block when asked: it reads
as the list of times it was made from (with the times appended after it), whatever is asked of
it (one, from either end, a time turned into a seq, all), and a block changed on disk after it
was checked raises DamagedProjection naming the tx times, never a wrong time."""

from __future__ import annotations

import bisect
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from projections.errors import DamagedProjection
from projections.part_blob import BLOCK, PartBlob, block_digests
from projections.tx_times import TxTimes
from tests.conftest import examples

times = st.lists(st.integers(-(2**63), 2**63 - 1), max_size=5000)


def _kept(tmp_path, values: list[int], before: bytes = b"head") -> TxTimes:
    data = np.array(values, dtype="<i8").tobytes()
    path = tmp_path / "manifest"
    path.write_bytes(before + data)
    fd = os.open(path, os.O_RDONLY)
    return TxTimes(PartBlob(fd, len(before), len(data), block_digests(data),
                            what="the checkpoint's tx times"))


@settings(max_examples=examples(dev=60, ci=300), deadline=None)
@given(kept=times, tail=st.lists(st.integers(0, 2**40), max_size=50), data=st.data())
def test_kept_and_appended_times_read_as_one_list(tmp_path_factory, kept, tail, data):
    tx = _kept(tmp_path_factory.mktemp("tx"), kept)
    tx.extend(tail)
    want = kept + tail
    assert len(tx) == len(want)
    if want:
        i = data.draw(st.integers(-len(want), len(want) - 1), label="index")
        assert tx[i] == want[i]
    with pytest.raises(IndexError):
        tx[len(want)]
    assert list(tx) == want and list(tx.array()) == want
    ascending = sorted(want)
    tx_sorted = _kept(tmp_path_factory.mktemp("tx"), ascending)
    point = data.draw(st.integers(-(2**63), 2**63 - 1), label="time")
    assert bisect.bisect_right(tx_sorted, point) == bisect.bisect_right(ascending, point)
    assert tx_sorted.nbytes() == 0 and tx.nbytes() == 8 * len(tail)  # kept ones left in the file


def test_a_time_changed_on_disk_after_the_check_raises_on_read(tmp_path):
    values = list(range(3 * BLOCK // 8))  # three blocks
    tx = _kept(tmp_path, values)
    path = tmp_path / "manifest"
    raw = bytearray(path.read_bytes())
    raw[4 + BLOCK + 3] ^= 1  # in the second block
    path.write_bytes(bytes(raw))
    assert tx[5] == 5 and tx[-1] == values[-1]  # the other blocks still read
    with pytest.raises(DamagedProjection, match="tx times"):
        tx[BLOCK // 8 + 1]


def test_a_damaged_block_is_read_through_recover_and_only_that_block(tmp_path):
    values = list(range(3 * BLOCK // 8 + 5))  # three blocks and a part of a fourth
    tx = _kept(tmp_path, values)
    path = tmp_path / "manifest"
    raw = bytearray(path.read_bytes())
    raw[4 + BLOCK + 3] ^= 1  # in the second block
    path.write_bytes(bytes(raw))
    asked: list[tuple[int, int]] = []

    def recover(start: int, stop: int) -> list[int]:
        asked.append((start, stop))
        return values[start:stop]

    tx.recover = recover
    assert tx[BLOCK // 8 + 1] == BLOCK // 8 + 1 and asked == [(BLOCK // 8, 2 * BLOCK // 8)]
    assert list(tx) == values and tx.nbytes() == BLOCK  # the recovered block is held
    assert bisect.bisect_right(tx, BLOCK // 8 + 7) == BLOCK // 8 + 8
    assert len(asked) == 1
