"""Sealing a store on PostgreSQL: its key file, and the row that binds it to the store.

A new server store seals its texts (:mod:`eventlog.sealing`) with a key file that is never in
the database, so that the database's backups, replicas and dumps never hold a key: destroying
keys in the key file erases what they sealed from every copy of the log. The file is the
embedded store's (:mod:`eventlog.keyfile`); its writers extend and erase it under the store's
writer lock. Where it is: ``key_file=`` or ``$HMEM_KEY_FILE`` when given, else
``<keys home>/<store id>.hmk`` on the host that made the store (:func:`keys_home`). Every host
that opens the store needs it: a team points ``$HMEM_KEY_FILE`` on every host at one file on
shared storage (a secrets volume) that the database's backups do not include. The store records
the file's id in ``hmem_meta`` (``keys_id``), so that no host takes another store's key file
for its own. A store whose log is in the clear (made before server stores sealed, or with
``seal=False``) stays so: ``erase`` raises ``ErasureUnavailable`` saying why.
"""

from __future__ import annotations

import os
from pathlib import Path

from eventlog.errors import KeyFileMissing
from eventlog.pg_log import PgLog
from eventlog.sealing import Sealer
from hmem.storage.keys import open_sealer

__all__ = ["ServerBinding", "keys_home", "server_key_path", "open_server_sealer"]


class ServerBinding:
    """The key file's id in the store's ``hmem_meta`` row ``keys_id``."""

    def __init__(self, log: PgLog, shown: str) -> None:
        self.log = log
        self.where = shown  # the store's URL without its password

    def bound(self) -> str | None:
        row = self.log.con.execute(
            "SELECT value FROM hmem_meta WHERE key = 'keys_id'").fetchone()
        return None if row is None else str(row[0])

    def bind(self, file_id: str) -> None:
        self.log.con.execute(
            "INSERT INTO hmem_meta VALUES ('keys_id', %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (file_id,))


def keys_home() -> Path:
    """``$HMEM_KEYS``, else ``$XDG_DATA_HOME/hmem/keys``, else ``~/.local/share/hmem/keys``:
    where a server store's key file is kept when none is named."""
    if os.environ.get("HMEM_KEYS"):
        return Path(os.environ["HMEM_KEYS"]).expanduser()
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(
        os.path.expanduser("~"), ".local", "share")
    return Path(base) / "hmem" / "keys"


def server_key_path(key_file: str | os.PathLike[str] | None, store_id: str) -> Path:
    """``key_file``, else ``$HMEM_KEY_FILE``, else ``<keys home>/<store_id>.hmk``."""
    if key_file is not None:
        return Path(key_file).expanduser()
    if os.environ.get("HMEM_KEY_FILE"):
        return Path(os.environ["HMEM_KEY_FILE"]).expanduser()
    return keys_home() / f"{store_id}.hmk"


def open_server_sealer(log: PgLog, shown: str, path: Path, *, seal: bool) -> Sealer | None:
    """The sealer of the server store whose log is ``log`` (its tables made; ``shown`` as
    messages show it): its key file at ``path`` opened, or made for a new store; None for a
    store in the clear. A sealed store without its key file is ``KeyFileMissing``."""
    binding = ServerBinding(log, shown)
    if not path.exists() and binding.bound() is not None:
        raise KeyFileMissing(
            f"the store at {binding.where} seals its texts with a key file this host does not "
            f"have at {path}: point key_file=... or $HMEM_KEY_FILE at the store's key file (one "
            f"file every host of the store reaches, outside the database's backups); hmem "
            f"never reads or writes this store without it"
        )
    if seal and not log.read_only and log.last_seq == 0 and not path.exists():
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    return open_sealer(log, path, binding, seal=seal)
