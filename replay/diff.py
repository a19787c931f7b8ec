"""diff(t1, t2): what was added, revised, forgotten and erased by events with t1 < seq <= t2."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import duckdb
import numpy as np

from projections.fact_columns import FactColumns
from projections.timeutil import from_us
from replay.views import Diff, Revision, fact_view

__all__ = ["diff"]


def diff(
    con: duckdb.DuckDBPyConnection,
    state: FactColumns,
    namespace: str,
    since: int,
    until: int,
    tx_times: Sequence[int],
) -> Diff:
    """Fact views show each fact as it stands now (its versions say what happened when)."""
    rows = con.execute(
        "SELECT type, fact_id, target_id FROM events WHERE namespace = ? AND seq > ? "
        "AND seq <= ? AND type IN ('remembered', 'revised', 'forgotten', 'erased') ORDER BY seq",
        [namespace, since, until],
    ).fetchall()
    added, revised, forgotten, erased = [], [], [], []
    for kind, fact_id, target_id in rows:
        if kind == "erased":  # the facts this receipt ended (fact_id: the receipt's seq)
            slots = np.flatnonzero(state.table.forgotten_seq[: state.n] == fact_id)
            erased += [fact_view(state.fact_at(int(s))) for s in slots]
            continue
        view = fact_view(state.facts[fact_id])
        if kind == "remembered":
            added.append(view)
        elif kind == "revised":
            assert view.revision is not None  # a revised fact always says how it replaced
            revised.append(Revision(fact_view(state.facts[target_id]), view, view.revision))
        else:
            forgotten.append(view)
    def tx(seq: int) -> datetime | None:
        """When this namespace last changed at or before ``seq`` (another namespace's
        events are not its to date)."""
        [(own,)] = con.execute(
            "SELECT max(seq) FROM events WHERE namespace = ? AND seq <= ?", [namespace, seq]
        ).fetchall()
        return None if own is None else from_us(tx_times[own - 1])

    return Diff(since, until, tx(since), tx(until), tuple(added), tuple(revised), tuple(forgotten),
                tuple(erased))
