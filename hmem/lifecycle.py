"""Lifecycle calls of :class:`~hmem.memory.Memory`: ``consolidate`` (rules in
:mod:`hmem.consolidate`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime

import duckdb

from eventlog.events import FactForgotten, FactRevised
from hmem.consolidate import SOURCE, ConsolidationReport, Proposal, propose
from hmem.errors import InvalidInput
from hmem.handle import StoreHandle
from hmem.store import Store
from hmem.transaction import transaction_time
from projections.state import Fact
from projections.timeutil import from_us, to_us

__all__ = ["LifecycleMethods"]

MAX_STALE_DAYS = 1_000_000  # ~2,700 years: beyond it a date is no longer a datetime


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
        """Propose what this namespace could do without: older duplicates of a current fact
        over a period the newer one covers (same normalised text, or a cosine of at least
        ``similarity`` between vectors of one model), facts a newer fact of their subject
        repeats with one word changed over an overlapping period, and episodic facts older than
        ``stale_days`` that no logged recall served since. Proposes only: nothing is written
        unless ``apply`` (every proposal) or ``accept`` (proposal ids from a report) asks; then
        each accepted proposal is one event, reason "consolidate: ...", source agent
        "consolidate": a forget, or, for a fact a newer one replaces from a later date, a
        correction that ends its valid period there. The same state proposes the same (ids
        included), so a second run appends nothing. See :mod:`hmem.consolidate`."""
        if isinstance(accept, str):
            raise InvalidInput("accept takes a list of proposal ids, e.g. ['duplicate:12:15']")
        wanted = list(accept)
        if not (isinstance(similarity, (int, float)) and 0 < similarity <= 1):
            raise InvalidInput(f"similarity must be a cosine in (0, 1], not {similarity!r}")
        if not (isinstance(stale_days, (int, float)) and math.isfinite(stale_days)
                and 0 <= stale_days <= MAX_STALE_DAYS):
            raise InvalidInput(
                f"stale_days must be a number of days from 0 to {MAX_STALE_DAYS:,}, "
                f"not {stale_days!r}"
            )
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
            facts = self.store.projector.state.facts
            positions = [txn.append(_event(p, facts[p.fact_id])) for p in chosen]
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


def _event(proposal: Proposal, fact: Fact) -> FactForgotten | FactRevised:
    """A proposal as its event: a forget, or a correction that keeps the fact's text and
    judgements and ends its valid period (``end_us``)."""
    reason = f"consolidate: {proposal.reason}"
    if proposal.end_us is None:
        return FactForgotten(fact_id=fact.id, reason=reason, source_agent=SOURCE)
    return FactRevised(
        fact_id=fact.id, text=fact.text, valid_to=from_us(proposal.end_us),
        confidence=fact.confidence, entities=fact.entities, reason=reason, source_agent=SOURCE,
        derived_from=fact.derived_from, extractor=fact.extractor,
        prompt_version=fact.prompt_version, category=fact.category, importance=fact.importance,
    )
