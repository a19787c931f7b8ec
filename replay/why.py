"""why(id): how a fact came to be believed: its chain of versions, the events, the turns."""

from __future__ import annotations

import numpy as np

from eventlog.protocol import Log
from projections.event_columns import EventColumns
from projections.fold_state import FactColumns
from replay.views import SeenBy, Why, episode_view, fact_view

__all__ = ["why"]


def why(state: FactColumns, events: EventColumns, log: Log, namespace: str, fact_id: int) -> Why:
    """The fact, its whole revision chain (oldest first), every event that touched the chain
    and, for extracted facts, the turns it was derived from."""
    fact = state.lookup(fact_id, namespace)
    chain = [state.facts[state.head_of(fact.id)]]
    while chain[0].supersedes is not None:
        chain.insert(0, state.facts[chain[0].supersedes])
    ids = sorted(f.id for f in chain)
    mine = events.seqs_in(namespace)
    about = mine[np.isin(events.column("fact")[events.rows(mine)], ids)].tolist()
    receipts = events.seqs_in(namespace, kinds=("erased",)).tolist()
    about += [s for s in receipts if set(getattr(log.get(s), "fact_ids", ())) & set(ids)]
    logged = tuple(log.get(s) for s in sorted(set(about)))
    turns = sorted({s for f in chain for s in f.derived_from})
    episodes = tuple(episode_view(state.episodes[s]) for s in turns)
    wanted = set(ids)
    seen_by = tuple(
        SeenBy(r.seq, r.tx_at, fid, rank, r.query, r.source_agent, r.source_ref)
        for r in events.recalls_in(namespace)
        for rank, fid in enumerate(r.hits, 1) if fid in wanted
    )
    return Why(fact_view(fact), tuple(fact_view(f) for f in chain), logged, episodes, seen_by)
