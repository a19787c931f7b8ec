"""What a store on PostgreSQL needs beyond the embedded one (issue 15): its log on the server
(:class:`~eventlog.pg_log.PgLog`), its tables there (:mod:`projections.pg_tables`), written in
each append's transaction, and a local cache directory for the process's own projection.

Every process that opens ``postgresql://...`` keeps the projection hmem reads from (the fold,
the recall indexes, DuckDB for ``sql``) as a shared writer of a file store does: a private copy
of the last checkpoint published on this host, plus the log's tail read from the server. The
cache is keyed by the store's id, so two databases never share one, and is disposable: without
it the process replays the log.

A writer also shares its checkpoint on the server (``hmem_checkpoint_parts``: the two files in
8 MiB rows, replaced when the log has grown by a tenth since, and at close), and a process whose
cache holds no checkpoint or an older one fetches it first: a new host reads one checkpoint and
the log's tail, not every row.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from eventlog.events import Event
from eventlog.pg_log import PgLog, is_server_url
from projections import pg_tables
from projections.fact_columns import FactColumns
from projections.fact_fold import touched_facts

__all__ = [
    "cache_home", "fetch_checkpoint", "is_server_url", "open_server_log", "rewrite_tables",
    "server_checkpoint_seq", "share_checkpoint", "write_tables",
]

_PART = 8 << 20  # bytes per row of a checkpoint file on the server
_DONE = ".done"  # the part naming a checkpoint whole (its data: the chain at its seq)


def cache_home() -> Path:
    """``$HMEM_CACHE``, else ``$XDG_CACHE_HOME/hmem``, else ``~/.cache/hmem``."""
    if os.environ.get("HMEM_CACHE"):
        return Path(os.environ["HMEM_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hmem"


def open_server_log(url: str, *, read_only: bool) -> tuple[PgLog, Path]:
    """The store's log at ``url`` (its tables made, for a writer) and its cache directory."""
    log = PgLog(url, read_only=read_only)
    try:
        if not read_only:
            with log.writing(), log.con.transaction():
                pg_tables.create_tables(log.con)
        sid = pg_tables.store_id(log.con)
        if sid is None:  # a log written without hmem's tables (e.g. by a bare PgLog)
            sid = "log-" + (log.chain_at(1).hex()[:16] if log.last_seq else "empty")
    except BaseException:
        log.close()
        raise
    root = cache_home() / "pg" / sid
    root.mkdir(mode=0o700, parents=True, exist_ok=True)
    return log, root


def write_tables(log: PgLog, state: FactColumns, events: Sequence[Event]) -> None:
    """Bring the server's tables to ``state`` (the fold after ``events``, the batch just
    appended), in the append's transaction."""
    pg_tables.write_facts(log.con, state, touched_facts(events), after=events[0].seq - 1)


def rewrite_tables(log: PgLog, state: FactColumns) -> None:
    """Write every fact's rows again (the tables were missing, behind, or rebuilt)."""
    with log.writing(), log.con.transaction():
        pg_tables.write_facts(log.con, state, (), after=-1)  # with COPY


def server_checkpoint_seq(log: PgLog) -> int:
    """The seq of the checkpoint shared on the server (0: none, or a store without the table)."""
    if log.con.execute("SELECT to_regclass('hmem_checkpoint_parts')").fetchone()[0] is None:
        return 0
    row = log.con.execute(
        "SELECT max(seq) FROM hmem_checkpoint_parts WHERE file = %s", (_DONE,)
    ).fetchone()
    return int(row[0] or 0)


def share_checkpoint(log: PgLog, files: dict[str, Path], seq: int, chain: bytes) -> None:
    """Put the checkpoint at ``seq`` (its files, read now) on the server in one transaction,
    replacing the one there."""
    with log.con.transaction(), log.con.cursor() as cur:
        cur.execute("DELETE FROM hmem_checkpoint_parts WHERE seq >= %s", (seq,))
        for name, path in files.items():
            with open(path, "rb") as f:
                part = 0
                while chunk := f.read(_PART):
                    cur.execute("INSERT INTO hmem_checkpoint_parts VALUES (%s, %s, %s, %s)",
                                (seq, name, part, chunk))
                    part += 1
        cur.execute("INSERT INTO hmem_checkpoint_parts VALUES (%s, %s, 0, %s)",
                    (seq, _DONE, chain))
        cur.execute("DELETE FROM hmem_checkpoint_parts WHERE seq < %s", (seq,))


def fetch_checkpoint(log: PgLog, root: Path, have: int) -> int:
    """Fetch the server's checkpoint into ``root`` when it is newer than ``have`` (the seq of
    the one there); returns the seq fetched, 0 when none was. Each file is written beside its
    place and renamed into it, the fold's columns first."""
    with log.con.transaction():  # one snapshot: a checkpoint replaced meanwhile stays whole
        log.con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
        return _fetch(log, root, have)


def _fetch(log: PgLog, root: Path, have: int) -> int:
    seq = server_checkpoint_seq(log)
    if seq <= have:
        return 0
    names = [r[0] for r in log.con.execute(
        "SELECT DISTINCT file FROM hmem_checkpoint_parts WHERE seq = %s AND file <> %s "
        "ORDER BY file", (seq, _DONE))]
    fetched: list[tuple[Path, Path]] = []
    for name in names:
        tmp = root / f"{name}.fetch-{os.getpid()}"
        with open(tmp, "wb") as f:
            part = 0
            while True:
                row = log.con.execute(
                    "SELECT data FROM hmem_checkpoint_parts WHERE seq = %s AND file = %s "
                    "AND part = %s", (seq, name, part)).fetchone()
                if row is None:
                    break
                f.write(row[0])
                part += 1
            f.flush()
            os.fsync(f.fileno())
        fetched.append((tmp, root / name))
    for tmp, path in sorted(fetched, key=lambda item: item[1].suffix != ".columns"):
        os.replace(tmp, path)
    return seq
