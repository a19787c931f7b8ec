"""Which key file a store uses, and whether it seals at all (see :mod:`eventlog.sealing`).

A new store seals its texts from its first event, with a key file made beside the log (or at
``key_file`` / ``$HMEM_KEY_FILE``: keep it on other storage than the store's backups, so that an
erasure also holds for a backup restored later). A store whose log holds events in the clear
(made before hmem sealed texts, or with ``seal=False``) stays so. A store whose log is sealed
never opens without its key file: that is an error, never a silent read or write in the clear.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Protocol

from eventlog.errors import KeyFileDamaged, KeyFileMissing
from eventlog.events import FactsErased
from eventlog.fileio import OS
from eventlog.keyfile import KeyFile
from eventlog.protocol import Log
from eventlog.sealing import Sealer, key_owner
from eventlog.segments import fsync_dir

__all__ = [
    "KEYS_FILE", "KEYS_ID", "Binding", "DirectoryBinding", "key_path", "open_sealer", "shred",
    "missing_receipts",
]

KEYS_FILE = "keys.hmk"
KEYS_ID = "keys.id"  # in the store directory: the id of the store's key file


def key_path(root: Path, key_file: str | os.PathLike[str] | None) -> Path:
    """``key_file``, else ``$HMEM_KEY_FILE``, else ``keys.hmk`` in the store directory."""
    if key_file is not None:
        return Path(key_file).expanduser()
    if os.environ.get("HMEM_KEY_FILE"):
        return Path(os.environ["HMEM_KEY_FILE"]).expanduser()
    return root / KEYS_FILE


def checkpoint_key(keys: KeyFile) -> bytes | None:
    """The key a sealed store's checkpoints are authenticated with, derived from its key
    file's secret (None: a version-1 file opened read-only has none yet)."""
    return keys.derived_key("checkpoint")


class Binding(Protocol):
    """Where a store records the id of its key file, so that it never takes another store's
    key file for its own: ``keys.id`` in a store directory, a row on a server."""

    @property
    def where(self) -> str:
        """The store, as messages show it."""

    def bound(self) -> str | None:
        """The id recorded (hex), None before the store made its key file."""

    def bind(self, file_id: str) -> None:
        """Record ``file_id`` (hex), durably."""


class DirectoryBinding:
    """The key file's id in ``keys.id`` of the store directory ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.where = str(root)

    def bound(self) -> str | None:
        try:
            return (self.root / KEYS_ID).read_text(encoding="ascii").strip() or None
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as e:
            raise KeyFileDamaged(f"{self.root / KEYS_ID} cannot be read ({e})") from None

    def bind(self, file_id: str) -> None:
        root = self.root
        tmp = root / (KEYS_ID + ".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            os.write(fd, f"{file_id}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, root / KEYS_ID)
        fsync_dir(OS, root)


def open_sealer(log: Log, path: Path, binding: Binding, *, seal: bool) -> Sealer | None:
    """The sealer of the store whose log is ``log`` (its key file's id recorded by
    ``binding``): its key file opened (made, for a new store that seals); None for a store in
    the clear."""
    bound = binding.bound()
    if path.exists():
        sealer = Sealer(KeyFile(path, read_only=log.read_only))
        try:
            _check_owner(log, sealer.keys, bound, binding)
            _check_opens(log, sealer)
        except BaseException:
            sealer.keys.close()
            raise
        return sealer
    if log.last_seq == 0:
        if not seal or log.read_only:
            return None
        file_id = bytes.fromhex(bound) if bound else os.urandom(16)
        if not bound:  # the binding first: a crash before the file leaves it to be made
            binding.bind(file_id.hex())
        return Sealer(KeyFile.create(path, file_id))
    if log.get_raw(1).sealed:
        raise KeyFileMissing(
            f"the store's texts are sealed, but its key file {path} is missing. Restore it, or "
            f"point to it (key_file=..., or $HMEM_KEY_FILE); hmem never reads or writes this "
            f"store without it"
        )
    return None


def _check_owner(log: Log, keys: KeyFile, bound: str | None, binding: Binding) -> None:
    """The key file is the one this store made (its id is the one ``binding`` records)."""
    have = keys.file_id.hex()
    if bound is not None and bound != have:
        raise KeyFileDamaged(
            f"the key file {keys.path} is not this store's (its id is {have}; the store at "
            f"{binding.where} was made with {bound}); point key_file / $HMEM_KEY_FILE at its own"
        )
    if bound is None:
        if log.last_seq == 0:
            raise KeyFileDamaged(
                f"the key file {keys.path} already exists and this store did not make it: a "
                f"new store makes its own key file; point key_file / $HMEM_KEY_FILE at a new "
                f"path (two stores never share keys: erasing in one would erase in the other)"
            )
        if not log.read_only:  # a store made before stores kept the id: bound now
            binding.bind(have)


def _check_opens(log: Log, sealer: Sealer) -> None:
    """The key file is this log's: it holds a key for the last event, and the newest sealed
    event with a live key among the last few opens with it (else ``KeyFileDamaged``)."""
    last = log.last_seq
    if not last:
        return
    sealer.keys.key(last)  # raises if the file holds no key for it
    for seq in range(last, max(last - 16, 0), -1):
        ev = log.get_raw(seq)
        if ev.sealed and sealer.keys.key(key_owner(ev)) is not None:
            sealer.open(ev)
            return


def shred(log: Log, keys: KeyFile, receipt_seq: int) -> None:
    """Destroy the keys of every event the erasure receipt at ``receipt_seq`` names (those
    already destroyed stay so), then note the receipt done in the key file."""
    receipt = log.get_raw(receipt_seq)
    if not isinstance(receipt, FactsErased):
        raise KeyFileDamaged(f"event {receipt_seq} is no erasure receipt")
    keys.erase(receipt.named, receipt_seq)
    keys.mark(erased_through=max(keys.erased_through, receipt_seq))


def missing_receipts(
    log: Log, keys: KeyFile, receipts: list[int], kind_of: Callable[[int], tuple[str, str]]
) -> list[FactsErased] | None:
    """None when the log holds the key file's last erasure receipt (the usual case). Else the
    log is a backup restored from before erasures the key file records: the receipts (one per
    namespace, scope "restored") for every event whose key is erased and that none of the log's
    ``receipts`` names. ``kind_of(seq)`` is ("fact" | "episode" | "recall", namespace)."""
    last = keys.erased_through
    if not last or (last <= log.last_seq and isinstance(log.get_raw(last), FactsErased)):
        return None
    named: set[int] = set()
    for seq in receipts:
        ev = log.get_raw(seq)
        assert isinstance(ev, FactsErased)
        named.update(ev.named)
    groups: dict[str, dict[str, list[int]]] = {}
    for seq in keys.erased_seqs(log.last_seq):
        if seq not in named:
            kind, namespace = kind_of(seq)
            groups.setdefault(namespace, {}).setdefault(kind, []).append(seq)
    head = str(log.head())
    return [
        FactsErased(
            namespace=namespace, scope="restored", fact_ids=tuple(ids.get("fact", ())),
            episode_ids=tuple(ids.get("episode", ())), recall_ids=tuple(ids.get("recall", ())),
            reason=f"erased (through receipt {last} of the log this backup was taken from) "
                   f"before this backup was restored", chain_head=head, source_agent="hmem",
        )
        for namespace, ids in sorted(groups.items())
    ]
