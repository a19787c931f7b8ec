"""The key file's check before an erasure (eventlog/keyfile.py): every key record up to a seq is
read at once, and the first one that fails its checks is named, whichever byte of it changed."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.keyfile import RECORD, KeyFile
from hmem.errors import KeyFileDamaged
from tests.conftest import examples


def made(directory: Path, through: int, erased: list[int]) -> Path:
    path = directory / "keys.hmk"
    keys = KeyFile.create(path, os.urandom(16))
    keys.reserve(through)
    keys.erase(erased, receipt=through)
    keys.close()
    return path


@settings(max_examples=examples(dev=40, ci=300))
@given(
    through=st.integers(1, 3000),
    data=st.data(),
)
def test_the_check_names_the_first_key_record_that_fails(through, data):
    with tempfile.TemporaryDirectory() as d:
        erased = data.draw(st.lists(st.integers(1, through), max_size=5), label="erased")
        path = made(Path(d), through, erased)
        keys = KeyFile(path)
        keys.check(through)  # intact, erased records included
        keys.close()
        raw = bytearray(path.read_bytes())
        damaged = sorted(data.draw(st.sets(st.integers(1, through), min_size=1, max_size=3),
                                   label="damaged records"))
        for seq in damaged:  # any byte the record's checksum covers, or the checksum itself
            at = RECORD * seq + data.draw(st.integers(0, 59), label="byte")
            raw[at] ^= 1 << data.draw(st.integers(0, 7), label="bit")
        path.write_bytes(bytes(raw))
        keys = KeyFile(path)
        try:
            if damaged[0] > 1:
                keys.check(damaged[0] - 1)  # the records before it pass
            with pytest.raises(KeyFileDamaged, match=f"record of event {damaged[0]} fails"):
                keys.check(through)
        finally:
            keys.close()


def test_the_check_past_the_keys_made_names_a_damaged_record_first_then_the_first_missing(
        tmp_path):
    path = made(tmp_path, 10, [])
    keys = KeyFile(path)
    keys.check(0)
    first_missing = keys.made_through + 1
    with pytest.raises(KeyFileDamaged, match=f"no key for event {first_missing}"):
        keys.check(first_missing + 5000)
    keys.close()
    raw = bytearray(path.read_bytes())
    raw[RECORD * 3 + 30] ^= 1  # the key of event 3
    path.write_bytes(bytes(raw))
    keys = KeyFile(path)
    with pytest.raises(KeyFileDamaged, match="record of event 3 fails"):
        keys.check(first_missing + 5000)
    keys.close()


@settings(max_examples=examples(dev=30, ci=200))
@given(through=st.integers(1, 2000), data=st.data())
def test_keys_read_at_once_are_the_keys_read_one_by_one_and_fail_alike(through, data):
    with tempfile.TemporaryDirectory() as d:
        erased = data.draw(st.lists(st.integers(1, through), max_size=5), label="erased")
        path = made(Path(d), through, erased)
        seqs = data.draw(st.lists(st.integers(1, through), min_size=1, max_size=50), label="seqs")
        keys = KeyFile(path)
        try:
            assert keys.keys(seqs) == [keys.key(seq) for seq in seqs]
            got = keys.keys(seqs)
            assert [seq for seq, key in zip(seqs, got, strict=True) if key is None] == [
                seq for seq in seqs if seq in erased]
            past = keys.made_through + 1  # among seqs that have keys, first or last
            with pytest.raises(KeyFileDamaged, match=f"holds no key for event {past}"):
                keys.keys([*seqs, past])
            with pytest.raises(KeyFileDamaged, match="holds no key for event 0"):
                keys.keys([0, *seqs])
        finally:
            keys.close()
        raw = bytearray(path.read_bytes())
        bad = data.draw(st.sampled_from(seqs), label="damaged")
        raw[RECORD * bad + data.draw(st.integers(0, 59), label="byte")] ^= 1
        path.write_bytes(bytes(raw))
        keys = KeyFile(path)
        try:
            with pytest.raises(KeyFileDamaged, match=f"record of event {bad} fails"):
                keys.key(bad)
            with pytest.raises(KeyFileDamaged, match="record of event .* fails"):
                keys.keys(seqs)
            with pytest.raises(KeyFileDamaged, match="holds no key for event"):
                keys.keys([keys.made_through + 1])
        finally:
            keys.close()


def test_a_key_record_of_no_known_state_fails_its_checks_read_alone_or_at_once(tmp_path):
    """A record whose state byte is neither live nor erased, with its checksum made to match
    (written by another program, say): refused either way, never taken as a key."""
    import struct
    import zlib

    path = made(tmp_path, 10, [])
    raw = bytearray(path.read_bytes())
    at = RECORD * 4
    raw[at + 8] = 3  # the state of event 4's record
    raw[at + 56:at + 60] = struct.pack("<I", zlib.crc32(bytes(raw[at:at + 56])))
    path.write_bytes(bytes(raw))
    keys = KeyFile(path)
    try:
        for read in (lambda: keys.key(4), lambda: keys.keys([2, 4, 6])):
            with pytest.raises(KeyFileDamaged, match="record of event 4 fails"):
                read()
        assert keys.keys([2, 6]) == [keys.key(2), keys.key(6)]
    finally:
        keys.close()
