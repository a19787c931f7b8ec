"""The opt-in local usage log: which operations an agent really calls, and when.

One JSON line per call, appended to ``<store>/usage.log``::

    {"ts":"2026-03-01T09:30:00.123456Z","op":"recall","ok":true}

Only the operation's name, the time and whether it succeeded: never arguments, results or memory
text. Nothing leaves the machine. Off by default; ``hmem mcp --usage-log`` (or
``HMEM_USAGE_LOG=1``) turns it on, ``hmem stats --usage`` summarises it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import msgspec

__all__ = [
    "USAGE_FILE",
    "UsageRecord",
    "OpUsage",
    "UsageSummary",
    "UsageLog",
    "usage_enabled",
    "summarize_usage",
    "usage_lines",
]

USAGE_FILE = "usage.log"

_TRUE = {"1", "true", "yes", "on"}


class UsageRecord(msgspec.Struct, frozen=True):
    """One call: when, which operation, whether it succeeded."""

    ts: datetime
    op: str
    ok: bool = True


class OpUsage(msgspec.Struct, frozen=True):
    """How often one operation was called, how many of those calls failed, first and last use."""

    op: str
    calls: int
    errors: int
    first: datetime
    last: datetime


class UsageSummary(msgspec.Struct, frozen=True):
    """The usage log summarised per operation, most called first."""

    path: str
    exists: bool
    calls: int
    ops: tuple[OpUsage, ...]
    first: datetime | None
    last: datetime | None
    unreadable_lines: int  # lines that were not a usage record (a torn last line counts too)


def usage_enabled(flag: bool = False) -> bool:
    """Whether to log usage: the ``--usage-log`` flag, else ``$HMEM_USAGE_LOG`` (1/true/yes/on)."""
    return flag or os.environ.get("HMEM_USAGE_LOG", "").strip().lower() in _TRUE


def _utc_now() -> datetime:
    return datetime.now(timezone.utc)


class UsageLog:
    """Appends usage records to ``<root>/usage.log``. Thread-safe; each record is one
    ``write`` of one line to a file opened in append mode."""

    def __init__(
        self, root: str | os.PathLike[str], *, clock: Callable[[], datetime] = _utc_now
    ) -> None:
        self.path = Path(root) / USAGE_FILE
        self._clock = clock
        self._lock = threading.Lock()
        self._encoder = msgspec.json.Encoder()

    def record(self, op: str, *, ok: bool = True) -> None:
        """Append one record. Raises ``OSError`` if the file cannot be written."""
        now = self._clock().astimezone(timezone.utc)
        line = self._encoder.encode(UsageRecord(ts=now, op=op, ok=ok)) + b"\n"
        with self._lock:
            self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
            with os.fdopen(fd, "ab") as f:
                f.write(line)


_decoder = msgspec.json.Decoder(UsageRecord)


def summarize_usage(root: str | os.PathLike[str]) -> UsageSummary:
    """Counts per operation (calls, errors, first and last use) from ``<root>/usage.log``.

    A missing file is an empty summary (``exists`` False). Lines that do not decode are counted
    in ``unreadable_lines``, not guessed at."""
    path = Path(root) / USAGE_FILE
    if not path.is_file():
        return UsageSummary(str(path), False, 0, (), None, None, 0)
    counts: dict[str, list[Any]] = {}
    bad = 0
    with open(path, "rb") as f:
        for raw in f:
            if not raw.strip():
                continue
            try:
                rec = _decoder.decode(raw)
            except msgspec.DecodeError:
                bad += 1
                continue
            if rec.ts.tzinfo is None:  # not written by UsageLog
                bad += 1
                continue
            entry = counts.setdefault(rec.op, [0, 0, rec.ts, rec.ts])
            entry[0] += 1
            entry[1] += not rec.ok
            entry[2] = min(entry[2], rec.ts)
            entry[3] = max(entry[3], rec.ts)
    ops = tuple(
        sorted(
            (OpUsage(op, calls, errors, first, last)
             for op, (calls, errors, first, last) in counts.items()),
            key=lambda u: (-u.calls, u.op),
        )
    )
    return UsageSummary(
        path=str(path),
        exists=True,
        calls=sum(u.calls for u in ops),
        ops=ops,
        first=min((u.first for u in ops), default=None),
        last=max((u.last for u in ops), default=None),
        unreadable_lines=bad,
    )


def _tx(dt: datetime | None) -> str:
    return "-" if dt is None else dt.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def usage_lines(summary: UsageSummary) -> list[str]:
    """The summary as an aligned table for ``hmem stats --usage``."""
    if not summary.exists:
        return [
            f"no usage log at {summary.path}",
            "it is written by `hmem mcp --usage-log` (or HMEM_USAGE_LOG=1): tool names and "
            "times only",
        ]
    lines = [f"usage log   {summary.path}",
             f"calls       {summary.calls}, {_tx(summary.first)} to {_tx(summary.last)}"]
    if summary.ops:
        lines.append(f"{'tool':<12}{'calls':>7}{'errors':>8}  {'first use':<22}last use")
    for u in summary.ops:
        lines.append(
            f"{u.op:<12}{u.calls:>7}{u.errors:>8}  {_tx(u.first):<22}{_tx(u.last)}"
        )
    if summary.unreadable_lines:
        lines.append(f"({summary.unreadable_lines} unreadable line(s) skipped)")
    return lines
