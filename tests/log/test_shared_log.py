"""A shared log (``EventLog(shared=True)``): many processes append to
one log, each taking the writer lock for one append only, after taking in what the others
appended. Seqs stay gapless, the chain unbroken, every acknowledged append present; a torn tail
a killed writer left is cut by the next writer; a lifetime writer keeps them out."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pytest

from eventlog.errors import StoreLocked
from eventlog.events import FactRemembered
from eventlog.keyfile import KeyFile
from eventlog.log import EventLog
from eventlog.repair import verify_log
from eventlog.sealing import Sealer

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def fact(text: str) -> FactRemembered:
    return FactRemembered(subject="s", text=text, tx_at=NOW)


def test_two_shared_writers_interleave_without_a_gap(tmp_path):
    a, b = EventLog(tmp_path, shared=True), EventLog(tmp_path, shared=True)
    try:
        got = []
        for i in range(20):
            log = a if i % 3 else b
            got.append(log.append(fact(f"fact {i}")).seq)
            if i % 5 == 4:
                got.extend(e.seq for e in log.append_many([fact("x"), fact("y")]))
        assert got == list(range(1, len(got) + 1))
        b.refresh()
        assert [e.seq for e in a.read()] == [e.seq for e in b.read()] == got
    finally:
        a.close()
        b.close()
    assert verify_log(tmp_path).ok


WRITER = textwrap.dedent("""
    import sys
    from datetime import datetime, timezone
    from eventlog.events import FactRemembered
    from eventlog.log import EventLog
    name, n = sys.argv[2], int(sys.argv[3])
    with EventLog(sys.argv[1], shared=True, lock_wait=60) as log:
        for i in range(n):
            ev = log.append(FactRemembered(subject=name, text=f"{name} {i}",
                                           tx_at=datetime.now(timezone.utc)))
            print(ev.seq, flush=True)  # acknowledged
""")


def run_writers(directory: Path, names: list[str], n: int) -> list[subprocess.Popen[str]]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return [subprocess.Popen([sys.executable, "-c", WRITER, str(directory), name, str(n)],
                             stdout=subprocess.PIPE, text=True, env=env) for name in names]


def test_four_processes_append_at_once_and_every_acknowledged_event_is_there(tmp_path):
    procs = run_writers(tmp_path, ["a", "b", "c", "d"], 150)
    acked = {}
    for name, p in zip("abcd", procs, strict=True):
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        acked[name] = [int(line) for line in out.split()]
    with EventLog(tmp_path, read_only=True) as log:
        events = list(log.read())
    assert [e.seq for e in events] == list(range(1, 601))
    for name, seqs in acked.items():
        mine = [e for e in events if e.subject == name]
        assert [e.seq for e in mine] == seqs
        assert [e.text for e in mine] == [f"{name} {i}" for i in range(150)]
    assert all(a.tx_at <= b.tx_at for a, b in zip(events, events[1:], strict=False))
    assert verify_log(tmp_path).ok


def test_a_writer_killed_mid_write_leaves_a_tail_the_next_one_cuts(tmp_path):
    procs = run_writers(tmp_path, ["a", "b"], 100_000)
    acked: list[int] = []
    line = procs[0].stdout.readline()  # a is writing
    while len(acked) < 50:
        acked.append(int(line))
        line = procs[0].stdout.readline()
    for p in procs:
        p.send_signal(signal.SIGKILL)
        p.wait()
    seg = sorted(tmp_path.glob("*.hlog"))[-1]
    with open(seg, "ab") as f:
        f.write(b"\x07\x00\x00\x00garbage")  # as if a writer died in the middle of a record
    with EventLog(tmp_path, shared=True) as log:
        last = log.last_seq
        assert log.append(fact("after the crash")).seq == last + 1
        seqs = [e.seq for e in log.read()]
    assert seqs == list(range(1, last + 2)) and set(acked) <= set(seqs)
    assert verify_log(tmp_path).ok


def test_lifetime_and_shared_writers_never_meet_and_each_is_named(tmp_path):
    with EventLog(tmp_path, lock_label="store x") as owner:
        owner.append(fact("mine"))
        with pytest.raises(StoreLocked, match=f"does not share it .pid {os.getpid()}"):
            EventLog(tmp_path, shared=True, lock_label="store x")
    with EventLog(tmp_path, shared=True, lock_label="store x") as other:  # the owner gone
        assert other.append(fact("theirs")).seq == 2
        with pytest.raises(StoreLocked, match="shared writers open"):
            EventLog(tmp_path, lock_label="store x")
    with pytest.raises(ValueError, match="not both"):
        EventLog(tmp_path, shared=True, read_only=True)


def test_shared_writers_seal_with_one_key_file_each_opening_the_others(tmp_path):
    keys = tmp_path / "keys.hmk"
    KeyFile.create(keys, os.urandom(16)).close()
    logs = [EventLog(tmp_path / "log", shared=True,
                     sealer=Sealer(KeyFile(keys))) for _ in range(2)]
    try:
        for i in range(2500):  # past the first block of keys each made
            logs[i % 2].append(fact(f"secret {i}"))
        for log in logs:
            log.refresh()
            assert [e.text for e in log.read()] == [f"secret {i}" for i in range(2500)]
    finally:
        for log in logs:
            log.close()
            assert log.sealer is not None
            log.sealer.keys.close()
    assert not any(b"secret" in p.read_bytes() for p in (tmp_path / "log").glob("*.hlog"))
