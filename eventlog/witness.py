"""Signed checkpoints: what a rewriter of the log cannot forge without a key it does not have.

The hash chain proves the log is one unbroken sequence; it cannot prove *which* sequence: whoever
can write the store can rewrite every record and recompute a fresh chain. A checkpoint closes
that gap. It is the log's head (seq and chain hash) at a moment, with an HMAC-SHA256 over it
under a key kept *outside* the store, appended as one JSON line to a witness file (also best kept
elsewhere: another disk, another machine, a ticket). :func:`check` then proves that the log still
holds every checkpointed prefix: a rewritten log fails at the first checkpoint it changed.

What it cannot prove: anything written after the last checkpoint, or by someone who holds the
key (or who deletes the witness file and the log together).
"""

from __future__ import annotations

import hashlib
import hmac
import os
from datetime import datetime, timezone
from pathlib import Path

import msgspec

from eventlog.errors import LogError
from eventlog.protocol import Log

__all__ = ["Checkpoint", "WitnessError", "check", "load_key", "new_key", "record"]

MIN_KEY_BYTES = 16


class WitnessError(LogError):
    """A key or witness file is missing, unreadable or malformed."""


class Checkpoint(msgspec.Struct, frozen=True):
    """One witnessed head: ``mac`` is HMAC-SHA256(key, "seq:hash:at") in hex."""

    seq: int
    hash: str
    at: str  # when it was signed, ISO 8601 UTC
    mac: str

    def message(self) -> bytes:
        return f"{self.seq}:{self.hash}:{self.at}".encode()


def new_key(path: str | os.PathLike[str]) -> Path:
    """Write a new random 32-byte key to ``path`` (readable by its owner only); never
    overwrites an existing file."""
    path = Path(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise WitnessError(
            f"{path} exists; a key is never overwritten (choose a new file)"
        ) from None
    with os.fdopen(fd, "wb") as f:
        f.write(os.urandom(32))
    return path


def load_key(path: str | os.PathLike[str]) -> bytes:
    """The key in ``path`` (at least 16 bytes)."""
    try:
        key = Path(path).read_bytes()
    except OSError as e:
        raise WitnessError(f"cannot read the key {path}: {e.strerror or e}") from e
    if len(key) < MIN_KEY_BYTES:
        raise WitnessError(
            f"the key {path} has {len(key)} bytes; a key has at least {MIN_KEY_BYTES} "
            f"(make one with `hmem log keygen FILE`)"
        )
    return key


def _mac(key: bytes, message: bytes) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def record(
    log: Log, key: bytes, witness: str | os.PathLike[str], *, now: datetime | None = None
) -> Checkpoint:
    """Sign the log's current head and append it to the ``witness`` file; returns it."""
    head = log.head()
    at = (now or datetime.now(timezone.utc)).astimezone(timezone.utc).isoformat()
    unsigned = Checkpoint(head.seq, head.hash, at, "")
    checkpoint = msgspec.structs.replace(unsigned, mac=_mac(key, unsigned.message()))
    fd = os.open(witness, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    with os.fdopen(fd, "ab") as f:
        f.write(msgspec.json.encode(checkpoint) + b"\n")
        f.flush()
        os.fsync(f.fileno())
    return checkpoint


def check(log: Log, key: bytes, witness: str | os.PathLike[str]) -> tuple[int, list[str]]:
    """(checkpoints checked, problems): every line must carry a valid MAC, and the log must
    still hold each checkpointed prefix."""
    try:
        lines = Path(witness).read_bytes().splitlines()
    except OSError as e:
        raise WitnessError(f"cannot read the witness file {witness}: {e.strerror or e}") from e
    problems: list[str] = []
    checked = 0
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            cp = msgspec.json.decode(line, type=Checkpoint)
        except msgspec.DecodeError as e:
            problems.append(f"witness line {n} is not a checkpoint ({e})")
            continue
        checked += 1
        if not hmac.compare_digest(cp.mac, _mac(key, cp.message())):
            problems.append(
                f"witness line {n} (seq {cp.seq}) does not carry this key's signature: the "
                f"witness was altered, or the key is not the one that signed it"
            )
        elif cp.seq > log.last_seq:
            problems.append(
                f"checkpoint at seq {cp.seq} (signed {cp.at}) is past the log's end at seq "
                f"{log.last_seq}: events were removed"
            )
        elif (log.chain_at(cp.seq).hex() if cp.seq else "") != cp.hash:
            problems.append(
                f"checkpoint at seq {cp.seq} (signed {cp.at}) does not match the log: the log "
                f"was rewritten up to there"
            )
    return checked, problems
