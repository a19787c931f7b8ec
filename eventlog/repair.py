"""``hmem log verify`` and ``hmem log repair``: check every record; cut a damaged log back.

:func:`verify_log` reads a store directory's segment files (it works where the log cannot be
opened); :func:`verify_events` checks any opened :class:`~eventlog.protocol.Log` (a log on a
server: hmem/storage/server_backend.py adds the checks of its table)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

from eventlog.errors import LogCorrupted
from eventlog.events import Event
from eventlog.fileio import OS
from eventlog.lock import WriterLock
from eventlog.log import EventLog
from eventlog.protocol import Log
from eventlog.segments import ChainHead, Segments
from eventlog.witness import check as check_witness

__all__ = ["VerifyReport", "RepairReport", "verify_events", "verify_log", "repair_log"]


@dataclass
class VerifyReport:
    """The outcome of reading and decoding every record of a log."""

    ok: bool
    events: int
    segments: int
    bytes: int
    problem: str = ""
    segment: str | None = None
    offset: int | None = None
    torn_tail: str = ""
    head: str = ""  # SEQ:HASH of the last good record: note it, and --expect it later
    expected: str = ""  # the head the caller expected, if any
    checkpoints: int = 0  # signed checkpoints checked against the log (with key and witness)
    witness_problems: list[str] = field(default_factory=list)
    # a log in a server's table: the table (and database) it is in, then ``segment`` names it
    # too and ``offset`` is the seq of the first bad row; what else its table holds that
    # disagrees with its events
    table: str | None = None
    table_problems: list[str] = field(default_factory=list)


@dataclass
class RepairReport:
    """What ``repair_log`` cut off, and where the cut-off bytes were kept."""

    events_kept: int
    cuts: list[str] = field(default_factory=list)
    backup: str | None = None


def verify_log(
    directory: str | os.PathLike[str],
    *,
    expect: ChainHead | None = None,
    key: bytes | None = None,
    witness: str | os.PathLike[str] | None = None,
) -> VerifyReport:
    """Read and decode every record without modifying anything (safe beside a live writer).

    ``expect`` is a head noted earlier (``SEQ:HASH``): the log must still hold that prefix, so
    a log rewritten with a fresh hash chain (or cut short) fails. A damaged log reports how
    many events before the damage read fine (what ``repair_log`` would keep). With ``key`` and
    ``witness``, every signed checkpoint must carry the key's signature and match the log
    (see :mod:`eventlog.witness`)."""
    try:
        log = EventLog(directory, read_only=True)
    except LogCorrupted as e:
        good = Segments(Path(directory), read_only=True, io=OS)
        try:
            good.load()
        except LogCorrupted:
            pass  # it stops at the same record: what it read before is the good prefix
        return VerifyReport(
            False, good.last_seq, len(good.list), good.size_bytes, e.detail, e.segment, e.offset,
            head=str(good.head()), expected=str(expect or ""),
        )
    with log:
        report = verify_events(log, expect=expect, key=key, witness=witness)
        report.segments = len(log.segment_paths)
        if report.ok and log.unfinished_tail:
            path, offset = log.unfinished_tail
            report.torn_tail = (f"{path} has an unfinished record at byte {offset} (cut on the "
                                f"next writer open)")
        return report


def verify_events(
    log: Log,
    *,
    expect: ChainHead | None = None,
    key: bytes | None = None,
    witness: str | os.PathLike[str] | None = None,
    table: str | None = None,
    each: Callable[[Event], None] | None = None,
) -> VerifyReport:
    """Read every event of the opened ``log`` through its checks (``each(event)`` sees each
    one), then hold it to ``expect`` and the signed checkpoints as :func:`verify_log` does
    (which sets the report's ``segments``). ``table``: where a log on a server is."""
    count = 0
    try:
        for event in log.read():
            if each is not None:
                each(event)
            count += 1
    except LogCorrupted as e:
        head = ChainHead(count, log.chain_at(count).hex() if count else "")
        return VerifyReport(
            False, count, 0, log.size_bytes, e.detail, e.segment, e.offset, head=str(head),
            expected=str(expect or ""), table=table,
        )
    report = VerifyReport(True, count, 0, log.size_bytes,
                          head=str(log.head()), expected=str(expect or ""), table=table)
    if expect is not None:
        report.problem = _against(log, expect)
    if key is not None and witness is not None:
        report.checkpoints, report.witness_problems = check_witness(log, key, witness)
    report.ok = not report.problem and not report.witness_problems
    return report


def _against(log: Log, expect: ChainHead) -> str:
    """Why the log does not hold the prefix ``expect`` names ("" when it does)."""
    if expect.seq > log.last_seq:
        return (
            f"the log ends at seq {log.last_seq}, before the expected head at seq {expect.seq}: "
            f"events were removed"
        )
    have = log.chain_at(expect.seq).hex() if expect.seq else ""
    if have != expect.hash:
        return (
            f"the hash chain at seq {expect.seq} is {have or '(empty)'}, not the expected "
            f"{expect.hash}: the log was rewritten up to there"
        )
    return ""


def repair_log(
    directory: str | os.PathLike[str], backup_root: str | os.PathLike[str]
) -> RepairReport:
    """Truncate the log to its last good record, copying everything cut into ``backup_root``.

    Holds the writer lock throughout, so it fails with ``StoreLocked`` while another process
    writes.
    """
    directory = Path(directory)
    report = RepairReport(events_kept=0)
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    backup = Path(backup_root) / f"log-{stamp}"
    lock = WriterLock(directory / "LOCK", f"event log {directory}")
    lock.acquire()
    try:
        while (problem := _first_problem(directory)) is not None:
            segment, offset, detail = problem
            _cut(directory, Path(segment), offset, backup)
            report.cuts.append(f"{segment} at byte {offset}: {detail}")
            report.backup = str(backup)
        with EventLog(directory, read_only=True) as log:
            report.events_kept = log.last_seq
    finally:
        lock.release()
    return report


def _first_problem(directory: Path) -> tuple[str, int, str] | None:
    try:
        with EventLog(directory, read_only=True) as log:
            for _ in log.read():
                pass
            tail = log.unfinished_tail
    except LogCorrupted as e:
        return e.segment, e.offset, e.detail
    if tail is not None:
        return str(tail[0]), tail[1], "unfinished record at the end"
    return None


def _cut(directory: Path, segment: Path, offset: int, backup: Path) -> None:
    backup.mkdir(mode=0o700, parents=True, exist_ok=True)
    later = sorted(p for p in directory.glob("*.hlog") if p.name > segment.name)
    for path in [segment, *later]:
        shutil.copy2(path, backup / path.name)
    for path in later:
        path.unlink()
    if offset == 0:
        segment.unlink()
    else:
        with open(segment, "r+b") as f:
            f.truncate(offset)
            os.fsync(f.fileno())
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
