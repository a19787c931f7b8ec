"""What the store must show, as the model says it, and the checks the stateful machine runs
after every step (tests/stateful/test_stateful.py). A mixin: it reads ``self.model``, ``self.mem``,
``self.m(ns)`` and the bookkeeping the machine keeps."""

from __future__ import annotations

from datetime import datetime, timezone

from hypothesis import strategies as st

from hmem.recall.hits import PastVersion
from hmem.views import FactView, Version
from projections.sql_tables import namespace_rows
from replay.verify import state_rows
from tests.stateful.model import US, subject_key
from tests.stateful.stateful_support import (
    ALL,
    DATES,
    NAMESPACES,
    SESSIONS,
    SUBJECTS,
    TAGS,
    assert_same,
    assert_same_view,
    epoch_us,
    raises_exactly,
)


class ModelChecks:
    """Compares every read of the store with the model."""


    def want_view(self, fid: int, facts=None) -> FactView:
        """The FactView ``get(fid)`` must return."""
        model = self.model
        f = (facts or model.facts())[fid]
        tx = model.tx_of
        return FactView(
            id=f.id, namespace=f.namespace, subject=f.subject, text=f.text,
            confidence=f.confidence, source_agent=f.source_agent, source_ref=f.source_ref,
            entities=f.entities, recorded_at=tx(f.created_seq), supersedes=f.supersedes,
            revision=f.revision, reason=f.reason, superseded_by=f.superseded_by,
            superseded_at=None if f.superseded_by is None else tx(f.superseded_by),
            forgotten_at=None if f.forgotten_seq is None else tx(f.forgotten_seq),
            forget_reason=f.forget_reason,
            versions=tuple(
                Version(
                    valid_from=r.valid_from, valid_to=r.valid_to, tx_from=tx(r.tx_from_seq),
                    tx_to=None if r.tx_to_seq is None else tx(r.tx_to_seq),
                    tx_from_seq=r.tx_from_seq, tx_to_seq=r.tx_to_seq,
                )
                for r in f.rows
            ),
            derived_from=f.derived_from, extractor=f.extractor,
            prompt_version=f.prompt_version, category=f.category, importance=f.importance,
        )

    def want_beliefs(self, ns: str, seq: int, valid_at: datetime | None) -> list[tuple]:
        """as_of(seq, valid_at) as (id, subject, text, valid_from, valid_to, recorded_at,
        confidence, superseded, source_agent, source_ref), by id."""
        facts = self.model.facts()
        out = []
        for fid, vf, vt, superseded, since in self.model.as_of(ns, seq, valid_at):
            f = facts[fid]
            out.append((fid, f.subject, f.text, vf, vt, self.model.tx_of(since),
                        f.confidence, superseded, f.source_agent, f.source_ref))
        return out

    def want_hits(self, ns: str, seq: int | None, valid_at: datetime | None) -> dict[int, tuple]:
        """recall(as_of=seq, valid_at=valid_at): the visible facts, each as its hit shows it."""
        model = self.model
        at = model.last_seq if seq is None else seq
        facts, then = model.facts(), model.snapshot(at)
        out = {}
        for fid in model.visible(ns, seq, valid_at):
            f, b = facts[fid], then[fid]
            history, kind = [], f.revision
            for p in model.predecessors(fid):  # each as believed at the query's seq
                history.append(PastVersion(p, facts[p].text, then[p].valid_from,
                                           then[p].valid_to, kind or "world"))
                kind = facts[p].revision
            superseded_by = f.superseded_by if f.superseded_by is not None and (
                f.superseded_by <= at) else None
            out[fid] = (f.text, f.subject, b.valid_from, b.valid_to,
                        model.tx_of(f.created_seq), f.confidence, f.source_agent, f.source_ref,
                        superseded_by, tuple(history))
        return out

    # ------------------------------------------------------------------ checks used by rules

    def check_as_of(self, ns: str, tx: int | datetime, valid_at: datetime | None) -> None:
        seq = tx if isinstance(tx, int) else self.model.seq_at(tx)
        got = [
            (b.id, b.subject, b.text, b.valid_from, b.valid_to, b.recorded_at, b.confidence,
             b.superseded, b.source_agent, b.source_ref)
            for b in self.m(ns).as_of(tx, valid_at=valid_at)
        ]
        assert_same(got, self.want_beliefs(ns, seq, valid_at),
                    f"as_of({tx!r}, valid_at={valid_at}) in {ns!r} (seq {seq})")

    def check_recall(self, ns: str, tx: int | datetime | None, valid_at: datetime | None,
                     subject: str | None = None) -> None:
        seq = tx if tx is None or isinstance(tx, int) else self.model.seq_at(tx)
        hits = self.m(ns).recall(
            "fact", as_of=tx, valid_at=valid_at, subject=subject, **ALL
        ).hits
        got = {
            h.id: (h.text, h.subject, h.valid_from, h.valid_to, h.recorded_at, h.confidence,
                   h.source_agent, h.source_ref, h.superseded_by, h.history)
            for h in hits
        }
        want = self.want_hits(ns, seq, valid_at)
        if subject is not None:  # only facts about it (case and spacing ignored)
            want = {f: w for f, w in want.items() if subject_key(w[1]) == subject_key(subject)}
        what = (f"recall(as_of={tx!r}, valid_at={valid_at}, subject={subject!r}) in {ns!r} "
                f"(seq {seq})")
        assert_same(sorted(got), sorted(want), what + ": visible ids")
        for fid in got:
            assert_same(got[fid], want[fid], f"{what}: hit {fid}")


    def replay_equals_incremental(self):
        """Skipped when nothing was written, reopened or rebuilt since the last check (reads
        change neither the log nor the projection)."""
        if self.mem is None:
            return
        now = (self.generation, self.model.last_seq)
        if self.verified == now:
            return
        report = self.mem.verify()
        assert report.ok, report.examples
        self.verified = now

    def records_match_model(self):
        """get, history and why of every fact of every namespace: every field, every row."""
        if self.mem is None:
            return
        model = self.model
        facts = model.facts()
        views = {fid: self.want_view(fid, facts) for fid in facts}
        # why reads the log and the events table: asked again for every chain an event touched
        # since the last step, and for all of them after a reopen, crash or rebuild.
        since = self.why_checked[1] if self.why_checked[0] == self.generation else 0
        touched = {c for op in model.ops[since:] if op.kind != "episode"
                   for f in (op.fact, *op.erased) for c in model.chain(f)}
        self.why_checked = (self.generation, model.last_seq)
        for ns in NAMESPACES:
            m = self.m(ns)
            mine = sorted(fid for fid, f in facts.items() if f.namespace == ns)
            for fid in mine:
                assert_same_view(m.get(fid), views[fid], f"get({fid}) in {ns!r}")
            for key in sorted({subject_key(s) for s in SUBJECTS}):
                got = m.history(key.upper())
                assert_same([f.id for f in got], model.history(ns, key), f"history({key!r}) ids")
                for view in got:
                    assert_same_view(view, views[view.id], f"history({key!r}) in {ns!r}")
            done: set[int] = set()
            for fid in mine:
                if fid in done or fid not in touched:
                    continue
                chain = model.chain(fid)
                done.update(chain)
                why = m.why(fid)
                assert_same_view(why.fact, views[fid], f"why({fid}).fact in {ns!r}")
                assert_same([v.id for v in why.chain], chain, f"why({fid}).chain")
                for view in why.chain:
                    assert_same_view(view, views[view.id], f"why({fid}).chain in {ns!r}")
                got_events = [(e.seq, TAGS[e.__struct_config__.tag]) for e in why.events]
                assert_same(got_events, model.events_of(ns, chain), f"why({fid}).events")
                turns = sorted({s for c in chain for s in facts[c].derived_from})
                assert_same([e.seq for e in why.episodes], turns, f"why({fid}).episodes")
            for session in (None, *SESSIONS):
                got = [(e.seq, e.session_id, e.turn, e.text, e.observed_at, e.recorded_at,
                        e.source_agent) for e in m.episodes(session)]
                assert_same(got, model.episodes(ns, session), f"episodes({session!r}) in {ns!r}")

    def fresh_refusals_match_model(self):
        """Every fact the step replaced or forgot can no longer be revised (forgotten is said
        first), a forgotten one not forgotten again; in the other namespace none is found."""
        model = self.model
        start = min(self.swept, model.last_seq + 1)
        for op in model.ops[max(start - 1, 0):]:
            if op.kind not in ("revise", "forget"):
                continue
            fid = op.target if op.kind == "revise" else op.fact
            for ns in NAMESPACES:
                m = self.m(ns)
                expected = model.revise_error(ns, fid, None, None)
                self._refused(expected, lambda m=m, fid=fid: m.revise(fid, "fact again"))
                if ns != op.namespace or model.snapshot()[fid].forgotten:
                    self._refused(model.forget_error(ns, fid),
                                  lambda m=m, fid=fid: m.forget(fid))

    def fresh_time_travel_matches_model(self):
        """as_of and recall at every seq the last step added (and the one before), with valid
        times at the edges of the rows that began or ended there."""
        if self.mem is None:
            return
        model = self.model
        last = model.last_seq
        if self.swept > last:
            return
        facts = model.facts()
        for seq in range(max(self.swept - 1, 0), last + 1):
            edges: dict[str, set[datetime]] = {ns: set() for ns in NAMESPACES}
            exact: set[datetime] = set()
            for f in facts.values():
                for r in f.rows:
                    if seq in (r.tx_from_seq, r.tx_to_seq, (r.tx_to_seq or 0) - 1):
                        for e in (r.valid_from, r.valid_to):
                            if e is not None:
                                edges[f.namespace] |= {e - US, e}
                                exact.add(e)
            for ns in NAMESPACES:
                near = [model.ops[s - 1].namespace for s in (seq, seq + 1) if 1 <= s <= last]
                if seq != last and ns not in near:
                    continue  # no event of this namespace at seq or just after it
                self.check_as_of(ns, seq, None)
                self.check_recall(ns, seq, None)
                for valid_at in sorted(edges[ns]):
                    self.check_recall(ns, seq, valid_at)
                    if valid_at in exact:  # as_of shows the periods: the edges suffice
                        self.check_as_of(ns, seq, valid_at)
        # as_of a transaction *time*: each new event's, and a microsecond before it
        for t in sorted({op.tx for op in model.ops[max(self.swept - 1, 0):]}):
            for ns in {op.namespace for op in model.ops if op.tx == t}:
                self.check_as_of(ns, t, None)
                self.check_as_of(ns, t - US, None)
        self.swept = last + 1

    def rows_are_never_rewritten_or_removed(self):
        """The projection's version rows, as written incrementally, are the model's rows (times
        in microseconds); no row ever disappears and no tx_from ever changes."""
        p = self.mem.store.projector
        rows = state_rows(p)
        got = sorted(rows["fact_versions"])
        assert len(got) >= self.rows_seen
        self.rows_seen = len(got)
        for fid, row_no, _, _, _, seq, tx_us, _, _ in got:
            key = (fid, row_no)
            assert self.seen_tx_from.setdefault(key, (seq, tx_us)) == (seq, tx_us), key
        tx = self.model.tx_of
        want = [
            (fid, i, f.namespace, epoch_us(r.valid_from), epoch_us(r.valid_to), r.tx_from_seq,
             epoch_us(tx(r.tx_from_seq)), r.tx_to_seq,
             None if r.tx_to_seq is None else epoch_us(tx(r.tx_to_seq)))
            for fid, f in sorted(self.model.facts().items()) for i, r in enumerate(f.rows)
        ]
        assert_same(got, want, "table fact_versions (times in microseconds since the epoch)")
        assert len(rows["facts"]) == len(self.model.snapshot())
        space = p.space(NAMESPACES[0])
        columns = list(namespace_rows(space.state, space.events, NAMESPACES[0])["facts"])
        at_id, at_superseded = columns.index("id"), columns.index("superseded_by")
        assert not [r for r in rows["facts"]
                    if r[at_superseded] is not None and r[at_superseded] <= r[at_id]]

    def current_recall_matches_model(self):
        """recall of current beliefs (no as_of, no valid_at: the in-memory current flags)."""
        if self.mem is None:
            return
        for ns in NAMESPACES:
            self.check_recall(ns, None, None)

    def namespace_wall_in_sql_reads(self, ns):
        m = self.m(ns)
        mine = self.model.facts_in(ns)
        assert {b.id for b in m.as_of(self.model.last_seq)} <= mine
        stats = m.stats()
        snap = self.model.snapshot()
        assert stats.facts == len(mine)
        assert stats.superseded == sum(snap[f].superseded for f in mine)
        assert stats.forgotten == sum(snap[f].forgotten for f in mine)
        # counted from the columns; the SQL tables (made by another path) say the same
        [events] = m.sql("SELECT count(*), min(tx_at), max(tx_at) FROM events").fetchall()
        assert (stats.namespace_events, stats.first_tx, stats.last_tx) == events
        assert stats.entities == m.sql(
            "SELECT count(DISTINCT entity) FROM entities").fetchall()[0][0]
        diff = m.diff(0)
        assert {f.id for f in diff.added} | {r.new.id for r in diff.revised} == mine
        # the snapshot relation holds the belief set of now, with its chain columns
        facts = self.model.facts()
        got = [(r[0], r[2], r[3], r[4], r[5], r[6], r[7], r[9], r[10], r[11], r[12], r[13],
                tuple(r[14])) for r in m.snapshot().order("id").fetchall()]
        want = [(fid, subj, text, conf, vf, vt, since, sup, facts[fid].supersedes,
                 facts[fid].revision, agent, ref, facts[fid].entities)
                for fid, subj, text, vf, vt, since, conf, sup, agent, ref
                in self.want_beliefs(ns, self.model.last_seq, None)]
        assert_same(got, want, f"snapshot() in {ns!r}")
        for fid in self.model.facts_in(NAMESPACES[0] if ns != NAMESPACES[0] else NAMESPACES[1]):
            raises_exactly("FactNotFound", lambda fid=fid: m.why(fid))

    # ------------------------------------------------------------------ time-travel checks

    def draw_tx(self, data, label: str):
        """A transaction point: a seq next to an event's, a tx time a microsecond around an
        event's, or any time around the history."""
        model = self.model
        return data.draw(
            st.sampled_from(model.tx_points())
            | (st.sampled_from(model.tx_times()) if model.ops else st.nothing())
            | st.datetimes(min_value=datetime(2025, 12, 1), max_value=datetime(2028, 1, 1),
                           timezones=st.just(timezone.utc)),
            label=label,
        )

    def draw_valid_at(self, data, ns: str):
        """None, or a world time at the edge of a row of this namespace."""
        points = self.model.valid_points(ns)
        return data.draw(st.none() | st.sampled_from(points or DATES), label="valid_at")

    def as_of_matches_model(self, ns, data):
        """as_of at a seq or time next to an event's, valid at the edge of a row."""
        self.check_as_of(ns, self.draw_tx(data, "as_of"), self.draw_valid_at(data, ns))

    def recall_matches_model(self, ns, data):
        """recall: which facts are visible, and each hit's period, links and history, at a seq
        or time next to an event's (or now), valid at the edge of a row (or any time)."""
        tx = None if data.draw(st.booleans(), label="now") else self.draw_tx(data, "as_of")
        valid_at = self.draw_valid_at(data, ns)
        subject = data.draw(st.none() | st.sampled_from(SUBJECTS), label="subject")
        self.check_recall(ns, tx, valid_at, subject)

    def diff_matches_model(self, ns, data):
        """diff(since, until) between seqs next to events': what was added, revised (old, new,
        kind) and forgotten, each fact as it stands now."""
        points = self.model.tx_points()
        since = data.draw(st.sampled_from(points), label="since")
        until = data.draw(st.sampled_from([p for p in points if p >= since]), label="until")
        d = self.m(ns).diff(since, until)
        added, revised, forgotten = self.model.diff(ns, since, until)
        facts = self.model.facts()
        what = f"diff({since}, {until}) in {ns!r}"
        assert_same(([f.id for f in d.added], [(r.old.id, r.new.id, r.kind) for r in d.revised],
                     [f.id for f in d.forgotten]), (added, revised, forgotten), what)
        for view in (*d.added, *d.forgotten, *(r.new for r in d.revised),
                     *(r.old for r in d.revised)):
            assert_same_view(view, self.want_view(view.id, facts), what)
        assert_same((d.since_seq, d.until_seq, d.since_tx, d.until_tx),
                    (since, until, self.model.own_tx(ns, since), self.model.own_tx(ns, until)),
                    f"{what}: its bounds and their tx times")
