"""Erasure (crypto-shredding): the erased texts are in no file of the store, nor in its exports,
while the log verifies and the receipt is shown; and every way it can be misused is refused."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np
import pytest

from eventlog.events import EpisodeRecorded, FactRemembered, FactsErased
from eventlog.keyfile import RECORD
from eventlog.repair import verify_log
from hmem import Memory
from hmem.errors import (
    AlreadyErased,
    ErasureUnavailable,
    ErasureUnfinished,
    FactNotFound,
    InvalidInput,
    KeyFileDamaged,
    KeyFileMissing,
    NothingToErase,
    ReadersOpen,
    ReadOnlyStore,
)
from hmem.notebook.export import export_jsonl, export_parquet
from hmem.storage.shredding import Shredding
from hmem.storage.store import Store
from projections.checkpoint import part_files

SECRETS = ("Alice's locker code is 4815162342", "Alice moved to Reykjavik-Nordurmyri")
KEPT = "Bob drinks oolong every morning"


def clock():
    t = [datetime(2026, 1, 1, tzinfo=timezone.utc)]

    def now():
        t[0] += timedelta(seconds=1)
        return t[0]

    return now


def files_holding(roots: list[Path], needle: bytes) -> list[str]:
    """Every file under ``roots`` whose bytes contain ``needle`` (case-insensitively)."""
    found = []
    for root in roots:
        for path in [root] if root.is_file() else sorted(root.rglob("*")):
            if path.is_file() and needle.lower() in path.read_bytes().lower():
                found.append(str(path))
    return found


def vector_bytes(m: Memory) -> list[bytes]:
    """The namespace's vectors as the log would hold them (little-endian float32)."""
    rows = m.sql("SELECT vector FROM vectors").fetchall()
    return [np.asarray(v, "<f4").tobytes() for (v,) in rows]


def fill(m: Memory) -> dict[str, int]:
    ids = {"a": m.remember("alice", SECRETS[0], source_ref="chat:1")}
    ids["a2"] = m.revise(ids["a"], SECRETS[0] + " (changed)", reason="alice said so")
    ids["b"] = m.remember("alice", SECRETS[1])
    ids["kept"] = m.remember("bob", KEPT)
    m.flush()
    m.recall("locker code")  # logged: the query's words are Alice's too
    m.recall("nothing here", subject="Alice")  # logged: it names her
    return ids


@pytest.fixture
def store(tmp_path: Path) -> Path:
    root = tmp_path / "store"
    with Memory(root, embedder="hash", embed_mode="inline", clock=clock(),
                log_recalls=True) as m:
        fill(m)
    return root


def test_an_erased_subject_is_in_no_file_of_the_store_nor_its_exports(store, tmp_path):
    out = tmp_path / "export"
    jsonl = tmp_path / "events.jsonl"
    with Memory(store, embedder="hash", clock=clock()) as m:
        export_parquet(m, out)
        export_jsonl(m, jsonl)
        vectors = vector_bytes(m)
        a = m.recall("locker code").hits[0].id
        assert files_holding([store, out, jsonl], b"4815162342")  # the projection and exports
        receipt = m.erase(subject="Alice", reason="subject request", by="dpo")
        assert receipt.facts == 2 and len(receipt.fact_ids) == 3
        assert sorted(receipt.exports) == sorted([str(out.resolve()), str(jsonl.resolve())])
        why = str(m.why(a))
        assert f"receipt #{receipt.seq}" in "\n".join(receipt.lines())
        assert "[erased]" in why and "receipt:" in why and "subject erased" in why
        assert [h.text for h in m.recall("locker code Reykjavik").hits] in ([], [KEPT])
        assert m.verify().ok  # replay equals the projection the erasure rebuilt
        remaining = vector_bytes(m)
    assert verify_log(store / "log").ok
    for needle in (*SECRETS, "4815162342", "Reykjavik", "locker code", "alice"):
        assert files_holding([store, out, jsonl], needle.encode()) == [], needle
    gone = [v for v in vectors if v not in remaining]
    assert len(gone) == 3 and all(files_holding([store, out, jsonl], v[:32]) == [] for v in gone)
    assert files_holding(part_files(store / "checkpoint.columns"), b"oolong")  # it finds words
    with Memory(store, read_only=True) as r:
        assert [h.text for h in r.recall("oolong").hits] == [KEPT]
        assert "[erased]" in str(r.why(a))
        assert r.diff(receipt.seq - 1).erased


def test_a_fact_erasure_takes_its_whole_chain_and_leaves_the_rest(store):
    with Memory(store, embedder="hash", clock=clock()) as m:
        newer = next(f for f in m.history("alice") if f.supersedes is not None)
        first = newer.supersedes
        receipt = m.erase(fact=newer.id)  # any version names the chain
        assert receipt.scope == "fact" and receipt.facts == 1 and len(receipt.fact_ids) == 2
        assert [f.text for f in m.history("alice")] == [SECRETS[1]]
        with pytest.raises(AlreadyErased, match=f"#{receipt.seq}"):
            m.erase(fact=first)
        with pytest.raises(FactNotFound):
            m.erase(fact=999)


def carols_session(m: Memory) -> tuple[int, int, int]:
    """Session s1: two turns, the first telling carol's pin, and a fact derived from it:
    (the first turn's seq, the second's, the derived fact's)."""
    with m.transaction() as txn:
        txn.append(EpisodeRecorded(session_id="s1", turn=0, role="user",
                                   text="my pin is zq9931 says carol"))
        txn.append(EpisodeRecorded(session_id="s1", turn=1, role="user", text="hello there"))
    first, second = (e.seq for e in m.episodes("s1"))
    with m.transaction() as txn:
        txn.append(FactRemembered(subject="carol", text="Carol's pin is zq9931",
                                  derived_from=(first,)))
    return first, second, m.last_seq


def test_erasing_an_episode_erases_the_facts_derived_from_it(tmp_path):
    with Memory(tmp_path / "s", embedder=None, clock=clock()) as m:
        ep, _, _ = carols_session(m)
        kept = m.remember("dave", "Dave likes chess")
        receipt = m.erase(session="s1")
        assert receipt.episode_ids == (ep, ep + 1) and receipt.facts == 1
        assert [e.text for e in m.episodes("s1")] == ["", ""]
        assert m.get(kept).text == "Dave likes chess"
    assert files_holding([tmp_path / "s"], b"zq9931") == []


def test_erasing_a_namespace_takes_its_logged_recalls_and_nothing_of_another(store):
    with Memory(store, embedder="hash", clock=clock()) as m:
        other = m.in_namespace("work")
        other.remember("alice", "Alice chairs the Tuesday budget meeting")
        with pytest.raises(InvalidInput, match="in_namespace"):
            m.erase(namespace="work")
        receipt = m.erase(namespace="default")
        assert receipt.recall_ids and receipt.facts == 3
        assert other.recall("budget meeting").hits
        with pytest.raises(AlreadyErased):
            m.erase(namespace="default")
    assert files_holding([store], b"locker") == []
    assert files_holding([store], b"budget meeting")


def test_an_erasure_folds_its_namespace_again_reading_no_other_namespaces_events(
        store, monkeypatch):
    with Memory(store, embedder="hash", clock=clock()) as m:
        other = m.in_namespace("work")
        for i in range(20):
            other.remember("alice", f"Alice chairs budget meeting {i}")
        m.remember("bob", "Bob's bike lock code is 7731")
        log, read = m.store.log, []

        def spied(reading):
            def each(*args, **kwargs):
                for ev in reading(*args, **kwargs):
                    read.append(ev.namespace)
                    yield ev
            return each

        for name in ("read", "read_raw", "read_raw_seqs"):
            monkeypatch.setattr(log, name, spied(getattr(log, name)))
        m.erase(namespace="default")
        assert read and set(read) == {"default"}
        monkeypatch.undo()
        assert m.verify().ok  # what it folded is what the whole log folds to
        assert other.recall("budget meeting").hits and not m.recall("bike lock").hits


def test_bad_erasures_are_refused_and_erase_nothing(store, tmp_path):
    with Memory(store, embedder="hash", clock=clock()) as m:
        head = m.last_seq
        with pytest.raises(NothingToErase, match="'carol'"):
            m.erase(subject="carol")
        with pytest.raises(InvalidInput, match="exactly one"):
            m.erase(subject="alice", fact=1)
        with pytest.raises(InvalidInput, match="exactly one"):
            m.erase()
        with pytest.raises(NothingToErase):
            m.erase(session="nope")
        plan = m.erase(subject="alice", dry_run=True)
        assert plan.seq == 0 and plan.facts == 2 and "would erase" in plan.lines()[0]
        with Memory(store, read_only=True) as reader:
            with pytest.raises(ReadersOpen, match=f"pid {os.getpid()}"):
                m.erase(subject="alice")
            with pytest.raises(ReadOnlyStore):
                reader.erase(subject="alice")
        assert m.last_seq == head
        assert files_holding([store], b"locker")
    plain = tmp_path / "plain"
    clear = Store(plain, seal=False)
    try:
        with Memory(store=clear, embedder=None) as m:
            m.remember("alice", "Alice is in the clear")
            with pytest.raises(ErasureUnavailable, match="clear"):
                m.erase(subject="alice")
    finally:
        clear.close()
    with Memory(plain, embedder=None) as m:  # stays in the clear, never half sealed
        m.remember("bob", "Bob too")
    assert files_holding([plain / "log"], b"Bob too")


def test_a_missing_foreign_or_damaged_key_file_is_an_error_never_plaintext(store, tmp_path):
    keys = store / "keys.hmk"
    saved = keys.read_bytes()
    keys.unlink()
    with pytest.raises(KeyFileMissing, match="keys.hmk"):
        Memory(store, embedder=None)
    with pytest.raises(KeyFileMissing):
        Memory(store, read_only=True)
    with Memory(tmp_path / "other", embedder=None) as o:
        o.remember("x", "y")
    shutil.copy(tmp_path / "other" / "keys.hmk", keys)  # another store's
    with pytest.raises(KeyFileDamaged, match="not this store's"):
        Memory(store, embedder=None)
    with pytest.raises(KeyFileDamaged, match="not this store's"):
        Memory(store, embedder=None, read_only=True)
    (store / "keys.id").unlink()  # a store that kept no id: the log itself must open
    with pytest.raises(KeyFileDamaged, match="another store's or damaged"):
        Memory(store, embedder=None, read_only=True)
    keys.write_bytes(saved)
    with Memory(store, embedder=None):  # its own again: bound anew
        pass
    with pytest.raises(KeyFileDamaged, match="already exists"):  # never shared by a new store
        Memory(tmp_path / "new", embedder=None, key_file=keys)
    (tmp_path / "dir.hmk").mkdir()
    with pytest.raises(KeyFileDamaged, match="cannot be opened"):
        Memory(tmp_path / "other", embedder=None, key_file=tmp_path / "dir.hmk")
    damaged = bytearray(saved)
    damaged[RECORD * 1 + 30] ^= 0xFF  # the key of event 1
    keys.write_bytes(bytes(damaged))
    with Memory(store, embedder=None) as m:  # opens (its newest events open) ...
        head = m.last_seq
        with pytest.raises(KeyFileDamaged, match="event 1"):
            m.erase(subject="bob")  # ... but an erasure checks every key first
        assert m.last_seq == head
    (store / "checkpoint.columns").unlink()  # so the reader must replay from event 1
    with pytest.raises(KeyFileDamaged, match="event 1"):
        Memory(store, read_only=True)
    keys.write_bytes(saved)
    with Memory(store, read_only=True) as r:
        assert r.recall("locker").hits


@pytest.mark.parametrize("step", ["shred", "scrub"])
def test_an_erasure_cut_short_is_finished_at_the_next_open(store, monkeypatch, step):
    def crash(*_args, **_kwargs):
        raise KeyboardInterrupt("power cut")

    m = Memory(store, embedder="hash", clock=clock())
    if step == "shred":
        monkeypatch.setattr("hmem.storage.shredding.shred", crash)
    else:
        monkeypatch.setattr(Shredding, "scrub", crash)
    with pytest.raises(KeyboardInterrupt):
        m.erase(subject="alice")
    monkeypatch.undo()
    m.store.backend.close()  # the process dies: nothing more is written
    with pytest.raises(ErasureUnfinished, match="writer once"):
        Memory(store, read_only=True)  # its copy of the checkpoint could show the texts
    with Memory(store, embedder="hash", clock=clock()) as m2:
        assert any("finished an erasure" in n for n in m2.notes)
        assert [h.text for h in m2.recall("locker").hits] in ([], [KEPT])
        assert m2.verify().ok
    assert files_holding([store], b"4815162342") == []


def test_a_backup_restored_with_the_key_file_kept_apart_stays_erased(tmp_path):
    key_file = tmp_path / "vault" / "keys.hmk"
    key_file.parent.mkdir()
    root, backup = tmp_path / "store", tmp_path / "backup"
    with Memory(root, embedder=None, clock=clock(), key_file=key_file) as m:
        m.remember("alice", SECRETS[0])
        m.remember("bob", KEPT)
    assert not (root / "keys.hmk").exists()
    shutil.copytree(root, backup)
    with Memory(root, embedder=None, clock=clock(), key_file=key_file) as m:
        m.erase(subject="alice")
    shutil.rmtree(root)
    shutil.copytree(backup, root)  # the backup from before the erasure, restored
    with Memory(root, embedder=None, clock=clock(), key_file=key_file) as m:
        assert any("restored" in n for n in m.notes)
        assert [h.text for h in m.recall("locker code oolong").hits] == [KEPT]
        erased = [e for e in m.store.log.read() if isinstance(e, FactsErased)]
        assert len(erased) == 1 and erased[0].scope == "restored"
    assert files_holding([root], b"4815162342") == []


def test_the_cli_shows_then_erases_and_log_show_opens_texts(store):
    def hmem(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hmem", "--embedder", "none", "--path",
                               str(store), *args], capture_output=True, text=True, check=False)

    shown = hmem("log", "show")
    assert shown.returncode == 0 and "4815162342" in shown.stdout
    dry = hmem("erase", "--subject", "alice")
    assert dry.returncode == 0 and "would erase" in dry.stdout
    done = hmem("--json", "erase", "--subject", "alice", "--yes", "--by", "dpo")
    assert done.returncode == 0, done.stderr
    receipt = json.loads(done.stdout)
    assert receipt["by"] == "dpo" and receipt["facts"] == 2
    shown = hmem("log", "show")
    assert "4815162342" not in shown.stdout and "receipt: subject erased" in shown.stdout
    again = hmem("erase", "--subject", "alice", "--yes")
    assert again.returncode != 0 and f"receipt #{receipt['seq']}" in again.stderr


def test_sealing_keeps_texts_out_of_the_log_and_reads_them_back(tmp_path):
    root = tmp_path / "s"
    with Memory(root, embedder="hash", embed_mode="inline") as m:
        fid = m.remember("alice", SECRETS[0])
        [vec] = vector_bytes(m)
    assert files_holding([root / "log"], b"4815162342") == []
    assert files_holding([root / "log"], vec[:32]) == []
    with Memory(root, read_only=True) as r:
        assert r.get(fid).text == SECRETS[0]
        assert [e.text for e in r.store.log.read() if hasattr(e, "text")] == [SECRETS[0]]


def test_a_receipt_digest_needs_the_key_file(tmp_path):
    """The subject digest of a receipt is keyed from the key file's secret, not from the id kept
    in clear beside the log: a dictionary of names keyed with that id finds nothing. A receipt
    logged before key files had a secret (keyed with the id) still names its subject."""
    import hashlib

    root = tmp_path / "s"
    with Memory(root, embedder=None, clock=clock()) as m:
        m.remember("alice", SECRETS[0])
        m.remember("carol", KEPT)
        m.erase(subject="alice")
        receipt = next(e for e in m.store.log.read() if isinstance(e, FactsErased))
    file_id = bytes.fromhex((root / "keys.id").read_text().strip())
    guesses = {hashlib.blake2b(n.encode(), key=file_id, digest_size=16).hexdigest()
               for n in ("alice", "Alice", "bob", "carol")}
    assert receipt.subject_digest and receipt.subject_digest not in guesses
    with Memory(root, embedder=None, clock=clock()) as m:  # the old digest, as an old hmem wrote it
        keys = m.store.log.sealer.keys
        keys.digest = keys.id_digest
        m.erase(subject="carol")
        del keys.digest
        with pytest.raises(AlreadyErased):
            m.erase(subject="carol")


@pytest.mark.parametrize("scope, message", [
    ({"fact": 0}, "fact must be a positive integer id, not 0"),
    ({"fact": True}, "fact must be a positive integer id, not True"),
    ({"fact": "1"}, "fact must be a positive integer id, not '1'"),
    ({"episode": -1}, "episode must be a positive integer id, not -1"),
    ({"subject": "  "}, "subject must be a non-empty string, not '  '"),
    ({"subject": 5}, "subject must be a non-empty string, not 5"),
    ({"session": ""}, "session must be a non-empty string, not ''"),
    ({"session": 5}, "session must be a non-empty string, not 5"),
])
def test_an_erasure_of_a_malformed_scope_is_invalid_input_naming_it(tmp_path, scope, message):
    with Memory(tmp_path / "s", embedder=None) as m:
        m.remember("alice", "Alice likes chess")
        seq = m.last_seq
        with pytest.raises(InvalidInput) as refused:
            m.erase(**scope)
        assert str(refused.value) == message
        assert m.last_seq == seq


def test_erasing_one_episode_takes_it_and_its_facts_and_no_other_namespace_can_name_it(tmp_path):
    with Memory(tmp_path / "s", embedder=None, clock=clock()) as m:
        first, second, derived = carols_session(m)
        with pytest.raises(NothingToErase) as refused:
            m.in_namespace("work").erase(episode=first)
        assert str(refused.value).startswith(f"no episode {first} in namespace 'work'; ")
        with pytest.raises(NothingToErase, match="^no episode 999 in namespace 'default'; "):
            m.erase(episode=999)
        alone = m.erase(episode=second)  # no fact derived from it, no recall: still erased
        assert (alone.episode_ids, alone.fact_ids, alone.recall_ids) == ((second,), (), ())
        receipt = m.erase(episode=first)
        assert (receipt.episode_ids, receipt.fact_ids) == ((first,), (derived,))
        assert [e.text for e in m.episodes("s1")] == ["", ""]
        with pytest.raises(AlreadyErased) as again:
            m.erase(session="s1")
        assert str(again.value) == (
            f"everything this erase names was erased before (receipt #{alone.seq}, "
            f"#{receipt.seq}); nothing more to erase")


def test_erasing_a_session_takes_its_episodes_only(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        with m.transaction() as txn:
            txn.append(EpisodeRecorded(session_id="s1", turn=0, role="user", text="one"))
            txn.append(EpisodeRecorded(session_id="s2", turn=0, role="user", text="two"))
        with pytest.raises(NothingToErase) as refused:
            m.erase(session="nope")
        assert str(refused.value) == (
            "no session 'nope' in namespace 'default'; nothing was erased")
        assert m.erase(session="s1").episode_ids == (1,)
        assert [e.text for e in m.episodes("s2")] == ["two"]


@pytest.mark.parametrize("holds", ["facts", "episodes", "recalls", "nothing"])
def test_erasing_a_namespace_takes_whatever_it_holds(tmp_path, holds):
    with Memory(tmp_path / "s", embedder=None, log_recalls=True) as m:
        if holds == "facts":
            m.remember("alice", "Alice likes chess")
        elif holds == "episodes":
            with m.transaction() as txn:
                txn.append(EpisodeRecorded(session_id="s1", turn=0, role="user", text="hi"))
        elif holds == "recalls":
            m.recall("anything at all")
        if holds == "nothing":
            with pytest.raises(NothingToErase) as refused:
                m.erase(namespace="default")
            assert str(refused.value) == "namespace 'default' holds nothing; nothing was erased"
            return
        receipt = m.erase(namespace="default")
        named = {"facts": receipt.fact_ids, "episodes": receipt.episode_ids,
                 "recalls": receipt.recall_ids}
        assert named == {k: (1,) if k == holds else () for k in named}


def test_erasing_a_subject_takes_the_recalls_asked_about_it_though_they_found_nothing(tmp_path):
    with Memory(tmp_path / "s", embedder=None, log_recalls=True) as m:
        m.remember("alice", "Alice likes chess")
        m.remember("bob", "Bob likes tea")
        m.recall("zebra crossings", subject="Alice")
        about_alice = m.last_seq
        m.recall("zebra crossings", subject="bob")
        receipt = m.erase(subject="alice")
        assert receipt.recall_ids == (about_alice,) and receipt.fact_ids == (1,)
        with pytest.raises(AlreadyErased) as again:
            m.erase(subject="Alice")
        assert str(again.value) == (
            f"subject 'Alice' was erased before (receipt #{receipt.seq}); nothing more to erase")


def test_erasing_a_middle_version_takes_the_whole_chain(tmp_path):
    with Memory(tmp_path / "s", embedder=None) as m:
        first = m.remember("alice", "Alice lives in Oslo")
        middle = m.revise(first, "Alice lives in Bergen")
        last = m.revise(middle, "Alice lives in Tromso")
        assert m.erase(fact=middle).fact_ids == (first, middle, last)


def test_a_diff_over_erasures_lists_each_receipts_facts_and_what_came_after(tmp_path):
    with Memory(tmp_path / "s", embedder=None, clock=clock()) as m:
        alice = m.remember("alice", SECRETS[0])
        bob = m.remember("bob", KEPT)
        carol = m.remember("carol", "Carol plays the oboe")
        before = m.last_seq
        m.erase(subject="alice")
        m.erase(subject="bob")
        dave = m.remember("dave", "Dave likes chess")
        d = m.diff(before)
        assert [f.id for f in d.erased] == [alice, bob]
        assert [f.id for f in d.added] == [dave]
        assert carol not in [f.id for f in d.erased]
