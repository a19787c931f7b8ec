"""A store on PostgreSQL: its log on the server (:class:`~eventlog.pg_log.PgLog`), its tables
there (:mod:`projections.server_tables`, :mod:`projections.server_records`), written in each
append's transaction, and a local cache directory for the process's checkpoint.
:func:`verify_server_log` is ``hmem log verify`` of such a store.

Every process that opens ``postgresql://...`` keeps the state hmem reads from (the fold, the
recall indexes) as a shared writer of a file store does: loaded from the last checkpoint this
host has, plus the log's tail read from the server. The cache is keyed by the store's id, so two
databases never share one, and is disposable: without it the process replays the log.

A writer also shares its checkpoint on the server (``hmem_checkpoint_parts``: its files in 8 MiB
rows, when the log has grown by a tenth since, and at close (the one it published then, or the
one its host holds if the server's is older): the manifest, and the namespace
parts the server does not have yet, each named by what it holds), and a process whose cache
holds no checkpoint or an older one fetches the manifest first and each namespace's part when it
first uses the namespace: a new host reads the manifest, the parts it serves and the log's
tail, not every row. A store made with a key file seals its texts and can erase them
(hmem/storage/server_keys.py); every host learns of an erasure from its receipt in the log.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from eventlog.events import Event
from eventlog.pg_log import PgLog
from eventlog.protocol import Then
from eventlog.repair import VerifyReport, verify_events
from eventlog.segments import ChainHead
from eventlog.server_urls import redacted
from hmem.storage.backend import Backend, Capabilities
from hmem.storage.group_commit import GroupCommit, GroupedStore
from hmem.storage.server_keys import open_server_sealer, server_key_path
from projections import checkpoint, server_records, server_tables
from projections.checkpoint import CHECKPOINT_FILE
from projections.fold import touched_facts
from projections.projector import Projector
from projections.timeutil import to_us

__all__ = ["ServerBackend", "cache_home", "verify_server_log"]

_PART = 8 << 20  # bytes per row of a checkpoint file on the server
_DONE = ".done"  # the part naming a checkpoint whole (its data: the chain at its seq)
MANIFEST = CHECKPOINT_FILE  # the checkpoint's manifest; its parts are the other files


def cache_home() -> Path:
    """``$HMEM_CACHE``, else ``$XDG_CACHE_HOME/hmem``, else ``~/.cache/hmem``."""
    if os.environ.get("HMEM_CACHE"):
        return Path(os.environ["HMEM_CACHE"]).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "hmem"


class ServerBackend:
    """The store at the PostgreSQL ``url`` (see the module docstring)."""

    def __init__(self, url: str, *, read_only: bool,
                 key_file: str | os.PathLike[str] | None = None, seal: bool = True) -> None:
        self.shown = redacted(url)
        self.log = log = PgLog(url, read_only=read_only)
        self._key_path: Path | None = None
        try:
            if not read_only:
                with log.writing(), log.con.transaction():
                    server_tables.create_tables(log.con)
            sid = server_tables.store_id(log.con)
            if sid is None:  # a log written without hmem's tables (e.g. by a bare PgLog)
                sid = "log-" + (log.chain_at(1).hex()[:16] if log.last_seq else "empty")
            if not sid.startswith("log-"):  # a log without hmem's tables stays in the clear
                self._key_path = server_key_path(key_file, sid)
                if read_only:
                    log.sealer = open_server_sealer(log, self.shown, self._key_path, seal=False)
                else:
                    with log.writing():  # one writer makes the key file of a new store
                        log.sealer = open_server_sealer(log, self.shown, self._key_path,
                                                        seal=seal)
        except BaseException:
            self.close()
            raise
        self.root = cache_home() / "pg" / sid
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)

    @property
    def capabilities(self) -> Capabilities:
        if self.log.sealer is not None:
            return Capabilities(erase=True, many_hosts=True)
        return Capabilities(erase=False, many_hosts=True, no_erase=(
            f"the store at {self.shown} keeps its texts in the clear (it was made before "
            f"server stores sealed texts, or with seal=False): forget() tombstones a fact, but "
            f"nothing can be erased from its log"
        ))

    @property
    def key_path(self) -> Path | None:
        return self._key_path

    @contextmanager
    def excluding_readers(self, what: str) -> Iterator[None]:
        # other hosts cannot be waited for: each drops what it holds of an erasure when it
        # folds the receipt (hmem/storage/shredding.py, Shredding.follow)
        yield

    def refresh(self) -> None:
        """A reader that opened the store while it was empty: its key file, once made."""
        if self.log.sealer is None and self._key_path is not None and self._key_path.exists():
            self.log.sealer = open_server_sealer(self.log, self.shown, self._key_path, seal=False)

    def group_commit(self, store: GroupedStore) -> GroupCommit | None:
        if self.log.read_only:
            return None
        return GroupCommit(self.log, store)

    def after_scrub(self, projector: Projector, namespaces: list[str]) -> None:
        """The tables' rows of ``namespaces`` again, from the state folded again; their parts
        of the checkpoint shared on the server deleted (the next share sends new ones: a host
        meanwhile replays the namespace), and the writes staged for group commit that were
        settled (their texts are in the clear)."""
        log = self.log
        with log.writing(), log.con.transaction():
            server_tables.rewrite_namespaces(log.con, projector, namespaces)
            server_records.rewrite_namespaces(log.con, projector, namespaces)
            for namespace in namespaces:
                log.con.execute("DELETE FROM hmem_checkpoint_parts WHERE starts_with(file, %s)",
                                (checkpoint.part_prefix(MANIFEST, namespace),))
            log.con.execute("DELETE FROM hmem_pending WHERE first_seq IS NOT NULL OR error IS "
                            "NOT NULL")

    def on_append(self, projector: Projector) -> Then | None:
        def write_tables(stamped: list[Event]) -> None:
            """Bring the tables to the fold of the batch, in the append's transaction: the
            records' statements sent first, so that the facts' wait for the server fetches
            both answers."""
            con, after = self.log.con, stamped[0].seq - 1
            records = server_records.write_records(con, projector, stamped, after=after)
            touched = {ns: touched_facts(ev for ev in stamped if ev.namespace == ns)
                       for ns in dict.fromkeys(ev.namespace for ev in stamped)}
            server_tables.write_facts(con, projector, touched, after=after)
            records()
        return write_tables

    def after_open(self, projector: Projector) -> list[str]:
        """Tables behind the log (written by something that did not keep them) are written
        whole; so are the record tables of a store made before them (no ``records_seq``
        yet), once."""
        con, seq = self.log.con, projector.last_seq
        facts_behind = server_tables.tables_seq(con) != seq
        records = server_records.records_seq(con)
        if not facts_behind and records == seq:
            return []
        with self.log.writing(), con.transaction():
            if facts_behind:
                server_tables.write_facts(con, projector, {}, after=-1)  # with COPY
            if records != seq:
                server_records.rewrite_records(con, projector, copy=True)
        notes = ["the server's tables were behind the log; written again"] if facts_behind else []
        if records is None:
            notes.append("the server's tables of episodes, logged recalls and vectors were made "
                         "and filled from the log (a store made before them)")
        elif records != seq:
            notes.append("the server's tables of episodes, logged recalls and vectors were "
                         "behind the log; written again")
        return notes

    def after_rebuild(self, projector: Projector) -> None:
        """Write every row of the tables again."""
        log = self.log
        with log.writing(), log.con.transaction():
            server_tables.write_facts(log.con, projector, {}, after=-1)  # with COPY
            server_records.rewrite_records(log.con, projector, copy=True)

    def fetch_checkpoint(self, have: int) -> None:
        """Fetch the server's checkpoint into :attr:`root` when it is newer than ``have`` (the
        seq of the one there). Written beside its place and renamed into it."""
        con = self.log.con
        with con.transaction():  # one snapshot: a checkpoint replaced meanwhile stays whole
            con.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ")
            seq = server_checkpoint_seq(self.log)
            if seq > have and _fetch_file(self.log, self.root, MANIFEST, seq):
                named = checkpoint.named_parts(self.root / MANIFEST) or set()
                for stale in checkpoint.part_files(self.root / MANIFEST):
                    if stale.name not in named:  # fetched for an older one: not needed again
                        stale.unlink(missing_ok=True)

    def fetch_part(self, name: str) -> bool:
        """Fetch the checkpoint part ``name`` from the server, if it has it."""
        with self.log.con.transaction():
            return _fetch_file(self.log, self.root, name, None)

    def share_checkpoint(self, files: list[Path], seq: int, *, closing: bool, every: int
                         ) -> list[str]:
        """Put the checkpoint of ``files`` (just published, or at a close this host's) on the
        server when the log has grown by a tenth (and by ``every`` events) since the one there,
        or at close if it is newer than that one, for other hosts."""
        shared = server_checkpoint_seq(self.log)
        if seq <= shared or not (closing or seq - shared >= max(every, seq // 10)):
            return []
        try:
            share_checkpoint(self.log, {path.name: path for path in files}, seq,
                             self.log.chain_at(seq))
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
            projector = caught_up()
            return {**server_tables.differences(con, projector),
                    **server_records.differences(con, projector)}

    def close(self) -> None:
        self.log.close()
        if self.log.sealer is not None:
            self.log.sealer.keys.close()


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
    replacing the one there: its manifest, and the parts the server does not have (a part's
    name says what it holds); the parts it no longer names are deleted."""
    with log.con.transaction(), log.con.cursor() as cur:
        cur.execute("DELETE FROM hmem_checkpoint_parts WHERE seq >= %s", (seq,))
        held = {r[0] for r in cur.execute("SELECT DISTINCT file FROM hmem_checkpoint_parts")}
        for name, path in files.items():
            if name != MANIFEST and name in held:
                continue
            with open(path, "rb") as f:
                part = 0
                while chunk := f.read(_PART):
                    cur.execute("INSERT INTO hmem_checkpoint_parts VALUES (%s, %s, %s, %s)",
                                (seq, name, part, chunk))
                    part += 1
        cur.execute("INSERT INTO hmem_checkpoint_parts VALUES (%s, %s, 0, %s)",
                    (seq, _DONE, chain))
        cur.execute("DELETE FROM hmem_checkpoint_parts WHERE seq < %s AND NOT file = ANY(%s)",
                    (seq, [name for name in files if name != MANIFEST]))


def _fetch_file(log: PgLog, root: Path, name: str, seq: int | None) -> bool:
    """Fetch the checkpoint file ``name`` (of the checkpoint at ``seq``; a part: whichever
    checkpoint shared it) into ``root``, written beside its place and renamed into it; returns
    whether the server has it."""
    at = "" if seq is None else " AND seq = %s"
    args: tuple[object, ...] = (name,) if seq is None else (name, seq)
    rows = log.con.execute(
        f"SELECT part, data FROM hmem_checkpoint_parts WHERE file = %s{at} ORDER BY seq DESC, "
        f"part", args).fetchall()
    if not rows:
        return False
    tmp = root / f"{name}.fetch-{os.getpid()}"
    with open(tmp, "wb") as f:
        expected = 0
        for part, data in rows:
            if part != expected:  # the rows of an older copy of the same file: not needed
                break
            f.write(data)
            expected += 1
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, root / name)
    return True


# the triggers that keep hmem_log append-only (eventlog/pg_log.py), and what each refuses
_GUARDS = {"hmem_log_no_change": "UPDATE and DELETE", "hmem_log_no_truncate": "TRUNCATE"}


def verify_server_log(
    url: str, *, expect: ChainHead | None = None, key: bytes | None = None,
    witness: str | os.PathLike[str] | None = None,
) -> VerifyReport:
    """``hmem log verify`` of the store at ``url``: every row of ``hmem_log`` read through the
    hash chain (no seq missing, each payload an event of its row's seq), the head held to
    ``expect`` and the signed checkpoints (as a store directory's log is), and what the table
    holds beside the chain: each row's ``tx_us`` is its event's time (the head's time is read
    from it), and the triggers that keep the table append-only are there and enabled. Reads
    only; safe beside the writers."""
    with PgLog(url, read_only=True) as log:
        times = array("q")
        report = verify_events(log, expect=expect, key=key, witness=witness, table=log.where(),
                               each=lambda event: times.append(to_us(event.tx_at)))
        report.table_problems = _guard_problems(log) + _time_problems(log, times)
        report.ok = report.ok and not report.table_problems
        return report


def _guard_problems(log: PgLog) -> list[str]:
    found = dict(log.con.execute(
        "SELECT tgname, tgenabled FROM pg_trigger WHERE tgrelid = to_regclass('hmem_log')"
    ).fetchall())
    problems = []
    for name, refuses in _GUARDS.items():
        if name not in found:
            problems.append(
                f"the trigger {name}, which refuses {refuses} of hmem_log, is missing: the "
                f"table is no longer append-only. The next write through hmem makes it again; "
                f"find out who dropped it (it takes the table's owner)")
        elif found[name] == "D":
            problems.append(
                f"the trigger {name}, which refuses {refuses} of hmem_log, is disabled: enable "
                f"it (ALTER TABLE hmem_log ENABLE TRIGGER {name}, as the table's owner)")
    return problems


def _time_problems(log: PgLog, times: array[int]) -> list[str]:
    """Rows (of the ``len(times)`` read) whose ``tx_us`` is not their event's tx time."""
    wrong, first, seq = 0, 0, 0
    while seq < len(times):
        page = log.con.execute("SELECT seq, tx_us FROM hmem_log WHERE seq > %s AND seq <= %s "
                               "ORDER BY seq LIMIT 10000", (seq, len(times))).fetchall()
        if not page:
            break
        for seq, tx_us in page:
            if tx_us != times[seq - 1]:
                wrong, first = wrong + 1, first or seq
    if not wrong:
        return []
    return [f"{wrong} row(s) of hmem_log hold a tx_us that is not their event's time (the "
            f"first at seq {first}): the events are intact (the chain holds), the column was "
            f"changed outside hmem; the store takes its head's time from it, so restore it from "
            f"a backup"]
