"""Issue 12, continued: the namespace wall's metadata (4), permissions (10) and tamper
evidence (11), through the library and the CLI. One test per finding, each failing before its fix.
"""

from __future__ import annotations

import random
import shutil

import pytest

from hmem import Memory
from hmem.errors import HmemError, InvalidInput


@pytest.fixture
def store(tmp_path):
    return tmp_path / "store"


# ---------------------------------------------------------------------- 4. the namespace wall


def test_stats_tx_time_and_diff_say_nothing_of_other_namespaces(store):
    with Memory(store, embedder=None) as m:
        mine = m.remember("a", "mine")
        other = m.in_namespace("secret")
        foreign = [other.remember("b", f"theirs {i}") for i in range(5)]
        s = m.stats()
        assert (s.facts, s.namespace_events) == (1, 1)
        fields = set(type(s).__struct_fields__)
        assert not {"log_bytes", "log_segments"} & fields  # sizes of the whole log: not ours
        assert s.head_seq == m.last_seq and len(s.head_hash) == 32  # the shared clock and head
        assert m.tx_time(mine)
        for seq in foreign:
            with pytest.raises(InvalidInput, match="not an event of namespace"):
                m.tx_time(seq)
        d = m.diff(mine, foreign[-1])  # dated by this namespace's own last change
        assert d.since_tx == m.tx_time(mine) and d.until_tx == m.tx_time(mine)
        assert other.diff(0).until_tx == other.tx_time(foreign[-1])


# ---------------------------------------------------------------------- 10. permissions


def test_the_store_is_readable_by_its_owner_only(tmp_path):
    import stat

    store = tmp_path / "deep" / "store"
    with Memory(store, embedder=None) as m:
        m.remember("a", "private thought")
        m.snapshot(parquet=tmp_path / "snap.parquet")
        from hmem.notebook.export import export_parquet

        export_parquet(m, tmp_path / "export")
    for path in [store, *store.rglob("*")]:
        mode = stat.S_IMODE(path.stat().st_mode)
        assert mode & 0o077 == 0, f"{path} is {oct(mode)}"
    for path in [tmp_path / "snap.parquet", *(tmp_path / "export").iterdir()]:
        assert stat.S_IMODE(path.stat().st_mode) & 0o077 == 0, path


# ---------------------------------------------------------------------- 11. tamper evidence


def _rewrite(store, texts):
    """What an attacker with write access does: a new log, a fresh, valid hash chain."""
    from datetime import datetime, timezone

    from eventlog.events import FactRemembered
    from eventlog.log import EventLog

    shutil.rmtree(store / "log")
    (store / "checkpoint.columns").unlink(missing_ok=True)
    t = datetime(2026, 1, 1, tzinfo=timezone.utc)
    with EventLog(store / "log") as log:
        log.append_many([FactRemembered(tx_at=t, subject="a", text=x) for x in texts])


def test_a_log_rewritten_with_a_fresh_chain_fails_against_a_noted_head(store):
    from eventlog.repair import verify_log
    from eventlog.segments import ChainHead

    with Memory(store, embedder=None) as m:
        for text in ("one", "two", "three"):
            m.remember("a", text)
        head = ChainHead.parse(m.stats().head)
    assert verify_log(store / "log", expect=head).ok
    _rewrite(store, ["one", "TWO", "three"])
    plain = verify_log(store / "log")
    assert plain.ok  # the chain itself is sound: only the noted head tells
    report = verify_log(store / "log", expect=head)
    assert not report.ok and "rewritten" in report.problem
    _rewrite(store, ["one"])
    assert "removed" in verify_log(store / "log", expect=head).problem


def test_signed_checkpoints_catch_a_rewriter_without_the_key(tmp_path):
    from eventlog import witness
    from eventlog.log import EventLog

    store, key_file, wit = tmp_path / "store", tmp_path / "key", tmp_path / "witness.jsonl"
    witness.new_key(key_file)
    key = witness.load_key(key_file)
    with Memory(store, embedder=None) as m:
        m.remember("a", "one")
        witness.record(m.store.log, key, wit)
        m.remember("a", "two")
        witness.record(m.store.log, key, wit)
    with EventLog(store / "log", read_only=True) as log:
        assert witness.check(log, key, wit) == (2, [])
    _rewrite(store, ["one", "TWO"])
    with EventLog(store / "log", read_only=True) as log:
        checked, problems = witness.check(log, key, wit)
        assert checked == 2 and len(problems) == 2  # other tx times: no record is the same
        assert all("rewritten" in p for p in problems)
        # a forger recomputes the witness line without the key: the MAC does not match
        forged = wit.read_text().splitlines()[-1].replace('"seq":2', '"seq":1')
        wit.write_text(wit.read_text() + forged + "\n")
        assert any("signature" in p for p in witness.check(log, key, wit)[1])
    with pytest.raises(HmemError, match="never overwritten"):
        witness.new_key(key_file)


def test_verify_counts_the_events_before_the_damage_as_repair_keeps_them(tmp_path):
    from eventlog.repair import repair_log, verify_log

    rng = random.Random(3)
    for trial in range(8):
        store = tmp_path / f"s{trial}"
        with Memory(store, embedder=None) as m:
            m.remember_many({"subject": "a", "text": f"fact {i}"} for i in range(200))
        segment = next((store / "log").glob("*.hlog"))
        data = bytearray(segment.read_bytes())
        offset = rng.randrange(64, len(data) - 200)
        data[offset] ^= 1 << rng.randrange(8)
        segment.write_bytes(bytes(data))
        report = verify_log(store / "log")
        assert not report.ok
        kept = repair_log(store / "log", store / "backups").events_kept
        assert report.events == kept, (report, kept)
        assert report.head.startswith(f"{kept}:")


# ---------------------------------------------------------------------- 4 and 11, from the CLI


def _hmem(*argv, env=None):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "hmem", "--embedder", "none", *argv],
                          capture_output=True, text=True, env=env, timeout=120)


def test_log_show_prints_only_its_namespace(store):
    with Memory(store, embedder=None) as m:
        m.remember("maya", "Maya lives in London")
        m.in_namespace("secret").remember("tom", "the vault code is 1234")
    mine = _hmem("--path", str(store), "log", "show")
    theirs = _hmem("--path", str(store), "--namespace", "secret", "log", "show")
    assert mine.returncode == 0 and "London" in mine.stdout
    assert "vault" not in mine.stdout + mine.stderr and "secret" not in mine.stdout
    assert "vault" in theirs.stdout and "London" not in theirs.stdout
    empty = _hmem("--path", str(store), "--namespace", "nobody", "log", "show", "--json")
    assert empty.returncode == 0 and empty.stdout.strip() == "[]"


def test_the_cli_notes_checks_and_signs_the_head(tmp_path):
    import json

    store, key, wit = tmp_path / "store", tmp_path / "key", tmp_path / "w.jsonl"
    with Memory(store, embedder=None) as m:
        m.remember("a", "one")
        m.remember("a", "two")
    head = json.loads(_hmem("--path", str(store), "stats", "--json").stdout)
    noted = f"{head['head_seq']}:{head['head_hash']}"
    report = json.loads(_hmem("--path", str(store), "log", "verify", "--json").stdout)
    assert report["ok"] and report["head"] == noted
    assert _hmem("log", "keygen", str(key)).returncode == 0
    signed = _hmem("--path", str(store), "log", "checkpoint", "--key", str(key),
                   "--witness", str(wit))
    assert signed.returncode == 0 and noted in signed.stdout
    ok = _hmem("--path", str(store), "log", "verify", "--expect", noted, "--key", str(key),
               "--witness", str(wit))
    assert ok.returncode == 0 and "1 signed checkpoint(s) checked" in ok.stdout
    _rewrite(store, ["one", "TWO"])
    bad = _hmem("--path", str(store), "log", "verify", "--expect", noted, "--key", str(key),
                "--witness", str(wit))
    assert bad.returncode == 1 and "rewritten" in bad.stdout
    assert _hmem("--path", str(store), "log", "verify").returncode == 0  # the chain alone: fine
    junk = _hmem("--path", str(store), "log", "verify", "--expect", "nonsense")
    assert junk.returncode == 1 and junk.stderr.startswith("error: a chain head is SEQ:HASH")
