"""A store in a directory: the embedded default.

Layout::

    log/                 segment files (*.hlog), the writer LOCK, reader marks: the source of truth
    checkpoint.columns   the state derived from the log at a point of it (projections/checkpoint.py)
    keys.hmk, keys.id    the data keys that seal the log's texts, and the key file's id
                         (hmem/storage/keys.py; the key file may live elsewhere: key_file=,
                         $HMEM_KEY_FILE)
    backups/             what `hmem log repair` cut off
    exports.jsonl        the exports the store made (written again after an erasure)

A reader, and every shared writer, is marked open in ``log/readers`` (an erasure waits for none
to be open: eventlog/lock.py). Its texts are sealed (an erasure can destroy them), unless the
store was made before hmem sealed texts or with ``seal=False``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path

from eventlog.errors import KeyFileError
from eventlog.fileio import OS, FileIO
from eventlog.format import SEGMENT_BYTES
from eventlog.keyfile import KeyFile
from eventlog.lock import ReaderMark, readers_excluded
from eventlog.log import EventLog, FsyncPolicy
from eventlog.protocol import Then
from eventlog.segment import Resume
from hmem.errors import StoreNotFound
from hmem.storage.backend import Backend, Capabilities
from hmem.storage.group_commit import GroupCommit, GroupedStore
from hmem.storage.keys import DirectoryBinding, checkpoint_key, key_path, open_sealer
from projections.checkpoint import CHECKPOINT_FILE, Seal, read_log_at
from projections.projector import Projector

__all__ = ["FileBackend", "LEGACY_FILES", "missing_store"]

# what earlier versions derived beside the log (DuckDB tables and their copies for readers):
# derived, and holding every text, so a writer removes them
LEGACY_FILES = ("projection.duckdb*", "checkpoint.duckdb*")


def missing_store(root: Path) -> StoreNotFound:
    """The error for a read of a store that does not exist (nothing was created)."""
    return StoreNotFound(
        f"no hmem store at {root}; create one by writing to it "
        f"(e.g. `hmem --path {root} remember SUBJECT TEXT`)"
    )


class FileBackend:
    """The store in the directory ``root`` (see the module docstring)."""

    def __init__(
        self,
        root: Path,
        *,
        read_only: bool,
        shared: bool,
        fsync: FsyncPolicy = "always",
        segment_bytes: int = SEGMENT_BYTES,
        io: FileIO | None = None,
        key_file: str | os.PathLike[str] | None = None,
        seal: bool = True,
    ) -> None:
        self.root = root.expanduser()
        self.shown = str(self.root)
        if read_only and not (self.root / "log").is_dir():
            raise missing_store(self.root)
        if not read_only:  # the store holds what an agent believes: its owner's eyes only
            self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._key_path = key_path(self.root, key_file)
        self.log = EventLog(
            self.root / "log", read_only=read_only, fsync=fsync, segment_bytes=segment_bytes,
            lock_label=f"store {self.root}", io=io or OS,
            # from a checkpoint only the log's tail is read, by a reader and by a shared
            # writer (the CLI's, the MCP server's: a scan of every record cost 1.5 s a million
            # events at each CLI write); the lifetime writer checks every record at its open
            lazy=read_only or shared,
            # the records before the checkpoint's are not read by an open from it: checked
            # when first read (where its record lies is taken from an authentic checkpoint)
            resume=_resume_point(self.root, self._key_path) if read_only or shared else None,
            shared=shared,
        )
        self._mark: ReaderMark | None = None
        try:
            if read_only or shared:  # an erasure waits for no reader to be open
                self._mark = ReaderMark(self.log.directory)
            with self.log.writing() if shared else nullcontext():  # one makes the key file
                self.log.sealer = open_sealer(
                    self.log, self._key_path, DirectoryBinding(self.root), seal=seal)
            if not read_only:
                self._remove_legacy_files()
        except BaseException:
            self.close()
            raise

    @property
    def capabilities(self) -> Capabilities:
        if self.log.sealer is not None:
            return Capabilities(erase=True)
        return Capabilities(erase=False, no_erase=(
            f"the store {self.root} keeps its texts in the clear (it was made before hmem "
            f"sealed texts, or with seal=False): forget() tombstones a fact, but nothing can "
            f"be erased from its log"
        ))

    @property
    def key_path(self) -> Path | None:
        return self._key_path

    def refresh(self) -> None:
        """A reader that opened the store while it was empty: its key file, once made."""
        if self.log.sealer is None and self._key_path.exists():
            self.log.sealer = open_sealer(
                self.log, self._key_path, DirectoryBinding(self.root), seal=False)

    @contextmanager
    def excluding_readers(self, what: str) -> Iterator[None]:
        mark = self._mark  # a shared writer, marked as a reader, steps aside for its own
        if mark is not None:
            mark.release()
        try:
            with readers_excluded(self.log.directory, what):
                yield
        finally:
            if mark is not None:
                self._mark = ReaderMark(self.log.directory)

    def on_append(self, projector: Projector) -> Then | None:
        return None

    def after_open(self, projector: Projector) -> list[str]:
        return []

    def after_rebuild(self, projector: Projector) -> None:
        pass

    def group_commit(self, store: GroupedStore) -> GroupCommit | None:
        return None  # a shared writer's append takes the file lock and fsyncs on its own

    def after_scrub(self, projector: Projector, namespaces: list[str]) -> None:
        pass  # the checkpoint is all it derives

    def fetch_checkpoint(self, have: int) -> None:
        pass

    def fetch_part(self, name: str) -> bool:
        return False

    def share_checkpoint(self, files: list[Path], seq: int, *, closing: bool, every: int
                         ) -> list[str]:
        return []

    def table_differences(
        self, caught_up: Callable[[], Projector]
    ) -> dict[str, tuple[int, int]]:
        return {}

    def _remove_legacy_files(self) -> None:
        for pattern in LEGACY_FILES:
            for path in self.root.glob(pattern):
                path.unlink(missing_ok=True)

    def close(self) -> None:
        try:
            self.log.close()
        finally:
            if self.log.sealer is not None:
                self.log.sealer.keys.close()
            if self._mark is not None:
                self._mark.release()
                self._mark = None


_: type[Backend] = FileBackend  # a directory is a Backend (hmem/storage/backend.py)


def _resume_point(root: Path, keys_at: Path) -> Resume | None:
    """Where the store's checkpoint says its record lies in the log, and the chain before it,
    when the checkpoint is authentic under the store's key file (None else, and for a store in
    the clear)."""
    if not keys_at.exists():
        return None
    try:
        keys = KeyFile(keys_at, read_only=True)
    except (KeyFileError, OSError):
        return None  # the sealer's open says what is wrong with it
    try:
        key = checkpoint_key(keys)
    finally:
        keys.close()
    at = None if key is None else read_log_at(root / CHECKPOINT_FILE, Seal(key))
    if at is None:
        return None
    seq, chain, segment, offset, before = at
    try:
        return Resume(seq, bytes.fromhex(chain), segment, offset, bytes.fromhex(before))
    except ValueError:
        return None
