"""A store on PostgreSQL: its log on the server (:class:`~eventlog.pg_log.PgLog`), its tables
there (:mod:`projections.server_tables`), written in each append's transaction, and a local cache
directory for the process's checkpoint.

Every process that opens ``postgresql://...`` keeps the state hmem reads from (the fold, the
recall indexes) as a shared writer of a file store does: loaded from the last checkpoint this
host has, plus the log's tail read from the server. The cache is keyed by the store's id, so two
databases never share one, and is disposable: without it the process replays the log.

A writer also shares its checkpoint on the server (``hmem_checkpoint_parts``: the file in 8 MiB
rows, replaced when the log has grown by a tenth since, and at close), and a process whose
cache holds no checkpoint or an older one fetches it first: a new host reads one checkpoint and
the log's tail, not every row. Texts are kept in the clear (no sealing on a server store yet),
so nothing can be erased there.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from eventlog.events import Event
from eventlog.pg_log import PgLog, redacted
from eventlog.protocol import Then
from hmem.storage.backend import Backend, Capabilities
from projections import server_tables
from projections.fold import touched_facts
from projections.projector import Projector

__all__ = ["ServerBackend", "cache_home"]

_PART = 8 << 20  # bytes per row of a checkpoint file on the server
_DONE = ".done"  # the part naming a checkpoint whole (its data: the chain at its seq)


def cache_home() -> Path:
    """``$HMEM_CACHE``, else ``$XDG_CACHE_HOME/hmem``, else ``~/.cache/hmem``."""
    if os.environ.get("HMEM_CACHE"):
        return Path(os.environ["HMEM_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hmem"


class ServerBackend:
    """The store at the PostgreSQL ``url`` (see the module docstring)."""

    def __init__(self, url: str, *, read_only: bool) -> None:
        self.shown = redacted(url)
        self.log = log = PgLog(url, read_only=read_only)
        try:
            if not read_only:
                with log.writing(), log.con.transaction():
                    server_tables.create_tables(log.con)
            sid = server_tables.store_id(log.con)
            if sid is None:  # a log written without hmem's tables (e.g. by a bare PgLog)
                sid = "log-" + (log.chain_at(1).hex()[:16] if log.last_seq else "empty")
        except BaseException:
            log.close()
            raise
        self.root = cache_home() / "pg" / sid
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)

    @property
    def capabilities(self) -> Capabilities:
        return Capabilities(erase=False, no_erase=(
            f"the store at {self.shown} keeps its texts in the clear (a store on PostgreSQL "
            f"does not seal them yet): forget() tombstones a fact, but nothing can be erased"
        ))

    @property
    def key_path(self) -> Path | None:
        return None

    @contextmanager
    def excluding_readers(self, what: str) -> Iterator[None]:
        yield  # nothing can be erased here: nothing to exclude readers from

    def refresh(self) -> None:
        pass

    def on_append(self, projector: Projector) -> Then | None:
        def write_tables(stamped: list[Event]) -> None:
            """Bring the tables to the fold of the batch, in the append's transaction."""
            server_tables.write_facts(self.log.con, projector.state, touched_facts(stamped),
                                  after=stamped[0].seq - 1)
        return write_tables

    def after_open(self, projector: Projector) -> list[str]:
        """Tables behind the log (written by something that did not keep them) are written
        whole."""
        if server_tables.tables_seq(self.log.con) == projector.last_seq:
            return []
        self.after_rebuild(projector)
        return ["the server's tables were behind the log; written again"]

    def after_rebuild(self, projector: Projector) -> None:
        """Write every fact's rows again."""
        log = self.log
        with log.writing(), log.con.transaction():
            server_tables.write_facts(log.con, projector.state, (), after=-1)  # with COPY

    def fetch_checkpoint(self, have: int) -> None:
        """Fetch the server's checkpoint into :attr:`root` when it is newer than ``have`` (the
        seq of the one there). Written beside its place and renamed into it."""
        con = self.log.con
        with con.transaction():  # one snapshot: a checkpoint replaced meanwhile stays whole
            con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            _fetch(self.log, self.root, have)

    def share_checkpoint(self, path: Path, seq: int, *, closing: bool, every: int) -> list[str]:
        """Put the checkpoint just published on the server when the log has grown by a tenth
        (and by ``every`` events) since the one there, or at close, for other hosts."""
        shared = server_checkpoint_seq(self.log)
        if seq <= shared or not (closing or seq - shared >= max(every, seq // 10)):
            return []
        try:
            share_checkpoint(self.log, {path.name: path}, seq, self.log.chain_at(seq))
        except OSError as e:
            return [f"checkpoint not shared on the server ({e})"]
        return []

    def table_differences(
        self, caught_up: Callable[[], Projector]
    ) -> dict[str, tuple[int, int]]:
        """The server's tables against the state ``caught_up()`` returns, read in one snapshot
        with the log's head."""
        con = self.log.con
        with con.transaction():
            con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            return server_tables.differences(con, caught_up().state)

    def close(self) -> None:
        self.log.close()


_: type[Backend] = ServerBackend  # a PostgreSQL database is a Backend (hmem/storage/backend.py)


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
