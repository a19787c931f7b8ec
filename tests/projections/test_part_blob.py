"""A large namespace's fact texts and index tokens stay in its checkpoint part until read: every
text reads back as written, across block boundaries, the tokens when verify or SQL first asks
(a recall answers from the kept postings, its feedback reads a few facts' tokens by block). The
part keeps their blocks' digests, so an open checks no block it does not read, and a block
changed on disk, before the open or after it, is never believed: a store makes it again from its
log (saying so), a bare reader of the part raises."""

from __future__ import annotations

import hashlib
import os
import random
import sys
from concurrent.futures import ThreadPoolExecutor

import pytest

from hmem import Memory
from projections import checkpoint_part
from projections.checkpoint import part_files
from projections.errors import DamagedProjection
from projections.index_tokens import token_counts
from projections.part_blob import BLOCK, PartBlob, block_digests, stream_digests

CHECKPOINT = "checkpoint.columns"


def _texts(n: int) -> list[str]:
    """Texts of many lengths, some not ASCII, so that many span two or more blocks."""
    return [(f"fact {i} " + ("é café " if i % 3 else "tea ") * (i * 37 % 900)).strip()
            for i in range(n)]


def _store(path, texts):
    with Memory(path, embedder=None) as m:
        return [m.remember("maya", t, dedup=False) for t in texts]


def _texts_on_disk(r: Memory) -> PartBlob:
    blob = r.store.projector.kept_space("default").state.texts.blob
    assert isinstance(blob, PartBlob)
    return blob


@pytest.fixture
def left_on_disk(monkeypatch):
    monkeypatch.setattr(checkpoint_part, "_LEFT_ON_DISK", 0)


def test_texts_left_in_the_part_read_back_as_written(tmp_path, left_on_disk):
    texts = _texts(120)
    ids = _store(tmp_path / "s", texts)
    assert sum(len(t.encode()) for t in texts) > 20 * BLOCK
    with Memory(tmp_path / "s", read_only=True, embedder=None) as r:
        _texts_on_disk(r)
        assert [r.get(i).text for i in reversed(ids)] == texts[::-1]


def test_a_writer_adding_to_texts_left_on_disk_keeps_every_text(tmp_path, left_on_disk):
    texts = _texts(60)
    ids = _store(tmp_path / "s", texts)
    with Memory(tmp_path / "s", embedder=None) as w:
        _texts_on_disk(w)
        ids.append(w.remember("tom", "one more", dedup=False))
        _texts_on_disk(w)  # a new text is kept apart: the part's buffer is not read in for it
        with Memory(tmp_path / "s", read_only=True, embedder=None) as r:  # folds it as a tail
            assert [r.get(i).text for i in ids] == [*texts, "one more"]
            _texts_on_disk(r)
        assert [w.get(i).text for i in ids] == [*texts, "one more"]
    with Memory(tmp_path / "s", read_only=True, embedder=None) as r:  # the part it published
        assert [r.get(i).text for i in ids] == [*texts, "one more"]


def _part_file(root):
    (part,) = [p for p in part_files(root / CHECKPOINT) if ".tx-" not in p.name]
    return part


def _column_start(part, name: str) -> int:
    """Where column ``name``'s bytes start in the part file."""
    with open(part, "rb") as f:
        manifest, _ = checkpoint_part._manifest(f)
        start = -(-f.tell() // 64) * 64  # columns start 64-byte aligned after the manifest
    (column,) = [c for c in manifest.columns if c.name == name]
    return start + column.offset


def _flip(path, needle: bytes) -> None:
    """Change the first byte of ``needle`` in the file, in place."""
    data = bytearray(path.read_bytes())
    at = data.find(needle)
    assert at >= 0
    data[at] ^= 1
    with open(path, "r+b") as f:
        f.write(data)


def test_a_part_changed_after_it_was_opened_is_not_believed(tmp_path, left_on_disk):
    texts = _texts(60)
    ids = _store(tmp_path / "s", texts)
    with Memory(tmp_path / "s", read_only=True, embedder=None) as r:
        _texts_on_disk(r)
        _flip(_part_file(tmp_path / "s"), texts[-1].encode())  # the last text's first byte
        assert r.get(ids[0]).text == texts[0]  # a block that did not change reads
        assert r.get(ids[-1]).text == texts[-1]  # the changed one made again from the log
        assert any("failed its digest" in note for note in r.notes)


def test_a_part_damaged_before_the_open_is_not_believed_and_not_read_whole(
    tmp_path, left_on_disk
):
    """Neither texts nor tokens are streamed at open: the damaged blocks are found as they are
    read, and what they held is made again from the log, the tokens as the fold made them."""
    texts = _texts(80)
    ids = _store(tmp_path / "s", texts)
    with Memory(tmp_path / "s", read_only=True, embedder=None) as r:
        state = r.store.projector.kept_space("default").state
        want_tokens = [token_counts(state, slot) for slot in range(state.n)]
    part = _part_file(tmp_path / "s")
    for i in (5, 40, 79):
        _flip(part, texts[i].encode())
    with open(part, "r+b") as f:  # a byte of the tokens, in their second block
        f.seek(_column_start(part, "tokens") + BLOCK + 7)
        byte = f.read(1)
        f.seek(-1, 1)
        f.write(bytes([byte[0] ^ 1]))
    with Memory(tmp_path / "s", read_only=True, embedder=None) as r:
        state = r.store.projector.kept_space("default").state
        assert state.tokens.deferred() == ["values"]
        assert [r.get(i).text for i in ids] == texts
        assert [token_counts(state, slot) for slot in range(state.n)] == want_tokens
        assert r.recall("café", limit=3)[0].id in ids
        damaged = [note for note in r.notes if "failed its digest" in note]
        assert any("fact texts" in note for note in damaged)
        assert any("block 1 of the checkpoint part's index tokens" in note for note in damaged)
        assert r.verify().ok


def test_a_bare_reader_of_a_damaged_part_raises_on_the_damaged_block(tmp_path, left_on_disk):
    texts = _texts(60)
    _store(tmp_path / "s", texts)
    part = _part_file(tmp_path / "s")
    with open(part, "rb") as f:
        digest = hashlib.sha256(checkpoint_part._manifest(f)[1]).digest()
    _flip(part, texts[-1].encode())
    facts, _ = checkpoint_part.read(part, digest)  # the damage is not read at open
    assert facts.texts[0] == texts[0]
    with pytest.raises(DamagedProjection, match="fails its digest"):
        facts.texts[len(texts) - 1]
    with pytest.raises(checkpoint_part.Refused, match="damaged"):
        checkpoint_part.read(part, digest, every_block=True)


def test_index_tokens_stay_in_the_part_until_verify_or_sql_reads_them_all(tmp_path, left_on_disk):
    texts = _texts(60)
    ids = _store(tmp_path / "s", texts)
    with Memory(tmp_path / "s", embedder=None) as w:
        expected = w.sql("SELECT term, fact_id, tf FROM postings ORDER BY ALL").fetchall()
    with Memory(tmp_path / "s", read_only=True, embedder=None) as r:
        state = r.store.projector.kept_space("default").state
        tokens = state.tokens
        assert tokens.deferred() == ["values"]
        assert r.recall("café", limit=3)[0].id in ids
        assert tokens.deferred() == ["values"]  # the kept postings answered, and feedback
        by_block = [token_counts(state, slot) for slot in range(state.n)]  # read by block
        assert tokens.deferred() == ["values"]
        assert r.verify().ok
        assert tokens.deferred() == []
        assert [token_counts(state, slot) for slot in range(state.n)] == by_block
        assert r.sql("SELECT term, fact_id, tf FROM postings ORDER BY ALL").fetchall() == expected


@pytest.mark.parametrize("length", [0, 1, BLOCK, 3 * BLOCK + 5, (2 << 20) + 1, (5 << 20) + 7])
def test_streamed_block_digests_are_the_blocks_digests(tmp_path, length):
    """Read a chunk at a time (by threads beyond two chunks), the digests of every block of
    the column, in order; a file that ends inside the column is refused."""
    data = bytes((i * 7 + i // 251) % 256 for i in range(length + 11))
    path = tmp_path / "part"
    path.write_bytes(data)
    with open(path, "rb") as f:
        assert stream_digests(f, 11, length) == block_digests(data[11:])
        if length:
            with pytest.raises(ValueError, match="ends inside a column"):
                stream_digests(f, 12, length)


def _damaged_blob(tmp_path, data: bytes, block: int) -> PartBlob:
    """A blob over ``data`` written to a file, then one byte of ``block`` changed on disk."""
    path = tmp_path / "blob"
    path.write_bytes(data)
    blob = PartBlob(os.open(path, os.O_RDONLY), 0, len(data), block_digests(data))
    with open(path, "r+b") as f:
        f.seek(block * BLOCK + 3)
        f.write(bytes([data[block * BLOCK + 3] ^ 1]))
    return blob


def test_a_block_made_again_is_checked_as_the_block_was(tmp_path):
    """What ``recover`` makes of a damaged block is believed only if it is the block that was
    written: a remake that differs (a log that does not hold what the part did) raises."""
    data = bytes(range(256)) * (3 * BLOCK // 256)
    blob = _damaged_blob(tmp_path, data, 1)
    blob.recover = lambda i: b"x" * BLOCK
    with pytest.raises(DamagedProjection, match="block 1"):
        blob[BLOCK:BLOCK + 8]
    blob.recover = lambda i: data[i * BLOCK:(i + 1) * BLOCK]
    assert blob[BLOCK - 4:BLOCK + 8] == data[BLOCK - 4:BLOCK + 8]
    assert bytes(blob) == data


def test_readers_on_many_threads_share_a_blob(tmp_path):
    data = os.urandom(BLOCK * 200)
    path = tmp_path / "blob"
    path.write_bytes(data)
    blob = PartBlob(os.open(path, os.O_RDONLY), 0, len(data), block_digests(data))

    def read(seed: int) -> bool:
        picks = random.Random(seed)
        blocks = [picks.randrange(200) for _ in range(3000)]
        return all(blob[i * BLOCK:i * BLOCK + 9] == data[i * BLOCK:i * BLOCK + 9]
                   for i in blocks)

    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads switch often, as on a busy server
    try:
        with ThreadPoolExecutor(max_workers=8) as pool:
            assert all(pool.map(read, range(8)))
    finally:
        sys.setswitchinterval(switch)
