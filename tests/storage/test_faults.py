"""Fault injection under the log, and damaged projections: loud failure, never silent loss."""

from __future__ import annotations

import errno
import os
import shutil
from datetime import datetime, timezone

import pytest

from eventlog.events import FactRemembered
from eventlog.fileio import FileIO
from eventlog.log import EventLog
from hmem import Memory, errors
from hmem.storage.store import Store
from projections import projector as projector_module
from projections.checkpoint import CHECKPOINT_FILE
from replay.verify import state_rows

T0 = datetime(2026, 1, 1, tzinfo=timezone.utc)


class Faulty(FileIO):
    """Fails the n-th call of one kind (counting from 1), in a chosen way."""

    def __init__(self, call: str, nth: int, how: str) -> None:
        self.call, self.nth, self.how = call, nth, how
        self.count = 0

    def _maybe_fail(self, call: str) -> bool:
        if call != self.call:
            return False
        self.count += 1
        return self.count == self.nth

    def write(self, fd, data):  # type: ignore[no-untyped-def]
        if self._maybe_fail("write"):
            if self.how == "short":
                os.write(fd, bytes(data)[: max(1, len(data) // 3)])
                raise OSError(errno.ENOSPC, "No space left on device")
            raise OSError(errno.EIO if self.how == "eio" else errno.ENOSPC, self.how)
        return super().write(fd, data)

    def fdatasync(self, fd):  # type: ignore[no-untyped-def]
        if self._maybe_fail("fdatasync"):
            raise OSError(errno.EIO, "Input/output error")
        super().fdatasync(fd)

    def fsync(self, fd):  # type: ignore[no-untyped-def]
        if self._maybe_fail("fsync"):
            raise OSError(errno.EIO, "Input/output error")
        super().fsync(fd)

    def open(self, path, flags, mode=0o644):  # type: ignore[no-untyped-def]
        if self._maybe_fail("open"):
            raise OSError(errno.ENOSPC, "No space left on device")
        return super().open(path, flags, mode)


def ev(text: str) -> FactRemembered:
    return FactRemembered(tx_at=T0, subject="s", text=text)


@pytest.mark.parametrize("how", ["short", "enospc", "eio"])
def test_a_failed_write_stores_nothing_of_the_call_and_refuses_until_reopened(tmp_path, how):
    io = Faulty("write", 3, how)  # 1: segment header, 2: first append, 3: the failing one
    log = EventLog(tmp_path / "log", io=io)
    log.append(ev("kept"))
    with pytest.raises(errors.LogWriteFailed) as info:
        log.append_many([ev("lost 1"), ev("lost 2")])
    assert "Nothing of this call was stored" in str(info.value)
    with pytest.raises(errors.LogWriteFailed, match="refuses writes"):
        log.append(ev("refused"))
    log.close()
    with EventLog(tmp_path / "log") as log:
        assert [e.text for e in log.read()] == ["kept"]
        assert log.recovery.clean
        log.append(ev("after reopen"))


def test_an_fsync_failure_is_fatal_and_never_retried(tmp_path):
    io = Faulty("fdatasync", 2, "eio")
    log = EventLog(tmp_path / "log", io=io)
    log.append(ev("synced"))
    with pytest.raises(errors.LogWriteFailed, match="fsync"):
        log.append(ev("unsure"))
    assert io.count == 2  # not retried
    with pytest.raises(errors.LogWriteFailed, match="refuses writes"):
        log.sync()
    log.close()
    with EventLog(tmp_path / "log") as log:  # the page cache still had it: present, in order
        assert [e.text for e in log.read()] == ["synced", "unsure"]


def test_a_failed_segment_rollover_is_loud_and_recoverable(tmp_path):
    io = Faulty("open", 3, "enospc")  # opens 1-2: the first segment and its directory
    log = EventLog(tmp_path / "log", segment_bytes=200, io=io)
    log.append_many([ev("x" * 100), ev("y" * 100)])
    with pytest.raises(errors.LogWriteFailed, match="new segment"):
        log.append(ev("needs a new segment"))
    log.close()
    with EventLog(tmp_path / "log", segment_bytes=200) as log:
        assert [e.text for e in log.read()] == ["x" * 100, "y" * 100]
        log.append(ev("now it rolls over"))
        assert len(log.segment_paths) == 2


def test_memory_reports_a_failed_write_and_keeps_its_state(tmp_path):
    io = Faulty("fdatasync", 2, "eio")  # the second remember's sync fails
    store = Store(tmp_path / "s", io=io)
    m = Memory(store=store, embedder=None)
    a = m.remember("maya", "Maya lives in London")
    with pytest.raises(errors.LogWriteFailed):
        m.remember("maya", "Maya likes tea")
    with pytest.raises(errors.LogWriteFailed):
        m.revise(a, "Maya lives in Paris")
    assert [h.id for h in m.recall("maya london")] == [a]
    store.close()
    with Memory(tmp_path / "s", embedder=None) as m:
        assert m.verify().ok
        assert m.remember("maya", "writes work again") > a


def test_a_shared_writer_whose_fold_failed_after_the_write_reloads_and_holds_that_write(
    tmp_path, monkeypatch
):
    """The records were written, then the fold stopped: the writer's state is behind its log.
    The next write catches up from the checkpoint and the log, the stopped write included."""
    store = Store(tmp_path / "s", shared=True, checkpoint_every=1)  # a checkpoint at seq 1
    with Memory(store=store, embedder=None) as m:
        a = m.remember("maya", "Maya lives in London")
        folding = projector_module.fold

        def stopped(events, into, **kw):  # type: ignore[no-untyped-def]
            if events:  # a catch-up with nothing new folds nothing
                raise RuntimeError("the fold stopped")

        monkeypatch.setattr(projector_module, "fold", stopped)
        with pytest.raises(RuntimeError, match="the fold stopped"):
            m.remember("tom", "Tom likes tea")
        monkeypatch.setattr(projector_module, "fold", folding)
        c = m.remember("bo", "Bo plays drums")
        assert (a, c) == (1, 3) and m.get(2).text == "Tom likes tea"
        assert m.verify().ok
    store.close()


# ------------------------------------------------------------------ damaged projections


def _store_with_facts(path):
    with Memory(path, embedder=None) as m:
        a = m.remember("maya", "Maya lives in London")
        m.revise(a, "Maya lives in Paris", valid_from="2030-01-01")
        m.remember("tom", "Tom likes chess")
        return state_rows(m.store.projector)


@pytest.mark.parametrize("damage", ["delete", "truncate", "garbage", "old-layout", "ahead"])
def test_a_damaged_checkpoint_is_detected_and_replaced_by_a_replay_with_a_note(tmp_path, damage):
    path = tmp_path / "s"
    before = _store_with_facts(path)
    ck = path / CHECKPOINT_FILE
    if damage == "delete":
        ck.unlink()
    elif damage == "truncate":
        os.truncate(ck, ck.stat().st_size // 2)
    elif damage == "garbage":
        ck.write_bytes(os.urandom(4096) * 8)
    elif damage == "old-layout":
        data = bytearray(ck.read_bytes())
        data[8:12] = (1).to_bytes(4, "little")
        ck.write_bytes(bytes(data))
    elif damage == "ahead":  # a stamp past the log's end (the log was cut since, say)
        with Memory(tmp_path / "longer", embedder=None) as other:
            for i in range(9):
                other.remember("x", f"fact {i}")
        shutil.copy(tmp_path / "longer" / CHECKPOINT_FILE, ck)
    with Memory(path, embedder=None) as m:
        assert state_rows(m.store.projector) == before
        assert m.verify().ok
        if damage != "delete":
            assert m.notes, "a rebuilt projection is reported"
