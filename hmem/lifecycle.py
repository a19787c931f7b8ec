"""Lifecycle calls of :class:`~hmem.memory.Memory`: ``consolidate`` (rules in
:mod:`hmem.consolidate`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime

import duckdb

from eventlog.events import FactForgotten
from hmem.consolidate import SOURCE, ConsolidationReport, propose
from hmem.errors import InvalidInput
from hmem.handle import StoreHandle
from hmem.store import Store
from hmem.transaction import transaction_time
from projections.timeutil import to_us

__all__ = ["LifecycleMethods"]


class LifecycleMethods(StoreHandle):
    """Consolidation: proposals to forget what the memory could do without."""

    def consolidate(
        self,
        *,
        apply: bool = False,
        accept: Iterable[str] = (),
        similarity: float = 0.95,
        stale_days: float = 90.0,
    ) -> ConsolidationReport:
        """Propose what this namespace could forget: older duplicates of a current fact (same
        normalised text, or a cosine of at least ``similarity`` between vectors of one model),
        facts a newer fact of their subject repeats with one word changed, and episodic facts
        older than ``stale_days`` that no logged recall served since. Proposes only: nothing is
        written unless ``apply`` (every proposal) or ``accept`` (proposal ids from a report)
        asks, and then each accepted proposal is one forget event, reason "consolidate: ...",
        source agent "consolidate". The same state proposes the same (ids included), so a second
        run appends nothing. See :mod:`hmem.consolidate` for the rules."""
        if isinstance(accept, str):
            raise InvalidInput("accept takes a list of proposal ids, e.g. ['duplicate:12:15']")
        wanted = list(accept)
        if not (isinstance(similarity, (int, float)) and 0 < similarity <= 1):
            raise InvalidInput(f"similarity must be a cosine in (0, 1], not {similarity!r}")
        if not (isinstance(stale_days, (int, float)) and math.isfinite(stale_days)
                and stale_days >= 0):
            raise InvalidInput(f"stale_days must be a number of days >= 0, not {stale_days!r}")
        if not apply and not wanted:  # a report: a reader may make it too
            with self.reading() as store:
                return self._report(store, transaction_time(self.clock, store.log),
                                    similarity, stale_days)
        with self.transaction() as txn:  # the store's lock: proposals and forgets in one step
            report = self._report(self.store, txn.time, similarity, stale_days)
            by_id = {p.id: p for p in report.proposals}
            unknown = [i for i in wanted if i not in by_id]
            if unknown:
                raise InvalidInput(
                    f"no such proposal now: {unknown} (run consolidate() for the current ids)"
                )
            chosen = report.proposals if apply else [by_id[i] for i in dict.fromkeys(wanted)]
            positions = [txn.append(FactForgotten(
                fact_id=p.fact_id, reason=f"consolidate: {p.reason}", source_agent=SOURCE,
            )) for p in chosen]
            txn.commit()
            applied = tuple(txn.seq(position) for position in positions)
        return ConsolidationReport(report.namespace, report.seq, report.proposals, applied)

    def _report(
        self, store: Store, now: datetime, similarity: float, stale_days: float
    ) -> ConsolidationReport:
        return ConsolidationReport(self.namespace, store.projector.last_seq, propose(
            store.projector, self.namespace, now_us=to_us(now),
            served_us=self._served(store.connection()), similarity=float(similarity),
            stale_days=float(stale_days),
        ))

    def _served(self, con: duckdb.DuckDBPyConnection) -> dict[int, int]:
        """Fact id -> when a logged recall last served it (microseconds)."""
        rows = con.execute(
            "SELECT h.fact_id, max(epoch_us(r.served_at)) FROM recall_hits h "
            "JOIN recalls r USING (seq) WHERE h.namespace = ? GROUP BY h.fact_id",
            [self.namespace],
        ).fetchall()
        return {int(fid): int(at) for fid, at in rows}
