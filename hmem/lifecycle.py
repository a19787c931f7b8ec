"""Lifecycle calls of :class:`~hmem.memory.Memory`: ``consolidate`` (rules in
:mod:`hmem.consolidate`) and ``erase`` (:mod:`hmem.erasure`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import msgspec

from eventlog.events import FactForgotten, FactRevised, FactsErased
from hmem.args import name_arg
from hmem.consolidate import SOURCE, ConsolidationReport, Proposal, propose
from hmem.erasure import ErasureReceipt, Scope, plan_erasure, receipt_of
from hmem.errors import InvalidInput, ReadOnlyStore
from hmem.handle import StoreHandle
from hmem.notebook.export import rewrite_exports, rewrite_recorded
from hmem.storage.store import Store
from hmem.storage.transaction import transaction_time
from projections.checks import check_fields
from projections.records import Fact, subject_key
from projections.timeutil import from_us, to_us

__all__ = ["LifecycleMethods"]

MAX_STALE_DAYS = 1_000_000  # ~2,700 years: beyond it a date is no longer a datetime


class LifecycleMethods(StoreHandle):
    """Consolidation: proposals to forget what the memory could do without; erasure."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        store = self.store
        keys = None if store.read_only or store.log.sealer is None else store.log.sealer.keys
        if keys is not None and keys.exports_pending:  # an erasure's last step, cut short
            with store.lock:
                _, missed = rewrite_recorded(
                    lambda ns: StoreHandle(namespace=ns, store=store, embedder=None), store.root,
                    keys.derived_key("exports"),
                )
                keys.mark(exports_pending=False)
            store.notes.append(
                "the exports the store made were written again after an erasure a crash "
                "interrupted" + "".join(f"; NOT written again: {m}" for m in missed)
            )

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
        for i in wanted:
            name_arg(i, "a proposal id")
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
                more = f" and {len(unknown) - 10:,} more" if len(unknown) > 10 else ""
                raise InvalidInput(
                    f"no such proposal now: {unknown[:10]}{more} (run consolidate() for the "
                    f"current ids)"
                )
            chosen = report.proposals if apply else [by_id[i] for i in dict.fromkeys(wanted)]
            facts = self.store.projector.space(self.namespace).state.facts
            positions = [txn.append(_event(p, facts[p.fact_id])) for p in chosen]
            txn.commit()
            applied = tuple(txn.seq(position) for position in positions)
        return ConsolidationReport(report.namespace, report.seq, report.proposals, applied)

    def erase(
        self,
        *,
        fact: int | None = None,
        subject: str | None = None,
        episode: int | None = None,
        session: str | None = None,
        namespace: str | None = None,
        reason: str | None = None,
        by: str | None = None,
        dry_run: bool = False,
    ) -> ErasureReceipt:
        """Erase, for real, one of: ``fact`` (every version of its revision chain),
        ``subject`` (every chain that ever had it), ``episode`` or ``session`` (episodes, with
        the facts derived from them), or ``namespace`` (everything in it; name this view's
        namespace). Their texts, subjects, entities and vectors are removed from every file of
        the store: the keys that sealed them in the log are destroyed (the log's records and
        hash chain stay, so it still verifies), then the projection files are rebuilt from the
        log, and the exports the store made are written again. Appends a receipt (``why``,
        ``history`` and ``diff`` show it where the text was) and returns it.

        ``by`` names who erases (default: this Memory's source agent). ``dry_run`` returns what
        would be erased (a receipt with seq 0) and writes nothing. Needs the writer, and no
        reader open (:class:`~hmem.errors.ReadersOpen` names them). See README "Erasure" for
        what it guarantees and what it cannot."""
        for label, value in (("subject", subject), ("session", session),
                             ("namespace", namespace), ("reason", reason), ("by", by)):
            name_arg(value, label)
        scope = Scope(fact, subject, episode, session, namespace)
        scope.kind  # noqa: B018  (raises for no scope, or more than one)
        if not isinstance(dry_run, bool):
            raise InvalidInput(f"dry_run must be True or False, not {dry_run!r}")
        if self.read_only:
            raise ReadOnlyStore("erase needs the writer: open the store without read_only")
        self.flush()  # no embedding of a fact being erased is still on its way
        store = self.store
        keys = store.shredding.keys()
        with store.lock, store.backend.excluding_readers("an erasure"), store.log.writing():
            store.catch_up()  # a shared writer: what the others appended first
            store.shredding.finish_if_interrupted()  # an earlier erasure its writer left
            space = store.projector.space(self.namespace)
            events = space.events
            named = subject_key(subject) if isinstance(subject, str) else None
            digest = "" if named is None else keys.digest(named)
            # receipts logged before key files had a secret: keyed with the file's id
            digests = {digest, keys.id_digest(named)} if named is not None else set()

            def earlier(_: str) -> int | None:
                for seq in reversed(events.seqs_in(self.namespace, kinds=("erased",)).tolist()):
                    if getattr(store.log.get_raw(seq), "subject_digest", "") in digests:
                        return int(seq)
                return None

            fact_ids, episode_ids, recall_ids, chains = plan_erasure(
                space.state, events, self.namespace, scope, keys.receipt, earlier
            )
            receipt = FactsErased(
                namespace=self.namespace, scope=scope.kind, fact_ids=fact_ids,
                episode_ids=episode_ids, recall_ids=recall_ids, reason=reason,
                chain_head=str(store.log.head()), source_agent=by or self.source_agent,
                subject_digest=digest,
                tx_at=transaction_time(self.clock, store.log),
            )
            if dry_run:
                check_fields(receipt)
                return receipt_of(receipt, chains)
            store.shredding.begin()
            try:
                stamped = store.append(receipt)
            except BaseException:
                store.shredding.abandon()  # nothing was logged: nothing to finish
                raise
            # from now on this process reads what the receipt names as erased, even if
            # destroying the keys fails below (the next writer to take the lock finishes it)
            store.shredding.note_receipts([stamped])
            try:
                store.shredding.erased(stamped.seq)
            except BaseException:
                store.shredding.follow([self.namespace])
                raise
            self.copies.clear()
        done, missed = rewrite_exports(self)
        keys.mark(exports_pending=False)
        return msgspec.structs.replace(
            receipt_of(stamped, chains),  # type: ignore[arg-type]
            exports=tuple(done), exports_missed=tuple(missed),
        )

    def _report(
        self, store: Store, now: datetime, similarity: float, stale_days: float
    ) -> ConsolidationReport:
        return ConsolidationReport(self.namespace, store.projector.last_seq, propose(
            store.projector, self.namespace, now_us=to_us(now),
            served_us=self._served(store), similarity=float(similarity),
            stale_days=float(stale_days),
        ))

    def _served(self, store: Store) -> dict[int, int]:
        """Fact id -> when a logged recall last served it (microseconds)."""
        served: dict[int, int] = {}
        for r in store.projector.space(self.namespace).events.recalls_in(self.namespace):
            at = to_us(r.tx_at)
            for fid in r.hits:
                served[fid] = max(served.get(fid, at), at)
        return served


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
