"""diff(t1, t2): what was added, revised and forgotten by events with t1 < seq <= t2."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import duckdb

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
        "AND seq <= ? AND type IN ('remembered', 'revised', 'forgotten') ORDER BY seq",
        [namespace, since, until],
    ).fetchall()
    added, revised, forgotten = [], [], []
    for kind, fact_id, target_id in rows:
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

    return Diff(since, until, tx(since), tx(until), tuple(added), tuple(revised), tuple(forgotten))
