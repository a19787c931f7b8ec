"""The read calls of :class:`~hmem.memory.Memory`: recall, provenance, time travel, counts and
SQL. Each reads one consistent state under :meth:`~hmem.handle.StoreHandle.reading`."""

from __future__ import annotations

import os
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import Any

import duckdb

from eventlog.events import EVENT_TAGS
from hmem.args import fact_id, name_arg, seq_arg, text_arg
from hmem.errors import InvalidInput, InvalidTime
from hmem.handle import StoreHandle, TxPoint
from hmem.notebook.export import note_export, write_private
from hmem.notebook.sql import NamespaceCopy, check_read_only, run_query
from hmem.recall.logged import LoggedRecall, RecallReplay, recall_view, replay_recall, served_event
from hmem.recall.ranking import rank
from hmem.recall.request import RecallRequest, RecallResult, resolve
from hmem.storage.transaction import Transaction, transaction_time
from hmem.time.arguments import parse_when_opt
from hmem.time.iso import TimeLike
from hmem.views import Belief, Diff, EpisodeView, FactView, Stats, Why, episode_view, fact_view
from projections.checks import MAX_TEXT_CHARS
from projections.records import subject_key
from projections.timeutil import from_us, from_us_opt, to_us
from replay import as_of as beliefs_as_of
from replay import diff as diff_between
from replay import snapshot_query
from replay import why as why_of

__all__ = ["ReadMethods"]


class ReadMethods(StoreHandle):
    """Reads: recall, get, why, history, episodes, as_of, snapshot, diff, stats, sql, events,
    recalls, replay_recall."""

    def recall(
        self,
        query: str,
        *,
        limit: int | None = None,
        max_tokens: int | None = None,
        as_of: TxPoint | None = None,
        valid_at: TimeLike | None = None,
        subject: str | None = None,
        reference_time: TimeLike | None = None,
        explain: bool = False,
        source_agent: str | None = None,
        source_ref: str | None = None,
    ) -> RecallResult:
        """The ``limit`` facts most relevant to ``query``, best first; with ``max_tokens``
        (~4 chars each, also ``RecallConfig.max_tokens``), only as many as fit that budget.

        By default: current beliefs only (forgotten and superseded facts are left out, but each
        hit shows the versions it replaced). ``as_of``: what was believed then. ``valid_at``:
        what was true in the world then, including versions later superseded by a world change.
        Time expressions in the query ("last summer", "in March 2023") favour facts valid then,
        read relative to ``reference_time`` (default: now). ``explain=True`` puts each signal's
        contribution on every hit.

        With recall logging on (``log_recalls``), the recall is appended to the log as a
        ``RecallServed`` event with ``source_agent`` (default: this Memory's) and
        ``source_ref`` (the caller's session / turn): see :meth:`recalls` and
        :meth:`replay_recall`.
        """
        config = self.recall_config
        request = RecallRequest.build(
            query, config, limit=limit, max_tokens=max_tokens, as_of=as_of, valid_at=valid_at,
            subject=subject, reference_time=reference_time, explain=explain,
            now=self.clock,
        )
        if source_ref is not None:
            source_ref = text_arg(source_ref, "source_ref")
        if source_agent is not None:
            source_agent = text_arg(source_agent, "source_agent")
        embedder = self.embedder
        with self.reading() as store:
            now = transaction_time(self.clock, store.log)
            resolved = resolve(store, self.namespace, request, embedder, now, config)
            result = rank(store.projector, self.namespace, config, resolved)
            if self.log_recalls:
                event = served_event(
                    resolved, request, config, result,
                    source_agent=source_agent or self.source_agent, source_ref=source_ref,
                )
                with Transaction(store, self.namespace, lambda: now, durable=False) as txn:
                    txn.append(event)
            return result

    def recalls(
        self,
        since: TxPoint | None = None,
        until: TxPoint | None = None,
        *,
        source_ref: str | None = None,
    ) -> list[LoggedRecall]:
        """The recalls logged in this namespace (``since < seq <= until``; each a time or a
        seq), oldest first; ``source_ref`` picks one caller's (e.g. a session's turn)."""
        if source_ref is not None:
            source_ref = text_arg(source_ref, "source_ref")
        with self.reading() as store:
            low = 0 if since is None else store.tx_seq(since, "since", self.clock)
            high = store.tx_seq_or_now(until, "until", self.clock)
            seqs = [
                r.seq for r in
                store.projector.space(self.namespace).events.recalls_in(self.namespace)
                if low < r.seq <= high and (source_ref is None or r.source_ref == source_ref)
            ]
            return [recall_view(store.log.get(s)) for s in seqs]  # type: ignore[arg-type]

    def replay_recall(self, seq: int) -> RecallReplay:
        """Re-run the recall logged at ``seq`` against the log as it was then (its own prefix),
        with its logged parameters, ranking knobs and query vector. ``same`` says whether it
        returns the same facts in the same order; if not, ``differences`` says how and both
        lists are shown. Costs a replay of the log up to ``seq``."""
        with self.reading() as store:
            return replay_recall(store.log, self.namespace, seq_arg(seq, "seq"))

    def get(self, fact_id: int) -> FactView:
        """One fact with its provenance and every version row."""
        fid = _fact_id(fact_id)
        with self.reading() as store:
            state = store.projector.space(self.namespace).state
            return fact_view(state.lookup(fid, self.namespace))

    def why(self, fact_id: int) -> Why:
        """How we came to believe this: source, the revision chain (oldest first), the events."""
        fid = _fact_id(fact_id)
        with self.reading() as store:
            p = store.projector.space(self.namespace)
            return why_of(p.state, p.events, store.log, self.namespace, fid)

    def episodes(self, session_id: str | None = None) -> list[EpisodeView]:
        """The raw conversation turns recorded in this namespace (of one session, if given),
        in the order they were recorded. Episodes are not facts: recall never returns them."""
        name_arg(session_id, "session_id")
        with self.reading() as store:
            state = store.projector.space(self.namespace).state
            return [episode_view(e) for e in state.episodes_in(self.namespace, session_id)]

    def history(self, subject: str) -> list[FactView]:
        """Every fact ever stored about ``subject`` (case-insensitive), oldest first."""
        key = subject_key(text_arg(subject, "subject"))
        with self.reading() as store:
            facts = store.projector.space(self.namespace).state.in_namespace(self.namespace)
            return [fact_view(f) for f in facts if f.subject_key == key]

    def as_of(self, tx: TxPoint | None = None, *, valid_at: TimeLike | None = None) -> list[Belief]:
        """Everything believed at transaction time ``tx`` (a time or a seq; default now),
        optionally only what was true at world time ``valid_at``. Includes superseded rows
        (flagged)."""
        valid = parse_when_opt(valid_at, "valid_at", self.clock)
        with self.reading() as store:
            seq = store.tx_seq_or_now(tx, "as_of", self.clock)
            return beliefs_as_of(
                store.projector.space(self.namespace).state, self.namespace, seq,
                None if valid is None else to_us(valid),
            )

    def beliefs(
        self, as_of: TxPoint | None = None, *, valid_at: TimeLike | None = None
    ) -> list[Belief]:
        """Every belief at a point, not only those matching a query: what was believed at
        ``as_of`` (a time or a seq; default now), of it what was true at ``valid_at`` if given.
        The same as :meth:`as_of`, named for the question an audit asks."""
        return self.as_of(as_of, valid_at=valid_at)

    def snapshot(
        self,
        as_of: TxPoint | None = None,
        *,
        valid_at: TimeLike | None = None,
        parquet: str | os.PathLike[str] | None = None,
    ) -> duckdb.DuckDBPyRelation:
        """The belief set at ``as_of`` (default now) as a DuckDB relation; with ``parquet``,
        also written to that file. Use ``.fetchall()``, ``.df()`` (pandas) or
        ``.to_arrow_table()`` (pyarrow) on the result."""
        valid = parse_when_opt(valid_at, "valid_at", self.clock)
        with self.reading() as store:
            seq = store.tx_seq_or_now(as_of, "as_of", self.clock)
            rel = snapshot_query(
                store.projector.space(self.namespace).state, self.namespace, seq,
                None if valid is None else to_us(valid),
            )
            if parquet is not None:
                try:
                    write_private(parquet, rel.write_parquet)  # the owner's eyes only
                except (duckdb.Error, OSError) as e:
                    raise InvalidInput(f"cannot write {parquet}: {e}") from e
                note_export(self, "snapshot", Path(parquet), as_of=seq,  # erase rewrites it
                            valid_at_us=None if valid is None else to_us(valid))
            return rel

    def diff(self, since: TxPoint, until: TxPoint | None = None) -> Diff:
        """What was added, revised and forgotten after ``since`` up to and including ``until``
        (default now). Each is a transaction time or a seq."""
        with self.reading() as store:
            lo = store.tx_seq(since, "since", self.clock)
            hi = store.tx_seq_or_now(until, "until", self.clock)
            if hi < lo:
                raise InvalidTime("until is before since; swap them")
            p = store.projector.space(self.namespace)
            return diff_between(p.state, p.events, self.namespace, lo, hi)

    def stats(self) -> Stats:
        """Counts for this namespace and the state of the log and projection."""
        with self.reading() as store:
            state = store.projector.space(self.namespace).state
            counts = state.counts(self.namespace)
            workers = [w for w in store.embed_workers if w.namespace == self.namespace]
            head = store.log.head()
            ns_events, first, last = store.projector.namespace_events(self.namespace)
            n_entities = state.entity_count(self.namespace)
            return Stats(
                path=store.shown,
                namespace=self.namespace,
                **counts,
                entities=n_entities,
                vectors=sum(v.namespace == self.namespace for v in state.vectors),
                namespace_events=ns_events,
                head_seq=head.seq,
                head_hash=head.hash,
                projection_seq=store.projector.last_seq,
                first_tx=from_us_opt(first),
                last_tx=from_us_opt(last),
                fsync=store.log.fsync_policy,
                read_only=store.read_only,
                embedding_backlog=sum(w.backlog for w in workers),
                embedding_error=next((str(e) for w in workers if (e := w.error)), None),
            )

    def sql(
        self, query: str, params: Any = None, *, timeout: float = 60.0, max_rows: int = 1_000_000
    ) -> duckdb.DuckDBPyRelation:
        """Read-only SQL over this namespace's tables (``facts``, ``fact_versions``,
        ``events``, ``entities``, ``postings``, ``vectors``, ``episodes``, ``recalls``,
        ``recall_hits`` and the view ``event_log``; see docs/audit.md). Runs on a private copy
        without file access: it can neither see other
        namespaces nor change the store nor read or write files (use ``hmem.notebook.export`` for
        Parquet). The query runs now: errors are raised here, a query running longer than
        ``timeout`` seconds (or interrupted with Ctrl-C) is stopped, and a result over
        ``max_rows`` rows is refused. Returns the result as a DuckDB relation of its own
        (unaffected by later writes): ``.fetchall()``, ``.fetchnumpy()``, and with pandas /
        polars / pyarrow installed ``.df()``, ``.pl()``, ``.to_arrow_table()``."""
        if isinstance(query, str) and len(query) > MAX_TEXT_CHARS:
            raise InvalidInput(f"SQL has {len(query):,} characters; the limit is "
                               f"{MAX_TEXT_CHARS:,}: shorten the query")
        check_read_only(query)
        for name, value in (("timeout", timeout), ("max_rows", max_rows)):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
                raise InvalidInput(f"{name} must be a positive number, not {value!r}")
        with self.reading() as store:
            copy = self.copies.get(self.namespace)
            if copy is not None and copy.erased_since(store.projector):
                copy.close()  # it holds what was erased since
                copy = None
            if copy is None:
                copy = self.copies[self.namespace] = NamespaceCopy(store.projector, self.namespace)
            else:  # only what changed since the copy's seq
                copy.refresh(store.projector)
        return run_query(copy, query, params, timeout=float(timeout), max_rows=int(max_rows))

    def events(
        self,
        since: TxPoint | None = None,
        until: TxPoint | None = None,
        *,
        types: Iterable[str] | None = None,
        subject: str | None = None,
    ) -> duckdb.DuckDBPyRelation:
        """This namespace's events (``since < seq <= until``; each a time or a seq) as a DuckDB
        relation with the fact's subject and text joined in (an episode's text for an episode),
        ordered by seq. ``types`` picks event types (remembered, revised, forgotten, embedding,
        episode, recall); ``subject`` is case-insensitive."""
        where: list[str] = ["true"]
        params: list[Any] = []
        with self.reading() as store:
            if since is not None:
                where.append("seq > ?")
                params.append(store.tx_seq(since, "since", self.clock))
            if until is not None:
                where.append("seq <= ?")
                params.append(store.tx_seq(until, "until", self.clock))
        if types is not None:
            kinds = [types] if isinstance(types, str) else list(types)
            unknown = set(kinds) - set(EVENT_TAGS)
            if unknown:
                raise InvalidInput(f"unknown event types {sorted(unknown)}; use {EVENT_TAGS}")
            where.append("list_contains(?, type)")
            params.append(kinds)
        if subject is not None:
            where.append("subject_key = ?")
            params.append(subject_key(text_arg(subject, "subject")))
        return self.sql(f"SELECT * FROM event_log WHERE {' AND '.join(where)} ORDER BY seq", params)

    @property
    def last_seq(self) -> int:
        """Seq of the newest event in the store (all namespaces)."""
        with self.reading() as store:
            return store.projector.last_seq

    def tx_time(self, seq: int) -> datetime:
        """The transaction time of an event."""
        seq = seq_arg(seq)
        with self.reading() as store:
            last = store.projector.last_seq
            if not 1 <= seq <= last or store.log.get(seq).namespace != self.namespace:
                raise InvalidInput(
                    f"seq {seq} is not an event of namespace {self.namespace!r}; its events are "
                    f"listed by `hmem log show` and Memory.events()"
                )
            return from_us(store.projector.tx_times[seq - 1])


_fact_id = fact_id  # the argument check, under a name the parameters do not shadow
