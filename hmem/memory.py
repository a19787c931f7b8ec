"""The ``Memory`` facade: the library API over one store and one namespace."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb
import numpy as np

from eventlog.events import (
    EVENT_TAGS,
    EmbeddingRecorded,
    EventBase,
    FactForgotten,
    FactRemembered,
    FactRevised,
)
from eventlog.log import FsyncPolicy
from hmem.analytics import NamespaceCopy, check_read_only
from hmem.embedders import Embedder, check_output, resolve_embedder
from hmem.errors import (
    EmbedderError,
    EmbedderUnavailable,
    InvalidInput,
    InvalidTime,
    StoreClosed,
    shown,
)
from hmem.recall import RecallConfig, RecallResult, run_recall
from hmem.store import Store, default_root
from hmem.timeexpr import parse_time_expression
from hmem.timeparse import TimeLike, parse_time, parse_time_opt
from hmem.views import (
    Belief,
    Diff,
    EpisodeView,
    FactView,
    Stats,
    Why,
    episode_view,
    fact_view,
)
from projections.entities import fact_entities
from projections.projector import index_text
from projections.state import subject_key
from projections.timeutil import from_us, from_us_opt, to_us
from replay import as_of as _as_of
from replay import diff as _diff
from replay import seq_at, snapshot_query, verify_projection
from replay.rebuild import Progress
from replay.verify import ProjectionDiff

if TYPE_CHECKING:  # the LLM layer is optional and imported only when used
    from hmem.extract import AddResult, ExtractorSpec

__all__ = ["Memory", "Clock", "utc_now"]

Clock = Callable[[], datetime]
TxPoint = datetime | str | int  # a transaction time, or a seq


def utc_now() -> datetime:
    return datetime.now(timezone.utc)


class Memory:
    """What an agent believes, in one namespace of a store, with full history.

    ``Memory(path)`` opens (or creates) the store at ``path`` as its single writer;
    ``Memory()`` uses ``$HMEM_HOME`` or the XDG data dir. ``read_only=True`` never writes, never
    takes the writer lock and works beside a live writer in another process: every read first
    picks up what the writer has appended.

    Time-travel arguments are keyword-only: ``as_of`` is a transaction time (what we believed
    then; a datetime, ISO string or seq) and ``valid_at`` a world time (what was true then).
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        namespace: str = "default",
        read_only: bool = False,
        fsync: FsyncPolicy = "always",
        clock: Clock = utc_now,
        source_agent: str | None = None,
        recall_config: RecallConfig | None = None,
        embedder: Embedder | str | None = "auto",
        flush_every: int = 256,
        _store: Store | None = None,
        _lock: threading.RLock | None = None,
    ) -> None:
        _check_namespace(namespace)
        self.namespace = namespace
        self.clock = clock
        self._copies: dict[str, NamespaceCopy] = {}
        self._embedder_spec = embedder
        self._embedder_resolved = False
        self._embedder_obj: Embedder | None = None
        self._extractor: Any = None  # the default LLM extractor, built on first add()
        self.source_agent = source_agent
        self.recall_config = recall_config or RecallConfig()
        self._lock = _lock or threading.RLock()
        if _store is None:
            root = Path(path) if path is not None else default_root()
            _store = Store(root, read_only=read_only, fsync=fsync, flush_every=flush_every)
            self._owner = True
        else:
            self._owner = False
        self._store: Store | None = _store

    # ------------------------------------------------------------------ lifecycle

    @property
    def path(self) -> Path:
        return self._open().root

    @property
    def read_only(self) -> bool:
        return self._open().read_only

    @property
    def notes(self) -> list[str]:
        """What opening the store found and repaired (torn log tail, rebuilt projection)."""
        return list(self._open().notes)

    def in_namespace(self, namespace: str) -> Memory:
        """A view of the same open store in another namespace (shares the writer and embedder)."""
        return Memory(
            namespace=namespace, clock=self.clock, source_agent=self.source_agent,
            recall_config=self.recall_config, embedder=self.embedder, _store=self._open(),
            _lock=self._lock,
        )

    @property
    def embedder(self) -> Embedder | None:
        """The embedder new facts and queries are embedded with (resolved on first use)."""
        if not self._embedder_resolved:
            self._embedder_obj = resolve_embedder(self._embedder_spec)
            self._embedder_resolved = True
        return self._embedder_obj

    def close(self) -> None:
        """Write the projection, sync the log, release the writer lock. Idempotent."""
        with self._lock:
            for copy in self._copies.values():
                copy.close()
            self._copies.clear()
            if self._store is not None and self._owner:
                self._store.close()
            self._store = None

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _open(self) -> Store:
        if self._store is None:
            raise StoreClosed("this Memory is closed; open a new one")
        return self._store

    def _read(self) -> Store:
        store = self._open()
        if store.read_only:
            store.catch_up()
        return store

    # ------------------------------------------------------------------ writes

    def _now(self, store: Store) -> datetime:
        now = self.clock()
        if not isinstance(now, datetime) or now.tzinfo is None:
            raise InvalidTime("the clock must return an aware datetime (e.g. in UTC)")
        now = now.astimezone(timezone.utc)
        last = store.log.last_tx_at
        return now if now > last else last

    def _append(
        self, make: Callable[[datetime], EventBase], vector: np.ndarray | None = None
    ) -> int:
        """Append one event (and, atomically with it, the new fact's vector); returns its seq."""
        with self._lock:
            store = self._open()
            tx = self._now(store)
            events = [make(tx)]
            if vector is not None:
                events.append(self._embedding_event(tx, store.log.last_seq + 1, vector))
            return store.append_batch(events)[0].seq

    def _embedding_event(self, tx: datetime, fact_id: int, vector: np.ndarray) -> EmbeddingRecorded:
        embedder = self.embedder
        assert embedder is not None
        return EmbeddingRecorded(
            tx_at=tx, namespace=self.namespace, fact_id=fact_id, model=embedder.model,
            dims=embedder.dims, vector=np.asarray(vector, dtype="<f4").tobytes(),
            source_agent=self.source_agent,
        )

    def _embed(self, pairs: list[tuple[str, str]]) -> np.ndarray | None:
        """Vectors of (subject, text) pairs with the configured embedder, or None without one."""
        embedder = self.embedder
        if embedder is None or not pairs:
            return None
        texts = [index_text(subject, text) for subject, text in pairs]
        return check_output(embedder, texts, embedder.embed(texts))

    def _embed_one(self, subject: str, text: str) -> np.ndarray | None:
        if not isinstance(subject, str) or not isinstance(text, str) or not text.strip():
            return None  # validation reports it; never send junk to a model
        vectors = self._embed([(subject, text)])
        return None if vectors is None else vectors[0]

    def remember(
        self,
        subject: str,
        text: str,
        *,
        valid_from: TimeLike | None = None,
        valid_to: TimeLike | None = None,
        confidence: float = 1.0,
        entities: Iterable[str] = (),
        source_agent: str | None = None,
        source_ref: str | None = None,
    ) -> int:
        """Store a new belief about ``subject``; returns its id.

        ``valid_from`` (when it became true in the world) defaults to now; ``valid_to`` to
        "still true". Entities default to the proper nouns of ``text`` (plus the subject).
        """
        vf = parse_time_opt(valid_from, "valid_from")
        vt = parse_time_opt(valid_to, "valid_to")
        subject, text = _strip(subject, "subject"), _strip(text, "text")
        ents = fact_entities(subject, text, _entities(entities))
        vector = self._embed_one(subject, text)
        return self._append(
            lambda tx: FactRemembered(
                tx_at=tx, namespace=self.namespace, subject=subject, text=text,
                valid_from=vf, valid_to=vt, confidence=confidence, entities=ents,
                source_agent=source_agent or self.source_agent, source_ref=source_ref,
            ),
            vector,
        )

    def remember_many(self, facts: Iterable[dict[str, Any]]) -> list[int]:
        """Remember many facts as one write (one fsync; embeddings computed in one batch).

        Each item holds ``remember``'s arguments by name, e.g.
        ``{"subject": "maya", "text": "...", "valid_from": "2025-01-01"}``. All or nothing:
        one invalid item rejects the batch. Returns the new ids in order.
        """
        items = [dict(item) for item in facts]
        prepared = []
        for item in items:
            unknown = set(item) - _REMEMBER_ARGS
            if unknown or not {"subject", "text"} <= set(item):
                raise InvalidInput(
                    f"each item needs subject and text and may have {sorted(_REMEMBER_ARGS)}; "
                    f"got {sorted(item)}"
                )
            subject, text = _strip(item["subject"], "subject"), _strip(item["text"], "text")
            prepared.append((
                subject, text,
                parse_time_opt(item.get("valid_from"), "valid_from"),
                parse_time_opt(item.get("valid_to"), "valid_to"),
                fact_entities(subject, text, _entities(item.get("entities", ()))),
                item,
            ))
        vectors = self._embed([(p[0], p[1]) for p in prepared])
        with self._lock:
            store = self._open()
            tx = self._now(store)
            events: list[EventBase] = []
            ids = []
            for i, (subject, text, vf, vt, ents, item) in enumerate(prepared):
                fid = store.log.last_seq + len(events) + 1
                ids.append(fid)
                events.append(FactRemembered(
                    tx_at=tx, namespace=self.namespace, subject=subject, text=text,
                    valid_from=vf, valid_to=vt, confidence=item.get("confidence", 1.0),
                    entities=ents, source_agent=item.get("source_agent") or self.source_agent,
                    source_ref=item.get("source_ref"),
                ))
                if vectors is not None:
                    events.append(self._embedding_event(tx, fid, vectors[i]))
            store.append_batch(events)
            return ids

    def revise(
        self,
        fact_id: int,
        text: str,
        *,
        valid_from: TimeLike | None = None,
        valid_to: TimeLike | None = None,
        subject: str | None = None,
        confidence: float = 1.0,
        entities: Iterable[str] = (),
        reason: str | None = None,
        source_agent: str | None = None,
        source_ref: str | None = None,
    ) -> int:
        """Replace fact ``fact_id`` with a new version; returns the new id. Nothing is overwritten.

        With ``valid_from`` the world changed at that time: the old fact stays believed as true
        until then. Without it this is a correction: the old statement is no longer believed at
        all (``as_of`` earlier times still shows it). Only the newest version of a chain can be
        revised. ``source_agent`` defaults to the old fact's.
        """
        fid = _fact_id(fact_id)
        vf = parse_time_opt(valid_from, "valid_from")
        vt = parse_time_opt(valid_to, "valid_to")
        text = _strip(text, "text")
        subject = None if subject is None else _strip(subject, "subject")
        with self._lock:
            store = self._open()
            old = store.projector.state.lookup(fid, self.namespace)
            agent = source_agent or self.source_agent or old.source_agent
            ents = fact_entities(subject or old.subject, text, _entities(entities))
            vector = self._embed_one(subject or old.subject, text)
            return self._append(
                lambda tx: FactRevised(
                    tx_at=tx, namespace=self.namespace, fact_id=fid, text=text,
                    subject=subject, valid_from=vf,
                    valid_to=vt, confidence=confidence, entities=ents, reason=reason,
                    source_agent=agent, source_ref=source_ref,
                ),
                vector,
            )

    def forget(
        self,
        fact_id: int,
        *,
        reason: str | None = None,
        source_agent: str | None = None,
        source_ref: str | None = None,
    ) -> int:
        """Tombstone a fact: gone from recall from now on, still in history, why and as_of.

        Returns the seq of the tombstone event. Nothing is deleted.
        """
        fid = _fact_id(fact_id)
        return self._append(
            lambda tx: FactForgotten(
                tx_at=tx, namespace=self.namespace, fact_id=fid, reason=reason,
                source_agent=source_agent or self.source_agent, source_ref=source_ref,
            )
        )

    def record_embedding(self, fact_id: int, model: str, vector: Any) -> int:
        """Record a vector for a fact as an event (replay never recomputes it); returns its seq."""
        fid = _fact_id(fact_id)
        arr = np.asarray(vector, dtype="<f4")
        if arr.ndim != 1 or not len(arr) or not np.isfinite(arr).all():
            raise InvalidInput("vector must be a non-empty 1-D array of finite numbers")
        return self._append(
            lambda tx: EmbeddingRecorded(
                tx_at=tx, namespace=self.namespace, fact_id=fid, model=model,
                dims=len(arr), vector=arr.tobytes(), source_agent=self.source_agent,
            )
        )

    def add(
        self,
        messages: Iterable[dict[str, Any]],
        *,
        session_id: str,
        observed_at: TimeLike | None = None,
        namespace: str | None = None,
        extractor: ExtractorSpec = None,
        context_turns: int = 6,
        similar: int = 10,
        profile: str | None = None,
        source_ref: str | None = None,
    ) -> AddResult:
        """Store conversation turns, then extract facts from them with an LLM (``hmem[openai]``;
        ``HMEM_BASE_URL``, ``HMEM_API_KEY``, ``HMEM_LLM``). See :mod:`hmem.extract`.

        ``messages`` are ``{"role": ..., "content": ...}`` dicts (optionally ``"name"`` and
        ``"observed_at"``). The turns are stored first, as ``EpisodeRecorded`` events; then one
        extractor call sees them with the last ``context_turns`` turns of the session and the
        ``similar`` most similar facts, and its facts are appended in one atomic batch, each
        with its lineage (the turns, the model, the prompt version). All or nothing: when the
        extraction fails no fact is appended and :class:`~hmem.errors.ExtractionFailed` carries
        the stored turns' seqs, for :meth:`extract`.
        """
        from hmem import extract

        _check_sequence(messages, "messages", "a list of {'role': ..., 'content': ...} dicts")
        resolved = extract.resolve_extractor(self, extractor)
        mem = self if namespace is None else self.in_namespace(namespace)
        return extract.add(
            mem, messages, extractor=resolved, session_id=session_id, observed_at=observed_at,
            context_turns=context_turns, similar=similar, profile=profile, source_ref=source_ref,
        )

    def extract(
        self,
        episode_seqs: Iterable[int],
        *,
        extractor: ExtractorSpec = None,
        context_turns: int = 6,
        similar: int = 10,
        profile: str | None = None,
    ) -> AddResult:
        """Extract facts from turns already stored (all of one session of this namespace): to
        retry after :class:`~hmem.errors.ExtractionFailed`, or to re-extract with another model
        (new events; nothing is changed in place)."""
        from hmem import extract

        _check_sequence(episode_seqs, "episode_seqs", "a list of seqs (ExtractionFailed.episode_seqs)")
        resolved = extract.resolve_extractor(self, extractor)
        return extract.extract(
            self, list(episode_seqs), extractor=resolved, context_turns=context_turns,
            similar=similar, profile=profile,
        )

    # ------------------------------------------------------------------ reads

    def _tx_seq(self, store: Store, point: TxPoint, label: str) -> int:
        """A transaction point as a seq: an int is a seq; a time means the last seq at or before it."""
        if isinstance(point, bool):
            raise InvalidInput(f"{label} must be a datetime, an ISO string or a seq")
        if isinstance(point, int):
            if not 0 <= point <= store.projector.last_seq:
                raise InvalidInput(
                    f"{label} seq {point} is outside the log (0..{store.projector.last_seq})"
                )
            return point
        return seq_at(store.projector.tx_times, to_us(parse_time(point, label)))

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
    ) -> RecallResult:
        """The facts most relevant to ``query``, best first, within ``max_tokens`` (~4 chars each).

        By default: current beliefs only (forgotten and superseded facts are left out, but each
        hit shows the versions it replaced). ``as_of``: what was believed then. ``valid_at``:
        what was true in the world then, including versions later superseded by a world change.
        Time expressions in the query ("last summer", "in March 2023") favour facts valid then,
        read relative to ``reference_time`` (default: now). ``explain=True`` puts each signal's
        contribution on every hit.
        """
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query is empty; ask about something, e.g. 'where does maya live'")
        cfg = self.recall_config
        limit = cfg.limit if limit is None else limit
        max_tokens = cfg.max_tokens if max_tokens is None else max_tokens
        if limit < 1 or max_tokens < 1:
            raise InvalidInput("limit and max_tokens must be at least 1")
        valid = parse_time_opt(valid_at, "valid_at")
        with self._lock:
            store = self._read()
            seq = None if as_of is None else self._tx_seq(store, as_of, "as_of")
            if valid is not None:
                ref = to_us(valid)
            elif seq is not None:
                ref = store.projector.tx_times[seq - 1] if seq else 0
            else:
                ref = to_us(self._now(store))
            model, query_vector = self._query_vector(store, query)
            when = parse_time_opt(reference_time, "reference_time") or self._now(store)
            time_range = query_time_range(query, when)
            if time_range is not None:
                ref = min(ref, time_range[1])  # "last summer": age counts from then, not now
            return run_recall(
                store.projector, self.namespace, query, config=cfg, limit=limit,
                max_tokens=max_tokens, as_of_seq=seq,
                valid_at_us=None if valid is None else to_us(valid), reference_us=ref,
                subject=subject, query_vector=query_vector, model=model,
                time_range=time_range, explain=explain,
            )

    def _query_vector(self, store: Store, query: str) -> tuple[str | None, np.ndarray | None]:
        """(model, query vector) when this namespace has vectors of the configured model."""
        embedder = self.embedder
        if embedder is None:
            return None, None
        index = store.projector.indexes.get(self.namespace)
        vectors = None if index is None else index.vectors.get(embedder.model)
        if vectors is None:
            return None, None
        if vectors.dims != embedder.dims:
            raise EmbedderError(
                f"stored vectors of {embedder.model!r} have {vectors.dims} dims but the embedder "
                f"makes {embedder.dims}; re-embed with `hmem reembed` or use the original model"
            )
        vector = check_output(embedder, [query], embedder.embed([query]))[0]
        return embedder.model, vector

    def reembed(
        self, *, batch_size: int = 64, progress: Progress | None = None
    ) -> int:
        """Embed, with the configured embedder, every fact of this namespace that has no vector
        from its model yet (history included, so time travel can use vectors too). Appends one
        ``EmbeddingRecorded`` per fact; returns how many."""
        embedder = self.embedder
        if embedder is None:
            raise EmbedderUnavailable(
                "no embedder is configured; pass embedder='local' (pip install 'hmem[local]'), "
                "'openai' or an Embedder"
            )
        with self._lock:
            store = self._open()
            state = store.projector.state
            have = {v.fact_id for v in state.vectors if v.model == embedder.model}
            todo = sorted(f.id for f in state.in_namespace(self.namespace) if f.id not in have)
        done = 0
        for start in range(0, len(todo), batch_size):
            chunk = todo[start : start + batch_size]
            facts = [state.facts[i] for i in chunk]
            vectors = self._embed([(f.subject, f.text) for f in facts])
            assert vectors is not None
            with self._lock:
                store = self._open()
                tx = self._now(store)
                store.append_batch([
                    self._embedding_event(tx, fid, vec) for fid, vec in zip(chunk, vectors)
                ])
            done += len(chunk)
            if progress is not None:
                progress(done, len(todo))
        return done

    def get(self, fact_id: int) -> FactView:
        """One fact with its provenance and every version row."""
        with self._lock:
            store = self._read()
            return fact_view(store.projector.state.lookup(_fact_id(fact_id), self.namespace))

    def why(self, fact_id: int) -> Why:
        """How we came to believe this: source, the revision chain (oldest first), the events."""
        with self._lock:
            store = self._read()
            state = store.projector.state
            fact = state.lookup(_fact_id(fact_id), self.namespace)
            chain = [state.facts[state.head_of(fact.id)]]
            while chain[0].supersedes is not None:
                chain.insert(0, state.facts[chain[0].supersedes])
            ids = {f.id for f in chain}
            con = store.tables()
            seqs = [
                r[0]
                for r in con.execute(
                    "SELECT seq FROM events WHERE namespace = ? AND fact_id IN "
                    "(SELECT unnest(?::BIGINT[])) ORDER BY seq",
                    [self.namespace, sorted(ids)],
                ).fetchall()
            ]
            events = tuple(store.log.get(s) for s in seqs)
            turns = sorted({s for f in chain for s in f.derived_from})
            episodes = tuple(episode_view(state.episodes[s]) for s in turns)
            return Why(fact_view(fact), tuple(fact_view(f) for f in chain), events, episodes)

    def episodes(self, session_id: str | None = None) -> list[EpisodeView]:
        """The raw conversation turns recorded in this namespace (of one session, if given),
        in the order they were recorded. Episodes are not facts: recall never returns them."""
        with self._lock:
            state = self._read().projector.state
            return [episode_view(e) for e in state.episodes_in(self.namespace, session_id)]

    def history(self, subject: str) -> list[FactView]:
        """Every fact ever stored about ``subject`` (case-insensitive), oldest first."""
        key = subject_key(subject)
        with self._lock:
            state = self._read().projector.state
            return [fact_view(f) for f in state.in_namespace(self.namespace) if f.subject_key == key]

    def as_of(self, tx: TxPoint, *, valid_at: TimeLike | None = None) -> list[Belief]:
        """Everything believed at transaction time ``tx`` (a time or a seq), optionally only
        what was true at world time ``valid_at``. Includes superseded rows (flagged)."""
        valid = parse_time_opt(valid_at, "valid_at")
        with self._lock:
            store = self._read()
            seq = self._tx_seq(store, tx, "as_of")
            return _as_of(store.tables(), self.namespace, seq, None if valid is None else to_us(valid))

    def snapshot(
        self,
        as_of: TxPoint | None = None,
        *,
        valid_at: TimeLike | None = None,
        parquet: str | os.PathLike[str] | None = None,
    ) -> duckdb.DuckDBPyRelation:
        """The belief set at ``as_of`` (default now) as a DuckDB relation; with ``parquet``,
        also written to that file. Use ``.df()``, ``.arrow()``, ``.fetchall()`` on the result."""
        valid = parse_time_opt(valid_at, "valid_at")
        with self._lock:
            store = self._read()
            seq = store.projector.last_seq if as_of is None else self._tx_seq(store, as_of, "as_of")
            rel = snapshot_query(
                store.tables(), self.namespace, seq, None if valid is None else to_us(valid)
            )
            if parquet is not None:
                rel.write_parquet(str(parquet))
            return rel

    def diff(self, since: TxPoint, until: TxPoint | None = None) -> Diff:
        """What was added, revised and forgotten after ``since`` up to and including ``until``
        (default now). Each is a transaction time or a seq."""
        with self._lock:
            store = self._read()
            lo = self._tx_seq(store, since, "since")
            hi = store.projector.last_seq if until is None else self._tx_seq(store, until, "until")
            if hi < lo:
                raise InvalidTime("until is before since; swap them")
            return _diff(
                store.tables(), store.projector.state, self.namespace, lo, hi,
                store.projector.tx_times,
            )

    def stats(self) -> Stats:
        """Counts for this namespace and the state of the log and projection."""
        with self._lock:
            store = self._read()
            state = store.projector.state
            facts = list(state.in_namespace(self.namespace))
            con = store.tables()
            ns_events, first, last = con.execute(
                "SELECT count(*), min(epoch_us(tx_at)), max(epoch_us(tx_at)) FROM events "
                "WHERE namespace = ?",
                [self.namespace],
            ).fetchone()
            n_entities = con.execute(
                "SELECT count(DISTINCT entity) FROM entities WHERE namespace = ?", [self.namespace]
            ).fetchone()[0]
            return Stats(
                path=str(store.root),
                namespace=self.namespace,
                facts=len(facts),
                current=sum(f.superseded_by is None and f.forgotten_seq is None for f in facts),
                superseded=sum(f.superseded_by is not None for f in facts),
                forgotten=sum(f.forgotten_seq is not None for f in facts),
                subjects=len({f.subject_key for f in facts}),
                entities=n_entities,
                vectors=sum(v.namespace == self.namespace for v in state.vectors),
                namespace_events=ns_events,
                log_events=store.log.last_seq,
                log_bytes=store.log.size_bytes,
                log_segments=len(store.log.segment_paths),
                projection_seq=store.projector.last_seq,
                first_tx=from_us_opt(first),
                last_tx=from_us_opt(last),
                fsync=store.log.fsync_policy,
                read_only=store.read_only,
            )

    def sql(self, query: str, params: Any = None) -> duckdb.DuckDBPyRelation:
        """Read-only SQL over this namespace's projection (tables ``facts``, ``fact_versions``,
        ``events``, ``entities``, ``postings``, ``vectors`` and the view ``event_log``; see the
        README). Runs on a private copy without file access: it can neither see other
        namespaces nor change the store nor read or write files (use ``hmem.export`` for
        Parquet). Returns a DuckDB relation: ``.df()``, ``.arrow()``, ``.fetchall()``,
        ``.pl()``."""
        check_read_only(query)
        with self._lock:
            store = self._read()
            seq = store.projector.last_seq
            copy = self._copies.get(self.namespace)
            if copy is None or copy.seq != seq:
                if copy is not None:
                    copy.close()
                copy = self._copies[self.namespace] = NamespaceCopy(
                    store.tables(), self.namespace, seq
                )
            try:
                return copy.query(query, params)
            except duckdb.Error as e:
                raise InvalidInput(f"SQL failed: {e}") from e

    def _export_copy(self) -> NamespaceCopy:
        """A fresh copy of this namespace's tables that may write files (for ``hmem.export``);
        the caller closes it."""
        with self._lock:
            store = self._read()
            return NamespaceCopy(
                store.tables(), self.namespace, store.projector.last_seq, sandboxed=False
            )

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
        episode); ``subject`` is case-insensitive."""
        where, params = ["true"], []
        with self._lock:
            store = self._read()
            if since is not None:
                where.append("seq > ?")
                params.append(self._tx_seq(store, since, "since"))
            if until is not None:
                where.append("seq <= ?")
                params.append(self._tx_seq(store, until, "until"))
        if types is not None:
            kinds = [types] if isinstance(types, str) else list(types)
            unknown = set(kinds) - set(EVENT_TAGS)
            if unknown:
                raise InvalidInput(f"unknown event types {sorted(unknown)}; use {EVENT_TAGS}")
            where.append("list_contains(?, type)")
            params.append(kinds)
        if subject is not None:
            where.append("subject_key = ?")
            params.append(subject_key(subject))
        return self.sql(f"SELECT * FROM event_log WHERE {' AND '.join(where)} ORDER BY seq", params)

    @property
    def last_seq(self) -> int:
        """Seq of the newest event in the store (all namespaces)."""
        with self._lock:
            return self._read().projector.last_seq

    def tx_time(self, seq: int) -> datetime:
        """The transaction time of an event."""
        with self._lock:
            store = self._read()
            if not 1 <= seq <= store.projector.last_seq:
                raise InvalidInput(f"seq {seq} is outside the log (1..{store.projector.last_seq})")
            return from_us(store.projector.tx_times[seq - 1])

    # ------------------------------------------------------------------ maintenance

    def rebuild(self, progress: Progress | None = None) -> int:
        """Drop the projection and replay the whole log; returns the number of events replayed."""
        with self._lock:
            return self._open().rebuild(progress)

    def verify(self) -> ProjectionDiff:
        """Replay the log into a fresh database and compare it with the live projection.

        On a writer this checks the projection file that was updated incrementally (and across
        reopens); on a read-only Memory, the in-memory projection that followed the log."""
        with self._lock:
            store = self._read()
            store.tables()
            return verify_projection(store.log, store.db)


_REMEMBER_ARGS = {
    "subject", "text", "valid_from", "valid_to", "confidence", "entities", "source_agent",
    "source_ref",
}


def query_time_range(query: str, reference: datetime) -> tuple[int, int] | None:
    """The valid-time range a query names ("last summer"), in microseconds, if any."""
    found = parse_time_expression(query, reference)
    if found is None or found.asks_when:
        return None  # "when did ..." names no period to favour
    return to_us(found.start), to_us(found.end)


def _check_namespace(namespace: object) -> None:
    if not isinstance(namespace, str) or not namespace.strip():
        raise InvalidInput("namespace must be a non-empty string, e.g. 'default'")
    if any(ord(c) < 32 or ord(c) == 127 for c in namespace) or len(namespace) > 500:
        raise InvalidInput(
            f"namespace {shown(namespace)} has control characters or is longer than 500 "
            f"characters; use a short printable name")
    if any("\ud800" <= c <= "\udfff" for c in namespace):
        raise InvalidInput(
            f"namespace {shown(namespace)} is not valid Unicode text (a lone surrogate); "
            f"decode it with errors='replace' first"
        )


def _check_sequence(value: object, label: str, want: str) -> None:
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Iterable):
        raise InvalidInput(f"{label} must be {want}, not {type(value).__name__}")


def _strip(value: object, label: str) -> str:
    if not isinstance(value, str):
        raise InvalidInput(f"{label} must be a string, not {type(value).__name__}")
    return value.strip()


def _entities(entities: Iterable[str]) -> tuple[str, ...]:
    if isinstance(entities, str):
        raise InvalidInput("entities must be a list of names, not one string")
    names = tuple(entities)
    for name in names:
        _strip(name, "entity")
    return names


def _fact_id(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        text = value.strip().lstrip("#") if isinstance(value, str) else ""
        if text.isascii() and text.isdigit() and len(text) <= 19:  # "42", "#42"; not "²"
            return int(text)
        raise InvalidInput(f"a fact id is an integer (e.g. 42), not {shown(value)}")
    return int(value)

