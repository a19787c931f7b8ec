"""Consolidation: what a namespace's memory could do without, proposed, then applied on request.

Each proposal changes one current fact, and loses no period in which something was believed
true (``why`` and ``history`` keep everything, with the reason and the source agent
"consolidate"). Three kinds:

* ``duplicate``: another current fact of the same subject says the same (the same normalised
  text, or, when both have vectors of the namespace's main model, a cosine of at least
  ``similarity``) over a period that contains this fact's: forget this one (of two facts with
  the same period, the older).
* ``replaced``: a newer current fact of the same subject is the same sentence with one word
  changed ("Maya lives in London" -> "... in Paris": index tokens differing by one on each side,
  at least two shared) and their periods overlap. If the newer one starts later, this one is
  *ended* there (a correction with the same text, valid until then: "lived in London until
  2020"); else it is forgotten. A heuristic: review it.
* ``stale``: an episodic fact (category "episodic", as extraction records it) that became true
  more than ``stale_days`` ago, was stored that long ago and that no logged recall served since
  (recalls are logged with ``Memory(log_recalls=True)``): forget it.

Pairs are decided against the facts kept so far (duplicates widest period first, replacements
newest first), so every proposal names a fact that stays (a duplicate's kept fact may be ended,
never forgotten), and once all are applied there is nothing left to propose. A report is a
function of the namespace at one seq and of "now": running it again proposes the same (ids
included: kind, the fact changed, the fact kept) and appends nothing.
Subjects with more than ``MAX_COMPARED`` current facts are compared by text only (no cosines).

Work and memory are linear in the facts' lengths: a fact's one-word-changed sketches are hashed
(a fact of n distinct tokens keeps n integers, not n sets of n - 1 tokens), and a pair that
shares a sketch hash is compared token by token before it is proposed, so a hash collision
costs a comparison, never a wrong proposal.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import timedelta

import msgspec
import numpy as np

from hmem.dedup import normalise
from projections.projector import Projector, index_counts
from projections.records import Fact
from projections.timeutil import from_us

__all__ = ["ConsolidationReport", "Proposal", "propose"]

SOURCE = "consolidate"
KINDS = ("duplicate", "replaced", "stale")


class Proposal(msgspec.Struct, frozen=True):
    """Forget ``fact_id``, or end its period at ``end_us`` (``keep_id``: the fact that says it
    better, None for stale)."""

    id: str
    kind: str
    fact_id: int
    keep_id: int | None
    reason: str
    end_us: int | None = None  # not forgotten: valid until then (a correction, same text)

    def line(self) -> str:
        what = "forget" if self.end_us is None else (
            f"end at {from_us(self.end_us).date().isoformat()}")
        return f"{self.id:<24} {what} #{self.fact_id}: {self.reason}"


class ConsolidationReport(msgspec.Struct, frozen=True):
    """The proposals for ``namespace`` at ``seq`` (best first: duplicates, then replaced, then
    stale, each by fact id); ``applied``: the seqs of the forget events appended, if any."""

    namespace: str
    seq: int
    proposals: tuple[Proposal, ...]
    applied: tuple[int, ...] = ()

    def lines(self) -> list[str]:
        head = (f"{len(self.proposals)} proposal(s) for namespace {self.namespace!r} at seq "
                f"{self.seq}" + (f"; applied {len(self.applied)}" if self.applied else ""))
        return [head, *(p.line() for p in self.proposals)]


def propose(
    projector: Projector,
    namespace: str,
    *,
    now_us: int,
    served_us: dict[int, int],
    similarity: float,
    stale_days: float,
) -> tuple[Proposal, ...]:
    """Every proposal for ``namespace`` now (``served_us``: fact id -> when a logged recall last
    served it)."""
    facts = [f for f in projector.space(namespace).state.in_namespace(namespace)
             if f.superseded_by is None and f.forgotten_seq is None]
    by_subject: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        by_subject[fact.subject_key].append(fact)
    vectors = _vectors(projector, namespace)
    out: dict[int, Proposal] = {}
    for group in by_subject.values():
        for p in _settled(group, vectors if len(group) <= MAX_COMPARED else {}, similarity):
            out[p.fact_id] = p
    horizon = now_us - int(timedelta(days=stale_days) / timedelta(microseconds=1))
    for fact in facts:
        if (fact.id not in out and fact.category == "episodic"
                and fact.rows[-1].valid_from < horizon and fact.created_at < horizon
                and served_us.get(fact.id, -1) < horizon):
            out[fact.id] = Proposal(f"stale:{fact.id}", "stale", fact.id, None,
                                    f"episodic, not recalled in {stale_days:g} days")
    return tuple(sorted(out.values(), key=lambda p: (KINDS.index(p.kind), p.fact_id)))


MAX_COMPARED = 5_000  # current facts of one subject compared by cosine (n^2 dot products)
MAX_ROUNDS = 32  # settling rounds per subject (each forgets a fact or shortens a period)
_END = float("inf")


class _Seen:
    """One current fact as a pass sees it: ``fact`` is the stored fact, ``id`` the id it has
    once the proposals decided so far are applied (an ended fact becomes a new version), and
    ``start`` / ``end`` its valid period then."""

    __slots__ = ("fact", "id", "text", "tokens", "total", "start", "end", "vector")

    def __init__(self, fact: Fact, vector: np.ndarray | None) -> None:
        row = fact.rows[-1]  # a current fact's last row is its open one
        self.fact, self.id, self.text = fact, fact.id, normalise(fact.text)
        self.tokens = frozenset(index_counts(fact.subject, fact.text))
        self.total = sum(hash(word) for word in self.tokens) & _MASK  # of the tokens' hashes
        self.start = row.valid_from
        self.end: float = _END if row.valid_to is None else row.valid_to
        self.vector = vector

    def ended(self, end_us: int, new_id: int) -> _Seen:
        """This fact as the correction that ends it at ``end_us`` leaves it."""
        out = _Seen.__new__(_Seen)
        for name in _Seen.__slots__:
            setattr(out, name, getattr(self, name))
        out.end, out.id = end_us, new_id
        return out


def _settled(
    group: Sequence[Fact], vectors: dict[int, np.ndarray], similarity: float
) -> list[Proposal]:
    """The proposals for one subject's current facts (``group``, in id order) such that, once
    all are applied, nothing is left to propose: the two passes of :func:`_pairs` run on the
    facts as the proposals so far would leave them (forgotten ones gone, ended ones shortened,
    as new versions) until they propose nothing more; a later round's proposal about a fact
    replaces the earlier one. A proposal whose kept fact a later round forgot keeps the fact
    that one was kept for instead."""
    seen = []
    for fact in group:
        vec = vectors.get(fact.id)
        seen.append(_Seen(fact, None if vec is None else
                          vec / max(float(np.linalg.norm(vec)), 1e-12)))
    decided: dict[int, Proposal] = {}
    state = seen
    for _ in range(MAX_ROUNDS):
        found = list(_pairs(state, similarity))
        if not found:
            break
        decided.update((p.fact_id, p) for p in found)
        ended = sorted(p.fact_id for p in decided.values() if p.end_us is not None)
        after = {fid: group[-1].id + 1 + i for i, fid in enumerate(ended)}  # as apply numbers
        state = []
        for x in seen:
            p = decided.get(x.fact.id)
            if p is None:
                state.append(x)
            elif p.end_us is not None:
                state.append(x.ended(p.end_us, after[x.fact.id]))
    return [_kept_by_survivor(p, decided) for p in decided.values()]


def _kept_by_survivor(p: Proposal, decided: dict[int, Proposal]) -> Proposal:
    keep, hops = p.keep_id, 0
    while keep in decided and decided[keep].end_us is None and hops < len(decided):
        keep, hops = decided[keep].keep_id, hops + 1
    if keep == p.keep_id:
        return p
    return msgspec.structs.replace(
        p, id=f"{p.kind}:{p.fact_id}:{keep}", keep_id=keep,
        reason=p.reason.replace(f"#{p.keep_id}", f"#{keep}"),
    )


def _pairs(seen: Sequence[_Seen], similarity: float) -> Iterable[Proposal]:
    """Proposals among one subject's current facts, in two passes. Duplicates: widest period
    first (earlier start, later end, then newer), so a fact is compared with kept facts that
    may contain it. Replacements, among the facts left: newest first, so a fact is compared
    with newer kept facts. Proposals name the stored facts."""
    by_text: dict[str, list[_Seen]] = defaultdict(list)
    dims = next((len(x.vector) for x in seen if x.vector is not None), 0)
    matrix = np.empty((len(seen), dims), dtype=np.float32)  # kept facts' unit vectors
    owners: list[_Seen] = []  # whose row each is
    left: list[_Seen] = []
    keeps: set[int] = set()  # facts a duplicate proposal keeps: never forgotten below
    for x in sorted(seen, key=lambda s: (s.start, -s.end, -s.id)):
        found = _duplicate(x, by_text, matrix[: len(owners)], owners, similarity)
        if found is not None:
            keeps.add(found.keep_id)  # type: ignore[arg-type]
            yield found
            continue
        left.append(x)
        by_text[x.text].append(x)
        if x.vector is not None:
            matrix[len(owners)] = x.vector
            owners.append(x)
    by_sketch: dict[_Sketch, list[_Seen]] = defaultdict(list)  # tokens minus one, hashed
    for x in sorted(left, key=lambda s: -s.id):  # so each list is newest first
        found = _replacement(x, by_sketch)
        if found is not None and (found.end_us is not None or x.fact.id not in keeps):
            yield found
            continue
        for key in _sketches(x) if len(x.tokens) >= 3 else ():
            by_sketch[key].append(x)


_Sketch = tuple[int, int]  # (number of tokens, hash of the tokens but one)
_MASK = 2**64 - 1


def _sketches(x: _Seen) -> Iterable[_Sketch]:
    """The hashed sketches of ``x``: for each of its tokens, the set of the others as (its
    size, the sum of their hashes): one integer per token, made in time linear in the
    tokens. Equal sets have equal sketches; a collision is caught by :func:`_one_changed`."""
    n = len(x.tokens) - 1
    return ((n, (x.total - hash(word)) & _MASK) for word in x.tokens)


def _one_changed(x: _Seen, y: _Seen) -> bool:
    """Whether x and y differ by exactly one token on each side (they share a sketch)."""
    return len(x.tokens) == len(y.tokens) and len(x.tokens & y.tokens) == len(x.tokens) - 1


def _contains(y: _Seen, x: _Seen) -> bool:
    return y.start <= x.start and x.end <= y.end


def _duplicate(
    x: _Seen, by_text: dict[str, list[_Seen]], matrix: np.ndarray, owners: list[_Seen],
    similarity: float,
) -> Proposal | None:
    """Forget ``x`` when a kept fact says the same over a period containing x's."""
    for y in by_text.get(x.text, []):
        if _contains(y, x):
            return Proposal(f"duplicate:{x.fact.id}:{y.fact.id}", "duplicate", x.fact.id,
                            y.fact.id, f"the same text as #{y.fact.id}")
    if x.vector is None or not len(matrix):
        return None
    cosines = matrix @ x.vector
    for k in np.flatnonzero(cosines >= similarity).tolist():
        y = owners[k]
        if _contains(y, x):
            return Proposal(f"duplicate:{x.fact.id}:{y.fact.id}", "duplicate", x.fact.id,
                            y.fact.id, f"cosine {float(cosines[k]):.3f} with #{y.fact.id}")
    return None


def _replacement(x: _Seen, by_sketch: dict[_Sketch, list[_Seen]]) -> Proposal | None:
    """End (or forget) ``x`` when a kept fact says it with one word changed over an
    overlapping period: two facts share a sketch (tokens minus one) exactly when they differ
    by one token on each side. Of those, the newest (each sketch's list is newest first)."""
    if len(x.tokens) < 3 or x.fact.category == "episodic":  # events do not replace events
        return None
    found: _Seen | None = None
    for key in _sketches(x):
        for y in by_sketch.get(key, ()):
            if found is not None and y.id <= found.id:
                break  # the rest of this list is older still
            if (y.start < x.end and x.start < y.end and y.fact.category != "episodic"
                    and _one_changed(x, y)):
                found = y
                break
    if found is None:
        return None
    y = found
    pid, keep = f"replaced:{x.fact.id}:{y.fact.id}", y.fact.id
    if y.start > x.start:  # the newer holds from later on: the older ends there
        return Proposal(pid, "replaced", x.fact.id, keep,
                        f"#{keep} says it with one word changed from "
                        f"{from_us(y.start).date().isoformat()}", end_us=y.start)
    # the reason names facts by id only: it is logged with the changed fact, and another
    # fact's words there would outlive that fact's erasure
    return Proposal(pid, "replaced", x.fact.id, keep, f"#{keep} says it with one word changed")


def _vectors(projector: Projector, namespace: str) -> dict[int, np.ndarray]:
    """Fact id -> its latest vector from the namespace's most used model."""
    by_model: dict[str, dict[int, np.ndarray]] = defaultdict(dict)
    for vec in projector.space(namespace).state.vectors:
        if vec.namespace == namespace:
            by_model[vec.model][vec.fact_id] = np.frombuffer(vec.vector, dtype="<f4")
    if not by_model:
        return {}
    best = max(by_model.values(), key=len)
    dims = {len(v) for v in best.values()}
    if len(dims) != 1:  # an old log's odd vector: compare only the model's usual length
        usual = max(dims, key=lambda d: sum(len(v) == d for v in best.values()))
        return {k: v for k, v in best.items() if len(v) == usual}
    return best
