"""The store's checkpoint: the one persisted form of its derived state, its writer and its loader.

Every process that opens a store loads the last checkpoint (projections/checkpoint.py) when it
was published from this log, and folds only the log's tail after it; without one (a new store,
another store's, a damaged one) it replays the log, with a note. The load reads the manifest
only: each namespace's part is read when the namespace is first used (:meth:`Checkpoints.loader`),
with its events of the log after the checkpoint. A part that cannot be used then (replaced by a
newer publish, damaged, older than an erasure since) is taken from the newest checkpoint if it
can be, else the namespace's events are replayed from the log, with a note. The writer (the lifetime
writer; a shared writer under the log's writer lock) publishes a new one when the tail reaches
``every`` events or 1% of the log, and at close when the tail is at least :data:`CLOSE_SHARE`
of the log (a smaller one costs the next open less to fold than a large namespace's part costs
to write again); a backend that shares checkpoints with other hosts gets each one published,
and at a close that publishes none the one this host holds, if the backend's is older
(hmem/storage/backend.py).

A publish writes the parts of the namespaces with events since the last one and every event's
tx time, so it costs time in proportion to what changed: a writer spends at most :data:`SHARE`
of its time publishing (a bulk load writes faster than it could publish every 1%; the tail an
open folds is then longer, and closing publishes it unless it is small). A shared writer
publishes under the log's writer lock, which the other writers wait for: its publish goes in
steps that hold the lock for at most :data:`STEP_SHARE` of their wait each, the parts of one
step kept for the next (see :meth:`Checkpoints.publish`).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from functools import partial
from pathlib import Path

from eventlog.events import Event, FactRemembered, FactRevised, FactsErased
from eventlog.protocol import Log
from eventlog.sealing import blanked, check_opened, key_owner
from hmem.storage.backend import Backend
from hmem.storage.keys import checkpoint_key
from projections import checkpoint
from projections.checkpoint import CHECKPOINT_FILE, Part
from projections.errors import DamagedProjection
from projections.part_recovery import recover_from_log
from projections.projector import Loaded, Loader, Projector, Space
from projections.timeutil import to_us
from projections.tx_times import Recover

__all__ = ["CHECKPOINT_FILE", "MAX_STEPS", "SHARE", "STEP_SHARE", "Checkpoints"]

SHARE = 0.1  # at most this share of a writer's time goes to publishing checkpoints
# a close publishes a tail of at least this share of the log: a smaller one is cheaper for the
# next open to fold than a large namespace's part is to write again (one fact after a 1M-fact
# part: 2.6 s and 1 GB at the close of every CLI write)
CLOSE_SHARE = 1 / 256
_ATTEMPTS = 3  # reads of a checkpoint that other writers keep replacing
# a publish in steps holds the writer lock about this share of the log's lock_wait a step (the
# time another writer waits for it): 300 namespaces' parts take 10-15 s, past the default 10 s
STEP_SHARE = 0.2
MAX_STEPS = 20  # steps after which a publish is finished in one (writers keep changing parts)


class Checkpoints:
    """The checkpoint of the store on ``backend`` (see the module docstring)."""

    def __init__(self, backend: Backend, *, every: int, notes: list[str]) -> None:
        self.backend = backend
        self.every = every
        self.path: Path = backend.root / CHECKPOINT_FILE
        self.seq = 0  # the seq of the checkpoint published from this log (0: none)
        self.notes = notes  # the store's: what loading or publishing found
        self.clock = time.monotonic  # seconds, for the share of time publishing takes
        self._spent = 0.0  # how long the last publish (or step of one) took, and when it ended
        self._ended = 0.0
        self._written: dict[str, Part] = {}  # parts of a publish not finished, by namespace
        self._written_under = 0  # the key file's erasure record they were written under
        self._steps = 0  # calls of that publish so far

    def load(self, log: Log) -> Projector:
        """The state at the last checkpoint published from ``log``, or an empty one (the log
        is then replayed) with a note saying why none was used."""
        have = checkpoint.read_stamp(self.path)
        self.backend.fetch_checkpoint(have[0] if have else 0)  # a newer one from elsewhere
        self.seq = 0
        read = self._read(log, lazy=True)
        if not isinstance(read, Projector):
            if read is not None:
                self.notes.append(f"{read}; replayed the log")
            return Projector()
        self.seq = read.last_seq
        read.loader = self.loader(log, read.last_seq, self.seal(log).erased_through)
        read.tx_times.recover = self._times_from(log)
        return read

    def _times_from(self, log: Log) -> Recover:
        """What reads the tx times of a run of seqs from ``log`` when the checkpoint's block
        of them fails its digest (checked when first read, not at open: a process that never
        travels in time by a time reads none of them)."""

        def recover(start: int, stop: int) -> list[int]:
            self.notes.append(f"the checkpoint's tx times of seqs {start + 1}-{stop} failed "
                              f"their digest; read them from the log")
            return [to_us(ev.tx_at) for ev in log.read_raw(start + 1, stop)]

        return recover

    def loader(self, log: Log, opened: int, erased_through: int) -> Loader:
        """What loads a namespace deferred by the checkpoint at seq ``opened`` (written under
        the erasure record ``erased_through``) into a projector at a later seq: see the module
        docstring."""

        def load(namespace: str, part: Part, upto: int) -> Space:
            tail = _events_of(log, namespace, opened, upto)
            if any(isinstance(ev, FactsErased) for ev in tail):
                self.notes.append(f"namespace {namespace!r} was erased in since the checkpoint; "
                                  f"replayed its events")
                return self.replayed(log, namespace, upto)
            base, loaded = self._part(log, namespace, part, upto, opened, erased_through)
            if base != opened:
                tail = _events_of(log, namespace, base, upto)
            return _folded(Space(loaded), log, tail)

        return load

    def _part(self, log: Log, namespace: str, part: Part, upto: int, opened: int,
              erased_through: int) -> tuple[int, Loaded | None]:
        """(the seq through which it holds the namespace's events, the state) of the best part
        for ``namespace`` at seq ``upto``: the one the projector was opened with, else the
        newest checkpoint's; (0, None) when neither can be used (a note says why)."""
        why = "its checkpoint was replaced by an erasure since"
        try:
            seal = self.seal(log)
            if seal.erased_through == erased_through:
                try:
                    return opened, self._read_part(log, part)
                except checkpoint.Refused as e:
                    why = str(e)
            stamp = checkpoint.read_stamp(self.path)
            if stamp is not None and checkpoint.from_log(stamp, log.last_seq, log.chain_at):
                seq, parts = checkpoint.authentic_parts(self.path, stamp, seal)
                newest = parts.get(namespace)
                if newest is not None and newest.seq <= upto:
                    return min(seq, upto), self._read_part(log, newest)
        except checkpoint.Refused as e:
            why = str(e)
        self.notes.append(f"the checkpoint's part of namespace {namespace!r} not used: {why}; "
                          f"replayed its events")
        return 0, None

    def examined(self, log: Log) -> Projector | str | None:
        """The state the checkpoint on disk holds (every part read) when it would be used by
        an open of ``log`` now; else why not (None: there is none)."""
        return self._read(log, lazy=False)

    def _read(self, log: Log, *, lazy: bool) -> Projector | str | None:
        """The checkpoint on disk when an open of ``log`` would use it; else why not (None:
        there is none). A checkpoint replaced while it was read is read again."""
        for attempt in range(_ATTEMPTS):
            stamp = checkpoint.read_stamp(self.path)
            if stamp is None:
                if self.path.exists():
                    return f"checkpoint {self.path} is unreadable or of another layout"
                return None
            if not checkpoint.from_log(stamp, log.last_seq, log.chain_at):
                return f"checkpoint (seq {stamp[0]}) was published from a different log"
            try:
                return checkpoint.load(self.path, stamp, self.seal(log), lazy=lazy,
                                       fetch=self._fetch)
            except checkpoint.Refused as e:
                if attempt + 1 < _ATTEMPTS and checkpoint.read_stamp(self.path) != stamp:
                    continue  # a writer published a new one meanwhile (and removed old parts)
                return f"checkpoint {self.path} not used: {e}"
        return None

    def _read_part(self, log: Log, part: Part) -> Loaded:
        """The part's state, its file fetched first if this host does not have it; a block of
        its texts or tokens that fails its digest when read is made again from ``log``."""
        self._fetch(part.file)
        loaded = checkpoint.read_part(self.path, part)
        recover_from_log(loaded[0], partial(_fact_text, log), self.notes.append)
        return loaded

    def _fetch(self, name: str) -> None:
        """Fetch the checkpoint's file ``name`` (a part, the tx times) if this host does not
        have it (where the backend shares checkpoints)."""
        if not (self.path.parent / name).exists():
            self.backend.fetch_part(name)

    @staticmethod
    def seal(log: Log) -> checkpoint.Seal:
        """What the store's checkpoints are written and checked with: a MAC key derived from
        the key file of a sealed store (none for a store in the clear), and the key file's
        erasure record."""
        sealer = log.sealer
        if sealer is None:
            return checkpoint.Seal(None)
        keys = sealer.keys
        key = checkpoint_key(keys)
        if key is None:
            raise checkpoint.Refused(
                "the key file has no secret yet (it was made by an earlier hmem): open the "
                "store as its writer once"
            )
        return checkpoint.Seal(key, keys.erasure_record())

    def find(self, log: Log) -> None:
        """Note the seq of the checkpoint on disk if it is from this log (another writer of a
        shared store may have published a newer one)."""
        stamp = checkpoint.read_stamp(self.path)
        seq, self.seq = self.seq, 0
        if stamp is not None and checkpoint.from_log(stamp, log.last_seq, log.chain_at):
            self.seq = stamp[0]
        if self.seq != seq:  # a publish of ours not finished is another one from here on
            self._steps = 0

    def due(self, last_seq: int, *, closing: bool = False) -> bool:
        """Whether a writer at ``last_seq`` publishes now: at close, once the tail is
        :data:`CLOSE_SHARE` of the log; else once it is ``every`` events or 1% of the log and
        publishing has not had its share of the time since the last one."""
        tail = last_seq - self.seq
        if tail <= 0 or closing:
            return tail > 0 and tail >= last_seq * CLOSE_SHARE
        return tail >= max(self.every, last_seq // 100) and (
            self.clock() - self._ended >= self._spent * (1 - SHARE) / SHARE
        )

    def publish(self, projector: Projector, log: Log, *, closing: bool = False,
                scrubbed: bool = False, step: bool = False) -> int:
        """Save ``projector``'s state as the checkpoint (the caller holds the log's writer
        lock) and share it if the backend does; returns its seq. A failure (a full disk, say)
        is a note, not an error: the next open folds a longer tail of the log. While an
        erasure is under way (begun, not finished: a state may hold what its receipt names)
        only the erasure's own publish (``scrubbed``) is made.

        ``step``: hold the lock for about :data:`STEP_SHARE` of the log's ``lock_wait`` (other
        writers wait that long for it at most): the parts written by then are kept for the
        next call, which goes on from them (the checkpoint's seq is unchanged until a call
        writes the manifest). After :data:`MAX_STEPS` calls without one, a call finishes it;
        the caller finishes it at close (a process that writes once would never reach a next
        step)."""
        seq = projector.last_seq
        if not seq:  # an empty log: nothing to save (an open of it replays nothing)
            return 0
        if not scrubbed and log.sealer is not None and log.sealer.keys.erasing_now():
            self.notes.append("checkpoint not published: an erasure is under way (the writer "
                              "that finishes it publishes one)")
            return self.seq
        started = self.clock()
        try:
            at = log.position(seq)
            seal = self.seal(log)
            if self._written_under != seal.erased_through:  # parts made before an erasure
                self._written, self._written_under, self._steps = {}, seal.erased_through, 0
            until = started + STEP_SHARE * log.lock_wait
            parts = checkpoint.save(
                self.path, projector, (seq, log.chain_at(seq).hex()), seal,
                None if at is None else (*at, log.chain_at(seq - 1).hex()),
                written=self._written,
                stop=(lambda: self.clock() >= until) if step and self._steps < MAX_STEPS else None)
        except OSError as e:
            self.notes.append(f"checkpoint not published ({e}); the next open replays more of "
                              f"the log")
            return self.seq
        if parts is None:  # stopped: the next call goes on from the parts written
            self._ended = self.clock()
            self._spent = self._ended - started
            self._steps += 1
            return self.seq
        self._written, self._steps = {}, 0
        projector.rebase(parts, self.loader(log, seq, seal.erased_through))
        self.seq = seq
        self.notes += self.backend.share_checkpoint(
            [self.path, *checkpoint.part_files(self.path)], seq, closing=closing, every=self.every)
        self._ended = self.clock()
        self._spent = self._ended - started
        return seq

    def share_held(self, log: Log) -> None:
        """At a close that publishes nothing: share the checkpoint this host holds where the
        backend shares them, if the backend's is older (a server's copy is refreshed at every
        close, not only when the log has grown by a tenth)."""
        stamp = checkpoint.read_stamp(self.path)
        if stamp is not None and stamp[0] <= log.last_seq:
            self.notes += self.backend.share_checkpoint(
                [self.path, *checkpoint.part_files(self.path)], stamp[0], closing=True,
                every=self.every)

    def remove(self, namespaces: list[str] | None = None) -> None:
        """Delete the checkpoint and what a crash left of one being written; with
        ``namespaces``, the manifest and those namespaces' parts only (the other parts stay
        for the next publish to name again)."""
        if namespaces is None:
            doomed = list(self.path.parent.glob(CHECKPOINT_FILE + "*"))
        else:
            doomed = [self.path, *(p for ns in namespaces
                                   for p in checkpoint.part_files(self.path, ns))]
        for path in doomed:
            path.unlink(missing_ok=True)
        self.seq = 0

    def drop_parts(self, namespaces: list[str]) -> None:
        """Delete this host's checkpoint parts of ``namespaces`` (the manifest stays: a part it
        names that is gone is replayed when its namespace is first used)."""
        for path in (p for ns in namespaces for p in checkpoint.part_files(self.path, ns)):
            path.unlink(missing_ok=True)

    @staticmethod
    def replayed(log: Log, namespace: str, upto: int, seqs: Sequence[int] | None = None
                 ) -> Space:
        """The namespace's state at ``upto``, its events folded from the log's first: read
        by their ``seqs`` when the caller knows them (a loaded state's, through ``upto``:
        the other namespaces' events are not read), else found by reading the whole log."""
        if seqs is not None:
            try:
                events = list(log.read_raw_seqs([s for s in seqs if s <= upto]))
            except (IndexError, KeyError):  # a seq the log does not hold: not the state's
                events = []
            if events and all(ev.namespace == namespace for ev in events):
                return _folded(Space(), log, events)
        return _folded(Space(), log, _events_of(log, namespace, 0, upto))


def _events_of(log: Log, namespace: str, after: int, upto: int) -> list[Event]:
    """The namespace's events of the log with ``after < seq <= upto``, as stored (only the
    namespace's own are opened, by :func:`_folded`)."""
    return [ev for ev in log.read_raw(after + 1, upto) if ev.namespace == namespace]


def _folded(space: Space, log: Log, events: list[Event]) -> Space:
    """``space`` with ``events`` (of its namespace, as stored) opened and folded. An event an
    erasure receipt among them names is folded as erased whether its key is destroyed yet or
    not (another process's erasure destroys the keys after logging its receipt)."""
    named = {seq for ev in events if isinstance(ev, FactsErased) for seq in ev.named}
    sealer = log.sealer
    opened = []
    for ev in events:
        if key_owner(ev) in named:
            opened.append(blanked(ev))
            continue
        if sealer is not None:
            ev = sealer.open(ev)
            check_opened(ev)
        opened.append(ev)
    space.fold(opened)
    return space


def _fact_text(log: Log, seq: int) -> str:
    """The text of the fact event ``seq`` made, read from ``log``."""
    ev = log.get(seq)
    if not isinstance(ev, (FactRemembered, FactRevised)):
        raise DamagedProjection(f"the checkpoint names event {seq} as a fact's, which it is not")
    return ev.text
