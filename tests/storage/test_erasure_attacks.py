"""What an outside attack on erasure found, each held by a test: a text kept in another fact's
reason, in another view's copy, in a file moved aside, in a snapshot; a restored backup that
could no longer be written; an embedding on its way when its fact was erased."""

from __future__ import annotations

import json
import os
import shutil
import threading
from pathlib import Path

import pytest

from hmem import Memory
from hmem.embedders.base import HashEmbedder
from hmem.errors import AlreadyErased, InvalidInput
from hmem.notebook.export import export_jsonl, export_parquet
from tests.storage.test_erasure import clock, files_holding


def test_a_consolidation_reason_names_facts_by_id_not_by_their_words(tmp_path):
    root = tmp_path / "s"
    with Memory(root, embedder=None, clock=clock()) as m:
        x = m.remember("alice", "Alice lives in Oslo", valid_from="2020-01-01")
        y = m.remember("alice", "Alice lives in Vardoxenhavn", valid_from="2024-01-01")
        assert m.consolidate(apply=True).applied
        m.erase(fact=y)
        assert "Vardoxenhavn" not in str(m.why(x))
    assert files_holding([root], b"Vardoxenhavn") == []


def test_another_views_sql_copy_is_made_anew_after_an_erasure(tmp_path):
    with Memory(tmp_path / "s", embedder=None, clock=clock()) as m:
        v, w = m.in_namespace("work"), m.in_namespace("work")
        v.remember("alice", "Alice secret pin 4815")
        v.remember("bob", "Bob likes tea")
        assert len(w.sql("SELECT text FROM facts").fetchall()) == 2  # w's copy is made
        v.erase(subject="alice")
        texts = [t for (t,) in w.sql("SELECT text FROM facts").fetchall()]
        assert "Alice secret pin 4815" not in texts and "Bob likes tea" in texts


def test_a_restored_backup_stays_writable_after_erasures_beyond_its_end(tmp_path):
    key_file = tmp_path / "vault.hmk"
    root, backup = tmp_path / "s", tmp_path / "backup"
    with Memory(root, embedder=None, clock=clock(), key_file=key_file) as m:
        m.remember("bob", "Bob likes tea")
    shutil.copytree(root, backup)
    with Memory(root, embedder=None, clock=clock(), key_file=key_file) as m:
        m.remember("alice", "Alice hides 9931")  # seq 2: beyond the backup's end
        m.erase(subject="alice")
    shutil.rmtree(root)
    shutil.copytree(backup, root)
    with Memory(root, embedder=None, clock=clock(), key_file=key_file) as m:
        new = m.remember("carol", "Carol plays chess")  # seq 2 again, with a new key
    with Memory(root, read_only=True, key_file=key_file) as r:
        assert r.get(new).text == "Carol plays chess"
        assert sorted(h.text for h in r.recall("tea chess").hits) == ["Bob likes tea",
                                                                      "Carol plays chess"]


def test_a_damaged_checkpoint_and_an_old_hmems_files_are_gone_after_an_erasure(tmp_path):
    root = tmp_path / "s"
    with Memory(root, embedder=None, clock=clock()) as m:
        m.remember("alice", "Alice qwertysecret")
        m.remember("bob", "Bob likes tea")
    with open(root / "checkpoint.columns", "r+b") as f:
        f.write(b"\xff" * 64)  # its header: not used, not trusted
    for name in ("projection.duckdb", "checkpoint.duckdb.tmp"):  # an earlier hmem's copies
        (root / name).write_bytes(b"Alice qwertysecret")
    with Memory(root, embedder=None, clock=clock()) as m:
        assert any("checkpoint" in n and "replayed the log" in n for n in m.notes)
        m.erase(subject="alice")
    assert files_holding([root], b"qwertysecret") == []


def test_a_snapshot_file_is_written_again_and_a_bad_dry_run_is_refused(tmp_path):
    snap = tmp_path / "snap.parquet"
    with Memory(tmp_path / "s", embedder=None, clock=clock()) as m:
        m.remember("alice", "Alice wibbleton")
        m.remember("bob", "Bob likes tea")
        m.snapshot(parquet=snap)
        with pytest.raises(InvalidInput, match="dry_run"):
            m.erase(subject="alice", dry_run="no")  # type: ignore[arg-type]
        receipt = m.erase(subject="alice")
        assert receipt.exports == (str(snap.resolve()),)
    assert files_holding([snap], b"wibbleton") == [] and files_holding([snap], b"oolong") == []
    assert files_holding([snap], b"Bob likes tea")


class GatedEmbedder(HashEmbedder):
    """Embeds only when let: a background embedding stays on its way meanwhile."""

    def __init__(self) -> None:
        super().__init__(8)
        self.started, self.go = threading.Event(), threading.Event()

    def embed(self, texts):  # type: ignore[no-untyped-def]
        self.started.set()
        assert self.go.wait(30)
        return super().embed(texts)


def test_an_embedding_on_its_way_when_its_fact_is_erased_is_dropped(tmp_path, monkeypatch):
    embedder = GatedEmbedder()
    with Memory(tmp_path / "s", embedder=embedder, clock=clock()) as m:
        fid = m.remember("alice", "Alice zanzibarcode")
        assert embedder.started.wait(30)  # the worker holds the fact, embedding it
        monkeypatch.setattr(Memory, "flush", lambda self: None)  # erase must not wait for it
        m.erase(subject="alice")
        monkeypatch.undo()
        embedder.go.set()
        m.flush()  # no EmbeddingFailed: the vector of an erased fact is not recorded
        assert m.sql("SELECT count(*) FROM vectors").fetchall() == [(0,)]
        assert m.get(fid).text == ""
    assert files_holding([Path(tmp_path / "s")], b"zanzibarcode") == []


def test_the_mcp_tool_shows_then_erases_with_a_receipt(tmp_path):
    pytest.importorskip("mcp")
    from tests.adapters.test_mcp import run, serve

    store = tmp_path / "store"

    async def body() -> None:
        async with serve(store) as c:
            await c.ok("remember", subject="alice", text="Alice's pin is zq5521")
            await c.ok("remember", subject="bob", text="Bob likes tea")
            shown = await c.ok("erase", subject="alice")
            assert "would erase" in shown["text"] and shown["structuredContent"]["seq"] == 0
            done = await c.ok("erase", subject="alice", confirm=True, reason="asked")
            assert "erased [receipt #" in done["text"]
            assert done["structuredContent"]["facts"] == 1
            again = await c.call("erase", subject="alice", confirm=True)
            assert again["isError"] and "erased before" in again["text"]
            recalled = await c.ok("recall", query="pin")
            assert "zq5521" not in recalled["text"]

    run(body)
    assert files_holding([store], b"zq5521") == []


def test_exports_cut_short_by_a_crash_are_written_again_at_the_next_open(tmp_path, monkeypatch):
    root, out = tmp_path / "s", tmp_path / "out.jsonl"
    m = Memory(root, embedder=None, clock=clock())
    m.remember("alice", "Alice's code is 55443322")
    m.remember("bob", "Bob likes tea")
    export_jsonl(m, out)

    def crash(*_args, **_kwargs):
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr("hmem.lifecycle.rewrite_exports", crash)
    with pytest.raises(KeyboardInterrupt):
        m.erase(subject="alice")
    monkeypatch.undo()
    m.store.backend.close()  # the process dies
    assert files_holding([out], b"55443322")  # not yet
    with Memory(root, read_only=True) as r:  # the store's own files are done: readers open
        assert r.recall("code").hits == ()
    with Memory(root, embedder=None) as m2:
        assert any("written again" in n for n in m2.notes)
    assert files_holding([out], b"55443322") == [] and files_holding([out], b"Bob likes tea")


def test_a_replayed_recall_says_what_an_erasure_took(tmp_path):
    with Memory(tmp_path / "s", embedder=None, clock=clock(), log_recalls=True) as m:
        for i in range(6):
            m.remember("bob", f"Bob drinks tea number {i}")
        m.remember("alice", "Alice drinks tea too")
        m.recall("alice tea")  # serves alice's fact: erased with her
        m.recall("bob number 3", limit=1)  # serves bob's fact only
        gone, kept = (r.seq for r in m.recalls())
        m.erase(subject="alice")
        with pytest.raises(AlreadyErased, match="nothing to replay"):
            m.replay_recall(gone)
        replay = m.replay_recall(kept)
        assert replay.erased_before == 2 and "were erased since" in str(replay)  # fact, recall


def test_a_hand_edited_export_list(tmp_path):
    root = tmp_path / "s"
    with Memory(root, embedder=None, clock=clock()) as m:
        m.remember("alice", "Alice hums zq777")
        m.remember("bob", "Bob likes tea")
    with open(root / "exports.jsonl", "a") as f:
        f.write('{"kind": "snapshot", "path": "x", "namespace": "default"}\n')
        f.write('{"kind": "jsonl", "path": 5, "namespace": "default"}\nnot json\n')
    with Memory(root, embedder=None, clock=clock()) as m:
        receipt = m.erase(subject="alice")  # the odd lines are skipped, not fatal
        assert receipt.facts == 1 and receipt.exports == ()


@pytest.mark.parametrize("kind", ["jsonl", "parquet", "snapshot"])
def test_a_planted_export_line_is_never_written_to(tmp_path, kind):
    """Someone who can write the store directory (not the key file) adds a line naming a path
    of theirs: the erasure writes the store's own exports again, never theirs (it would get
    the namespace's texts)."""
    root, mine, theirs = tmp_path / "s", tmp_path / "mine.jsonl", tmp_path / "theirs"
    theirs.mkdir() if kind == "parquet" else theirs.write_text("bait")
    with Memory(root, embedder=None, clock=clock()) as m:
        m.remember("alice", "Alice hums zq777")
        m.remember("bob", "Bob likes tea")
        export_jsonl(m, mine)
    entry = {"kind": kind, "path": str(theirs), "namespace": "default"}
    if kind == "snapshot":
        entry |= {"as_of": 2, "valid_at_us": None}
    lines = (root / "exports.jsonl").read_text().splitlines()
    forged = dict(json.loads(lines[0]), path=str(theirs), kind=kind) | entry
    with open(root / "exports.jsonl", "a") as f:
        f.write(json.dumps(entry) + "\n")  # no MAC
        f.write(json.dumps(forged) + "\n")  # the real line's MAC, another path
    with Memory(root, embedder=None, clock=clock()) as m:
        receipt = m.erase(subject="alice")
    assert receipt.exports == (str(mine.resolve()),)
    assert [str(theirs) in m for m in receipt.exports_missed] == [True, True]
    if kind == "parquet":
        assert list(theirs.iterdir()) == []
    else:
        assert theirs.read_text() == "bait"
    assert files_holding([mine], b"Bob likes tea") and not files_holding([mine], b"zq777")


def test_exports_are_never_readable_by_others_whatever_the_umask(tmp_path):
    root, out = tmp_path / "s", tmp_path / "out"
    old = os.umask(0)
    try:
        with Memory(root, embedder=None, clock=clock()) as m:
            m.remember("bob", "Bob likes tea")
            export_parquet(m, out)
            export_jsonl(m, tmp_path / "events.jsonl")
            m.snapshot(parquet=tmp_path / "snap.parquet")
    finally:
        os.umask(old)
    files = [*out.iterdir(), tmp_path / "events.jsonl", tmp_path / "snap.parquet"]
    assert len(files) == 9 and all(f.stat().st_mode & 0o077 == 0 for f in files), [
        (f.name, oct(f.stat().st_mode)) for f in files]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp left
