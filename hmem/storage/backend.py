"""Where a store lives, behind one interface: a directory (hmem/storage/file_backend.py) or a
PostgreSQL database (hmem/storage/server_backend.py).

:class:`~hmem.storage.store.Store` holds one :class:`Backend` and asks it, never which kind it
is: its log, the local directory of its files, how to show it in messages, what it can do
(:class:`Capabilities`), and the few steps only one kind has something to do for (reader marks,
a checkpoint shared with other hosts, tables written in each append's transaction). A step a
backend has nothing to do for is a no-op there. hmem/storage/targets.py picks the backend by
the target, as litestream picks a replica client by its URL's scheme.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from eventlog.protocol import Log, Then
from hmem.storage.group_commit import GroupCommit, GroupedStore
from projections.projector import Projector

__all__ = ["Backend", "Capabilities"]


@dataclass(frozen=True)
class Capabilities:
    """What a backend can do: ``erase`` (texts are sealed, so an erasure can destroy them),
    and, when it cannot, ``no_erase``: why, for the error a caller gets; ``many_hosts`` (see
    below)."""

    erase: bool
    no_erase: str = ""
    # processes on many hosts share the store and cannot be waited for: the checkpoint under
    # the backend's root is this host's cache of one kept elsewhere (any process may delete
    # from it), and an erasure reaches each process through its receipt (no reader is refused
    # while one is under way: hmem/storage/shredding.py)
    many_hosts: bool = False


class Backend(Protocol):
    """What a store asks of the place it lives (see the module docstring)."""

    @property
    def log(self) -> Log:
        """The store's event log."""

    @property
    def root(self) -> Path:
        """The directory of the store's local files (its checkpoint, key file, ...)."""

    @property
    def shown(self) -> str:
        """The store as messages show it (a password never shown)."""

    @property
    def capabilities(self) -> Capabilities:
        """What this store can do here."""

    @property
    def key_path(self) -> Path | None:
        """The key file that seals this store's texts (None: none is kept)."""

    def refresh(self) -> None:
        """A follower's step before it folds what was appended: take in what else changed
        (a key file made since a reader opened an empty store)."""

    def excluding_readers(self, what: str) -> AbstractContextManager[None]:
        """No reader open, none opening, for ``what`` (``ReadersOpen`` names them)."""

    def on_append(self, projector: Projector) -> Then | None:
        """What an append runs in its transaction once ``projector`` has folded the events
        (None: nothing more than the fold)."""

    def after_open(self, projector: Projector) -> list[str]:
        """A writer's last open step, with the log's writer lock held and ``projector`` caught
        up; returns notes for :attr:`Store.notes`."""

    def after_rebuild(self, projector: Projector) -> None:
        """After the whole log was folded again (a rebuild, a copy): whatever else the store
        derives from it, made again."""

    def group_commit(self, store: GroupedStore) -> GroupCommit | None:
        """What numbers ``store``'s writes with other writers' in one transaction (a server's:
        hmem/storage/group_commit.py); None: each write takes the writer lock itself."""

    def after_scrub(self, projector: Projector, namespaces: list[str]) -> None:
        """After an erasure folded ``namespaces`` again (their texts erased): whatever else
        the store derives from them, made again (a server's tables)."""

    def fetch_checkpoint(self, have: int) -> None:
        """Before a checkpoint is loaded: bring a newer one than ``have`` (its seq) to
        :attr:`root` if there is one elsewhere (its manifest: each part is fetched when its
        namespace is first used, :meth:`fetch_part`)."""

    def fetch_part(self, name: str) -> bool:
        """Bring the checkpoint part file ``name`` to :attr:`root` if it is elsewhere; returns
        whether it was found."""

    def share_checkpoint(self, files: list[Path], seq: int, *, closing: bool, every: int
                         ) -> list[str]:
        """After the checkpoint of ``files`` (its manifest, then its parts; at ``seq``) was
        published, or at a close that published none (this host's): share it where other hosts
        find it, if this backend does (at close, or every so many events); returns notes."""

    def table_differences(
        self, caught_up: Callable[[], Projector]
    ) -> dict[str, tuple[int, int]]:
        """Tables the backend keeps apart from the state, against the state ``caught_up()``
        returns: per table (rows missing, rows extra); empty when they agree."""

    def close(self) -> None:
        """Close the log, the key file and whatever else the backend holds."""
