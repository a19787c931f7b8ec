"""Sealing a batch (eventlog/sealing.py): every event of it is sealed under the key it names,
with a nonce of its own, its seq and kind bound in, nothing left in the clear, and opens, one by
one, to what was sealed; a record that claims to be sealed when nothing of its kind is sealed is
refused by name."""

from __future__ import annotations

import os
import struct

import msgspec
import pytest
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from hypothesis import given, settings
from hypothesis import strategies as st

from eventlog.events import (
    EmbeddingRecorded,
    EpisodeRecorded,
    FactForgotten,
    FactRemembered,
    FactRevised,
    FactsErased,
)
from eventlog.keyfile import KeyFile
from eventlog.sealing import SEALED_FIELDS, Sealer, is_erased
from hmem.errors import KeyFileDamaged
from tests.conftest import examples

text = st.text(max_size=40)


def _event(kind: str, seq: int, fact: int, words: str) -> object:
    """An event of ``kind`` with seq ``seq`` about the earlier fact ``fact``."""
    if kind == "remember":
        return FactRemembered(seq=seq, subject=f"s{seq}", text=words, entities=(words[:5],))
    if kind == "revise":
        return FactRevised(seq=seq, fact_id=fact, text=words, reason=words or None)
    if kind == "forget":
        return FactForgotten(seq=seq, fact_id=fact, reason=words or None)
    if kind == "embed":
        return EmbeddingRecorded(seq=seq, fact_id=fact, model="m", dims=1,
                                 vector=words.encode()[:4].ljust(4, b"\0"))
    return EpisodeRecorded(seq=seq, session_id="s", turn=seq, role="user", text=words)


@settings(max_examples=examples(dev=30, ci=200))
@given(batch=st.lists(st.tuples(st.sampled_from(
    ["remember", "revise", "forget", "embed", "episode"]), text), min_size=1, max_size=30),
    erased=st.sets(st.integers(1, 31), max_size=3))
def test_a_batch_sealed_at_once_opens_event_by_event_to_what_was_sealed(tmp_path_factory,
                                                                        batch, erased):
    keys = KeyFile.create(tmp_path_factory.mktemp("k") / "keys.hmk", os.urandom(16))
    try:
        keys.reserve(len(batch) + 1)
        events = [_event(kind, seq, 1, words) for seq, (kind, words) in enumerate(batch, 2)]
        sealer = Sealer(keys)
        sealed = sealer.seal_many(events)
        assert [type(e) for e in sealed] == [type(e) for e in events]
        blobs = [stored.sealed for stored in sealed if stored.sealed]
        assert len({blob[:12] for blob in blobs}) == len(blobs)  # a nonce of its own each
        for ev, stored in zip(events, sealed, strict=True):
            names, empties = SEALED_FIELDS[type(ev)]
            values = tuple(getattr(ev, name) for name in names)
            if values == empties:  # nothing to seal (a forget without a reason)
                assert stored == ev
                continue
            assert tuple(getattr(stored, name) for name in names) == empties  # none left clear
            owner = ev.fact_id if isinstance(ev, (EmbeddingRecorded, FactForgotten)) else ev.seq
            aad = struct.pack("<Q", ev.seq) + type(ev).__struct_config__.tag.encode()
            raw = AESGCM(keys.key(owner)).decrypt(stored.sealed[:12], stored.sealed[12:], aad)
            assert raw == msgspec.msgpack.encode(values)  # the values, msgpack-encoded
            assert sealer.open(stored) == ev  # under its own key, or the fact's (1)
        keys.erase(sorted(erased), receipt=len(batch) + 1)
        for ev, stored in zip(events, sealed, strict=True):
            owner = ev.fact_id if isinstance(ev, (EmbeddingRecorded, FactForgotten)) else ev.seq
            opened = sealer.open(stored)
            assert is_erased(opened) == (bool(stored.sealed) and owner in erased)
            if owner in erased and stored.sealed:
                with pytest.raises(KeyFileDamaged, match="which was erased"):
                    sealer.seal_many([ev])
    finally:
        keys.close()


def test_a_record_sealed_of_a_kind_nothing_seals_is_refused_by_name(tmp_path):
    keys = KeyFile.create(tmp_path / "keys.hmk", os.urandom(16))
    try:
        keys.reserve(3)
        forged = FactsErased(seq=2, scope="fact", fact_ids=(1,), sealed=b"\x01" * 40)
        with pytest.raises(KeyFileDamaged, match="event 2 is sealed, but no event of its kind"):
            Sealer(keys).open(forged)
        unsealed = msgspec.structs.replace(forged, sealed=b"")
        assert Sealer(keys).open(unsealed) == unsealed
        assert Sealer(keys).seal_many([unsealed]) == [unsealed]
    finally:
        keys.close()
