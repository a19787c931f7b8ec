"""Ways to change a checkpoint's files in place, as someone who can write the store's directory
could (a store in the clear: its digests are unkeyed, so the changes are written with matching
ones): what tests/storage/test_checkpoint.py opens a store after, to see each refused, saying
why."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import msgspec

from projections import checkpoint

__all__ = ["a_part", "another_tokenizer", "flipped_column", "rewrite", "stamped_seq_0",
           "with_unreadable_extra"]

HEAD = struct.Struct("<8sIQ32s")  # the checkpoint's header: magic, layout, manifest size, MAC


def rewrite(path: Path, change=None, mac: bytes | None = None, flip_column: bool = False) -> str:
    """Change a checkpoint file (the manifest or a part) at ``path`` in place: its manifest (by
    ``change``, keeping its length, the header's MAC then the manifest's SHA-256, as a store in
    the clear has it), its header's MAC (``mac``), or one bit of a part's first column that has
    bytes; returns that column's name."""
    data = bytearray(path.read_bytes())
    magic, version, size, old_mac = HEAD.unpack_from(data)
    manifest = msgspec.msgpack.decode(bytes(data[HEAD.size:HEAD.size + size]))
    name, _, _, offset, *_ = next((c for c in manifest.get("columns", ()) if c[2]),
                                  ("", 0, 0, 0, b""))
    if change is not None:
        change(manifest)
        raw = msgspec.msgpack.encode(manifest)
        assert len(raw) == size  # the columns stay where they are
        data[HEAD.size:HEAD.size + size] = raw
        mac = hashlib.sha256(raw).digest() if mac is None else mac
    if mac is not None:
        data[:HEAD.size] = HEAD.pack(magic, version, size, mac)
    if flip_column:
        data[-(-(HEAD.size + size) // 64) * 64 + offset] ^= 1
    path.write_bytes(bytes(data))
    return name


def unreadable_extra(manifest: dict) -> None:
    manifest["extra"] = b"\xc1" * len(manifest["extra"])  # a byte msgpack never uses


def with_unreadable_extra(ck: Path) -> str:
    """A part whose extra no decoder reads, with the manifest naming the part as it is now (a
    store in the clear: anyone can write its unkeyed digests)."""
    part = checkpoint.part_files(ck)[0]
    rewrite(part, unreadable_extra)
    data = part.read_bytes()
    _, _, size, digest = HEAD.unpack_from(data)

    def renamed(manifest: dict) -> None:
        for entry in manifest["parts"]:
            if entry[2] == part.name:
                entry[3] = digest

    rewrite(ck, renamed)
    return part.name


def flipped_column(ck: Path) -> str:
    """One bit of the first column of the first part; returns "<column> of <part file>"."""
    part = checkpoint.part_files(ck)[0]
    return f"{rewrite(part, flip_column=True)} of {part.name}"


def another_tokenizer(manifest: dict) -> None:
    manifest["tokens_id"] = "f" * len(manifest["tokens_id"])  # made by another stemmer, say


def a_part(ck: Path, file=None, newer: bool = False, at: int = 0) -> str:
    """Name the manifest's part ``at`` ``file(its name)`` (its namespace takes up the length the
    name loses: the manifest keeps its length), or say it holds an event after the manifest's
    (a store in the clear: anyone can write its unkeyed digest); returns the part's name now."""
    named: list[str] = []

    def change(manifest: dict) -> None:
        entry = manifest["parts"][at]
        if file is not None:
            new = file(entry[2])
            entry[0] += "x" * (len(entry[2]) - len(new))
            entry[2] = new
        if newer:
            entry[1] = manifest["seq"] + 1
        named.append(entry[2])

    rewrite(ck, change)
    return named[0]


def stamped_seq_0(manifest: dict) -> None:
    manifest["seq"], manifest["chain"] = 0, "00" * 16  # the log's point before its first event
