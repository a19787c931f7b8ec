"""why(id): how a fact came to be believed: its chain of versions, the events, the turns."""

from __future__ import annotations

import duckdb

from eventlog.log import EventLog
from projections.fact_columns import FactColumns
from projections.timeutil import from_us
from replay.views import SeenBy, Why, episode_view, fact_view

__all__ = ["why"]


def why(
    con: duckdb.DuckDBPyConnection, state: FactColumns, log: EventLog, namespace: str, fact_id: int
) -> Why:
    """The fact, its whole revision chain (oldest first), every event that touched the chain
    and, for extracted facts, the turns it was derived from."""
    fact = state.lookup(fact_id, namespace)
    chain = [state.facts[state.head_of(fact.id)]]
    while chain[0].supersedes is not None:
        chain.insert(0, state.facts[chain[0].supersedes])
    ids = sorted(f.id for f in chain)
    seqs = [
        r[0]
        for r in con.execute(
            "SELECT seq FROM events WHERE namespace = ? AND fact_id IN "
            "(SELECT unnest(?::BIGINT[])) ORDER BY seq",
            [namespace, ids],
        ).fetchall()
    ]
    receipts = [s for (s,) in con.execute(  # erasures that name a version of the chain
        "SELECT seq FROM events WHERE namespace = ? AND type = 'erased'", [namespace]
    ).fetchall()]
    seqs += [s for s in receipts if set(getattr(log.get(s), "fact_ids", ())) & set(ids)]
    events = tuple(log.get(s) for s in sorted(seqs))
    turns = sorted({s for f in chain for s in f.derived_from})
    episodes = tuple(episode_view(state.episodes[s]) for s in turns)
    seen_by = tuple(
        SeenBy(r[0], from_us(r[1]), *r[2:])
        for r in con.execute(
            "SELECT r.seq, epoch_us(r.served_at), h.fact_id, h.rank, r.query, r.source_agent, "
            "r.source_ref FROM recall_hits h JOIN recalls r USING (seq) "
            "WHERE h.namespace = ? AND h.fact_id IN (SELECT unnest(?::BIGINT[])) "
            "ORDER BY r.seq, h.rank",
            [namespace, ids],
        ).fetchall()
    )
    return Why(fact_view(fact), tuple(fact_view(f) for f in chain), events, episodes, seen_by)
