"""A large namespace's fact texts and index tokens stay in its checkpoint part until read: every
text reads back as written, across block boundaries, the tokens when verify or SQL first asks
(a recall answers from the kept postings, its feedback reads a few facts' tokens by block), and a part changed on disk after it was
opened is never believed (the read raises; a reopen refuses the part and replays the log)."""

from __future__ import annotations

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


def test_a_part_changed_after_it_was_opened_is_not_believed(tmp_path, left_on_disk):
    texts = _texts(60)
    ids = _store(tmp_path / "s", texts)
    (part,) = [p for p in part_files(tmp_path / "s" / CHECKPOINT) if ".tx-" not in p.name]
    with Memory(tmp_path / "s", read_only=True, embedder=None) as r:
        _texts_on_disk(r)
        data = bytearray(part.read_bytes())
        at = data.find(texts[-1].encode())
        data[at] ^= 1  # the last text's first byte, in place
        with open(part, "r+b") as f:
            f.write(data)
        assert r.get(ids[0]).text == texts[0]  # a block that did not change reads
        with pytest.raises(DamagedProjection, match="reopen the store"):
            r.get(ids[-1])
    with Memory(tmp_path / "s", read_only=True, embedder=None) as r:
        assert r.get(ids[-1]).text == texts[-1]  # refused at open, the log replayed
        assert any("not used" in note for note in r.notes)


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
