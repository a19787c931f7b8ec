"""The fold's columns saved in one file beside the checkpoint, loaded back with a read per column.

Loading the columns from DuckDB's tables (projections/column_load.py) costs seconds at a million
facts (every text crosses into Python as a ``str``); this file holds the same arrays as they are
in memory, so a reader's open (and the writer's reopen after a clean close) reads them back
instead. Like the checkpoint it is derived and disposable: it is used only when its stamp (the
seq it holds and the log's chain there) is exactly the stamp of the projection it is loaded
with, every column's CRC-32 matches and it was written by this layout version; otherwise it is
ignored and the tables are loaded as before.

Layout: ``MAGIC | u32 version | u64 manifest length | u32 its crc32 | manifest (msgpack) |
columns``. The
manifest holds the stamp, each column's (name, dtype, count, offset, crc32) and the small
pieces kept as objects (vectors, episodes, odd importances) as one msgpack blob; each column is
its bytes, 64-byte aligned. Written to ``.tmp``, fsynced and renamed over the last one.
"""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from projections.column_store import Ragged, Strings, Table, Texts
from projections.fact_columns import FactColumns
from projections.records import Episode, Vector

__all__ = ["COLUMNS_FILE", "LoadedColumns", "load_column_file", "save_column_file"]

COLUMNS_FILE = "checkpoint.columns"
MAGIC = b"HMEMCOLS"
VERSION = 2  # 2: index tokens and terms
_HEAD = struct.Struct("<8sIQI")
_ALIGN = 64

Stamp = tuple[int, str]
# (the fold, and by seq - 1 each event's tx time, namespace code and request key)
LoadedColumns = tuple[
    FactColumns, npt.NDArray[np.int64], npt.NDArray[np.int32], npt.NDArray[np.int64]
]

_STRING_TABLES = (
    "namespaces", "subjects", "agents", "labels", "reasons", "entity_names", "terms"
)
_RAGGED = ("entities", "derived", "tokens")
_TEXTS = ("texts", "refs")


class _Column(msgspec.Struct, array_like=True):
    name: str
    dtype: str
    count: int
    offset: int
    crc: int


class _Extra(msgspec.Struct):
    last_seq: int
    tokened: int
    odd: dict[int, int]
    vectors: list[Vector]
    episodes: list[Episode]


class _Manifest(msgspec.Struct):
    seq: int
    chain: str
    columns: list[_Column]
    extra: bytes


def save_column_file(
    path: Path, cols: FactColumns, tx_times: npt.NDArray[np.int64],
    event_namespaces: npt.NDArray[np.int32], event_requests: npt.NDArray[np.int64], stamp: Stamp,
) -> None:
    """Write ``cols`` (the fold at ``stamp``) and each event's tx time, namespace code and
    request key to ``path``, atomically."""
    arrays = dict(_arrays(cols))
    arrays["tx_times"] = np.asarray(tx_times, dtype=np.int64)
    arrays["event_namespaces"] = np.asarray(event_namespaces, dtype=np.int32)
    arrays["event_requests"] = np.asarray(event_requests, dtype=np.int64)
    extra = msgspec.msgpack.encode(_Extra(
        cols.last_seq, cols.tokened, cols.odd, cols.vectors, list(cols.episodes.values())
    ))
    columns, offset = [], 0
    for name, arr in arrays.items():
        columns.append(_Column(name, arr.dtype.str, len(arr), offset, zlib.crc32(_raw(arr))))
        offset += _aligned(arr.nbytes)
    manifest = msgspec.msgpack.encode(_Manifest(stamp[0], stamp[1], columns, extra))
    start = _aligned(_HEAD.size + len(manifest))
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(_HEAD.pack(MAGIC, VERSION, len(manifest), zlib.crc32(manifest)) + manifest)
            for column, arr in zip(columns, arrays.values(), strict=True):
                f.seek(start + column.offset)
                f.write(_raw(arr))
            f.truncate(start + offset)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)


def load_column_file(path: Path, stamp: Stamp) -> LoadedColumns | None:
    """The fold and event columns saved at ``path`` when the file holds exactly ``stamp`` and is
    intact; else None (no file, another stamp or layout, or damage: load the tables)."""
    try:
        with open(path, "rb") as f:
            magic, version, size, crc = _HEAD.unpack(f.read(_HEAD.size))
            if magic != MAGIC or version != VERSION or size > 1 << 30:
                return None
            raw = f.read(size)
            if zlib.crc32(raw) != crc:
                return None
            manifest = msgspec.msgpack.decode(raw, type=_Manifest)
            if (manifest.seq, manifest.chain) != tuple(stamp):
                return None
            start = _aligned(_HEAD.size + size)
            arrays: dict[str, Any] = {}
            for column in manifest.columns:
                into = _buffer(column)
                f.seek(start + column.offset)
                if f.readinto(into) != len(into) or zlib.crc32(into) != column.crc:
                    return None
                arrays[column.name] = into if isinstance(into, bytearray) else into.obj
        extra = msgspec.msgpack.decode(manifest.extra, type=_Extra)
        per_event = arrays["tx_times"], arrays["event_namespaces"], arrays["event_requests"]
        if any(len(column) != extra.last_seq for column in per_event):
            return None
        return (_columns(arrays, extra), *per_event)
    except (OSError, ValueError, KeyError, msgspec.DecodeError, struct.error):
        return None


def _arrays(cols: FactColumns) -> list[tuple[str, npt.NDArray[Any]]]:
    out: list[tuple[str, npt.NDArray[Any]]] = []
    for prefix, table in (("table", cols.table), ("rows", cols.rows)):
        out += [(f"{prefix}.{c}", getattr(table, c)[: table.n]) for c in table.COLUMNS]
    out.append(("slot_of", cols.slot_of[: cols.last_seq + 1]))
    for name in _TEXTS:
        texts: Texts = getattr(cols, name)
        out += [
            (f"{name}.blob", np.frombuffer(texts.blob, dtype=np.uint8)),
            (f"{name}.starts", texts.starts[: texts.n]),
            (f"{name}.ends", texts.ends[: texts.n]),
        ]
    for name in _STRING_TABLES:
        encoded = [v.encode("utf-8", "surrogatepass") for v in getattr(cols, name).values]
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        out += [
            (f"{name}.blob", np.frombuffer(b"".join(encoded), dtype=np.uint8)),
            (f"{name}.ends", np.cumsum(lengths)),
        ]
    for name in _RAGGED:
        ragged: Ragged = getattr(cols, name)
        out.append((name, ragged.values[: ragged.n]))
    return out


def _columns(arrays: dict[str, Any], extra: _Extra) -> FactColumns:
    cols = FactColumns()
    for prefix, table in (("table", cols.table), ("rows", cols.rows)):
        _fill_table(table, {c: arrays[f"{prefix}.{c}"] for c in table.COLUMNS})
    cols.slot_of = arrays["slot_of"]
    if len(cols.slot_of) != extra.last_seq + 1:
        raise ValueError("slot_of does not cover the stamp's seqs")
    for name in _TEXTS:
        texts: Texts = getattr(cols, name)
        texts.blob = arrays[f"{name}.blob"]
        texts.starts, texts.ends = arrays[f"{name}.starts"], arrays[f"{name}.ends"]
        texts.n = len(texts.ends)
    for name in _STRING_TABLES:
        strings: Strings = getattr(cols, name)
        strings.fill_utf8(arrays[f"{name}.blob"].tobytes(), arrays[f"{name}.ends"].tolist())
    for name in _RAGGED:
        ragged = getattr(cols, name)
        ragged.values, ragged.n = arrays[name], len(arrays[name])
    cols.odd = extra.odd
    cols.tokened = extra.tokened
    if not 0 <= cols.tokened <= cols.n:
        raise ValueError("more facts with index tokens than facts")
    for vec in extra.vectors:
        cols.add_vector(vec)
    for episode in extra.episodes:
        cols.add_episode(episode)
    cols.last_seq = extra.last_seq
    return cols


def _fill_table(table: Table, columns: dict[str, npt.NDArray[Any]]) -> None:
    counts = {len(c) for c in columns.values()}
    if len(counts) != 1:
        raise ValueError("a table's columns differ in length")
    for name, column in columns.items():
        setattr(table, name, column)
    table.n = counts.pop()


def _buffer(column: _Column) -> bytearray | memoryview:
    """Where a column is read to: a text buffer straight into the bytearray Texts keep (no
    copy), any other column into a new array (its bytes; ``.obj`` is the array)."""
    if column.name.endswith(".blob") and column.name.split(".")[0] in _TEXTS:
        return bytearray(column.count)
    return _raw(np.empty(column.count, dtype=np.dtype(column.dtype)))


def _raw(arr: npt.NDArray[Any]) -> memoryview:
    """The array's bytes (a view, no copy, for a contiguous array)."""
    return np.ascontiguousarray(arr).data.cast("B")


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN
