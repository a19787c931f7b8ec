"""The checkpoint: the state derived from the log, saved at a point of the log.

The one persisted form of derived state. Its writer is the store's writer (the lifetime
writer, or a shared one under the log's writer lock: hmem/storage/checkpoints.py); every
process that opens the store loads it and folds only the log's tail after it. The recall
indexes and the SQL tables are made from the loaded state when first used.

Files, in the store's directory: the manifest ``checkpoint.columns``, one part per namespace,
``checkpoint.columns.<digest of the name>-<seq>-<digest of the part>.part``
(projections/checkpoint_part.py), and every event's tx time (8 bytes an event: time travel
turns a time into a seq of the log) in ``checkpoint.columns.tx-<seq>-<digest>.part``. A part's
name says what it holds, so a file of that name never changes, and a host that has it needs it
from nowhere else. The manifest names the point of the log it holds (seq and chain), the key
file's erasure record when it was written, the block digests of the tx times and their file
(projections/tx_times.py reads them by block when time travel asks: a host of a server store
fetches that file then, not at open), and each namespace's part, by its seq and digest. A
publish writes the parts of the namespaces with events since the last one only (a part's name
holds its seq, so an unchanged part keeps its file), then the manifest, then deletes the parts
it no longer names; a reader can load the parts of the namespaces it serves alone.

It is used only when it is authentic, names a point of the log it is opened with, and is as
new as the key file's erasure record; otherwise it is refused (:class:`Refused` says why), the
log is replayed, and the next publish replaces it. Deleting it loses nothing.

Authentic: the manifest holds the digest of each part (which holds its columns' SHA-256s) and
of the tx times, and the header the manifest's MAC, keyed from the store's key file
(:class:`Seal`), so that no one without the key file can make files that are used, however they
change them. A store in the clear has no secret: its manifest carries an unkeyed SHA-256, which
finds damage but not a forgery (see docs/guarantees.md). ``erased_through`` records how far the
key file's erasures had gone when it was written: a checkpoint written before the last erasure
may hold the erased texts, and is never used.

Layout of the manifest file (layout 7): ``MAGIC | u32 version | u64 manifest length | 32-byte
MAC | manifest (msgpack)``; of the tx times' file: int64 each, little-endian. Written to
``.tmp``, fsynced and renamed over the last one, so a reader finds the old checkpoint or the new
one, never a part of one.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from collections.abc import Callable
from hashlib import blake2b
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import numpy as np

from projections import checkpoint_part
from projections.checkpoint_part import UNREADABLE, Refused
from projections.event_columns import EventColumns
from projections.fold_state import FactColumns
from projections.index_docs import TOKENS_ID
from projections.part_blob import BLOCK, block_digests, block_root
from projections.projector import Loaded, Projector
from projections.tx_times import TxTimes, fetched_tx_file, open_tx_file

__all__ = [
    "CHECKPOINT_FILE", "Part", "Refused", "Seal", "Stamp", "authentic_parts", "from_log", "load",
    "named_parts", "part_files", "read_log_at", "read_part", "read_stamp", "save",
]

CHECKPOINT_FILE = "checkpoint.columns"
MAGIC = b"HMEMCOLS"
# 2: index tokens and terms; 3: the event columns, logged recalls, vector columns;
# 4: authenticated (column SHA-256s, the manifest's MAC, the erasure record); 5: a part per
# namespace (projections/checkpoint_part.py) and every event's tx time; 6: the tx times digested
# by block (read when asked, not at open)
VERSION = 7
_HEAD = struct.Struct("<8sIQ32s")

Stamp = tuple[int, str]  # (the seq it holds, hex of the log's chain at that seq)


class Seal(NamedTuple):
    """What a checkpoint is written and checked with: ``key``, the store's MAC key (derived
    from its key file), None for a store in the clear; ``erased_through``, the key file's
    erasure record (the last erasure receipt whose keys are destroyed; 0 for none)."""

    key: bytes | None
    erased_through: int = 0


class Part(msgspec.Struct, array_like=True, frozen=True, gc=False):
    """A namespace's part as a manifest names it (not tracked by the garbage collector: it
    holds no container that could make a cycle; a manifest decodes one per namespace)."""

    namespace: str
    seq: int  # the namespace's last event in it
    file: str
    digest: bytes  # the SHA-256 of the part's manifest
    receipts: tuple[int, ...] = ()  # the seqs of the erasure receipts it holds


class _Manifest(msgspec.Struct):
    seq: int
    chain: str
    erased_through: int  # the key file's erasure record when it was written
    tx_blocks: bytes  # the block digests of the tx times (in ``tx_file``)
    parts: list[Part]
    tokens_id: str = ""  # the rule the parts' index tokens were made by (index_docs.TOKENS_ID)
    # where the log's record of seq lies (its segment's first seq, its offset; 0, 0: not
    # known) and the chain before it: an open resumes checking the log there
    # (eventlog.segment.Resume)
    log_at: tuple[int, int, str] = (0, 0, "")
    tx_file: str = ""  # the file of the tx times (``<manifest>.tx-<seq>-<digest>.part``)


class _StampOnly(msgspec.Struct):
    """A manifest's stamp alone (decoding it skips the parts: a store's manifest grows with its
    namespaces)."""

    seq: int
    chain: str


class _LogAtOnly(_StampOnly):
    """A manifest's stamp and where its record lies in the log, alone."""

    log_at: tuple[int, int, str] = (0, 0, "")


def from_log(stamp: Stamp, last_seq: int, chain_at: Callable[[int], bytes]) -> bool:
    """Whether ``stamp`` names a point of this log: a seq it has, with the log's chain at it
    (not a checkpoint of another store, or of a log cut shorter since)."""
    seq, chain = stamp
    return 0 < seq <= last_seq and chain_at(seq).hex() == chain


def part_files(path: Path, namespace: str | None = None) -> list[Path]:
    """The part files beside the manifest at ``path`` (named or not: the namespaces' and the
    tx times'), or of ``namespace``."""
    which = "*" if namespace is None else f"{_name_digest(namespace)}-*"
    return sorted(path.parent.glob(f"{path.name}.{which}.part"))


def part_prefix(manifest: str, namespace: str) -> str:
    """What the name of every part of ``namespace`` beside the manifest ``manifest`` starts
    with (whatever its seq and digest)."""
    return f"{manifest}.{_name_digest(namespace)}-"


def save(path: Path, projector: Projector, stamp: Stamp, seal: Seal,
         log_at: tuple[int, int, str] | None = None, *, written: dict[str, Part] | None = None,
         stop: Callable[[], bool] | None = None) -> dict[str, Part] | None:
    """Write ``projector``'s state (at ``stamp``) as the checkpoint at ``path``, authenticated
    with ``seal``: the parts of the namespaces whose part on disk (named by an authentic
    manifest) is older, then the manifest (naming ``log_at``, where the stamp's record lies in
    a log of files and the chain before it, if known). Returns the parts it names, by
    namespace. A deferred namespace with events since its part is loaded, written and dropped
    again, one at a time: the projector keeps no more loaded than it held.

    A publish may take several calls: ``written`` (the caller's, kept between them) holds the
    parts written for the manifest not yet made, by namespace, each used again while its
    namespace holds the same seq and its file is there; once a part has been written, a
    ``stop()`` that says so ends the call before the next one and before the manifest (it
    returns None)."""
    budget, projector.budget = projector.budget, None  # none of those held is dropped meanwhile
    try:
        return _save(path, projector, stamp, seal, log_at or (0, 0, ""),
                     {} if written is None else written, stop or (lambda: False))
    finally:
        projector.budget = budget


def _save(path: Path, projector: Projector, stamp: Stamp, seal: Seal,
          log_at: tuple[int, int, str], written: dict[str, Part], stop: Callable[[], bool]
          ) -> dict[str, Part] | None:
    tx = projector.tx_times
    if len(tx) != stamp[0]:
        raise ValueError(f"the state holds seq {len(tx)}, the stamp says {stamp[0]}")
    old = {p.namespace: p for p in _authentic(path, seal)}
    old.update((ns, part) for ns, part in written.items()
               if ns not in old or old[ns].seq < part.seq)
    wrote = False  # a part, in this call
    parts: dict[str, Part] = {}
    for namespace, space in projector.loaded():
        ready = _kept(path, old.get(namespace), space.state.last_seq)
        if ready is None and wrote and stop():
            return None
        parts[namespace] = written[namespace] = ready or _part(
            path, namespace, space.state, space.events, stamp)
        wrote = wrote or ready is None
    gone = [ns for ns, part in projector.deferred().items()
            if not (path.parent / part.file).exists()]  # replaced by another writer's publish
    for namespace in projector.changed() + gone:
        ready = _kept(path, old.get(namespace), projector.changed_through(namespace))
        if ready is not None:
            parts[namespace] = ready  # written by an earlier call of this publish
            continue
        if wrote and stop():
            return None
        space = projector.space(namespace)  # loaded (its part, the log after it), written
        ready = _kept(path, old.get(namespace), space.state.last_seq)  # a gone one, fetched
        parts[namespace] = written[namespace] = ready or _part(
            path, namespace, space.state, space.events, stamp)
        projector.drop(namespace)
        wrote = wrote or ready is None
    for namespace, part in projector.deferred().items():  # unchanged since its part
        parts.setdefault(namespace, part)
    times = np.asarray(tx.array(), dtype="<i8").tobytes()
    digests = block_digests(times)
    tx_file = f"{path.name}.tx-{stamp[0]}-{block_root(digests).hex()[:16]}.part"
    if not (path.parent / tx_file).exists():  # its name says what it holds
        _write_file(path.parent / (tx_file + ".new"), times)
        os.replace(path.parent / (tx_file + ".new"), path.parent / tx_file)
    manifest = msgspec.msgpack.encode(_Manifest(
        stamp[0], stamp[1], seal.erased_through, digests, list(parts.values()), TOKENS_ID,
        log_at, tx_file))
    tmp = path.with_name(path.name + ".tmp")
    _write_file(tmp, _HEAD.pack(MAGIC, VERSION, len(manifest), _mac(seal, manifest)) + manifest)
    _fsync_dir(path.parent)  # the new parts' names, before the manifest that names them
    os.replace(tmp, path)
    _fsync_dir(path.parent)
    named = {p.file for p in parts.values()} | {tx_file}
    for stale in part_files(path):
        if stale.name not in named:
            stale.unlink(missing_ok=True)
    return parts


def _kept(path: Path, part: Part | None, seq: int | None) -> Part | None:
    """``part`` when it holds ``seq`` and its file is beside the manifest at ``path`` (a part
    of the manifest on disk, or one an unfinished publish wrote), else None."""
    if part is not None and part.seq == seq and (path.parent / part.file).exists():
        return part
    return None


def _part(path: Path, namespace: str, facts: FactColumns, events: EventColumns,
          stamp: Stamp) -> Part:
    """The part of ``namespace`` (its state ``facts``, ``events``), written beside the
    manifest at ``path``."""
    if facts.last_seq > stamp[0]:
        raise ValueError(f"namespace {namespace!r} holds events after the stamp")
    receipts = tuple(events.seqs_of("erased"))
    tmp = path.parent / f"{path.name}.{_name_digest(namespace)}-{facts.last_seq}.new"
    digest = checkpoint_part.write(tmp, facts, events)
    name = f"{path.name}.{_name_digest(namespace)}-{facts.last_seq}-{digest.hex()[:16]}.part"
    os.replace(tmp, path.parent / name)
    return Part(namespace, facts.last_seq, name, digest, receipts)


def named_parts(path: Path) -> set[str] | None:
    """The part files the manifest at ``path`` names, and its tx times' file (not
    authenticated: for tidying a cache); None when there is none or it is unreadable."""
    peeked = _peek(path)
    return None if peeked is None else {p.file for p in peeked[0].parts} | {peeked[0].tx_file}


def _write_file(path: Path, data: bytes) -> None:
    """``data`` as the new file ``path``, durable (the caller renames it into place)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(data)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_stamp(path: Path) -> Stamp | None:
    """The stamp the checkpoint at ``path`` claims (not yet authenticated: :func:`load` does
    that); None when there is none, it is unreadable or of another layout version."""
    found = _stamp_only(path)
    return None if found is None else (found.seq, found.chain)


def read_log_at(path: Path, seal: Seal) -> tuple[int, str, int, int, str] | None:
    """(seq, chain, the first seq of the log segment that holds seq's record, its offset
    there, the chain before it) as the checkpoint at ``path`` names them, when it is authentic
    under ``seal`` and names them; else None. A keyed seal only: anyone can make a checkpoint
    of a store in the clear, and where the log is read from is not left to anyone."""
    if seal.key is None:
        return None
    try:
        with open(path, "rb") as f:
            framed = _framed(f)
        if framed is None or not hmac.compare_digest(framed[1], _mac(seal, framed[0])):
            return None
        found = msgspec.msgpack.decode(framed[0], type=_LogAtOnly)
    except UNREADABLE:
        return None
    if not found.log_at[0]:
        return None
    return found.seq, found.chain, *found.log_at


def _stamp_only(path: Path) -> _StampOnly | None:
    """The manifest at ``path``'s stamp (its other fields skipped)."""
    try:
        with open(path, "rb") as f:
            framed = _framed(f)
        if framed is None:
            return None
        return msgspec.msgpack.decode(framed[0], type=_StampOnly)
    except UNREADABLE:
        return None


def load(path: Path, stamp: Stamp, seal: Seal, *, lazy: bool = False,
         fetch: Callable[[str], None] | None = None) -> Projector:
    """The state saved at ``path`` (``lazy``: every namespace deferred, its part named but not
    read, and the tx times' file opened when time travel first asks, after ``fetch(name)``
    brought it here if it is not; the caller sets the projector's loader), when the
    checkpoint is authentic under ``seal``, holds exactly ``stamp``, was written after the
    last erasure ``seal`` records and is intact (each part's when it is read); else
    :class:`Refused`, saying why."""
    manifest, tx = _read_manifest(path, stamp, seal, times=True, check_times=not lazy,
                                  fetch=fetch)
    if lazy:
        parts = manifest.parts
        return Projector({}, tx, {p.namespace: p for p in parts},
                         {p.namespace: p.receipts for p in parts if p.receipts})
    return Projector({part.namespace: read_part(path, part, every_block=True)
                      for part in manifest.parts}, tx)


def read_part(path: Path, part: Part, *, every_block: bool = False) -> Loaded:
    """The state of one ``part`` of the checkpoint at ``path`` (:class:`Refused`, saying why,
    when it is gone or not what the manifest names; ``every_block``: a column left in the file
    is checked whole now, not block by block as it is read)."""
    facts, events = checkpoint_part.read(path.parent / part.file, part.digest,
                                         every_block=every_block)
    if facts.last_seq != part.seq or not _only(facts, events, part.namespace):
        raise Refused(f"its part {part.file} holds another namespace's state")
    return facts, events


def authentic_parts(path: Path, stamp: Stamp, seal: Seal) -> tuple[int, dict[str, Part]]:
    """(the seq, each namespace's part) of the checkpoint at ``path`` when it holds ``stamp``
    and is authentic under ``seal`` (:class:`Refused` else)."""
    manifest, _ = _read_manifest(path, stamp, seal, times=False)
    return manifest.seq, {p.namespace: p for p in manifest.parts}


def _read_manifest(path: Path, stamp: Stamp, seal: Seal, *, times: bool,
                   check_times: bool = True, fetch: Callable[[str], None] | None = None
                   ) -> tuple[_Manifest, TxTimes]:
    """The manifest at ``path`` when it is authentic under ``seal``, holds ``stamp``, is as
    new as the erasure record and names only parts it can hold; with ``times``, every event's
    tx time too (with ``check_times``, checked against its digest now; else each block when
    it is read). :class:`Refused` else."""
    try:
        with open(path, "rb") as f:
            manifest, raw = _manifest(f)
            if manifest is None:
                raise Refused("it is unreadable or of another layout")
            if not hmac.compare_digest(raw[1], _mac(seal, raw[0])):
                raise Refused(
                    "it is not authentic (not written with this store's key file, or changed "
                    "since)" if seal.key is not None else "it is damaged (its digest fails)"
                )
            if (manifest.seq, manifest.chain) != tuple(stamp):
                raise Refused(f"it holds seq {manifest.seq}, not the log's point {stamp[0]}")
            if manifest.erased_through != seal.erased_through:
                raise Refused(
                    f"it was written before the erasure (receipt {seal.erased_through}) its key "
                    f"file records, and may hold what that erased"
                )
            if manifest.tokens_id != TOKENS_ID:
                raise Refused("its index tokens were made by another tokenizer (another hmem "
                              "or stemmer)")
            bad = _unholdable(manifest)
            if bad is not None:
                raise Refused(f"its manifest names a part it cannot hold ({bad.file})")
            if _elsewhere(manifest.tx_file) or len(manifest.tx_blocks) != 32 * -(
                -8 * manifest.seq // BLOCK
            ):
                raise Refused("its manifest names tx times it cannot hold")
        tx = TxTimes()
        if times and check_times:
            tx = TxTimes(open_tx_file(path.parent / manifest.tx_file, manifest.seq,
                                      manifest.tx_blocks, check=True))
        elif times:
            tx = TxTimes(opener=lambda: fetched_tx_file(path.parent, manifest.tx_file,
                                                        manifest.seq, manifest.tx_blocks, fetch),
                         count=manifest.seq)
        return manifest, tx
    except Refused:
        raise
    except UNREADABLE as e:
        raise Refused(f"it cannot be read ({type(e).__name__}: {e})") from None


def _unholdable(manifest: _Manifest) -> Part | None:
    """The first part the manifest names that it cannot hold (newer than the manifest, or a
    file not a plain name in its directory), or None: looked for part by part only when a
    check over all of them at once finds one (a manifest names one per namespace)."""
    parts = manifest.parts
    files = [part.file for part in parts]
    if parts and (max(part.seq for part in parts) > manifest.seq or "" in files
                  or _elsewhere("".join(files))):
        return next((p for p in parts if p.seq > manifest.seq or _elsewhere(p.file)), None)
    return None


def _elsewhere(name: str) -> bool:
    """Whether a file name the manifest names is not a plain name in its directory."""
    return not name or os.sep in name or (os.altsep is not None and os.altsep in name)


def _only(facts: FactColumns, events: EventColumns, namespace: str) -> bool:
    """Whether every fact and event row of a part is of ``namespace``."""
    names = facts.namespaces.values
    ours = np.fromiter((name == namespace for name in names), dtype=bool, count=len(names))
    for codes in (events.column("namespace"), facts.table.namespace[: facts.n]):
        if len(codes) and (int(codes.min()) < 0 or int(codes.max()) >= len(ours)
                           or not bool(ours[codes].all())):
            return False
    return True


def _authentic(path: Path, seal: Seal) -> list[Part]:
    """The parts the manifest at ``path`` names when it is authentic under ``seal`` and as new
    as its erasure record; else none. (A part written before an erasure's keys were destroyed
    may hold what it erased, even at the seq of a part written after it.)"""
    peeked = _peek(path)
    if peeked is None:
        return []
    manifest, (raw, mac) = peeked
    if not hmac.compare_digest(mac, _mac(seal, raw)) or (
        manifest.erased_through != seal.erased_through
    ):
        return []
    return manifest.parts


def _peek(path: Path) -> tuple[_Manifest, tuple[bytes, bytes]] | None:
    """The manifest at ``path``, its bytes and its header's MAC, not authenticated; None when
    there is none, it is unreadable or of another layout."""
    try:
        with open(path, "rb") as f:
            manifest, raw = _manifest(f)
    except UNREADABLE:
        return None
    return None if manifest is None else (manifest, raw)


def _name_digest(namespace: str) -> str:
    return blake2b(namespace.encode("utf-8", "surrogatepass"), digest_size=10).hexdigest()


def _mac(seal: Seal, manifest: bytes) -> bytes:
    if seal.key is None:
        return hashlib.sha256(manifest).digest()
    return hmac.digest(seal.key, manifest, "sha256")


def _manifest(f: Any) -> tuple[_Manifest | None, tuple[bytes, bytes]]:
    """The manifest (None if it is not this layout's), with its bytes and the header's MAC."""
    framed = _framed(f)
    if framed is None:
        return None, (b"", b"")
    return msgspec.msgpack.decode(framed[0], type=_Manifest), framed


def _framed(f: Any) -> tuple[bytes, bytes] | None:
    """The manifest's bytes and the header's MAC (None if it is not this layout's)."""
    magic, version, size, mac = _HEAD.unpack(f.read(_HEAD.size))
    if magic != MAGIC or version != VERSION or size > 1 << 30:
        return None
    raw = f.read(size)
    return None if len(raw) != size else (raw, mac)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
