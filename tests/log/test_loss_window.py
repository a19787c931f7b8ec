"""What each fsync policy may lose when the OS crashes (power loss), and that the rest is a prefix.

A SIGKILL cannot show this: the kernel keeps a killed process's writes in its page cache. So the
log runs over :class:`Durable`, a FileIO that records each file's durable length at every
``fsync``/``fdatasync``; :func:`os_crash` then throws away what the OS had not made durable, the
way a power cut does: all of it, some of it (a prefix written back), or the size but not the data
(a zero-filled tail). The contract (README, "Guarantees"; eventlog/log.py):

* ``always``: every acknowledged append survives.
* ``batch``: every append acknowledged before the last completed sync survives (a sync happens
  when ``batch_events`` are pending, on ``sync()``/``close()``, or from the idle flusher).
* ``never``: nothing is promised beyond the OS; what survives is still a prefix.
* under every policy, reopening yields a valid prefix of what was appended; the cut-off tail is
  reported in ``recovery``; a hole in the middle (pages written back out of order) is refused
  loudly (``LogCorrupted``) and ``repair_log`` keeps everything durable.
"""

from __future__ import annotations

import os
import random
import threading
from datetime import datetime, timezone

import pytest

from eventlog.events import FactRemembered
from eventlog.fileio import FileIO
from eventlog.log import EventLog
from eventlog.repair import repair_log
from hmem import Memory, errors
from hmem.storage.store import Store

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Durable(FileIO):
    """Tracks, per file, how many bytes the last fsync made durable (and counts syncs)."""

    def __init__(self) -> None:
        self.paths: dict[int, str] = {}
        self.durable: dict[str, int] = {}
        self.synced = threading.Event()
        self.syncs = 0
        self.down = threading.Event()

    def power_cut(self) -> None:
        """From now on the machine is down: no sync makes anything durable any more (the process
        still closes its log, but the final sync of ``close()`` reaches no disk)."""
        self.down.set()

    def open(self, path, flags, mode=0o644):  # type: ignore[no-untyped-def]
        fd = super().open(path, flags, mode)
        self.paths[fd] = str(path)
        if os.path.isfile(path):
            self.durable.setdefault(str(path), os.fstat(fd).st_size)  # existed before: durable
        return fd

    def _synced(self, fd: int) -> None:
        if self.down.is_set():
            return
        if fd in self.paths and os.path.isfile(self.paths[fd]):
            self.durable[self.paths[fd]] = os.fstat(fd).st_size
            self.syncs += 1
            self.synced.set()

    def fdatasync(self, fd):  # type: ignore[no-untyped-def]
        super().fdatasync(fd)
        self._synced(fd)

    def fsync(self, fd):  # type: ignore[no-untyped-def]
        super().fsync(fd)
        self._synced(fd)


def os_crash(io: Durable, how: str, rng: random.Random) -> None:
    """Lose what was not durable: ``all``, a random ``prefix`` of it, or its data (``zeros``)."""
    for path, durable in io.durable.items():
        if not os.path.exists(path):
            continue
        size = os.path.getsize(path)
        if size <= durable:
            continue
        if how == "all":
            os.truncate(path, durable)
        elif how == "prefix":
            os.truncate(path, rng.randint(durable, size))
        elif how == "zeros":
            with open(path, "r+b") as f:
                f.seek(durable)
                f.write(bytes(size - durable))


def ev(i: int) -> FactRemembered:
    return FactRemembered(tx_at=T0, subject="s", text=f"event {i}")


def texts(path) -> list[str]:  # type: ignore[no-untyped-def]
    with EventLog(path) as log:
        return [e.text for e in log.read()]


def append_and_track(
    log: EventLog, io: Durable, n: int, rng: random.Random
) -> tuple[list[str], int]:
    """Append ``n`` events (one or a few per call); returns them and how many were synced."""
    acked: list[str] = []
    synced_upto = 0
    while len(acked) < n:
        batch = [ev(len(acked) + k) for k in range(rng.choice([1, 1, 1, 3]))]
        before = io.syncs
        log.append_many(batch)
        acked += [e.text for e in batch]
        if io.syncs > before:  # this call's sync covered everything appended so far
            synced_upto = len(acked)
    return acked, synced_upto


@pytest.mark.parametrize("how", ["all", "prefix", "zeros"])
@pytest.mark.parametrize("policy", ["always", "batch", "never"])
def test_an_os_crash_loses_at_most_the_policys_window_and_leaves_a_prefix(tmp_path, policy, how):
    rng = random.Random(f"{policy}-{how}")
    for trial in range(4):
        path = tmp_path / f"log{trial}"
        io = Durable()
        log = EventLog(path, fsync=policy, batch_events=7, batch_interval=3600, io=io)
        acked, synced_upto = append_and_track(log, io, rng.randint(1, 40), rng)
        io.power_cut()  # the process dies with the OS: its final sync never reaches the disk
        log.close()
        os_crash(io, how, rng)

        with EventLog(path, fsync=policy) as log:
            survived = [e.text for e in log.read()]
            recovery = log.recovery
        assert survived == acked[: len(survived)], "what survives is a prefix"
        if policy == "always":
            assert survived == acked
        elif policy == "batch":
            assert len(survived) >= synced_upto, "acknowledged before the last sync: kept"
            assert synced_upto >= len(acked) - 6, "fewer than batch_events are ever pending"
        if how == "all":  # exactly the synced prefix: the simulation really loses the rest
            assert len(survived) == {"always": len(acked), "batch": synced_upto, "never": 0}[policy]
        if how == "zeros" and len(survived) < len(acked):
            assert recovery.truncated_bytes > 0, "a zero-filled tail is cut off and reported"
        with EventLog(path, fsync=policy) as log:  # the store accepts writes again
            log.append(ev(999))
        assert texts(path) == survived + ["event 999"]


def test_batch_idle_flusher_makes_earlier_appends_durable(tmp_path):
    io = Durable()
    log = EventLog(tmp_path / "log", fsync="batch", batch_events=1000, batch_interval=0.01, io=io)
    io.synced.clear()
    log.append_many([ev(0), ev(1)])
    assert io.synced.wait(30), "the background thread syncs an idle log"
    log.append(ev(2))  # after the flush: may be lost
    io.power_cut()  # crash now: the final sync of close() makes nothing durable
    log.close()
    os_crash(io, "all", random.Random(0))
    assert texts(tmp_path / "log")[:2] == ["event 0", "event 1"]


def test_sync_and_close_end_the_loss_window(tmp_path):
    io = Durable()
    log = EventLog(tmp_path / "log", fsync="batch", batch_events=1000, batch_interval=3600, io=io)
    log.append_many([ev(0), ev(1)])
    log.sync()
    log.append(ev(2))
    log.close()
    os_crash(io, "all", random.Random(0))
    assert texts(tmp_path / "log") == ["event 0", "event 1", "event 2"]


def test_a_hole_in_unsynced_data_is_refused_loudly_and_repair_keeps_the_durable_prefix(tmp_path):
    """Pages written back out of order: a zeroed page with data after it is not a torn tail."""
    io = Durable()
    path = tmp_path / "log"
    log = EventLog(path, fsync="never", io=io)
    log.append(ev(0))
    log.sync()
    for i in range(1, 30):
        log.append(ev(i))
    seg = log.segment_paths[-1]
    log.close()  # under "never" close() does not sync: the tail stays as unsynced as it was
    durable = io.durable[str(seg)]
    with open(seg, "r+b") as f:  # the first unsynced page never reached the disk
        f.seek(durable)
        f.write(bytes(64))
    with pytest.raises(errors.LogCorrupted) as info:
        EventLog(path)
    assert str(seg) in str(info.value) and "repair" in str(info.value)
    report = repair_log(path, tmp_path / "backups")
    assert report.events_kept >= 1 and report.backup
    assert texts(path)[:1] == ["event 0"]


def test_memory_after_an_os_crash_rebuilds_a_projection_that_is_ahead_of_the_log(tmp_path):
    """DuckDB syncs its own file; the log under ``never`` may lose more: the projection is reset."""
    io = Durable()
    store = Store(tmp_path / "s", fsync="never", io=io)
    m = Memory(store=store, embedder=None)
    kept = m.remember("maya", "Maya lives in London")
    m.store.log.sync()
    m.remember("maya", "Maya likes tea")
    m.remember("tom", "Tom plays chess")
    store.close()  # the projection now covers seq 3; the log's last 2 events were never synced
    os_crash(io, "all", random.Random(0))
    with Memory(tmp_path / "s", embedder=None) as m:
        assert m.last_seq == kept
        assert m.verify().ok
        assert any("rebuilt" in n or "different log" in n for n in m.notes)
        assert [h.text for h in m.recall("maya")] == ["Maya lives in London"]
        m.remember("tom", "writes work again")
