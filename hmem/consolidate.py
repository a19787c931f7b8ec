"""Consolidation: what a namespace's memory could do without, proposed, then applied on request.

Every proposal is to forget one current fact (a tombstone: ``why`` and ``history`` keep it, with
the reason and the source agent "consolidate"). Three kinds:

* ``duplicate``: a newer current fact of the same subject says the same: the same normalised
  text, or (when both have vectors of the namespace's main model) a cosine of at least
  ``similarity``. The newest of such a group is kept.
* ``replaced``: a newer current fact of the same subject is the same sentence with one word
  changed ("Maya lives in London" -> "... in Paris": index tokens differing by one on each side,
  at least two shared), so the older one is probably out of date. A heuristic: review it.
* ``stale``: an episodic fact (category "episodic", as extraction records it) that became true
  more than ``stale_days`` ago, was stored that long ago and that no logged recall served since
  (recalls are logged with ``Memory(log_recalls=True)``; without a log nothing counts as served).

A report is a function of the namespace at one seq and of "now": running it again proposes the
same and appends nothing. Proposal ids ("duplicate:12:15": kind, the fact to forget, the fact
kept) stay the same across runs, so proposals can be accepted by id later. Applying every
proposal leaves nothing more to propose (each group keeps a fact no proposal names).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import timedelta

import msgspec
import numpy as np

from hmem.dedup import normalise
from projections.projector import Projector, index_counts
from projections.state import Fact

__all__ = ["ConsolidationReport", "Proposal", "propose"]

SOURCE = "consolidate"
KINDS = ("duplicate", "replaced", "stale")


class Proposal(msgspec.Struct, frozen=True):
    """Forget ``fact_id`` (``keep_id``: the fact that says it better, None for stale)."""

    id: str
    kind: str
    fact_id: int
    keep_id: int | None
    reason: str

    def line(self) -> str:
        return f"{self.id:<24} forget #{self.fact_id}: {self.reason}"


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
    facts = [f for f in projector.state.in_namespace(namespace)
             if f.superseded_by is None and f.forgotten_seq is None]
    by_subject: dict[str, list[Fact]] = defaultdict(list)
    for fact in facts:
        by_subject[fact.subject_key].append(fact)
    vectors = _vectors(projector, namespace)
    out: dict[int, Proposal] = {}  # one proposal per fact: the first kind that names it
    for group in by_subject.values():
        for p in _duplicates(group, vectors, similarity):
            out.setdefault(p.fact_id, p)
        for p in _replaced(group):
            out.setdefault(p.fact_id, p)
    horizon = now_us - int(timedelta(days=stale_days) / timedelta(microseconds=1))
    for fact in facts:
        if (fact.category == "episodic" and fact.rows[-1].valid_from < horizon
                and fact.created_at < horizon and served_us.get(fact.id, -1) < horizon):
            out.setdefault(fact.id, Proposal(
                f"stale:{fact.id}", "stale", fact.id, None,
                f"episodic, not recalled in {stale_days:g} days",
            ))
    return tuple(sorted(out.values(), key=lambda p: (KINDS.index(p.kind), p.fact_id)))


def _duplicates(
    group: Sequence[Fact], vectors: dict[int, np.ndarray], similarity: float
) -> Iterable[Proposal]:
    """Older facts of one subject that say what a newer one says (``group`` in id order)."""
    newest: dict[str, int] = {}
    for fact in group:
        newest[normalise(fact.text)] = fact.id
    for fact in group:
        keep = newest[normalise(fact.text)]
        if keep != fact.id:
            yield Proposal(f"duplicate:{fact.id}:{keep}", "duplicate", fact.id, keep,
                           f"the same text as #{keep}")
    have = [f.id for f in group if f.id in vectors and newest[normalise(f.text)] == f.id]
    if len(have) < 2:
        return
    m = np.stack([vectors[i] for i in have])
    m /= np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    for start in range(0, len(have), 256):  # a block of rows at a time: bounded memory
        sims = m[start:start + 256] @ m.T
        for row, col in zip(*np.nonzero(sims >= similarity), strict=True):
            i, j = start + int(row), int(col)
            if j > i and not _newer_match_after(sims[row], j, similarity):
                cos = float(sims[row, col])
                yield Proposal(f"duplicate:{have[i]}:{have[j]}", "duplicate", have[i],
                               have[j], f"cosine {cos:.3f} with #{have[j]}")


def _newer_match_after(row: np.ndarray, j: int, similarity: float) -> bool:
    """Whether a fact newer than ``j`` also matches (the newest match is the one kept)."""
    return bool((row[j + 1:] >= similarity).any())


def _replaced(group: Sequence[Fact]) -> Iterable[Proposal]:
    """Older facts of one subject that a newer one repeats with one word changed: pairs found
    by bucketing each fact's token set minus one token (two facts share a bucket exactly when
    they differ by one token on each side)."""
    tokens = [frozenset(index_counts(f.subject, f.text)) for f in group]
    buckets: dict[frozenset[str], list[int]] = defaultdict(list)
    for k, words in enumerate(tokens):
        if len(words) >= 3:  # two shared words at least, beside the one changed
            for word in words:
                buckets[words - {word}].append(k)
    newer: dict[int, int] = {}  # older position -> the newest position that replaces it
    for members in buckets.values():
        for a in members:
            for b in members:
                if b > a and tokens[a] != tokens[b] and len(tokens[a]) == len(tokens[b]):
                    newer[a] = max(newer.get(a, b), b)
    for a, b in sorted(newer.items()):
        old, new = group[a], group[b]
        yield Proposal(f"replaced:{old.id}:{new.id}", "replaced", old.id, new.id,
                       f"#{new.id} says it with one word changed: {new.text!r}")


def _vectors(projector: Projector, namespace: str) -> dict[int, np.ndarray]:
    """Fact id -> its latest vector from the namespace's most used model."""
    by_model: dict[str, dict[int, np.ndarray]] = defaultdict(dict)
    for vec in projector.state.vectors:
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
