"""diff(t1, t2): what was added, revised, forgotten and erased by events with t1 < seq <= t2."""

from __future__ import annotations

from datetime import datetime

import numpy as np

from projections.event_columns import KIND_CODES, EventColumns
from projections.fold_state import FactColumns
from projections.timeutil import from_us
from replay.views import Diff, Revision, fact_view

__all__ = ["diff"]

_CHANGES = ("remembered", "revised", "forgotten", "erased")


def diff(state: FactColumns, events: EventColumns, namespace: str, since: int, until: int) -> Diff:
    """Fact views show each fact as it stands now (its versions say what happened when)."""
    seqs = events.seqs_in(namespace, since, until, kinds=_CHANGES)
    at = events.rows(seqs)
    kinds = events.column("kind")[at].tolist()
    facts = events.column("fact")[at].tolist()
    targets = events.column("target")[at].tolist()
    added, revised, forgotten, erased = [], [], [], []
    for kind, fact_id, target_id in zip(kinds, facts, targets, strict=True):
        if kind == KIND_CODES["erased"]:  # the facts this receipt ended (fact_id: its seq)
            slots = np.flatnonzero(state.table.forgotten_seq[: state.n] == fact_id)
            erased += [fact_view(state.fact_at(int(s))) for s in slots]
            continue
        view = fact_view(state.facts[fact_id])
        if kind == KIND_CODES["remembered"]:
            added.append(view)
        elif kind == KIND_CODES["revised"]:
            assert view.revision is not None  # a revised fact always says how it replaced
            revised.append(Revision(fact_view(state.facts[target_id]), view, view.revision))
        else:
            forgotten.append(view)

    def tx(seq: int) -> datetime | None:
        """When this namespace last changed at or before ``seq`` (another namespace's
        events are not its to date)."""
        own = events.seqs_in(namespace, 0, seq)
        return None if not len(own) else from_us(events.tx[events.row(int(own[-1]))])

    return Diff(since, until, tx(since), tx(until), tuple(added), tuple(revised), tuple(forgotten),
                tuple(erased))
