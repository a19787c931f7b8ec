"""A derived file is believed only when it is authentic and as new as the key file's erasures.

The attacker here can write the store's directory but not its log's history or its key file:
they replace ``checkpoint.columns`` with a file they made (any contents, with the stamp of the
real log and every digest recomputed), or put back an old one, or restore a backup of the
directory from before an erasure. Every open (writer, reader, CLI) refuses such a file with a
note, answers from the log, and ``verify()`` holds; nothing the file said is republished.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from hmem import Memory
from hmem.storage.store import Store
from projections import checkpoint
from projections.checkpoint import CHECKPOINT_FILE
from projections.projector import Projector

START = datetime(2026, 1, 1, tzinfo=timezone.utc)
TRUE, FORGED = "Maya lives in London", "Maya lives in Berlin"
SECRET = "Alice's locker code is 4815162342"


def clock():
    t = [START]

    def now():
        t[0] += timedelta(seconds=1)
        return t[0]

    return now


@contextmanager
def writer(root: Path, **kw) -> Iterator[Memory]:
    store = Store(root, fsync="never", **kw)
    try:
        with Memory(store=store, clock=clock(), embedder=None) as m:
            yield m
    finally:
        store.close()


def reader(root: Path, **kw) -> Memory:
    return Memory(root, read_only=True, embedder=None, **kw)


def write(root: Path, texts: list[tuple[str, str]], **kw) -> list[int]:
    with writer(root, **kw) as m:
        return [int(m.remember(subject, text)) for subject, text in texts]


def forge(root: Path, texts: list[tuple[str, str]], tmp: Path, key: bytes | None) -> None:
    """Replace the checkpoint of the store at ``root`` with the fold of a log of ``texts`` (as
    many events as the real log), stamped with the real log's point, under ``key``."""
    fake = tmp / "forger"
    write(fake, texts, seal=False)
    with reader(fake) as m:
        log = m.store.log
        projector = Projector()
        projector.apply_all(list(log.read()))
    stamp = checkpoint.read_stamp(root / CHECKPOINT_FILE)
    assert stamp is not None and stamp[0] == projector.last_seq
    with reader(root) as r:
        sealer = r.store.log.sealer
        through = 0 if sealer is None else sealer.keys.erased_through
    for old in [root / CHECKPOINT_FILE, *checkpoint.part_files(root / CHECKPOINT_FILE)]:
        old.unlink()  # the forger's own files only, none of the store's kept
    checkpoint.save(root / CHECKPOINT_FILE, projector, stamp, checkpoint.Seal(key, through))


def hmem(root: Path, *args: str, key_file: Path | None = None) -> str:
    env = os.environ | ({"HMEM_KEY_FILE": str(key_file)} if key_file else {})
    done = subprocess.run([sys.executable, "-m", "hmem", "--embedder", "none", "--path",
                           str(root), *args], capture_output=True, text=True, check=False,
                          env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.parametrize("key", [None, b"k" * 32], ids=["unkeyed", "another key"])
def test_a_forged_checkpoint_of_a_sealed_store_is_refused_by_every_open(tmp_path, key):
    root = tmp_path / "s"
    ids = write(root, [("maya", TRUE), ("tom", "Tom likes tea")])
    forge(root, [("maya", FORGED), ("tom", "Tom likes tea")], tmp_path, key)
    with reader(root) as r:
        assert r.get(ids[0]).text == TRUE
        assert any("not authentic" in n for n in r.notes)
        assert r.verify().ok
    assert TRUE in hmem(root, "why", str(ids[0]))
    assert FORGED not in hmem(root, "recall", "Maya lives")
    with writer(root) as w:
        assert [f.text for f in w.history("maya")] == [TRUE]
        assert w.verify().ok
    with reader(root) as r:  # the writer published the log's state, not the forgery
        assert r.notes == [] and r.get(ids[0]).text == TRUE



def test_whoever_holds_the_key_files_secret_can_make_a_checkpoint_the_store_believes(
    tmp_path, monkeypatch
):
    """The MAC key is derived from the key file's secret for the purpose "checkpoint"
    (KeyFile.derived_key): a checkpoint made under it is believed, which is why the key file is
    what the attacker must not hold (and why a checkpoint one hmem wrote, the next one reads)."""
    monkeypatch.delenv("HMEM_KEY_FILE", raising=False)
    root = tmp_path / "s"
    ids = write(root, [("maya", TRUE)])
    secret = (root / "keys.hmk").read_bytes()[44:60]  # after magic, version, flags, marks, id
    key = hashlib.blake2b(b"checkpoint", key=secret, digest_size=32).digest()
    forge(root, [("maya", FORGED)], tmp_path, key)
    with reader(root) as r:
        assert r.notes == [] and r.get(ids[0]).text == FORGED

def test_a_forged_subject_cannot_make_an_erasure_miss_what_it_names(tmp_path):
    root = tmp_path / "s"
    write(root, [("alice", SECRET), ("bob", "Bob drinks oolong")])
    forge(root, [("carol", SECRET), ("bob", "Bob drinks oolong")], tmp_path, b"k" * 32)
    with writer(root) as w:
        receipt = w.erase(subject="alice", reason="asked")
        assert receipt.facts == 1
        assert w.history("alice") == [] and w.history("carol") == []
        assert SECRET not in str(w.recall("locker code").hits)
    files = [root / CHECKPOINT_FILE, *checkpoint.part_files(root / CHECKPOINT_FILE)]
    assert len(files) > 1 and not [f for f in files if b"4815162342" in f.read_bytes()]


def test_an_unsealed_store_finds_a_forgery_by_verify(tmp_path):
    """A store in the clear has no secret to key a MAC: an open believes a forged file whose
    digests were recomputed (docs/guarantees.md says so), and verify() finds it."""
    root = tmp_path / "s"
    write(root, [("maya", TRUE)], seal=False)
    forge(root, [("maya", FORGED)], tmp_path, None)
    with reader(root) as r:
        report = r.verify()
    assert not report.ok and "checkpoint" in str(report).lower()


def test_an_old_checkpoint_put_back_after_an_erasure_is_never_used(tmp_path):
    root = tmp_path / "s"
    write(root, [("alice", SECRET), ("bob", "Bob drinks oolong")])
    old = (root / CHECKPOINT_FILE).read_bytes()
    with writer(root) as w:
        w.erase(subject="alice")
        w.remember("bob", "Bob drinks sencha")  # so the old file's stamp is not the log's head
    with writer(root) as w:
        pass
    head = checkpoint.read_stamp(root / CHECKPOINT_FILE)
    (root / CHECKPOINT_FILE).write_bytes(old)
    with reader(root) as r:
        assert r.history("alice") == []
        assert SECRET not in hmem(root, "history", "alice")
    with writer(root) as w:
        assert w.history("alice") == []
    assert checkpoint.read_stamp(root / CHECKPOINT_FILE) == head
    files = [root / CHECKPOINT_FILE, *checkpoint.part_files(root / CHECKPOINT_FILE)]
    assert len(files) > 1 and not [f for f in files if b"4815162342" in f.read_bytes()]


def test_a_checkpoint_stamped_with_the_head_but_older_than_an_erasure_is_refused(tmp_path):
    """The same stamp, the real key, an erasure record behind the key file's: refused."""
    root = tmp_path / "s"
    write(root, [("alice", SECRET), ("bob", "Bob drinks oolong")])
    with writer(root) as w:
        w.erase(subject="alice")
    stamp = checkpoint.read_stamp(root / CHECKPOINT_FILE)
    with reader(root) as r:
        keys = r.store.log.sealer.keys
        key, through = keys.derived_key("checkpoint"), keys.erased_through
        projector = r.store.projector
        assert through > 0
        checkpoint.save(tmp_path / "old", projector, stamp, checkpoint.Seal(key, 0))
    with pytest.raises(checkpoint.Refused, match="before the erasure"):
        checkpoint.load(tmp_path / "old", stamp, checkpoint.Seal(key, through))


@pytest.mark.parametrize("first", ["reader", "cli"])
def test_a_backup_restored_after_an_erasure_serves_no_erased_text_to_readers(tmp_path, first):
    """The key file kept apart (as the README advises); the directory restored from before the
    erasure; a reader or the CLI opens before any writer does."""
    vault = tmp_path / "vault"
    vault.mkdir()
    key_file = vault / "keys.hmk"
    root, backup = tmp_path / "s", tmp_path / "backup"
    ids = write(root, [("alice", SECRET), ("bob", "Bob drinks oolong")], key_file=key_file)
    shutil.copytree(root, backup)
    with writer(root, key_file=key_file) as w:
        w.erase(subject="alice")
    shutil.rmtree(root)
    shutil.copytree(backup, root)
    if first == "reader":
        with reader(root, key_file=key_file) as r:
            assert SECRET not in r.get(ids[0]).text
            assert all(SECRET not in f.text for f in r.history("alice"))
            assert all(SECRET not in h.text for h in r.recall("locker code").hits)
            assert any("erasure" in n for n in r.notes)
    else:
        for args in (("why", str(ids[0])), ("history", "alice"), ("recall", "locker code")):
            assert "4815162342" not in hmem(root, *args, key_file=key_file)


def test_derived_files_of_earlier_hmems_planted_in_the_directory_are_never_read(tmp_path):
    """projection.duckdb and checkpoint.duckdb (an earlier hmem's derived forms) holding a
    forged facts table: no open reads them, and the writer removes them."""
    import duckdb

    root = tmp_path / "s"
    ids = write(root, [("maya", TRUE)])
    for name in ("projection.duckdb", "checkpoint.duckdb"):
        con = duckdb.connect(str(root / name))
        con.execute("CREATE TABLE facts AS SELECT 1 AS id, 'maya' AS subject, ? AS text",
                    [FORGED])
        con.close()
    with reader(root) as r:
        assert r.get(ids[0]).text == TRUE and r.sql("SELECT text FROM facts").fetchall() == [
            (TRUE,)]
    with writer(root) as w:
        assert w.get(ids[0]).text == TRUE
    assert not (root / "projection.duckdb").exists() and not (root / "checkpoint.duckdb").exists()
