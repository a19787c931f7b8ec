"""One namespace's derived state as a file: a part of the store's checkpoint.

The store's checkpoint (projections/checkpoint.py) is one part per namespace plus a manifest
that names each part by the SHA-256 of the part's own manifest. A part holds a space's fold
columns (projections/fold_state.py, with each fact's index tokens and the postings they make)
and event rows
(projections/event_columns.py) as they are in memory, so a load is a read per column.

Layout: ``MAGIC | u32 version | u64 manifest length | 32-byte SHA-256 of the manifest |
manifest (msgpack) | columns``. The manifest holds the part's seq (its namespace's last event),
each column's (name, dtype, count, offset, sha256, block) and the pieces kept as objects (episodes,
logged recalls, odd importances, the vectors' models) as one msgpack blob; each column is its
bytes, 64-byte aligned. :func:`read` takes the digest the store's manifest names and refuses a
part whose manifest or any column does not match it, so a part is as authentic as the manifest
that names it. The facts' texts are digested by block (``block`` > 0: the SHA-256 of their
blocks' SHA-256s) so that a large namespace's are checked at open without being read into
memory and read only when asked for (projections/part_blob.py). Written to ``.tmp``, fsynced
and renamed into place.
"""

from __future__ import annotations

import hashlib
import hmac
import os
import struct
from array import array
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import msgspec
import numpy as np
import numpy.typing as npt

from eventlog.events import RecallServed
from projections.arrays import (
    Deferred,
    FactTable,
    Ragged,
    RowTable,
    Table,
    array_of,
    as_bytes,
    with_room,
)
from projections.compact_columns import (
    Compact,
    DiskColumn,
    Sparse,
    derive_columns,
    pack,
    unpack,
    whole,
)
from projections.event_columns import EventColumns
from projections.fold_state import FactColumns
from projections.index_tokens import first_postings
from projections.kept_columns import (
    NARROW,
    entity_runs_arrays,
    kept_entity_runs,
    kept_postings,
    kept_turns,
    postings_arrays,
    turns_arrays,
)
from projections.kept_entities import first_entity_runs
from projections.kept_turns import first_turns
from projections.part_blob import BLOCK, LAZY, PartBlob, block_digests, block_root, stream_digests
from projections.records import Episode, Vector
from projections.request_keys import request_key
from projections.string_columns import Strings, Texts

__all__ = ["BLOCKS", "UNREADABLE", "Refused", "read", "write"]

MAGIC = b"HMEMPART"
VERSION = 2  # 2: the facts' texts digested by block; a version 1 part still reads
_VERSIONS = (1, 2)
_HEAD = struct.Struct("<8sIQ32s")
_ALIGN = 64
_HASHERS = 2  # threads checking a large part's column digests
_THREADED = 8 << 20  # bytes of columns from which they are hashed by threads
_LEFT_ON_DISK = 8 << 20  # bytes of a column from which it stays in the file until read
# the columns digested by block (so they can stay in the file): the fact texts, and the index
# tokens (the postings answer queries; verify and SQL read the tokens)
_BLOCKED = ("texts.blob", "tokens")
BLOCKS = "#blocks"  # the name of a blocked column's block digests: its own name and this


class Refused(Exception):
    """The checkpoint cannot be used; the message says why (the log is replayed instead)."""


# what reading a checkpoint file that is damaged, cut short or of another make raises
UNREADABLE = (OSError, ValueError, KeyError, IndexError, TypeError, msgspec.DecodeError,
              struct.error)


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
    sha256: bytes
    block: int = 0  # 0: sha256 is the column's; else of its blocks' (projections/part_blob.py)


class _Extra(msgspec.Struct):
    last_seq: int
    tokened: int
    odd: dict[int, int]
    models: list[str]  # the vectors' models, by code
    episodes: list[Episode]
    recalls: list[RecallServed]


class _Manifest(msgspec.Struct):
    seq: int  # the last event of the namespace the part holds
    columns: list[_Column]
    extra: bytes
    sparse: dict[str, Sparse]  # the columns kept as their exceptions (compact_columns.py)
    widths: dict[str, str]  # the stored arrays kept narrower: each one's own type


def write(path: Path, facts: FactColumns, events: EventColumns) -> bytes:
    """Write one namespace's state (``facts`` and ``events``) to ``path``, atomically (without
    syncing the directory: the manifest naming it does); returns its digest."""
    if len(events) and events.seq[-1] != facts.last_seq:
        raise ValueError(f"the event rows end at {events.seq[-1]}, the facts at {facts.last_seq}")
    arrays = dict(_arrays(facts))
    arrays |= postings_arrays(first_postings(facts))
    arrays |= turns_arrays(first_turns(facts))
    arrays |= entity_runs_arrays(first_entity_runs(facts))
    models = list(dict.fromkeys(v.model for v in facts.vectors))
    arrays |= _vector_arrays(facts, models)
    for name, code in EventColumns.ARRAYS.items():
        if name not in _DERIVED:
            arrays[f"events.{name}"] = np.frombuffer(getattr(events, name), dtype=_DTYPES[code])
    for name in _EVENT_TEXTS:
        arrays |= _text_arrays(f"events.{name}", getattr(events, name))
    for name in _DERIVED_COLUMNS:
        del arrays[name]
    arrays, sparse, widths = pack(arrays)
    extra = msgspec.msgpack.encode(_Extra(
        facts.last_seq, facts.tokened, facts.odd, models,
        list(facts.episodes.values()), list(events.recalls.values()),
    ))
    # a column digested by block keeps its blocks' digests beside it, so that a reader checks
    # each block as it reads it and need not stream the column at open
    blocks = {name: block_digests(as_bytes(arr)) for name, arr in arrays.items()
              if name in _BLOCKED}
    arrays |= {name + BLOCKS: np.frombuffer(found, dtype=np.uint8)
               for name, found in blocks.items()}
    columns, offset = [], 0
    for name, arr in arrays.items():
        found = blocks.get(name)
        digest = hashlib.sha256(as_bytes(arr)).digest() if found is None else block_root(found)
        columns.append(_Column(name, arr.dtype.str, len(arr), offset, digest,
                               0 if found is None else BLOCK))
        offset += _aligned(arr.nbytes)
    manifest = msgspec.msgpack.encode(_Manifest(facts.last_seq, columns, extra, sparse, widths))
    digest = hashlib.sha256(manifest).digest()
    start = _aligned(_HEAD.size + len(manifest))
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    try:
        with os.fdopen(fd, "wb", closefd=False) as f:
            f.write(_HEAD.pack(MAGIC, VERSION, len(manifest), digest) + manifest)
            for column, arr in zip(columns, arrays.values(), strict=True):
                f.seek(start + column.offset)
                f.write(as_bytes(arr))
            f.truncate(start + offset)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return digest


def read(path: Path, digest: bytes, *, every_block: bool = False
         ) -> tuple[FactColumns, EventColumns]:
    """The state saved at ``path`` when its manifest's SHA-256 is ``digest`` and every column
    matches the manifest; else :class:`Refused`, saying why. A large column digested by block
    stays in the file, each block checked when it is read (with ``every_block``, or when the
    part keeps no block digests, the whole column is streamed and checked now)."""
    try:
        with open(path, "rb") as f:
            manifest, raw = _manifest(f)
            if manifest is None:
                raise Refused(f"its part {path.name} is unreadable or of another layout")
            if not hmac.compare_digest(hashlib.sha256(raw).digest(), digest):
                raise Refused(f"its part {path.name} is not the one its manifest names")
            start = _aligned(f.tell())
            arrays: dict[str, Any] = {}
            buffers: list[bytearray | memoryview] = []
            read_columns = []
            on_disk: dict[str, PartBlob | DiskColumn] = {}
            kept_blocks = {c.name[: -len(BLOCKS)]: c for c in manifest.columns
                           if c.name.endswith(BLOCKS)}
            for column in manifest.columns:
                if column.name.endswith(BLOCKS):
                    continue  # read with the column whose blocks they digest
                if _left_on_disk(column):
                    digests = None if every_block else kept_blocks.get(column.name)
                    blob = _on_disk(f, start, column, digests, path)
                    own = np.dtype(manifest.widths.get(column.name, column.dtype))
                    on_disk[column.name] = blob if column.name == "texts.blob" else (
                        DiskColumn(blob, np.dtype(column.dtype), own))
                    continue
                into = _buffer(column)
                f.seek(start + column.offset)
                if f.readinto(into) != len(into):
                    raise Refused(_damaged(column, path))
                buffers.append(into)
                read_columns.append(column)
                arrays[column.name] = into if isinstance(into, bytearray) else into.obj
        blocks = [c.block for c in read_columns]
        for column, found in zip(read_columns, _digests(buffers, blocks), strict=True):
            if found != column.sha256:
                raise Refused(_damaged(column, path))
        extra = msgspec.msgpack.decode(manifest.extra, type=_Extra)
        if extra.last_seq != manifest.seq:
            raise ValueError("the part's seq and its state's differ")
        arrays = {name: column if name in _DEFERRED or name.startswith(NARROW) else whole(column)
                  for name, column in unpack(arrays, manifest.sparse, manifest.widths).items()}
        arrays.update(on_disk)
        facts = _columns(arrays, extra)
        events = _events(arrays, extra, facts)
        derive_columns(facts, events)
        return facts, events
    except Refused:
        raise
    except UNREADABLE as e:
        raise Refused(f"its part {path.name} cannot be read ({type(e).__name__}: {e})") from None


def _digests(buffers: list[bytearray | memoryview], blocks: list[int]) -> list[bytes]:
    """The digest of each buffer (:func:`_digest`): a large part's by threads (hashlib lets go
    of the GIL), a small one's at once (starting threads would cost more than the hashing)."""
    if sum(len(b) for b in buffers) < _THREADED:
        return list(map(_digest, buffers, blocks))
    with ThreadPoolExecutor(max_workers=_HASHERS) as hashers:
        return list(hashers.map(_digest, buffers, blocks))


def _digest(data: bytearray | memoryview, block: int) -> bytes:
    """A column's digest: its SHA-256, or (``block`` > 0) its blocks' root."""
    if not block:
        return hashlib.sha256(data).digest()
    if block != BLOCK:
        raise ValueError(f"a column digested by blocks of {block} bytes (this reader's: {BLOCK})")
    return block_root(block_digests(data))


def _left_on_disk(column: _Column) -> bool:
    """Whether the column stays in the file until read: large fact texts digested by block,
    where the file can be read at an offset."""
    return LAZY and column.name in _BLOCKED and column.block == BLOCK and (
        column.count * np.dtype(column.dtype).itemsize >= _LEFT_ON_DISK
    )


def _on_disk(f: Any, start: int, column: _Column, blocks: _Column | None, path: Path
             ) -> PartBlob:
    """The column left in the file, each block checked as it is read: against the block
    digests kept beside it (``blocks``: read now, checked against the column's digest), else
    against digests made by streaming the column now (no copy kept)."""
    if np.dtype(column.dtype).kind not in "iu" or (
        column.name == "texts.blob" and column.dtype != "|u1"
    ):
        raise ValueError(f"the column {column.name} is not of its type")
    offset = start + column.offset
    length = column.count * np.dtype(column.dtype).itemsize
    if blocks is None:
        digests = stream_digests(f, offset, length)
    else:
        f.seek(start + blocks.offset)
        digests = f.read(blocks.count)
        if os.fstat(f.fileno()).st_size < offset + length:
            raise ValueError("the part ends inside a column")
    if not hmac.compare_digest(block_root(digests), column.sha256):
        raise Refused(_damaged(column, path))
    return PartBlob(os.dup(f.fileno()), offset, length, digests)


def _damaged(column: _Column, path: Path) -> str:
    return f"it is damaged (column {column.name} of {path.name} fails its digest)"


def _manifest(f: Any) -> tuple[_Manifest | None, bytes]:
    """The manifest (None if it is not this layout's) and its bytes."""
    magic, version, size, _ = _HEAD.unpack(f.read(_HEAD.size))
    if magic != MAGIC or version not in _VERSIONS or size > 1 << 30:
        return None, b""
    raw = f.read(size)
    if len(raw) != size:
        return None, b""
    return msgspec.msgpack.decode(raw, type=_Manifest), raw


def _events(arrays: dict[str, Any], extra: _Extra, facts: FactColumns) -> EventColumns:
    events = EventColumns(facts)
    for name, code in EventColumns.ARRAYS.items():
        if name in _DERIVED:
            continue
        column = arrays[f"events.{name}"]
        if len(column) != len(arrays["events.seq"]):
            raise ValueError(f"the event column {name} is not one row per event")
        events.defer(name, partial(_event_array, code, column))
    for name in _EVENT_TEXTS:
        _fill_texts(getattr(events, name), arrays, f"events.{name}")
    events.recalls = {r.seq: r for r in extra.recalls}
    events.defer("request_key", partial(_request_keys, events, len(arrays["events.seq"])))
    return events


def _event_array(code: str, column: npt.NDArray[Any] | Compact) -> array[int]:
    return array_of(code, whole(column), _DTYPES[code])


def _request_keys(events: EventColumns, rows: int) -> array[int]:
    """The request key (projections/request_keys.py) of each of the first ``rows`` events (the
    part's), from its request id."""
    keys = np.zeros(rows, dtype=np.int64)
    codes = events.column("request")[:rows]
    names, requests = events.facts.namespaces.values, events.requests
    namespaces = events.column("namespace")[:rows]
    for i in np.flatnonzero(codes >= 0).tolist():
        keys[i] = request_key(names[namespaces[i]], requests[int(codes[i])])
    return array_of("q", keys, np.int64)


def _vector_arrays(facts: FactColumns, models: list[str]) -> dict[str, npt.NDArray[Any]]:
    """The vectors as columns: each one's fact, namespace, model, dims and seq, and their
    bytes one after another."""
    vectors = facts.vectors
    code = {m: i for i, m in enumerate(models)}
    n = len(vectors)
    lengths = np.fromiter((len(v.vector) for v in vectors), dtype=np.int64, count=n)
    return {
        "vectors.fact_id": np.fromiter((v.fact_id for v in vectors), np.int64, n),
        "vectors.namespace": facts.namespaces.encode([v.namespace for v in vectors]),
        "vectors.model": np.fromiter((code[v.model] for v in vectors), np.int32, n),
        "vectors.dims": np.fromiter((v.dims for v in vectors), np.int32, n),
        "vectors.seq": np.fromiter((v.seq for v in vectors), np.int64, n),
        "vectors.ends": np.cumsum(lengths),
        "vectors.blob": np.frombuffer(b"".join(v.vector for v in vectors), dtype=np.uint8),
    }


def _vectors(arrays: dict[str, Any], extra: _Extra, facts: FactColumns) -> None:
    blob = arrays["vectors.blob"].tobytes()
    ends = arrays["vectors.ends"].tolist()
    names, models = facts.namespaces.values, extra.models
    columns = zip(
        arrays["vectors.fact_id"].tolist(), arrays["vectors.namespace"].tolist(),
        arrays["vectors.model"].tolist(), arrays["vectors.dims"].tolist(),
        arrays["vectors.seq"].tolist(), [0, *ends][: len(ends)], ends, strict=True,
    )
    for fact_id, namespace, model, dims, seq, start, end in columns:
        facts.add_vector(Vector(fact_id, names[namespace], models[model], dims,
                                blob[start:end], seq))


_EVENT_TEXTS = ("refs", "requests")
# fold columns made again at load from the others (_derive)
_DERIVED_COLUMNS = ("table.created_at", "table.superseded_at", "table.forgotten_at",
                    "table.tokens_end", "rows.tx_from", "rows.tx_to")
_DERIVED = ("request_key",)  # event columns made again at load, not saved
# the fold's and the event rows' columns: made when first read
_DEFERRED = frozenset([*(f"table.{c}" for c in FactTable.COLUMNS),
                       *(f"rows.{c}" for c in RowTable.COLUMNS),
                       *(f"events.{c}" for c in EventColumns.ARRAYS)])
_DTYPES = {"q": "<i8", "i": "<i4", "b": "i1"}  # array typecodes as numpy dtypes


def _arrays(cols: FactColumns) -> list[tuple[str, npt.NDArray[Any]]]:
    out: list[tuple[str, npt.NDArray[Any]]] = []
    for prefix, table in (("table", cols.table), ("rows", cols.rows)):
        out += [(f"{prefix}.{c}", getattr(table, c)[: table.n]) for c in table.COLUMNS]
    for name in _TEXTS:
        out += _text_arrays(name, getattr(cols, name)).items()
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
        _fill_table(table, {c: arrays[f"{prefix}.{c}"] for c in table.COLUMNS
                            if f"{prefix}.{c}" not in _DERIVED_COLUMNS})
    for name in _TEXTS:
        _fill_texts(getattr(cols, name), arrays, name)
    for name in _STRING_TABLES:
        strings: Strings = getattr(cols, name)
        strings.fill_utf8(arrays[f"{name}.blob"].tobytes(), arrays[f"{name}.ends"].tolist())
    for name in _RAGGED:
        ragged = getattr(cols, name)
        ragged.n = len(arrays[name])
        _set(ragged, "values", arrays[name])  # the tokens may stay in the part
    cols.odd = extra.odd
    cols.tokened = extra.tokened
    if not 0 <= cols.tokened <= cols.n:
        raise ValueError("more facts with index tokens than facts")
    if "postings.codes" in arrays:  # a part written before they were kept has none
        cols.postings = kept_postings(arrays, cols.tokened, len(cols.terms))
    if "turns.session" in arrays:  # nor turn links, before they were
        cols.turns = kept_turns(arrays, cols.n)
    if "entity_runs.codes" in arrays:  # nor entity runs
        cols.entity_runs = kept_entity_runs(arrays, cols.n, len(cols.entity_names))
    _vectors(arrays, extra, cols)
    for episode in extra.episodes:
        cols.add_episode(episode)
    cols.last_seq = extra.last_seq
    return cols


def _text_arrays(name: str, texts: Texts) -> dict[str, npt.NDArray[Any]]:
    """Strings kept as one buffer: the buffer, in slot order, and each one's length."""
    starts, ends = texts.starts[: texts.n], texts.ends[: texts.n]
    blob = bytes(texts)
    if len(starts) and not (
        starts[0] == 0 and np.array_equal(starts[1:], ends[:-1]) and ends[-1] == len(blob)
    ):
        blob = b"".join(blob[a:b] for a, b in zip(starts.tolist(), ends.tolist(), strict=True))
    return {f"{name}.blob": np.frombuffer(blob, dtype=np.uint8),
            f"{name}.lengths": (ends - starts).astype(np.int64)}


def _fill_texts(texts: Texts, arrays: dict[str, Any], name: str) -> None:
    lengths = arrays[f"{name}.lengths"]
    texts.blob, texts.tail = arrays[f"{name}.blob"], bytearray()
    texts.ends = with_room(len(lengths), np.int64)
    texts.starts = with_room(len(lengths), np.int64)
    np.cumsum(lengths, dtype=np.int64, out=texts.ends)
    np.subtract(texts.ends, lengths, out=texts.starts)
    texts.n = len(lengths)
    if texts.n and int(texts.ends[-1]) != len(texts.blob):
        raise ValueError(f"the lengths of {name} do not add up to its buffer")


def _fill_table(table: Table, columns: dict[str, npt.NDArray[Any] | Compact]) -> None:
    counts = {len(c) for c in columns.values()}
    if len(counts) != 1:
        raise ValueError("a table's columns differ in length")
    for name, column in columns.items():
        _set(table, name, column)
    table.n = counts.pop()


def _set(holder: Deferred, name: str, column: npt.NDArray[Any] | Compact) -> None:
    """Set a column; one kept compact is made whole when first read."""
    if isinstance(column, Compact):
        holder.defer(name, column)
    else:
        setattr(holder, name, column)


def _buffer(column: _Column) -> bytearray | memoryview:
    """Where a column is read to: a text buffer straight into the bytearray Texts keep (no
    copy), any other column into a new array with room to grow into (its bytes; ``.obj`` is the
    array)."""
    if column.name.endswith(".blob") and (
        column.name.split(".")[0] in _TEXTS or column.name.startswith("events.")
    ):
        return bytearray(column.count)
    return as_bytes(with_room(column.count, np.dtype(column.dtype)))


def _aligned(n: int) -> int:
    return -(-n // _ALIGN) * _ALIGN
