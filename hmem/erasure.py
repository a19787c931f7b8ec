"""Erasure: what an erase names, resolved to the events whose keys it destroys, and its receipt.

``Memory.erase`` (hmem/lifecycle.py) takes exactly one scope: a fact (its whole revision
chain), a subject (every chain that ever had it), an episode or a session's episodes, or a whole
namespace (its facts, episodes and logged recalls). Facts derived from an erased episode are
erased with it (their whole chains: a cascading retraction along ``derived_from``). Events
whose keys are already destroyed are left out. Logged recalls go with what they name: those that
returned an erased fact (their queries may hold its words), and for a subject those asked about
it. An erase with nothing left is :class:`~hmem.errors.AlreadyErased`, one that names nothing
:class:`~hmem.errors.NothingToErase`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

import msgspec
import numpy as np

from eventlog.events import FactsErased
from hmem.errors import AlreadyErased, InvalidInput, NothingToErase
from projections.event_columns import EventColumns
from projections.fold_state import FactColumns
from projections.records import subject_key
from replay.views import pretty_text

__all__ = ["ErasureReceipt", "Scope", "plan_erasure", "receipt_of"]


class Scope(msgspec.Struct, frozen=True):
    """What to erase: exactly one of its fields is set (see :func:`plan_erasure`)."""

    fact: int | None = None
    subject: str | None = None
    episode: int | None = None
    session: str | None = None
    namespace: str | None = None

    @property
    def kind(self) -> str:
        given = [name for name in self.__struct_fields__ if getattr(self, name) is not None]
        if len(given) != 1:
            raise InvalidInput(
                "erase takes exactly one of fact=ID, subject=NAME, episode=ID, session=ID or "
                f"namespace=NAME, not {given or 'none'}"
            )
        return "episode" if given[0] == "session" else given[0]


class ErasureReceipt(msgspec.Struct, frozen=True):
    """An erasure as its receipt event records it: what (``scope`` and the ids), when, by whom,
    how many facts and versions, and the log's chain hash just before it. Texts are never part
    of it.

    ``facts`` counts statements (revision chains: a fact with all its revisions is one);
    ``fact_ids`` lists every version erased (each revision is a version with an id of its
    own), so one fact revised twice is ``facts=1`` with three ids; :attr:`versions` is their
    count. ``print(receipt)`` shows the text the CLI prints."""

    seq: int
    erased_at: datetime
    namespace: str
    scope: str
    by: str | None
    reason: str | None
    facts: int
    fact_ids: tuple[int, ...]
    episode_ids: tuple[int, ...]
    recall_ids: tuple[int, ...]
    chain_head: str
    # exports the store had made of this namespace, written again without what was erased,
    # and those it could not (moved, deleted, or the write failed: why)
    exports: tuple[str, ...] = ()
    exports_missed: tuple[str, ...] = ()

    @property
    def versions(self) -> int:
        """How many fact versions were erased (``len(fact_ids)``)."""
        return len(self.fact_ids)

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # IPython / Jupyter show str()
        pretty_text(self, p, cycle)

    def lines(self) -> list[str]:
        by = f" by {self.by}" if self.by else ""
        why = f" ({self.reason})" if self.reason else ""
        what = f"{self.scope} in namespace {self.namespace!r}"
        if not self.seq:  # a dry run
            return [f"would erase {what}{why}:", self.lines_counts(),
                    "  nothing was erased (erase without dry run / hmem erase --yes to erase)"]
        return [
            f"erased [receipt #{self.seq}] {self.erased_at.isoformat()}{by}{why}: {what}",
            self.lines_counts(),
            f"  log chain before it: {self.chain_head}",
            *(f"  export written again: {p}" for p in self.exports),
            *(f"  export NOT written again: {p}" for p in self.exports_missed),
        ]

    def lines_counts(self) -> str:
        """The counts, each saying what it counts: facts are revision chains, each of one or
        more versions (the ids listed)."""
        ids = ", ".join(f"#{i}" for i in self.fact_ids[:20]) + (
            " ..." if len(self.fact_ids) > 20 else "")
        facts = (f"{self.facts} fact(s) (revision chains) in {self.versions} fact version(s)"
                 + (f" {ids}" if ids else ""))
        return (f"  {facts}; {len(self.episode_ids)} episode(s); "
                f"{len(self.recall_ids)} logged recall(s)")


def receipt_of(ev: FactsErased, chains: int) -> ErasureReceipt:
    """The receipt a logged ``FactsErased`` event is (``chains``: how many statements)."""
    return ErasureReceipt(
        ev.seq, ev.tx_at, ev.namespace, ev.scope, ev.source_agent, ev.reason, chains,
        ev.fact_ids, ev.episode_ids, ev.recall_ids, ev.chain_head,
    )


def plan_erasure(
    cols: FactColumns,
    events: EventColumns,
    namespace: str,
    scope: Scope,
    erased: Callable[[int], int | None],
    earlier: Callable[[str], int | None],
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], int]:
    """(fact version ids, episode ids, recall ids, chains) to erase for ``scope`` in
    ``namespace``; ``erased(seq)`` is the receipt that already erased ``seq``, or None;
    ``earlier(subject)`` the receipt of an earlier erasure of this subject, or None."""
    kind = scope.kind
    facts: set[int] = set()
    episodes: set[int] = set()
    recalls: list[int] = []
    if kind == "fact":
        cols.lookup(_id(scope.fact, "fact"), namespace)  # FactNotFound names it
        facts.add(int(scope.fact))  # type: ignore[arg-type]
    elif kind == "subject":
        facts.update(_subject_ids(cols, namespace, scope.subject))  # type: ignore[arg-type]
        want = subject_key(scope.subject)  # type: ignore[arg-type]
        recalls = [r.seq for r in events.recalls_in(namespace)  # recalls asked about it
                   if r.subject is not None and subject_key(r.subject) == want]
        if not facts:
            done = earlier(scope.subject)  # type: ignore[arg-type]
            if done is not None:
                raise AlreadyErased(f"subject {scope.subject!r} was erased before (receipt "
                                    f"#{done}); nothing more to erase")
            raise NothingToErase(f"no fact in namespace {namespace!r} has subject "
                                 f"{scope.subject!r}; nothing was erased")
    elif kind == "episode":
        episodes.update(_episode_ids(cols, namespace, scope))
    else:
        if scope.namespace != namespace:
            raise InvalidInput(
                f"erase(namespace={scope.namespace!r}) from a view of namespace {namespace!r}: "
                f"open a view of the namespace to erase (in_namespace) and name it again"
            )
        facts.update(cols.ids_in(namespace).tolist())
        episodes.update(e.seq for e in cols.episodes_in(namespace))
        recalls = [r.seq for r in events.recalls_in(namespace)]
        if not facts and not episodes and not recalls:
            raise NothingToErase(f"namespace {namespace!r} holds nothing; nothing was erased")
    facts.update(_derived_from(cols, namespace, episodes))
    versions = _chains(cols, facts)
    recalls = sorted({*recalls, *(r.seq for r in events.recalls_in(namespace)  # that served
                                  if not versions.isdisjoint(r.hits))})
    heads = {v for v in versions if cols.fact(v).superseded_by is None}
    fact_ids, episode_ids, recall_ids = (
        tuple(sorted(s for s in ids if erased(s) is None))
        for ids in (versions, episodes, recalls)
    )
    if not (fact_ids or episode_ids or recall_ids):
        receipts = sorted({erased(s) or 0 for s in (*versions, *episodes, *recalls)})
        raise AlreadyErased(
            f"everything this erase names was erased before (receipt "
            f"{', '.join(f'#{seq}' for seq in receipts)}); nothing more to erase"
        )
    return fact_ids, episode_ids, recall_ids, len(heads)


def _id(value: object, what: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InvalidInput(f"{what} must be a positive integer id, not {value!r}")
    return value


def _subject_ids(cols: FactColumns, namespace: str, subject: str) -> list[int]:
    if not isinstance(subject, str) or not subject.strip():
        raise InvalidInput(f"subject must be a non-empty string, not {subject!r}")
    want = subject_key(subject)
    codes = [c for c, name in enumerate(cols.subjects.values) if subject_key(name) == want]
    slots = cols.namespace_slots(namespace)
    mine = slots[np.isin(cols.table.subject[slots], codes)]
    return cols.table.ids[mine].tolist()  # type: ignore[no-any-return]


def _episode_ids(cols: FactColumns, namespace: str, scope: Scope) -> list[int]:
    if scope.episode is not None:
        seq = _id(scope.episode, "episode")
        episode = cols.episodes.get(seq)
        if episode is None or episode.namespace != namespace:
            raise NothingToErase(f"no episode {seq} in namespace {namespace!r}; nothing was "
                                 f"erased (episodes: Memory.episodes())")
        return [seq]
    if not isinstance(scope.session, str) or not scope.session:
        raise InvalidInput(f"session must be a non-empty string, not {scope.session!r}")
    got = [e.seq for e in cols.episodes_in(namespace, scope.session)]
    if not got:
        raise NothingToErase(f"no session {scope.session!r} in namespace {namespace!r}; "
                             f"nothing was erased")
    return got


def _derived_from(cols: FactColumns, namespace: str, episodes: set[int]) -> list[int]:
    """Facts of the namespace derived from any of ``episodes``."""
    if not episodes:
        return []
    slots = cols.namespace_slots(namespace)
    runs = cols.derived.runs(cols.table.derived_end, slots)
    return [int(cols.table.ids[s]) for s, run in zip(slots.tolist(), runs, strict=True)
            if not episodes.isdisjoint(run)]


def _chains(cols: FactColumns, ids: Iterable[int]) -> set[int]:
    """Every version of the revision chains of ``ids``."""
    out: set[int] = set()
    for fid in ids:
        todo = [fid]
        while todo:
            v = todo.pop()
            if v in out:
                continue
            out.add(v)
            fact = cols.fact(v)
            todo.extend(x for x in (fact.supersedes, fact.superseded_by) if x is not None)
    return out
