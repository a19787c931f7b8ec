"""One namespace's beliefs and history for offline analysis: Parquet files (``export_parquet``)
and the log as JSON Lines (``export_jsonl``).

Written by DuckDB itself (no pyarrow), from a private per-namespace copy like the one
``Memory.sql`` queries (but allowed to write files), so an export never holds another
namespace's rows. Files:

* ``events.parquet``: the decoded log of this namespace (``Memory.events()``: one row per event,
  the fact's subject and text joined in).
* ``fact_versions.parquet``: one row per bi-temporal version row, joined with its fact (text,
  subject, provenance, chain links): the table to plot or pivot.
* ``facts.parquet``: one row per fact (statement), as the projection's ``facts`` table.
* ``entities.parquet``: (entity, fact) pairs.
* ``recalls.parquet``, ``recall_hits.parquet``: logged recalls and the facts each returned
  (empty unless recall logging is on; see :mod:`hmem.recall.logged`).
* ``manifest.json``: namespace, the log seq the files cover, row counts, hmem's version.

Each file is written to a temporary name and renamed, so a reader never sees half a file. If
the store changes while exporting (a writer in another process), the export starts again, so
all files always describe one seq.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import duckdb
import msgspec

from eventlog.segments import ChainHead
from hmem.errors import HmemError, InvalidInput
from hmem.notebook.sql import NamespaceCopy
from hmem.version import __version__
from projections.printable import json_visible
from replay import snapshot_query
from replay.rebuild import Progress

if TYPE_CHECKING:
    from hmem.handle import StoreHandle as Memory  # what an export needs of a Memory

__all__ = [
    "export_parquet", "export_jsonl", "Export", "ExportedTable", "EXPORT_QUERIES",
    "ExportChanged", "JsonlExport", "EXPORTS_FILE", "exports_key", "note_export", "write_private",
    "rewrite_exports", "rewrite_recorded",
]

# In the store directory: one JSON line per export to a path (kind, path, namespace; for a
# snapshot its seq and valid time), so that an erasure can write those exports again without
# what it erased. Each line carries its HMAC-SHA256 under a key derived from the key file's
# secret: a line planted by someone who can write the directory but not read the key file is
# ignored (else an erasure would write the namespace's texts wherever the line says). A store in
# the clear keeps no list: nothing in it can be erased.
EXPORTS_FILE = "exports.jsonl"

# file stem -> query over the namespace copy (see Memory.sql)
EXPORT_QUERIES: dict[str, str] = {
    "events": "SELECT * FROM event_log ORDER BY seq",
    "fact_versions": """
        SELECT v.fact_id, v.row_no, f.subject, f.text,
               v.valid_from, v.valid_to, v.tx_from_seq, v.tx_from, v.tx_to_seq, v.tx_to,
               v.tx_to IS NULL AS believed_now,
               f.confidence, f.source_agent, f.source_ref, f.entities, f.created_at,
               f.supersedes, f.revision, f.reason, f.superseded_by, f.superseded_at,
               f.forgotten_seq, f.forgotten_at, f.forget_reason, v.namespace
        FROM fact_versions v JOIN facts f ON f.id = v.fact_id
        ORDER BY v.fact_id, v.row_no""",
    "facts": "SELECT * FROM facts ORDER BY id",
    "entities": "SELECT * FROM entities ORDER BY entity, fact_id",
    "recalls": "SELECT * FROM recalls ORDER BY seq",
    "recall_hits": "SELECT * FROM recall_hits ORDER BY seq, rank",
}

MANIFEST_FORMAT = "hmem-parquet-export"
MANIFEST_VERSION = 1
_ATTEMPTS = 5


class ExportedTable(msgspec.Struct, frozen=True):
    path: str
    rows: int


class Export(msgspec.Struct, frozen=True):
    """What ``export_parquet`` wrote: the directory, the namespace, the log seq it covers."""

    directory: str
    namespace: str
    seq: int
    tables: dict[str, ExportedTable]
    manifest: str


class ExportChanged(HmemError):
    """The store kept changing during the export (a busy writer); try again."""


def export_parquet(
    memory: Memory, directory: str | os.PathLike[str], *, progress: Progress | None = None
) -> Export:
    """Write this namespace's events, fact versions, facts and entities as Parquet files into
    ``directory`` (created if needed; these files in it are replaced). ``progress(done, total)``
    is called after each file. Returns what was written."""
    out = Path(directory)
    if out.exists() and not out.is_dir():
        raise InvalidInput(f"{out} is a file, not a directory; choose a directory to export to")
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    for _ in range(_ATTEMPTS):
        seq = _last_seq(memory)
        with memory.reading() as store:
            copy = NamespaceCopy(store.projector, memory.namespace, sandboxed=False)
            head = str(ChainHead(copy.seq, store.log.chain_at(copy.seq).hex() if copy.seq else ""))
        try:
            tables = _write_tables(copy, out, progress)
            (last_tx,) = copy.query("SELECT max(tx_at) FROM events").fetchall()[0]
        finally:
            copy.close()
        if _last_seq(memory) == seq == copy.seq:
            break
    else:
        raise ExportChanged(
            f"the store changed during each of {_ATTEMPTS} export attempts; try again when the "
            f"writer is less busy"
        )
    manifest = out / "manifest.json"
    _write_text(manifest, json.dumps({
        "format": MANIFEST_FORMAT,
        "version": MANIFEST_VERSION,
        "hmem_version": __version__,
        "namespace": memory.namespace,
        "seq": seq,
        "head": head,  # the log's SEQ:HASH the files were taken at (hmem log verify --expect)
        "last_tx": last_tx.isoformat() if last_tx else None,  # this namespace's last change
        "tables": {name: {"file": Path(t.path).name, "rows": t.rows} for name, t in tables.items()},
    }, indent=2) + "\n")
    note_export(memory, "parquet", out)
    return Export(str(out), memory.namespace, seq, tables, str(manifest))


class JsonlExport(msgspec.Struct, frozen=True):
    """What ``export_jsonl`` wrote: where (``"-"``: standard output), the namespace, the log
    seq it covers and how many events."""

    path: str
    namespace: str
    seq: int
    events: int


def export_jsonl(memory: Memory, out: str | os.PathLike[str] | IO[str]) -> JsonlExport:
    """Write this namespace's whole log as JSON Lines: one event per line, in seq order, as the
    log holds it (``type`` names it; times RFC 3339 in UTC; vectors base64 little-endian
    float32). ``out`` is a path (written under a temporary name, then renamed) or an open text
    file. Logged recalls are included. Nothing of another namespace is written."""
    if not isinstance(out, (str, os.PathLike)):
        seq, n = _write_events(memory, out)
        return JsonlExport(str(getattr(out, "name", "-")), memory.namespace, seq, n)
    path = Path(out)
    if path.is_dir():
        raise InvalidInput(f"{path} is a directory; name the .jsonl file to write")
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)  # its owner's eyes only
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            seq, n = _write_events(memory, f)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    note_export(memory, "jsonl", path)
    return JsonlExport(str(path), memory.namespace, seq, n)


def _last_seq(memory: Memory) -> int:
    with memory.reading() as store:
        return store.projector.last_seq


def write_private(path: str | os.PathLike[str], write: Callable[[str], object]) -> None:
    """``write(name)`` a file that then replaces ``path``, readable by its owner only at every
    moment: it is written in a new directory only the owner can enter (DuckDB creates files
    under the process umask), made 0600 there, then renamed into place."""
    path = Path(path)
    private = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))  # mode 0700
    try:
        tmp = private / path.name
        write(str(tmp))
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    finally:
        shutil.rmtree(private, ignore_errors=True)


def exports_key(memory: Memory) -> bytes | None:
    """The key the store's list of exports is authenticated with (None: a store in the clear,
    or a key file too old to hold a secret, keeps no list)."""
    sealer = memory.store.log.sealer
    return None if sealer is None else sealer.keys.derived_key("exports")


def note_export(memory: Memory, kind: str, path: Path, **args: int | None) -> None:
    """Add the export to the store's list (once per kind, path, namespace and ``args``: what
    writing it again needs). A store in the clear, or whose directory cannot be written (a
    reader on a read-only file system), keeps no list."""
    key = exports_key(memory)
    if key is None:
        return
    entry = {"kind": kind, "path": str(path.resolve()), "namespace": memory.namespace, **args}
    try:
        if entry in _exports(memory.path, key):
            return
        fd = os.open(memory.path / EXPORTS_FILE, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as f:
            f.write(json.dumps({**entry, "mac": _mac(key, entry)}) + "\n")
    except OSError:
        return


def _mac(key: bytes, entry: dict[str, Any]) -> str:
    body = json.dumps(entry, sort_keys=True, ensure_ascii=True).encode()
    return hmac.digest(key, body, hashlib.sha256).hex()


def _exports(root: Path, key: bytes | None) -> list[dict[str, Any]]:
    """The recorded exports whose MAC holds under ``key``; lines that are not one (torn,
    edited by hand, planted, or written before lines were authenticated) are skipped."""
    return _listed(root, key)[0]


def _listed(root: Path, key: bytes | None) -> tuple[list[dict[str, Any]], list[str]]:
    """(the authentic entries, the paths other lines name)."""
    try:
        lines = (root / EXPORTS_FILE).read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return [], []
    out: list[dict[str, Any]] = []
    unproven: list[str] = []
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a torn last line
        if not isinstance(entry, dict):
            continue
        mac = entry.pop("mac", None)
        if key is not None and isinstance(mac, str) and _is_entry(entry) and (
            hmac.compare_digest(mac, _mac(key, entry))
        ):
            out.append(entry)
        elif isinstance(entry.get("path"), str):
            unproven.append(entry["path"])
    return out, unproven


def _is_entry(entry: dict[str, Any]) -> bool:
    if entry.get("kind") not in ("parquet", "jsonl", "snapshot") or not all(
        isinstance(entry.get(k), str) for k in ("path", "namespace")
    ):
        return False
    return entry["kind"] != "snapshot" or (
        type(entry.get("as_of")) is int and type(entry.get("valid_at_us")) in (int, type(None))
    )


def rewrite_recorded(
    handle_for: Callable[[str], Memory], root: Path, key: bytes | None
) -> tuple[list[str], list[str]]:
    """:func:`rewrite_exports` for every namespace with a recorded export (``handle_for(ns)``:
    a handle of that namespace; ``key``: :func:`exports_key`)."""
    entries, unproven = _listed(root, key)
    done: list[str] = []
    missed = _unproven(unproven)
    for namespace in sorted({e["namespace"] for e in entries}):
        got, lost = _rewrite(handle_for(namespace), entries)
        done += got
        missed += lost
    return done, missed


def rewrite_exports(memory: Memory) -> tuple[list[str], list[str]]:
    """Write again every export the store made of this namespace that is still where it was
    written (what an erasure does after it): (paths rewritten, paths gone or failed, with why)."""
    entries, unproven = _listed(memory.path, exports_key(memory))
    done, missed = _rewrite(memory, entries)
    return done, _unproven(unproven) + missed


def _unproven(paths: list[str]) -> list[str]:
    return [f"{path} (listed without this store's MAC, by hand or by an earlier hmem: not "
            f"written; export it again if it is yours)" for path in paths]


def _rewrite(memory: Memory, entries: list[dict[str, Any]]) -> tuple[list[str], list[str]]:
    """Write again the ``entries`` of ``memory``'s namespace: (paths rewritten, paths gone or
    failed, with why)."""
    done: list[str] = []
    missed: list[str] = []
    for entry in entries:
        if entry["namespace"] != memory.namespace:
            continue
        path = Path(entry["path"])
        if not path.exists():
            missed.append(f"{path} (no longer there)")
            continue
        try:
            if entry["kind"] == "parquet":
                export_parquet(memory, path)
            elif entry["kind"] == "snapshot":
                with memory.reading() as store:
                    valid = entry.get("valid_at_us")
                    state = store.projector.space(memory.namespace).state
                    rel = snapshot_query(state, memory.namespace, int(entry["as_of"]),
                                         None if valid is None else int(valid))
                    write_private(path, rel.write_parquet)
            else:
                export_jsonl(memory, path)
        except (OSError, HmemError, duckdb.Error, ValueError) as e:
            missed.append(f"{path} ({e})")
            continue
        done.append(str(path))
    return done, missed


def _write_events(memory: Memory, f: IO[str]) -> tuple[int, int]:
    encode = msgspec.json.encode
    n = 0
    with memory.reading() as store:
        seq = store.projector.last_seq
        for ev in store.log.read(1, seq):
            if ev.namespace == memory.namespace:
                f.write(json_visible(encode(ev).decode()))
                f.write("\n")
                n += 1
    return seq, n


def _write_tables(
    copy: NamespaceCopy, out: Path, progress: Progress | None
) -> dict[str, ExportedTable]:
    tables: dict[str, ExportedTable] = {}
    for i, (name, query) in enumerate(EXPORT_QUERIES.items(), 1):
        path = out / f"{name}.parquet"
        relation = copy.query(query)
        write_private(path, relation.write_parquet)  # the namespace's texts: its owner's only
        rows = copy.query(f"SELECT count(*) FROM ({query})").fetchall()[0][0]
        tables[name] = ExportedTable(str(path), int(rows))
        if progress is not None:
            progress(i, len(EXPORT_QUERIES))
    return tables


def _write_text(path: Path, text: str) -> None:
    write_private(path, lambda name: Path(name).write_text(text, encoding="utf-8"))
